//! `minimax`: the MiniMax models' call markup.
//!
//! - M2: `<minimax:tool_call><invoke name="f"><parameter name="k">v</parameter></invoke>
//!   ...</minimax:tool_call>`; values stay the strings the model wrote.
//! - M3: every tag prefixed by `]<]minimax[>[`: `]<]minimax[>[<tool_call>` wrapping invokes
//!   whose parameters are `<parameter name=..>` or `<key>value</key>` elements, or a bare
//!   `]<]minimax[>[<invoke ...>`; values that are non-string JSON become that value.
//! - M1: `<tool_calls>` holding one `{"name", "arguments"}` JSON object per line; lines
//!   that do not hold a complete call are skipped, the block is removed whole.
//!
//! The closing wrapper may be missing when only whitespace follows the last call. The
//! markers are model-specific: no enabled tool is needed. At the end of the text the last
//! invoke may also have lost its `</invoke>` after a closed parameter (a stop sequence or
//! the token limit): that call counts only for an enabled tool.
//!
//! May depend on: `crate::families::util`, `crate::json5`, `crate::types`, `crate::Ctx`.

use super::util::{
    at_lit, cut_run_ok, find_from, json_value_at, lost_closer_ok, merge, past_doubled_gt,
    preceded_by, skip_ws, Block, Finder, MAX_CANDIDATES,
};
use crate::grammar::json::{call_of, Keys};
use crate::grammar::xml::{parse_invoke_run, parse_invoke_run_to_end, InvokeSyntax, INVOKE};
use crate::grammar::ValueMode;
use crate::types::{Call, Family};
use crate::{Ctx, Leak};

/// Literal markers one of which any leak of this family contains.
pub(crate) const TRIGGERS: &[&str] = &["<minimax:tool_call>", "]<]minimax[>[", "<tool_calls>"];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

const NS: &str = "]<]minimax[>[";

/// M2's values stay the strings written.
pub(super) const M2: InvokeSyntax = InvokeSyntax {
    values: ValueMode::Raw,
    ..INVOKE
};

const M3: InvokeSyntax = InvokeSyntax {
    prefix: Some(NS),
    element_params: true,
    ..INVOKE
};

/// Appends the leaks of this family found in `text` to `out`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let mut pieces = Vec::new();
    find_m2(text, ctx, &mut pieces);
    find_m3(text, ctx, &mut pieces);
    find_m1(text, ctx, &mut pieces);
    merge(text, Family::Minimax, pieces, out);
}

/// After a run of invokes opened at `open` and ending at `run_end`: the end of the block
/// including `closer`, or the run's end when the closer is missing and nothing but
/// whitespace follows (or, for enabled tools, prose standing apart: [`lost_closer_ok`]).
fn block_end(
    text: &str,
    (open, run_end): (usize, usize),
    closers: &[&str],
    calls: &[Call],
    ctx: &Ctx<'_>,
) -> Option<usize> {
    let after = skip_ws(text, run_end);
    for c in closers {
        if at_lit(text, after, c) {
            return Some(after + c.len());
        }
    }
    (crate::grammar::keys::rest_ends_turn(text, run_end)
        || lost_closer_ok(text, open, run_end, calls, ctx))
    .then_some(run_end)
}

fn find_m2(text: &str, ctx: &Ctx<'_>, pieces: &mut Vec<Block>) {
    const OPEN: &str = "<minimax:tool_call>";
    let mut close = Finder::new(text, M2.invoke_close);
    let mut at = 0;
    let mut seen = 0;
    while let Some(pos) = find_from(text, OPEN, at) {
        seen += 1;
        if seen > MAX_CANDIDATES {
            break;
        }
        at = pos + OPEN.len();
        if ctx.quoted(pos) {
            continue;
        }
        let first = skip_ws(text, at);
        let Some((calls, run_end, cut)) = parse_invoke_run_to_end(text, first, &M2, &mut close)
        else {
            continue;
        };
        if cut && !cut_run_ok(text, pos, run_end, &calls, ctx) {
            continue;
        }
        let Some(end) = block_end(text, (pos, run_end), &["</minimax:tool_call>"], &calls, ctx)
        else {
            continue;
        };
        pieces.push((pos..end, calls));
        at = end;
    }
}

fn find_m3(text: &str, ctx: &Ctx<'_>, pieces: &mut Vec<Block>) {
    let mut close = Finder::new(text, M3.invoke_close);
    let mut at = 0;
    let mut seen = 0;
    while let Some(pos) = find_from(text, NS, at) {
        seen += 1;
        if seen > MAX_CANDIDATES {
            break;
        }
        let tag = pos + NS.len();
        at = tag;
        if ctx.quoted(pos) {
            continue;
        }
        let (first, wrapped) = if at_lit(text, tag, "<tool_call>") {
            let past = past_doubled_gt(text, tag + "<tool_call>".len(), "<tool_call>");
            (skip_ws(text, past), true)
        } else if at_lit(text, tag, "<invoke") {
            // An invoke inside a wrapper that did not parse, or continuing a run: not the
            // start of a bare block.
            if preceded_by(text, pos, "<tool_call>").is_some()
                || preceded_by(text, pos, "</invoke>").is_some()
            {
                continue;
            }
            (pos, false)
        } else {
            continue;
        };
        // A bare M3 run has no wrapper closer to lose: an invoke cut after it is a cut.
        let run = match wrapped {
            true => parse_invoke_run_to_end(text, first, &M3, &mut close),
            false => parse_invoke_run(text, first, &M3, &mut close).map(|(c, e)| (c, e, false)),
        };
        let Some((calls, run_end, cut)) = run else {
            continue;
        };
        if cut && !cut_run_ok(text, pos, run_end, &calls, ctx) {
            continue;
        }
        let end = if wrapped {
            let closers = [concat!("]<]minimax[>[", "</tool_call>"), "</tool_call>"];
            match block_end(text, (pos, run_end), &closers, &calls, ctx) {
                Some(e) => e,
                None => continue,
            }
        } else {
            run_end
        };
        pieces.push((pos..end, calls));
        at = end;
    }
}

/// M1: `<tool_calls>` with one JSON call per line.
fn find_m1(text: &str, ctx: &Ctx<'_>, pieces: &mut Vec<Block>) {
    const OPEN: &str = "<tool_calls>";
    const CLOSE: &str = "</tool_calls>";
    let mut closer = Finder::new(text, CLOSE);
    let mut at = 0;
    let mut seen = 0;
    while let Some(pos) = find_from(text, OPEN, at) {
        seen += 1;
        if seen > MAX_CANDIDATES {
            break;
        }
        at = pos + OPEN.len();
        if ctx.quoted(pos) {
            continue;
        }
        let close = closer.find(at);
        let (limit, end) = match close {
            Some(c) => (c, c + CLOSE.len()),
            None => (text.len(), text.len()),
        };
        let Some(scope) = text.get(..limit) else {
            continue;
        };
        let mut calls = Vec::new();
        let mut i = at;
        let mut ok = true;
        loop {
            i = skip_ws(scope, i);
            if i >= limit {
                break;
            }
            if scope.as_bytes().get(i) != Some(&b'{') {
                ok = false;
                break;
            }
            match json_value_at(scope, i) {
                Some((v, e)) if line_ends(scope, e) => {
                    calls.extend(call_of(&v, Keys::Strict));
                    i = e;
                }
                // A line that is not one JSON object: skipped, as MiniMax's parser does.
                _ => match find_from(scope, "\n", i) {
                    Some(nl) => i = nl + 1,
                    None => break,
                },
            }
        }
        if !ok || calls.is_empty() {
            continue;
        }
        pieces.push((pos..end, calls));
        at = end;
    }
}

/// Whether only spaces or tabs stand between `pos` and the end of its line.
fn line_ends(text: &str, pos: usize) -> bool {
    let rest = text.as_bytes().get(pos..).unwrap_or_default();
    rest.iter()
        .take_while(|&&b| b != b'\n')
        .all(|b| b.is_ascii_whitespace())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn run(text: &str) -> crate::Detection {
        super::super::testing::detect_with(text, &[])
    }

    #[test]
    fn m2_block_values_stay_strings() {
        let t = "Ok <minimax:tool_call>\n<invoke name=\"f\">\n<parameter name=\"n\">5</parameter>\n</invoke>\n</minimax:tool_call> done";
        let d = run(t);
        assert_eq!(d.leaks.len(), 1);
        assert_eq!(d.leaks[0].family, crate::Family::Minimax);
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"n": "5"}));
        assert_eq!(d.cleaned.as_deref(), Some("Ok done"));
    }

    #[test]
    fn m2_unclosed_wrapper_at_end_is_a_leak_but_not_midway() {
        let t =
            "<minimax:tool_call><invoke name=\"f\"><parameter name=\"a\">b</parameter></invoke>";
        assert_eq!(run(t).leaks.len(), 1);
        let t = "<minimax:tool_call><invoke name=\"f\"><parameter name=\"a\">b</parameter>";
        assert!(run(t).is_clean());
    }

    #[test]
    fn m2_invoke_cut_after_a_closed_parameter_is_an_enabled_tools_call() {
        let with = |t: &str| super::super::testing::detect_with(t, &["f"]);
        let t = "Ok.\n<minimax:tool_call>\n<invoke name=\"f\">\n<parameter name=\"a\">b\nc</parameter>\n";
        let d = with(t);
        assert_eq!(d.leaks.len(), 1);
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"a": "b\nc"}));
        assert_eq!(d.cleaned.as_deref(), Some("Ok."));
        // Cut inside the invoke's closing tag: later than right after the parameter, so a
        // call too, the cut tag taken with it.
        let d = with(
            "Ok.\n<minimax:tool_call><invoke name=\"f\"><parameter name=\"a\">b</parameter></inv",
        );
        assert_eq!(d.leaks.len(), 1);
        assert_eq!(d.cleaned.as_deref(), Some("Ok."));
        // Cut inside a value, before any parameter, or followed by prose: not a call.
        assert!(with("<minimax:tool_call><invoke name=\"f\"><parameter name=\"a\">b").is_clean());
        assert!(
            with("<minimax:tool_call><invoke name=\"f\"><parameter name=\"a\">b</par").is_clean()
        );
        assert!(with("<minimax:tool_call><invoke name=\"f\">\n").is_clean());
        assert!(with(
            "<minimax:tool_call><invoke name=\"f\"><parameter name=\"a\">b</parameter> and"
        )
        .is_clean());
    }

    #[test]
    fn m3_bare_invoke_then_prose() {
        let t = "]<]minimax[>[<invoke name=\"save_memory\">\n<parameter name=\"content\">tea</parameter>\n</invoke>\nNoted.";
        let d = run(t);
        assert_eq!(d.leaks.len(), 1);
        assert_eq!(d.leaks[0].family, crate::Family::Minimax);
        assert_eq!(d.cleaned.as_deref(), Some("Noted."));
    }

    #[test]
    fn m3_partial_start_is_kept() {
        assert!(run("plain ]<]minimax[>[<tool_ca").is_clean());
        assert!(run("]<]minimax[>[<tool_call>\n]<]minimax[>[<invoke name=\"f\">").is_clean());
    }

    #[test]
    fn m1_needs_json_lines_only() {
        let t = "<tool_calls>\nI will now call the weather tool for you.\n</tool_calls>";
        assert!(run(t).is_clean());
        let t = "Use a <tool_calls> block.";
        assert!(run(t).is_clean());
        let t = "<tool_calls>\n{\"name\": \"f\", \"arguments\": {}}\nsome prose\n</tool_calls>";
        assert!(run(t).is_clean());
    }

    #[test]
    fn m2_in_code_is_kept() {
        let t = "```\n<minimax:tool_call><invoke name=\"f\"><parameter name=\"a\">b</parameter></invoke></minimax:tool_call>\n```";
        assert!(run(t).is_clean());
    }
}
