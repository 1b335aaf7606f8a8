//! Calls a front end or a proxy wrote in a bracketed label: the call inside the label
//! (`[Tool Use: NAME({json})]`, `[Calling NAME with {json}]`), or the label naming the
//! tool and the arguments right after it (`[tool:NAME] {json}`, `[Tool Call: NAME (ID:
//! ..)] Arguments: {json}`). The bracket and its label are the call's markup and go with it.
//! The same trace written as a line of its own, without brackets (`Calling NAME with
//! input: {json}`), is [`trace_line`]; among the sentences of a bracketed note a framework
//! wrote into the history (`[Historical context: .. called tool "NAME" with arguments:
//! {json}. ..]`), the note is the call's markup. (LangChain's ``Invoking: `NAME` with `{..}` ``
//! puts the object in inline code, which is an example here.)
//! Whether the call names an enabled tool is the caller's check, as for a list.
//!
//! May depend on: `crate::families::util`, `crate::grammar`, `crate::json5`, `crate::types`.

use super::util::{is_tool_name, json_value_at, skip_ws};
use crate::grammar::is_ident_char;
use crate::grammar::python::{parse_call, PyOpts};
use crate::grammar::text::floor_char;
use crate::types::Call;

/// The longest label a front end writes before the call in its brackets (`Tool Use:`,
/// `Tool call:`, `Calling`): a few words, no sentence.
const MAX_LABEL: usize = 32;
/// At most this many words in a label.
const MAX_LABEL_WORDS: usize = 3;

/// A call a front end or proxy wrote in brackets with a short label (`[Tool Use:
/// NAME({json})]`, `[Tool call: NAME(k="v")]`, `[Calling NAME with {json}]`): the bracket's
/// content is exactly the label and one call, so the brackets and the label are the call's
/// markup and go with it. The label is at most [`MAX_LABEL_WORDS`] words of letters, the
/// first capitalised as software writes it (`Tool Use`, `Calling`), ending in `:`, or words before the name with `with` between the name and a JSON object
/// (`[Calling tool: NAME with arguments: {json}]` has both). The
/// call is a keyword call, `NAME({json})` or `NAME {json}`; whether it names an enabled
/// tool is the caller's check, as for a list.
pub(super) fn labeled_at(text: &str, p: usize) -> Option<(Vec<Call>, usize)> {
    label_call(text, p).or_else(|| traced_note(text, p))
}

fn label_call(text: &str, p: usize) -> Option<(Vec<Call>, usize)> {
    let inner = text.get(p + 1..)?;
    let head = inner.get(..floor_char(inner, MAX_LABEL + 1))?;
    let words = |label: &str| {
        let n = label.split_whitespace().count();
        (1..=MAX_LABEL_WORDS).contains(&n)
            && (!label.trim_start().starts_with(char::is_lowercase) || has_call_word(label))
            && label
                .chars()
                .all(|c| c.is_alphabetic() || c == ' ' || c == '-')
    };
    let (call, end) = match head.find(':') {
        Some(colon) if words(&head[..colon]) => {
            let at = skip_ws(text, p + 1 + colon + 1);
            match parse_call(text, at, PyOpts::STRICT).or_else(|| json_call(text, at)) {
                Some(c) => c,
                None => return header_then_object(text, at, has_call_word(&head[..colon])),
            }
        }
        _ => {
            // `Calling NAME with {..}`: the label's words, the name, `with`, the object.
            // The connective may name the object (`with args: {..}`), and the name may be
            // quoted (`Called function "NAME" with ..`).
            let brace = inner.get(..floor_char(inner, MAX_LABEL * 4))?.find('{')?;
            let before = inner.get(..brace)?.trim_end();
            let with = before.rfind(" with")?;
            let tail = before[with + " with".len()..].trim_end_matches(':');
            if tail.split_whitespace().count() > 1
                || !tail.chars().all(|c| c.is_alphabetic() || c == ' ')
            {
                return None;
            }
            let before = before[..with].trim_end();
            let name_at = before.rfind(' ')?;
            let (label, name) = (&before[..name_at], &before[name_at + 1..]);
            let name = name.trim_matches(['"', '\'', '`']);
            if !words(label) || label.len() > MAX_LABEL {
                return None;
            }
            let (arguments, e) = json_value_at(text, p + 1 + brace)?;
            (call_named(name, arguments)?, e)
        }
    };
    let close = skip_ws(text, end);
    (text.as_bytes().get(close) == Some(&b']')).then(|| (vec![call], close + 1))
}

/// The most bytes of a bracketed note (`[Historical context: ..]`) read for a trace.
const MAX_NOTE: usize = 2048;

/// A bracketed note on lines of its own holding a trace of a call among its sentences
/// (`[Historical context: a model called tool "NAME" with arguments: {json}. Do not mimic
/// this.]`): a history line a framework wrote that the model copied. The trace is a call
/// word, the name (maybe quoted), ` with`, maybe one word and a colon, the object; the note
/// is the call's markup, prose and all. It holds no other bracket or object; where it
/// stands is the caller's check, as for every label.
fn traced_note(text: &str, p: usize) -> Option<(Vec<Call>, usize)> {
    let inner = text.get(p + 1..)?;
    let inner = inner.get(..floor_char(inner, MAX_NOTE))?;
    let brace = inner.find('{')?;
    let before = inner[..brace].trim_end();
    if before.contains(['[', ']', '\n']) || !with_before(before.as_bytes()) {
        return None;
    }
    // The name last before ` with`, a call word right before it.
    let (lead, name) = name_before_with(before)?;
    let word = lead.trim_end().rsplit(' ').next()?;
    if !has_call_word(word) {
        return None;
    }
    let (arguments, end) = json_value_at(text, p + 1 + brace)?;
    let rest = text.get(end..)?;
    let close = rest.get(..floor_char(rest, MAX_NOTE))?.find(']')?;
    let tail = &rest[..close];
    if tail.contains(['[', '{', '\n']) {
        return None;
    }
    Some((vec![call_named(name, arguments)?], end + close + 1))
}

/// Words a label names a call with, in any case (`tool`, `Tool Call`, `Calling`): a
/// label in lower case counts only with one of them (`[tool:NAME]`, not `[note: ..]`).
const CALL_WORDS: &[&str] = &[
    "tool", "call", "calling", "function", "invoke", "invoking", "action", "use", "using",
];

/// Whether one of `label`'s words is one of [`CALL_WORDS`].
fn has_call_word(label: &str) -> bool {
    label
        .split(|c: char| !c.is_alphabetic())
        .any(|w| CALL_WORDS.iter().any(|c| w.eq_ignore_ascii_case(c)))
}

/// The most bytes of a parenthetical after the name (`(ID: call_17)`) and of the label
/// before the arguments (`Arguments:`).
const MAX_ASIDE: usize = 80;

/// The label names the tool and closes; the arguments follow it (`[tool:NAME] {json}`,
/// `[Tool Call: NAME (ID: ..)]` then `Arguments: {json}` on the same line or the next):
/// the name at `at`, maybe a parenthetical, `]`, then at most a line break and a short
/// label of words ending in `:` before one JSON object; each further object on a line of
/// its own right below is another call of the same tool. The name may be quoted. The
/// calls and the offset past them. A label about a call (`bare`: `[Function Call:
/// 'NAME']`) that ends its line with no object after it is a call without arguments.
fn header_then_object(text: &str, at: usize, bare: bool) -> Option<(Vec<Call>, usize)> {
    // The name may be quoted, or keep a stray quote (`[Used tools: browser"]`).
    let at = at + usize::from(matches!(text.as_bytes().get(at), Some(b'"' | b'\'')));
    let rest = text.get(at..)?;
    let name_len = rest.find(|c: char| !(is_ident_char(c) || c == '-' || c == '.'))?;
    let name = rest.get(..name_len)?;
    let mut i = at + name_len;
    i = skip_spaces(
        text,
        i + usize::from(matches!(text.as_bytes().get(i), Some(b'"' | b'\''))),
    );
    if text.as_bytes().get(i) == Some(&b'(') {
        let aside = text.get(i + 1..)?;
        let close = aside.get(..floor_char(aside, MAX_ASIDE))?.find(')')?;
        if aside[..close].contains(['(', '[', '{', '\n']) {
            return None;
        }
        i = skip_spaces(text, i + 1 + close + 1);
    }
    let closed = eat_byte(text, i, b']')?;
    i = skip_spaces(text, closed);
    let line_ends = matches!(text.as_bytes().get(i), None | Some(b'\n'));
    // What follows on the next lines must not be the arguments in any markup (an object,
    // parameter elements, a list, an `Arguments:` label).
    let next = text.get(skip_ws(text, i)..).unwrap_or_default();
    if bare
        && line_ends
        && !next.starts_with(['{', '<', '['])
        && !next
            .get(..4)
            .is_some_and(|w| w.eq_ignore_ascii_case("args"))
        && !next
            .get(..9)
            .is_some_and(|w| w.eq_ignore_ascii_case("arguments"))
    {
        return Some((
            vec![call_named(
                name,
                serde_json::Value::Object(Default::default()),
            )?],
            closed,
        ));
    }
    if let Some(j) = eat_byte(text, i, b'\n') {
        i = skip_spaces(text, j);
    }
    let tail = text.get(i..)?;
    if let Some(colon) = tail
        .get(..floor_char(tail, MAX_ASIDE))
        .and_then(|h| h.find(':'))
    {
        let label = &tail[..colon];
        if !label.is_empty()
            && label.split_whitespace().count() <= 2
            && label.chars().all(|c| c.is_alphabetic() || c == ' ')
        {
            i = skip_spaces(text, i + colon + 1);
        }
    }
    if text.as_bytes().get(i) != Some(&b'{') {
        return None;
    }
    let (arguments, mut end) = json_value_at(text, i)?;
    let mut calls = vec![call_named(name, arguments)?];
    // More objects, each on a line of its own right below: more calls of the same tool
    // (`[Used tools: browser]` then one object per call).
    while calls.len() < MAX_CALLS {
        let next = skip_spaces(text, end);
        let Some(line) = eat_byte(text, next, b'\n') else {
            break;
        };
        let q = skip_spaces(text, line);
        let Some((arguments, e)) = (text.as_bytes().get(q) == Some(&b'{'))
            .then(|| json_value_at(text, q))
            .flatten()
        else {
            break;
        };
        let Some(call) = call_named(name, arguments) else {
            break;
        };
        calls.push(call);
        end = e;
    }
    Some((calls, end))
}

/// The most calls one label heads.
const MAX_CALLS: usize = 16;

/// `i` past spaces and tabs (a line break stops it).
fn skip_spaces(text: &str, mut i: usize) -> usize {
    while matches!(text.as_bytes().get(i), Some(b' ' | b'\t' | b'\r')) {
        i += 1;
    }
    i
}

/// The offset past `b` when it stands at `i`.
fn eat_byte(text: &str, i: usize, b: u8) -> Option<usize> {
    (text.as_bytes().get(i) == Some(&b)).then_some(i + 1)
}

/// `NAME({json})` or `NAME {json}` at `at`: the call and the offset past it.
fn json_call(text: &str, at: usize) -> Option<(Call, usize)> {
    let rest = text.get(at..)?;
    let name_len = rest.find(|c: char| !(is_ident_char(c) || c == '-'))?;
    let name = rest.get(..name_len)?;
    let mut i = skip_ws(text, at + name_len);
    // `NAME with arguments: {..}`, `NAME with {..}`: a connective a front end's trace line
    // puts between the name and the object.
    if let Some(tail) = text.get(i..).and_then(|t| t.strip_prefix("with ")) {
        let words = tail.find('{').filter(|&e| e <= 20)?;
        let between = &tail[..words];
        if !between
            .chars()
            .all(|c| c.is_alphabetic() || matches!(c, ' ' | ':' | '='))
        {
            return None;
        }
        i = text.len() - tail.len() + words;
    }
    let paren = text.as_bytes().get(i) == Some(&b'(');
    if paren {
        i = skip_ws(text, i + 1);
    }
    let (arguments, mut end) = json_value_at(text, i)?;
    if paren {
        end = skip_ws(text, end);
        if text.as_bytes().get(end) != Some(&b')') {
            return None;
        }
        end += 1;
    }
    Some((call_named(name, arguments)?, end))
}

/// What stands before a trace's object (`Calling NAME with`, `.. tool "NAME" with
/// arguments:`): the words before the name, and the name, its quotes taken off. ` with`
/// ends it, maybe followed by one word naming the object and a colon or `=`.
fn name_before_with(head: &str) -> Option<(&str, &str)> {
    let head = head.trim_end();
    let head = head.strip_suffix([':', '=']).unwrap_or(head).trim_end();
    let head = match head.strip_suffix(" with") {
        Some(h) => h,
        None => {
            let (h, word) = head.rsplit_once(' ')?;
            if word.is_empty() || !word.chars().all(char::is_alphabetic) {
                return None;
            }
            h.strip_suffix(" with")?
        }
    };
    let (lead, name) = head.trim_end().rsplit_once(' ')?;
    Some((lead, name.trim_matches(['"', '\'', '`'])))
}

/// A trace line standing as a line of its own, its object at the `{` at `p`: a label of
/// at most [`MAX_LABEL_WORDS`] words (capitalised as software writes it, or holding a call
/// word), the tool's name (maybe quoted or in backticks), ` with`, maybe one word naming the
/// object and a colon, then the object (JSON, or a Python dict) ending the line. Where the line starts (past its indent), where the call ends, and the
/// call.
pub(crate) fn trace_line(text: &str, p: usize) -> Option<(usize, usize, Call)> {
    let line = text.get(..p)?.rfind('\n').map_or(0, |i| i + 1);
    let (label, name) = name_before_with(text.get(line..p)?)?;
    let label = label.trim_end().strip_suffix(':').unwrap_or(label).trim();
    let words = label.split_whitespace().count();
    let labelled = (1..=MAX_LABEL_WORDS).contains(&words)
        && label.len() <= MAX_LABEL
        && label.chars().all(|c| c.is_alphabetic() || c == ' ')
        && (label.starts_with(|c: char| c.is_uppercase()) || has_call_word(label));
    let start = line + (text.get(line..p)?.len() - text.get(line..p)?.trim_start().len());
    if !labelled || !text.get(start..)?.starts_with(label) {
        return None;
    }
    // A Python framework prints the object as a dict (`{'k': 'v', 'n': 0}`).
    let (arguments, end) = match json_value_at(text, p) {
        Some(read) => read,
        None if text.get(p + 1..)?.starts_with('\'') => {
            crate::json5::parse_value_at(text, p).ok()?
        }
        None => return None,
    };
    let rest = text.get(end..)?;
    let line_end = rest.find('\n').unwrap_or(rest.len());
    if !rest[..line_end].trim().is_empty() {
        return None;
    }
    Some((start, end, call_named(name, arguments)?))
}

/// Whether what stands before the `{` at `p` may end a trace line's connective (`with`,
/// `with input:`): the prefilter's side of [`trace_line`], a few bytes back.
#[inline]
pub(crate) fn trace_probe(bytes: &[u8], p: usize) -> bool {
    let head = bytes[..p].trim_ascii_end();
    let head = head.strip_suffix(b":").unwrap_or(head);
    // JSON's `"key": {` stops at its quote.
    if !head.last().is_some_and(u8::is_ascii_alphabetic) {
        return false;
    }
    let word = head
        .iter()
        .rev()
        .take(16)
        .take_while(|b| b.is_ascii_alphabetic())
        .count();
    let named = head[..head.len() - word].trim_ascii_end();
    head.ends_with(b" with") || (word > 0 && named.ends_with(b" with"))
}

/// A call of `name` with an argument object.
fn call_named(name: &str, arguments: serde_json::Value) -> Option<Call> {
    (is_tool_name(name) && arguments.is_object()).then(|| Call {
        name: name.to_string(),
        arguments,
    })
}

/// The probe's side of [`labeled_at`], on at most [`MAX_LABEL`] bytes after the `[` at
/// `from - 1`: letters and spaces up to a `:` followed by a name and `(` or `{`, or up to
/// ` with {`.
#[inline]
pub(super) fn label_probe(bytes: &[u8], from: usize) -> bool {
    let limit = (from + MAX_LABEL + 1).min(bytes.len());
    let Some(head) = bytes.get(from..limit) else {
        return false;
    };
    let Some(stop) = head
        .iter()
        .position(|b| !(b.is_ascii_alphabetic() || *b == b' ' || *b == b'-' || *b >= 0x80))
    else {
        return false;
    };
    let at = |i: usize| head.get(i).copied();
    match at(stop) {
        Some(b':') => {
            // A name, then `(` or `{` (after spaces): the call's shape.
            let rest = bytes.get(from + stop + 1..).unwrap_or_default();
            let rest = &rest[..rest.len().min(MAX_LABEL * 4)];
            let name = rest.iter().skip_while(|b| **b == b' ');
            // The name may be quoted, or keep a stray quote.
            let mut after = name.skip_while(|b| {
                b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'"' | b'\'') || **b >= 0x80
            });
            match after.find(|b| **b != b' ') {
                Some(b'(' | b'{') => true,
                // `[tool:NAME] {`, `[Tool Call: NAME]` then `Arguments: {` below it.
                Some(b']') => {
                    let tail: Vec<u8> = after.take(MAX_ASIDE).copied().collect();
                    // `[Function Call: 'NAME']` ending its line: a call without arguments.
                    let bare = tail
                        .iter()
                        .find(|b| !matches!(b, b' ' | b'\t' | b'\r'))
                        .is_none_or(|b| *b == b'\n')
                        && head[..stop].split(|b| !b.is_ascii_alphabetic()).any(|w| {
                            CALL_WORDS
                                .iter()
                                .any(|c| w.eq_ignore_ascii_case(c.as_bytes()))
                        });
                    bare || tail.iter().position(|b| *b == b'{').is_some_and(|e| {
                        tail[..e].iter().all(|b| {
                            b.is_ascii_alphabetic()
                                || matches!(b, b' ' | b'\t' | b'\r' | b'\n' | b':')
                        })
                    })
                }
                // `NAME with arguments: {`: a connective and a word or two before the object.
                Some(b'w') => {
                    let tail: Vec<u8> = after.take(24).copied().collect();
                    tail.starts_with(b"ith")
                        && tail.iter().position(|b| *b == b'{').is_some_and(|e| {
                            tail[..e]
                                .iter()
                                .all(|b| b.is_ascii_alphabetic() || matches!(b, b' ' | b':' | b'='))
                        })
                }
                // A note holding a trace among its words (`[Historical context: .. called
                // tool "NAME" with arguments: {`): ` with` and a word or two before a brace
                // on the same line.
                _ => {
                    let far = (from + MAX_LABEL * 6).min(bytes.len());
                    let rest = bytes.get(from..far).unwrap_or_default();
                    rest.iter()
                        .position(|b| matches!(b, b'{' | b']' | b'\n'))
                        .is_some_and(|e| rest[e] == b'{' && with_before(&rest[..e]))
                }
            }
        }
        // `Calling NAME with {`: the letters and spaces run up to the brace (a one-word
        // name), or into the name's `_` or digits, and then to the brace on the same line.
        // Anything else (`[the docs](..)`, `[1]`) stops here, at the first byte.
        Some(b'{') => with_before(&head[..stop]),
        // The name runs on (`_`, digits) or is quoted (`Called function "NAME" with`).
        Some(b) if matches!(b, b'_' | b'"' | b'\'' | b'`') || b.is_ascii_digit() => {
            let far = (from + MAX_LABEL * 4).min(bytes.len());
            let rest = bytes.get(from..far).unwrap_or_default();
            rest.iter()
                .position(|b| matches!(b, b'{' | b']' | b'\n'))
                .is_some_and(|e| rest[e] == b'{' && with_before(&rest[..e]))
        }
        _ => false,
    }
}

/// Whether `head` (what stands before an object) ends with the connective ` with`, maybe
/// followed by one word naming the object and a colon (`with args:`).
fn with_before(head: &[u8]) -> bool {
    let head = head.trim_ascii_end();
    let head = head
        .strip_suffix(b":")
        .or_else(|| head.strip_suffix(b"="))
        .unwrap_or(head);
    let word = head
        .iter()
        .rev()
        .take_while(|b| b.is_ascii_alphabetic())
        .count();
    let named = head[..head.len() - word].trim_ascii_end();
    head.ends_with(b" with") || (word > 0 && named.ends_with(b" with"))
}
