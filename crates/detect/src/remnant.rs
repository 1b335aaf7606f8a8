//! The remnant rule: when a call is taken, the markup-only tokens and tags that stand next
//! to it with nothing but whitespace between go with it: orphan openers and closers of any
//! format (`<tool_call>`, `</invoke>`, `<｜DSML｜function_calls` without its `>`), empty
//! wrapper pairs, special tokens (`<|tool_call_end|>`, `<|im_end|>`), and a list's `]` glued
//! to a call whose `[` was stripped; and a result object the model wrote right after its
//! call (`{"result": ..}`), or an answer under a label of its own ending the text
//! (`Output:` and a fence), the answer of a tool that never ran; and a closer the end of
//! the text cut short after it (`</tool_c`). A user who sees half a control sequence sees
//! a bug; the ledger keeps every removed byte, so nothing is lost by taking them.
//!
//! What counts as markup-only is read by structure (`crate::grammar::markup`): a special
//! token, or a tag whose name is call markup (`is_call_key`, any spelling) with no text of
//! its own. Tags in code are examples and stay; a closer before a call, and anything a
//! neighbouring leak owns, stay too.
//!
//! May depend on: `crate::grammar`, `crate::json5`, `crate::code`, `crate::types`. No I/O.
//! The stream uses `lone_word`.

use crate::code::CodeRegions;
use crate::grammar::keys::{is_call_key, is_end_key, is_param_key, is_placeholder_key};
use crate::grammar::markup::{tag_at, Kind};
use crate::grammar::text::skip_ws;
use crate::types::Leak;

/// Tokens taken on either side of one leak at most.
const MAX_TAKEN: usize = 16;

/// Extends every leak over the markup-only tokens right around it. Leaks stay in order and
/// apart.
pub fn take(text: &str, code: &CodeRegions, leaks: &mut [Leak]) {
    for i in 0..leaks.len() {
        let floor = if i == 0 { 0 } else { leaks[i - 1].span.end };
        let limit = leaks.get(i + 1).map_or(text.len(), |n| n.span.start);
        let start = before(text, code, floor, leaks[i].span.start);
        let calls = !leaks[i].calls.is_empty();
        let end = after(text, code, leaks[i].span.end, limit, calls);
        leaks[i].span = markdown_around(text, floor, limit, start..end);
    }
}

/// The span widened over the Markdown that decorates only it: a list item's bullet or
/// number, a quote's `>`, emphasis around it (`- <tool_call>..`, `**[f(x=1)]**`), where
/// the lines the span starts and ends on hold nothing else. Removed, the call would leave
/// `- ` or `****` behind.
fn markdown_around(
    text: &str,
    floor: usize,
    limit: usize,
    span: std::ops::Range<usize>,
) -> std::ops::Range<usize> {
    let line_start = text[..span.start]
        .rfind('\n')
        .map_or(0, |i| i + 1)
        .max(floor);
    let line_end = text[span.end..]
        .find('\n')
        .map_or(text.len(), |i| span.end + i)
        .min(limit);
    let (head, tail) = (&text[line_start..span.start], &text[span.end..line_end]);
    let lead = |c: char| {
        c.is_whitespace() || "-*+>#_`~".contains(c) || c.is_ascii_digit() || ".)".contains(c)
    };
    let trail = |c: char| c.is_whitespace() || "*_`~".contains(c);
    let marks = |s: &str| s.chars().any(|c| !c.is_whitespace());
    // A number is a list's only before `.` or `)` (`1. `), not a sentence's digits.
    let numbered = head.trim_start().starts_with(|c: char| c.is_ascii_digit())
        && !head
            .trim()
            .trim_start_matches(|c: char| c.is_ascii_digit())
            .starts_with(['.', ')']);
    if !(head.chars().all(lead) && tail.chars().all(trail))
        || numbered
        || !(marks(head) || marks(tail))
    {
        return span;
    }
    let start = match marks(head) {
        true => line_start,
        false => span.start,
    };
    let end = match marks(tail) {
        true => line_end,
        false => span.end,
    };
    start..end
}

/// The start of the markup-only tokens that end right before `start`, and of a lone word
/// standing in for a bare `<invoke>`'s wrapper.
fn before(text: &str, code: &CodeRegions, floor: usize, start: usize) -> usize {
    let start = openers_before(text, code, floor, start);
    stray_opener(text, code, floor, start)
}

/// The start of the orphan openers and bracket tokens that end right before `start`.
fn openers_before(text: &str, code: &CodeRegions, floor: usize, mut start: usize) -> usize {
    for _ in 0..MAX_TAKEN {
        let head = text.get(floor..start).unwrap_or_default().trim_end();
        let head_end = floor + head.len();
        if let Some(b) = bracket_token_ending(head).filter(|(_, closing)| !closing) {
            if !code.contains(floor + b.0) {
                start = floor + b.0;
                continue;
            }
        }
        // The tag ends the head: its `<` is the last one, its end the head's end.
        let Some(lt) = head.rfind('<').map(|i| floor + i) else {
            return start;
        };
        let Some(t) = tag_at(text, lt) else {
            return start;
        };
        let ends_here = t.span.end == head_end;
        // Only call markup opens a call: a reasoning channel's closer (`<channel|>`) or a
        // turn's header before a call is the text's own.
        let key = t.key();
        let opener = match t.kind {
            // A token in bars on both sides that ends nothing (`<|python_tag|>`,
            // `<|action_start|>`): a control token, never prose, standing right before
            // the call it announced.
            Kind::Special => {
                !is_end_key(&key) && (is_call_key(&key) || both_barred(&text[t.span.clone()]))
            }
            Kind::Open => is_call_key(&key) && bookkeeping_only(&t.attrs) && t.eq.is_none(),
            _ => false,
        };
        if !ends_here || !opener || code.contains(lt) {
            return start;
        }
        start = lt;
    }
    start
}

/// Whether a tag's attributes say nothing of a call (`<tool_call id="1">`): an id, an
/// index or a type. A name attribute (`<invoke name="f">`) makes the tag a call's own.
fn bookkeeping_only(attrs: &[(&str, &str)]) -> bool {
    attrs.iter().all(|(k, _)| {
        let k = crate::grammar::markup::fold(k);
        matches!(
            k.as_str(),
            "id" | "callid" | "toolcallid" | "index" | "type"
        )
    })
}

/// Whether a special token has bars on both sides of its name (`<|x|>`, `<｜x｜>`).
fn both_barred(token: &str) -> bool {
    let bar = |c: Option<char>| matches!(c, Some('|' | '｜'));
    bar(token.strip_prefix('<').and_then(|t| t.chars().next()))
        && bar(token.strip_suffix('>').and_then(|t| t.chars().next_back()))
}

/// Where a lone word stands in for the wrapper a call's element belongs in: a bare
/// `<invoke ..>` (its `<function_calls>` never written) right after a line holding one
/// lower-case word and nothing else (`court`, `count`: the opener as a model garbled it).
/// The word is that call's markup, not the reply's prose, which would not put a bare word
/// on a line of its own right before a call; otherwise `start` as it is.
///
/// Likewise a fence's info string whose backticks were lost (`json` alone on the line above
/// a JSON call): the label of a fence that is gone; and before any call, `assistant` alone
/// on its line: a role header whose tokens were stripped.
fn stray_opener(text: &str, code: &CodeRegions, floor: usize, start: usize) -> usize {
    let element = tag_at(text, start).is_some_and(|t| t.kind == Kind::Open && t.key() == "invoke");
    let json = matches!(text.as_bytes().get(start), Some(b'{' | b'['));
    let head = text.get(floor..start).unwrap_or_default();
    let trimmed = head.trim_end();
    // A chat template's role header whose special tokens were stripped (`<|im_start|>
    // assistant` before a new turn's call): the word ending the line above the call, alone
    // on it or glued to the sentence that ended the turn before (`Done.assistant`).
    if head[trimmed.len()..].contains('\n') {
        if let Some(before) = trimmed.strip_suffix("assistant") {
            let apart = before.is_empty()
                || before.ends_with(['\n', '.', '!', '?'])
                || before.trim_end_matches([' ', '\t']).ends_with('\n');
            let at = floor + before.len();
            if apart && !code.contains(at) {
                return at;
            }
        }
    }
    if !(element || json) {
        return start;
    }
    // The word's line ends before the call's: a line break lies between them. On the
    // call's own line, a one-word label right before a JSON call after a sentence's end
    // (`Done. function_call:{..}`) is the label of the call.
    if !head[trimmed.len()..].contains('\n') {
        // After a space or glued to a sentence's end (`Done.function_call:{..}`).
        let word_at = trimmed
            .rfind(|c: char| c.is_whitespace() || matches!(c, '.' | '!' | '?'))
            .map_or(0, |i| i + 1);
        let word = &trimmed[word_at..];
        let before = trimmed[..word_at].trim_end();
        let sentence = before.is_empty() || before.ends_with(['.', '!', '?', '\n']);
        let at = floor + word_at;
        let object = text.as_bytes().get(start) == Some(&b'{');
        if object && sentence && call_label(word) && !code.contains(at) {
            return at;
        }
        return start;
    }
    let line_start = trimmed.rfind('\n').map_or(0, |i| i + 1);
    let word = trimmed[line_start..].trim_start();
    let at = floor + trimmed.len() - word.len();
    let stray = match element {
        true => lone_word(word),
        false => word.eq_ignore_ascii_case("json") || call_label(word),
    };
    if stray && !code.contains(at) {
        at
    } else {
        start
    }
}

/// Whether `line` (trimmed) is a label announcing the call under it and nothing else: at
/// most three words naming an action, a tool, a function or a call, then a colon
/// (`Action:`, `**Tool call:**`, `Function call:`), as agents' prompts have models write.
fn call_label(line: &str) -> bool {
    let l = line.trim_matches('*').trim_end();
    let Some(words) = l.strip_suffix(':').map(|w| w.trim_matches('*')) else {
        return false;
    };
    let key = crate::grammar::markup::fold(words);
    words.split_whitespace().count() <= 3
        && words.len() <= 32
        && ["action", "tool", "function", "call"]
            .iter()
            .any(|w| key.contains(w))
}

/// Whether `line` (trimmed) is one lower-case word and nothing else: what a garbled wrapper
/// opener looks like (see `stray_opener`). The stream holds such a line until the next.
pub(crate) fn lone_word(line: &str) -> bool {
    (2..=16).contains(&line.len()) && line.bytes().all(|b| b.is_ascii_lowercase())
}

/// The end of the markup-only tokens that start right after `end`.
fn after(text: &str, code: &CodeRegions, mut end: usize, limit: usize, calls: bool) -> usize {
    for _ in 0..MAX_TAKEN {
        // A list's `]` glued to the call, its `[` stripped with the opener's tokens.
        if text.as_bytes().get(end) == Some(&b']') && glued_bracket(text, end + 1) {
            end += 1;
            continue;
        }
        let q = skip_ws(text, end);
        if q >= limit || quoted_after(code, end, q) {
            return end;
        }
        if let Some(e) = bracket_token_at(text, q).filter(|&e| e <= limit) {
            end = e;
            continue;
        }
        if let Some(e) = fake_result(text, q).filter(|&e| e <= limit && calls) {
            end = e;
            continue;
        }
        if calls && limit == text.len() {
            if let Some(e) = labelled_result(text, q) {
                return e;
            }
        }
        // A closer the end of the text cut short (`</t`), whatever it would have closed.
        if limit == text.len() && crate::grammar::text::cut_tag_start(text) == Some(q) {
            return text.len();
        }
        let Some(t) = tag_at(text, q) else {
            return end;
        };
        if t.span.end > limit {
            return end;
        }
        let key = t.key();
        let taken = match t.kind {
            Kind::Special => {
                is_end_key(&key)
                    || is_call_key(&key)
                    || is_placeholder_key(&key)
                    || matches!(key.as_str(), "eotid" | "eomid" | "eot")
            }
            Kind::Close => is_call_key(&key) || is_param_key(&key),
            // An opener of call markup with nothing after it but its own closer or the
            // end of the text: an empty wrapper, or one the generation stopped in.
            Kind::Open | Kind::SelfClose => {
                is_call_key(&key) && t.attrs.is_empty() && {
                    let next = skip_ws(text, t.span.end);
                    next >= text.len()
                        || tag_at(text, next)
                            .is_some_and(|c| c.kind == Kind::Close && c.key() == key)
                }
            }
        };
        if !taken {
            return end;
        }
        end = t.span.end;
    }
    end
}

/// Whether `q`, after a leak ending at `end`, lies in code the leak did not open: a fence the
/// leak's own markup opened (DeepSeek's ```` ```json ```` whose closer is glued to the next
/// token) does not make the tokens after it an example.
fn quoted_after(code: &CodeRegions, end: usize, q: usize) -> bool {
    code.regions()
        .iter()
        .any(|r| r.contains(&q) && r.start >= end)
}

/// Keys a tool's answer is written under. An object of them right after a call is the
/// answer the model made up for it (the call never ran): markup of the same leak.
const RESULT_KEYS: &[&str] = &[
    "result",
    "results",
    "output",
    "observation",
    "tool_response",
    "tool_result",
    "tool_output",
    "response",
    "success",
];

/// Keys that make an object a call, not an answer.
const CALL_KEYS: &[&str] = &[
    "name",
    "arguments",
    "parameters",
    "function",
    "action",
    "tool",
];

/// The end of a fake result object (`{"result": ..}`, `{success: true, ..}`) at `q`.
fn fake_result(text: &str, q: usize) -> Option<usize> {
    if text.as_bytes().get(q) != Some(&b'{') {
        return None;
    }
    let (v, end) = crate::grammar::json::value_at(text, q)
        .or_else(|| crate::json5::parse_value_at(text, q).ok())?;
    let obj = v.as_object()?;
    let answer = obj.keys().any(|k| RESULT_KEYS.contains(&k.as_str()))
        && !obj.keys().any(|k| CALL_KEYS.contains(&k.as_str()));
    answer.then_some(end)
}

/// Labels a made-up answer is written under when it is no object (`Output:`).
const RESULT_LABELS: &[&str] = &[
    "output",
    "observation",
    "result",
    "tool output",
    "tool result",
];

/// The end of a made-up answer under a label of its own, ending the text, at `q`: the
/// label's line (`Observation: 42`), or the label alone on its line and one fenced block
/// after it (`Output:` then ```` ``` ```` .. ```` ``` ````), and nothing after. A model that
/// wrote its call as text wrote the answer too; the tool never ran.
fn labelled_result(text: &str, q: usize) -> Option<usize> {
    let rest = text.get(q..)?;
    let line_end = rest.find('\n').unwrap_or(rest.len());
    let (label, value) = rest[..line_end].split_once(':')?;
    let label = label.trim_matches(|c: char| c == '*' || c.is_whitespace());
    if !RESULT_LABELS.iter().any(|l| l.eq_ignore_ascii_case(label)) {
        return None;
    }
    let tail = rest[line_end..].trim();
    let fenced = || {
        let body = tail.strip_prefix("```")?.strip_suffix("```")?;
        // One block: its first line is its info string, and no fence closes before its end.
        (!body.contains("\n```")).then_some(())
    };
    let answered = match value.trim().is_empty() {
        true => fenced().is_some(),
        false => tail.is_empty(),
    };
    answered.then_some(text.len())
}

/// A bracketed token of call markup (`[TOOL_CALLS]`, `[/TOOL_CALL]`, `[TOOL_CALL_END]`):
/// capitals, `_` and spaces naming a call, an optional `/`; or the numbered placeholder a
/// decoder printed for a special token it had no text for (`[UNUSED_TOKEN_144]`).
fn bracket_token(s: &str) -> Option<bool> {
    let inner = s.strip_prefix('[')?.strip_suffix(']')?;
    let (closing, word) = match inner.strip_prefix('/') {
        Some(w) => (true, w),
        None => (false, inner),
    };
    let shaped = !word.is_empty()
        && word.len() <= 32
        && word
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_' || c == ' ');
    let key = crate::grammar::markup::fold(word);
    (shaped && (is_call_key(&key) || is_placeholder_key(&key))).then_some(closing)
}

/// The bracketed token that ends `head`: its start in `head` and whether it closes.
pub(crate) fn bracket_token_ending(head: &str) -> Option<(usize, bool)> {
    let open = head.rfind('[')?;
    bracket_token(head.get(open..)?).map(|closing| (open, closing))
}

/// The end of a bracketed token at `q`.
fn bracket_token_at(text: &str, q: usize) -> Option<usize> {
    let rest = text.get(q..)?;
    let close = rest.get(..rest.len().min(40))?.find(']')?;
    bracket_token(rest.get(..=close)?).map(|_| q + close + 1)
}

/// Whether what follows a `]` at `at` says it closed markup: a tag, or the end of the text.
fn glued_bracket(text: &str, at: usize) -> bool {
    let q = skip_ws(text, at);
    q >= text.len() || tag_at(text, q).is_some_and(|t| t.kind == Kind::Special)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Family;

    fn taken(text: &str, span: std::ops::Range<usize>) -> String {
        let code = CodeRegions::find(text);
        let mut leaks = vec![Leak {
            family: Family::Hermes,
            span,
            calls: Vec::new(),
            results: Vec::new(),
        }];
        take(text, &code, &mut leaks);
        let s = leaks[0].span.clone();
        format!("{}{}", &text[..s.start], &text[s.end..])
    }

    #[test]
    fn orphan_openers_and_closers_go_with_the_call() {
        let t = "Hi <tool_call> CALL </tool_call>\n</function_calls> bye";
        let at = t.find("CALL").unwrap_or(0);
        assert_eq!(taken(t, at..at + 4), "Hi  bye");
    }

    #[test]
    fn empty_wrappers_and_special_tokens_go() {
        let t = "CALL\n<invoke>\n</invoke><|tool_call_end|><|im_end|>";
        assert_eq!(taken(t, 0..4), "");
        let t = "CALL]<|tool_call_end|>";
        assert_eq!(taken(t, 0..4), "");
    }

    #[test]
    fn prose_tags_and_closers_before_a_call_stay() {
        let t = "</think>\nCALL <b>bold</b>";
        let at = t.find("CALL").unwrap_or(0);
        assert_eq!(taken(t, at..at + 4), "</think>\n <b>bold</b>");
        let t = "CALL [1] and more";
        assert_eq!(taken(t, 0..4), " [1] and more");
    }

    #[test]
    fn a_token_cut_before_its_closing_bracket_goes() {
        assert_eq!(
            taken("Sure. CALL <|tool_calls_section_end|", 6..10),
            "Sure. "
        );
        // Not at the end of its line: not a token, and it stays.
        let t = "CALL <|a|b";
        assert_eq!(taken(t, 0..4), " <|a|b");
    }

    #[test]
    fn a_lone_word_where_the_wrapper_belongs_goes_with_a_bare_invoke() {
        let call = "<invoke name=\"f\">\n<parameter name=\"a\">1</parameter>\n</invoke>";
        let run = |head: &str| {
            let t = format!("{head}{call}");
            taken(&t, head.len()..t.len())
        };
        assert_eq!(run("I will run it.\n\ncourt\n"), "I will run it.\n\n");
        assert_eq!(run("count\n  "), "");
        // A sentence, a capitalised word, a word on the call's own line, or one in code stay.
        assert_eq!(run("Running it now\n"), "Running it now\n");
        assert_eq!(run("Done\n"), "Done\n");
        assert_eq!(run("see "), "see ");
        assert_eq!(run("```\ncount\n```\n"), "```\ncount\n```\n");
        // Only a bare `<invoke>` lacks its wrapper: after other markup, the word is prose.
        let t = format!("count\n<tool_call>{call}");
        assert_eq!(taken(&t, 6..t.len()), "count\n");
    }

    #[test]
    fn a_made_up_answer_right_after_a_call_goes() {
        let text = "CALL\n{\"result\": \"ok\"} Then more.";
        let code = CodeRegions::find(text);
        let mut leaks = vec![Leak {
            family: Family::Hermes,
            span: 0..4,
            calls: vec![crate::types::Call {
                name: "f".into(),
                arguments: serde_json::json!({}),
            }],
            results: Vec::new(),
        }];
        take(text, &code, &mut leaks);
        assert_eq!(&text[leaks[0].span.end..], " Then more.");
        // An object that is data, or one after no call, stays.
        assert_eq!(
            taken("CALL\n{\"name\": \"x\", \"result\": 1}", 0..4),
            "\n{\"name\": \"x\", \"result\": 1}"
        );
        assert_eq!(taken("CALL {\"result\": 1}", 0..4), " {\"result\": 1}");
    }

    #[test]
    fn bracketed_call_tokens_go_too() {
        let t = "Ok. [TOOL_CALLS] CALL [/TOOL_CALLS] bye";
        let at = t.find("CALL ").unwrap_or(0);
        assert_eq!(taken(t, at..at + 4), "Ok.  bye");
        let t = "See [NOTE] CALL [1]";
        let at = t.find("CALL").unwrap_or(0);
        assert_eq!(taken(t, at..at + 4), "See [NOTE]  [1]");
    }

    #[test]
    fn tags_in_code_stay() {
        let t = "CALL\n```\n</tool_call>\n```";
        assert_eq!(taken(t, 0..4), "\n```\n</tool_call>\n```");
    }
}
