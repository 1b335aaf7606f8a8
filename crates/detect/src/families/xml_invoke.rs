//! `xml_invoke`: XML-ish tool calls that are not tied to one vendor's special tokens.
//!
//! Two shapes:
//! - Anthropic-style `<invoke name="f"><parameter name="k">v</parameter></invoke>` blocks,
//!   bare or inside `<function_calls>...</function_calls>`; at the end of the text the last
//!   invoke may lack `</invoke>` after a closed parameter, for an enabled tool;
//! - Qwen3-Coder / Qwen3-XML (and Seed-OSS) `<tool_call>\n<function=f>\n<parameter=k>\nv\n
//!   </parameter>\n</function>\n</tool_call>` blocks, also with the `<tool_call>` opener or
//!   closer missing (and `</function>` before `</tool_call>`, or `</parameter>`, as vLLM's
//!   `qwen3_coder` parser reads them), or wrapped in `<seed:tool_call>`. At the end of the
//!   text `</function>` and `</tool_call>` may both be missing after a closed
//!   `</parameter>`, for enabled tools (a stop sequence or the token limit cut them).
//!
//! The XML grammars it shares with its sibling families live in `crate::grammar::xml`.
//!
//! May depend on: `super::minimax` (M2's syntax), `super::cli` (command-line arguments), `super::util`, `crate::grammar`,
//! `crate::types`, `crate::Ctx`.

use super::minimax::M2;
use super::util::{
    at_lit, cut_closers_ok, cut_run_ok, find_from, lost_closer_ok, merge, preceded_by, skip_ws,
    Block, Finder, MAX_CANDIDATES,
};
use crate::grammar::xml::{parse_function_eq, parse_invoke_run, parse_invoke_run_to_end, INVOKE};
use crate::types::{Call, Family};
use crate::{Ctx, Leak};

/// Literal markers one of which any leak of this family contains.
pub(crate) const TRIGGERS: &[&str] = &["<invoke", "<function="];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

/// Wrappers of other families: an `<invoke>` right after one of these belongs to that
/// family (which decides whether it is a leak), or continues a run already examined.
const FOREIGN_BEFORE_INVOKE: &[&str] = &[
    "<dots_function_call>",
    "<minimax:tool_call>",
    "]<]minimax[>[",
    "</invoke>",
    "<tool_call>",
];

/// Appends the leaks of this family found in `text` to `out`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let mut pieces = Vec::new();
    let mut minimax = Vec::new();
    find_invokes(text, ctx, &mut pieces, &mut minimax);
    find_qwen(text, ctx, &mut pieces);
    merge(text, Family::XmlInvoke, pieces, out);
    merge(text, Family::Minimax, minimax, out);
}

/// MiniMax-M2's closer: invokes followed by it lost their `<minimax:tool_call>` (a special
/// token), and are MiniMax's, read with its string values.
const MINIMAX_CLOSE: &str = "</minimax:tool_call>";

/// Bare `<invoke>` runs and `<function_calls>` blocks (and MiniMax's runs whose opener was
/// stripped, into `minimax`).
fn find_invokes(text: &str, ctx: &Ctx<'_>, pieces: &mut Vec<Block>, minimax: &mut Vec<Block>) {
    let mut close = Finder::new(text, INVOKE.invoke_close);
    let mut at = 0;
    let mut seen = 0;
    while let Some(pos) = find_from(text, "<invoke", at) {
        seen += 1;
        if seen > MAX_CANDIDATES {
            break;
        }
        at = pos + 1;
        if ctx.quoted(pos) {
            continue;
        }
        if FOREIGN_BEFORE_INVOKE
            .iter()
            .any(|w| preceded_by(text, pos, w).is_some())
        {
            continue;
        }
        let wrapper = preceded_by(text, pos, "<function_calls>");
        // The run's last invoke may have lost `</invoke>` at the end of the text (a stop
        // sequence took it): then only for an enabled tool.
        let Some((calls, run_end, cut)) = parse_invoke_run_to_end(text, pos, &INVOKE, &mut close)
        else {
            continue;
        };
        if cut && !cut_run_ok(text, pos, run_end, &calls, ctx) {
            continue;
        }
        let (start, end) = match wrapper {
            Some(w) => {
                let after = skip_ws(text, run_end);
                if text
                    .get(after..)
                    .is_some_and(|r| r.starts_with("</function_calls>"))
                {
                    (w, after + "</function_calls>".len())
                } else if crate::grammar::keys::rest_ends_turn(text, run_end)
                    || lost_closer_ok(text, w, run_end, &calls, ctx)
                {
                    (w, run_end)
                } else {
                    continue;
                }
            }
            None if at_lit(text, skip_ws(text, run_end), MINIMAX_CLOSE) => {
                let mut m2_close = Finder::new(text, M2.invoke_close);
                if let Some((calls, run_end)) = parse_invoke_run(text, pos, &M2, &mut m2_close) {
                    let end = skip_ws(text, run_end) + MINIMAX_CLOSE.len();
                    minimax.push((pos..end, calls));
                    at = end;
                }
                continue;
            }
            None => {
                // Without the wrapper, an invoke that names no enabled tool must at least
                // carry parameters: an empty `<invoke name="x"></invoke>` is too little.
                let strong = calls.iter().all(|c| {
                    ctx.tool_enabled(&c.name)
                        || c.arguments.as_object().is_some_and(|m| !m.is_empty())
                });
                if !strong {
                    continue;
                }
                // A `</function_calls>` right after the run lost its opener: it goes too.
                let after = skip_ws(text, run_end);
                match text
                    .get(after..)
                    .is_some_and(|r| r.starts_with("</function_calls>"))
                {
                    true => (pos, after + "</function_calls>".len()),
                    false => (pos, run_end),
                }
            }
        };
        pieces.push((start..end, calls));
        at = end;
    }
}

/// Qwen3-Coder / Qwen3-XML / Seed-OSS `<function=name>` blocks with their wrappers.
fn find_qwen(text: &str, ctx: &Ctx<'_>, pieces: &mut Vec<Block>) {
    let mut fclose = Finder::new(text, "</function>");
    let mut fnext = Finder::new(text, "<function=");
    let mut tclose = Finder::new(text, "</tool_call>");
    let mut pclose = Finder::new(text, "</parameter>");
    let mut pnext = Finder::new(text, "<parameter=");
    let mut at = 0;
    let mut seen = 0;
    while let Some(pos) = find_from(text, "<function=", at) {
        seen += 1;
        if seen > MAX_CANDIDATES {
            break;
        }
        at = pos + 1;
        if ctx.quoted(pos) {
            continue;
        }
        // Closed values are opaque: a file's content may hold `</function>` or another
        // `<function=..>`, which end or start nothing until the value's `</parameter>`.
        let body = past_closed_values(text, pos, &mut pclose, &mut pnext);
        let next_fn = fnext.find(body.max(pos + 1)).unwrap_or(text.len());
        // The function ends at its `</function>`, or (closer missing, as vLLM's qwen3_coder
        // parser allows) at its wrapper's `</tool_call>`, never past the next function, or
        // at the end of the text right after a closed `</parameter>` (the stack stopped on
        // `</function>`): then only for enabled tools, see `cut_closers_ok`.
        let (close, fn_end, cut) = match fclose.find(body).filter(|&c| c < next_fn) {
            Some(c) => (c, c + "</function>".len(), false),
            None => match tclose.find(body).filter(|&c| c < next_fn) {
                Some(c) => (c, c, false),
                None => match last_parameter_closes_text(text, pos, next_fn) {
                    Some(e) => (e, e, true),
                    // Arguments in command-line form, cut at the end: one line of them.
                    None if next_fn == text.len() => {
                        let end = text.trim_end().len();
                        if let Some(call) = command_line_body(text, pos, end, ctx) {
                            pieces.push((wrapper_start(text, pos)..end, vec![call]));
                            at = end;
                        }
                        continue;
                    }
                    None => continue,
                },
            },
        };
        let parsed = parse_function_eq(text, pos, close, &mut pclose, &mut pnext)
            .or_else(|| command_line_body(text, pos, close, ctx));
        let Some(call) = parsed else {
            continue;
        };
        if cut && !cut_closers_ok(text, pos, close, &call, ctx) {
            continue;
        }
        // Without `</function>` a call must carry parameters: a bare `<function=NAME>` is a
        // tag quoted in prose.
        let closed = fn_end > close;
        if !closed && call.arguments.as_object().is_none_or(|m| m.is_empty()) {
            continue;
        }
        let opener = [
            ("<tool_call>", "</tool_call>"),
            ("<seed:tool_call>", "</seed:tool_call>"),
        ]
        .iter()
        .find_map(|(o, c)| preceded_by(text, pos, o).map(|s| (s, *c)));
        let after = skip_ws(text, fn_end);
        let rest = text.get(after..).unwrap_or_default();
        let (start, end) = match opener {
            Some((s, closer)) if rest.starts_with(closer) => (s, after + closer.len()),
            Some((s, _)) => (s, fn_end),
            None => {
                // A stray closer without its opener is markup too (vLLM's engine emits it).
                match ["</tool_call>", "</seed:tool_call>"]
                    .iter()
                    .find(|c| rest.starts_with(**c))
                {
                    Some(c) => (pos, after + c.len()),
                    None => (pos, fn_end),
                }
            }
        };
        pieces.push((start..end, vec![call]));
        at = end;
    }
}

/// `<function=NAME>` whose body up to `end` is one line of arguments in command-line form
/// (`query="x" numResults=5`, `--key v`), for an enabled tool: the form the `cli` family
/// reads after a bare name, here after the element that names the tool.
fn command_line_body(text: &str, pos: usize, end: usize, ctx: &Ctx<'_>) -> Option<Call> {
    let name_start = pos + "<function=".len();
    let gt = name_start + text.get(name_start..end)?.find('>')?;
    let name = text.get(name_start..gt)?.trim();
    let body = text.get(gt + 1..end)?.trim();
    if body.is_empty() || body.contains(['\n', '<']) || !ctx.tool_enabled(name) {
        return None;
    }
    let args = super::cli::parse_args(body)?;
    Some(Call {
        name: name.to_string(),
        arguments: serde_json::Value::Object(args),
    })
}

/// Where the call at `pos` starts: at the `<tool_call>` right before it, if any.
fn wrapper_start(text: &str, pos: usize) -> usize {
    ["<tool_call>", "<seed:tool_call>"]
        .iter()
        .find_map(|o| preceded_by(text, pos, o))
        .unwrap_or(pos)
}

/// Where the function opened at `pos` goes on past its leading run of closed parameter
/// values (`<parameter=k>..</parameter>` with no `<parameter=` before that closer): `pos`
/// itself when none is closed.
fn past_closed_values(
    text: &str,
    pos: usize,
    pclose: &mut Finder<'_>,
    pnext: &mut Finder<'_>,
) -> usize {
    let Some(gt) = text
        .get(pos..)
        .and_then(|r| r.find('>'))
        .map(|i| pos + i + 1)
    else {
        return pos;
    };
    let (mut at, mut past) = (gt, pos);
    for _ in 0..MAX_CANDIDATES {
        at = skip_ws(text, at);
        if !text.get(at..).is_some_and(|r| r.starts_with("<parameter=")) {
            break;
        }
        let Some(close) = pclose.find(at) else { break };
        if pnext.find(at + 1).is_some_and(|n| n < close) {
            break;
        }
        at = close + "</parameter>".len();
        past = at;
    }
    past
}

/// Where the text ends (trailing whitespace aside) when a function at `pos`, the last one
/// (`next_fn` is the text's end), lost `</function>` and `</tool_call>` after its last
/// parameter: the text must end with that parameter's `</parameter>`. vLLM's parser also
/// takes a value running to the end of the text; that is what a cut in the middle of the
/// value looks like, so it stays prose. A value that ends the text in a person's elision
/// (`...`, `…`: a bug report's paste shortened) was not cut by the model: it ends there too.
fn last_parameter_closes_text(text: &str, pos: usize, next_fn: usize) -> Option<usize> {
    // Before a closer the end cut short (`</func`), which the call takes as a remnant.
    let end = match crate::grammar::text::cut_tag_start(text).filter(|&c| c > pos) {
        Some(c) => text[..c].trim_end().len(),
        None => text.trim_end().len(),
    };
    let head = text.get(..end)?;
    let ends = head.ends_with("</parameter>")
        || (crate::grammar::text::ends_in_elision(head) && head[pos..].contains("<parameter="));
    (next_fn == text.len() && end > pos && ends).then_some(end)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn run(text: &str, enabled: &[&str]) -> crate::Detection {
        super::super::testing::detect_with(text, enabled)
    }

    #[test]
    fn function_calls_block_is_a_leak() {
        let t = "Checking.\n<function_calls>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris</parameter>\n<parameter name=\"days\">3</parameter>\n</invoke>\n</function_calls>\nDone.";
        let d = run(t, &[]);
        assert_eq!(d.leaks.len(), 1);
        assert_eq!(d.leaks[0].calls[0].name, "get_weather");
        assert_eq!(
            d.leaks[0].calls[0].arguments,
            json!({"city": "Paris", "days": 3})
        );
        assert_eq!(d.cleaned.as_deref(), Some("Checking.\n\nDone."));
    }

    #[test]
    fn two_invokes_are_one_leak() {
        let t = "<invoke name=\"a\"><parameter name=\"x\">1</parameter></invoke>\n<invoke name=\"b\"><parameter name=\"y\">z</parameter></invoke> tail";
        let d = run(t, &[]);
        assert_eq!(d.leaks.len(), 1);
        assert_eq!(d.leaks[0].calls.len(), 2);
        assert_eq!(d.cleaned.as_deref(), Some("tail"));
    }

    #[test]
    fn empty_bare_invoke_needs_an_enabled_tool() {
        let t = "<invoke name=\"refresh\"></invoke>";
        assert!(run(t, &[]).is_clean());
        assert_eq!(run(t, &["refresh"]).leaks.len(), 1);
    }

    #[test]
    fn invoke_in_code_fence_is_an_example() {
        let t = "The format is:\n```xml\n<function_calls>\n<invoke name=\"search\">\n<parameter name=\"q\">cats</parameter>\n</invoke>\n</function_calls>\n```\nThat is all.";
        assert!(run(t, &["search"]).is_clean());
    }

    #[test]
    fn truncated_invoke_is_prose() {
        let t = "Let me search.\n<invoke name=\"search\">\n<parameter name=\"q\">cats";
        assert!(run(t, &["search"]).is_clean());
        let t = "<invoke name=\"search\"><parameter name=\"q\">cats</invoke>";
        assert!(run(t, &["search"]).is_clean());
    }

    #[test]
    fn prose_about_invoke_is_not_a_leak() {
        let t = "Claude used to write <invoke name=...> tags with <parameter> children, closed by </invoke>.";
        assert!(run(t, &[]).is_clean());
    }

    #[test]
    fn bpel_like_invoke_is_not_a_leak() {
        let t = "<invoke name=\"callService\" partnerLink=\"svc\" operation=\"op\"><correlations/></invoke>";
        assert!(run(t, &[]).is_clean());
    }

    #[test]
    fn qwen_block_with_missing_closers() {
        let t = "Sure.\n<function=f>\n<parameter=a>\n1\n<parameter=b>\nx y\n</parameter>\n</function>\n</tool_call>\nOk";
        let d = run(t, &[]);
        assert_eq!(d.leaks.len(), 1);
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"a": 1, "b": "x y"}));
        assert_eq!(d.cleaned.as_deref(), Some("Sure.\n\nOk"));
    }

    #[test]
    fn qwen_function_closer_missing() {
        let t = "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</tool_call>\nOk";
        let d = run(t, &[]);
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"a": 1}));
        assert_eq!(d.cleaned.as_deref(), Some("Ok"));
        let d = run(
            "<tool_call>\n<function=f>\n<parameter=a>\nx\n</tool_call>",
            &[],
        );
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"a": "x"}));
        assert_eq!(d.cleaned.as_deref(), Some(""));
        // At the end of the text it may be a cut between two parameters: only an enabled
        // tool's call, and only after a closed value; a tag with nothing in it is prose.
        let t = "Ok.\n<tool_call>\n<function=f>\n<parameter=a>\nx\n</parameter>\n";
        assert!(run(t, &[]).is_clean());
        let d = run(t, &["f"]);
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"a": "x"}));
        assert_eq!(d.cleaned.as_deref(), Some("Ok."));
        assert!(run("<tool_call>\n<function=f>\n<parameter=a>\nx", &["f"]).is_clean());
        assert!(run("<function=f>\n<parameter=a>\nx\n</parameter> and", &["f"]).is_clean());
        assert!(run("The tag is <function=f></tool_call>", &[]).is_clean());
    }

    #[test]
    fn qwen_block_with_prose_inside_is_not_a_leak() {
        let t = "<tool_call>\n<function=f>\nI think I should call it\n</function>\n</tool_call>";
        assert!(run(t, &[]).is_clean());
    }

    #[test]
    fn qwen_call_quoted_in_closed_think_is_kept() {
        let t = "<think>I could write <function=f>\n<parameter=a>\n1\n</parameter>\n</function> here.</think>Answer.";
        assert!(run(t, &[]).is_clean());
    }

    #[test]
    fn unclosed_block_does_not_swallow_the_next() {
        let t = "<invoke name=\"a\"><parameter name=\"x\">oops\n<invoke name=\"a\"><parameter name=\"x\">1</parameter></invoke>";
        let d = run(t, &[]);
        assert_eq!(d.leaks.len(), 1);
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"x": 1}));
        let t = "<function=a>\n<parameter=x>\n<function=a>\n<parameter=x>\ny\n</function>";
        let d = run(t, &[]);
        assert_eq!(d.leaks.len(), 1);
        assert_eq!(d.leaks[0].span.start, 27);
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"x": "y"}));
    }

    #[test]
    fn many_unclosed_candidates_stay_cheap() {
        let t = "<invoke name=\"a\"><parameter name=\"x\">".repeat(10_000);
        assert!(run(&t, &["a"]).is_clean());
        let t = "<function=a>\n<parameter=x>\n".repeat(10_000);
        assert!(run(&t, &["a"]).is_clean());
    }
}
