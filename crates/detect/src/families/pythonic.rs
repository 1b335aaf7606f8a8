//! `pythonic`: a Python list of keyword-argument calls,
//! `[get_weather(city='SF', metric='celsius'), get_time()]` (Llama 3.2/4, Llama 4's
//! `<|python_start|>` ... `<|python_end|>` around it), as the whole message or standing
//! apart from the prose around it, with the end-of-turn token that follows it.
//!
//! A Python-looking call is a weak marker (`f(x)` is ordinary prose and code), so this
//! family only counts when every call names a tool the agent has enabled, the list stands
//! apart (not an index `a[f(x=1)]`, not followed by `(`, `.` or a word), every argument is
//! a keyword argument and every value a Python literal. Toolformer-style calls written
//! inline in a sentence (`wikipedia('Paris')`, positional) are prose, never a leak. Lists
//! joined by a connective (`[a(x=1)] and [b(y=2)]`) stand apart as one run: each list is a
//! call, the connective stays as the model's text (SGLang's reading).
//!
//! May depend on: `crate::families::labels`, `crate::families::util`, `crate::grammar`, `crate::json5`, `crate::types`,
//! `crate::Ctx`.

use super::labels::{label_probe, labeled_at};
use super::util::with_trailing;
use super::util::{find_from, merge, skip_ws};
use crate::grammar::bytes as class;
use crate::grammar::python::{parse_call_list, PyOpts};
use crate::types::{Call, Family};
use crate::{Ctx, Leak};

/// Literal markers one of which any leak of this family contains.
pub(crate) const TRIGGERS: &[&str] = &["<|python_start|>", "["];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

const PY_START: &str = "<|python_start|>";
const PY_END: &str = "<|python_end|>";

/// Appends the leaks of this family found in `text` to `out`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let all_enabled = |calls: &[Call]| calls.iter().all(|c| ctx.tool_enabled(&c.name));
    let mut found = Vec::new();
    // A list standing on its own, anywhere in the message.
    let bytes = text.as_bytes();
    let mut from = 0;
    let mut seen = 0;
    while let Some(p) = bytes
        .get(from..)
        .and_then(|r| memchr::memchr(b'[', r))
        .map(|i| from + i)
    {
        from = p + 1;
        if !probe(bytes, p) || ctx.quoted(p) {
            continue;
        }
        if !stands_alone_before(bytes, p) {
            ctx.declined(p..p + 1, || {
                "a call's bracket inside a sentence (not at a line's start or after a \
                 sentence's end) is the text talking about markup"
                    .into()
            });
            continue;
        }
        seen += 1;
        if seen > super::MAX_CANDIDATES {
            break;
        }
        let Some((calls, mut end)) = list_at(text, p).or_else(|| labeled_at(text, p)) else {
            ctx.declined(p..p + 1, || {
                "a bracket that is neither a list of keyword calls nor a label of at most \
                 three words and one call filling the rest of it"
                    .into()
            });
            continue;
        };
        // `[a(x=1)] and [b(y=2)]`: lists joined by a connective stand apart together (each
        // list a call, the connective the model's text, as SGLang's parser reads it).
        let mut run = vec![(p..end, calls)];
        for _ in 0..super::MAX_CANDIDATES {
            if stands_alone_after(bytes, end) {
                break;
            }
            let Some((start, more, next_end)) = joined_list(text, end) else {
                break;
            };
            run.push((start..next_end, more));
            end = next_end;
        }
        if !stands_alone_after(bytes, end) {
            ctx.declined(p..end, || {
                "the calls' bracket does not stand apart from the text after it".into()
            });
        } else if run.iter().all(|(_, c)| all_enabled(c)) {
            for (span, calls) in run {
                found.push((span.start..with_trailing(text, span.end, &[]), calls));
            }
            from = end;
        }
    }
    // `<|python_start|>[...]<|python_end|>` (the end token may be missing at the end).
    let mut from = 0;
    for _ in 0..super::MAX_CANDIDATES {
        let Some(p) = find_from(text, PY_START, from) else {
            break;
        };
        from = p + PY_START.len();
        if ctx.in_code(p) {
            continue;
        }
        let q = skip_ws(text, from);
        let Some((calls, end)) = parse_call_list(text, q, PyOpts::STRICT) else {
            continue;
        };
        let after = skip_ws(text, end);
        // `<|python_end|>` may be missing where the list ends its line or the text.
        let span_end = if text.get(after..).is_some_and(|r| r.starts_with(PY_END)) {
            after + PY_END.len()
        } else if after == text.len() || stands_alone_after(bytes, end) {
            end
        } else {
            continue;
        };
        if all_enabled(&calls) {
            found.push((p..with_trailing(text, span_end, &[]), calls));
            from = span_end;
        }
    }
    merge(text, Family::Pythonic, found, out);
}

/// The words that may join two call lists into one run of calls (`[a()] and [b()]`): what
/// models write between calls they mean to make one after the other. Anything longer is a
/// sentence about the calls.
const CONNECTIVES: &[&str] = &["and then", "and", "then", "or", ",", ";", "&", "+"];

/// The list joined to a list ending at `end` by one of the [`CONNECTIVES`]: its start, calls
/// and end.
fn joined_list(text: &str, end: usize) -> Option<(usize, Vec<Call>, usize)> {
    let mut rest = text.get(end..)?.trim_start_matches([' ', '\t']);
    // One connective or two (`, then`, `; and`).
    for n in 0..2 {
        let word = CONNECTIVES.iter().find_map(|c| {
            let r = rest.strip_prefix(c)?;
            // A whole word: `and` is not the start of `android`.
            (!r.starts_with(|ch: char| ch.is_alphanumeric())).then_some(r)
        });
        match word {
            Some(r) => rest = r.trim_start_matches([' ', '\t']),
            None if n == 0 => return None,
            None => break,
        }
    }
    let list = rest;
    let p = text.len() - list.len();
    if !list.starts_with('[') || !probe(text.as_bytes(), p) {
        return None;
    }
    list_at(text, p)
        .or_else(|| labeled_at(text, p))
        .map(|(calls, end)| (p, calls, end))
}

/// The call list at `p`: strict Python literals, or LFM2's lenient strings (its lists keep
/// them once its tokens are stripped).
fn list_at(text: &str, p: usize) -> Option<(Vec<Call>, usize)> {
    parse_call_list(text, p, PyOpts::STRICT).or_else(|| parse_call_list(text, p, PyOpts::LENIENT))
}

/// Whether the `[` at `p` opens what could be a call list: not an index (`a[f(x)]`), an
/// identifier, `(`, then `)` or a keyword argument `name=`; or a short label and a call
/// ([`labeled_at`]): words ending in `:` before the call's shape, or words and a name
/// before ` with {`. The prefilter asks this at every `[`, so it looks at a few bytes and
/// no further.
pub(crate) fn probe(bytes: &[u8], p: usize) -> bool {
    // Bytes of a UTF-8 sequence (>= 0x80) count as name bytes: names may be in any script.
    // Byte classes from one table: this runs at every `[` followed by a name or a space.
    let ident = |b: &u8| class::is(*b, class::WORD);
    let skip_ws = |i: usize| i + class::run(bytes.get(i..).unwrap_or_default(), class::SPACE, 64);
    // Where the name at `i` ends, if it ends within 96 bytes (before the text's end); a name
    // of `-` too (`get-weather(`), which detection reads under an alias.
    let word_end = |i: usize| {
        let r = bytes.get(i..(i + 96).min(bytes.len()))?;
        let n = class::run(r, class::WORD | class::DOT | class::DASH, usize::MAX);
        (n < r.len()).then_some(i + n)
    };
    let before = p.checked_sub(1).and_then(|i| bytes.get(i));
    // A sentence's dot may come right before (a token between was stripped): `Sure.[f()]`.
    if before.is_some_and(|b| ident(b) || matches!(b, b']' | b')')) {
        return false;
    }
    let i = skip_ws(p + 1);
    if !bytes
        .get(i)
        .is_some_and(|b| b.is_ascii_alphabetic() || *b == b'_' || *b >= 0xC2)
    {
        return false;
    }
    let Some(end) = word_end(i) else {
        return false;
    };
    if bytes.get(end) != Some(&b'(') {
        // A label starts with a capital (or a letter of another script): a front end's
        // `Tool Use:`, not a markdown link's `[the docs]`, which stops here.
        let capital = bytes
            .get(i)
            .is_some_and(|b| b.is_ascii_uppercase() || *b >= 0xC2);
        // Or a lower-case label whose word is about a call (`[tool:NAME]`).
        let called = || {
            let word = &bytes[i..end];
            (4..=8).contains(&word.len())
                && [&b"tool"[..], b"call", b"function", b"invoke", b"action"]
                    .iter()
                    .any(|w| word.eq_ignore_ascii_case(w))
        };
        return (capital || called())
            && matches!(bytes.get(end), Some(b' ' | b':'))
            && label_probe(bytes, p + 1);
    }
    let arg = skip_ws(end + 1);
    if bytes.get(arg) == Some(&b')') {
        return true;
    }
    match word_end(arg) {
        Some(e) if e > arg => {
            let eq = skip_ws(e);
            bytes.get(eq) == Some(&b'=') && bytes.get(eq + 1) != Some(&b'=')
        }
        _ => false,
    }
}

/// A list is a leak only where it stands as a sentence of its own: at the start of the
/// text or a line, or after a sentence's end or a colon. Inside a sentence (`it has
/// [f()] syntax`, `[f(q=1)] is what it emitted`) it is the text talking about markup.
fn stands_alone_before(bytes: &[u8], p: usize) -> bool {
    let mut i = p;
    while i > 0 && matches!(bytes[i - 1], b' ' | b'\t') {
        i -= 1;
    }
    // Markdown that decorates only the list (`- [f()]`, `**[f()]**`), back to the line's
    // start: the remnant rule takes it with the call.
    let mut j = i;
    while j > 0 && matches!(bytes[j - 1], b'*' | b'_' | b'-' | b'+' | b' ' | b'\t') {
        j -= 1;
    }
    if j < i && (j == 0 || bytes[j - 1] == b'\n') {
        return true;
    }
    match i.checked_sub(1).and_then(|j| bytes.get(j)) {
        None | Some(b'\n' | b'\r' | b'>') => true,
        // Glued to a sentence's end or a label (`Sure.[f()]`, `Calling:[f()]`: a token
        // between was stripped).
        Some(b'.' | b'!' | b'?' | b':') => true,
        Some(_) => false,
    }
}

/// After the list: the end of the text or line, a control token, or a new sentence.
fn stands_alone_after(bytes: &[u8], end: usize) -> bool {
    let mut i = end;
    while matches!(bytes.get(i), Some(b' ' | b'\t')) {
        i += 1;
    }
    // Emphasis closing what decorated the list, then the line's end.
    let mut j = i;
    while matches!(bytes.get(j), Some(b'*' | b'_')) {
        j += 1;
    }
    if j > i && matches!(bytes.get(j), None | Some(b'\n' | b'\r')) {
        return true;
    }
    match bytes.get(i) {
        None | Some(b'\n' | b'\r' | b'<') => true,
        Some(b) if i > end => b.is_ascii_uppercase(),
        Some(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn run(text: &str, tools: &[&str]) -> crate::Detection {
        super::super::testing::detect_with(text, tools)
    }

    #[test]
    fn whole_message_list_is_a_leak() {
        let d = run(
            "[get_weather(city='LA', n=3), ping()]",
            &["get_weather", "ping"],
        );
        assert_eq!(d.leaks.len(), 1);
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"city": "LA", "n": 3}));
        assert_eq!(d.leaks[0].calls[1].arguments, json!({}));
        assert_eq!(d.cleaned.as_deref(), Some(""));
    }

    #[test]
    fn lists_joined_by_a_connective_are_one_run() {
        let d = run("[a(x=1)] and [b(y=2)]", &["a", "b"]);
        assert_eq!(d.leaks.iter().map(|l| l.calls.len()).sum::<usize>(), 2);
        assert_eq!(d.cleaned.as_deref(), Some("and"));
        let d = run("Sure.\n[a(x=1)], then [b(y=2)]\nDone.", &["a", "b"]);
        assert_eq!(d.cleaned.as_deref(), Some("Sure.\n, then \nDone."));
        // Inside a sentence, or joined by more than a connective, they are prose.
        for t in [
            "I would run [a(x=1)] and then [b(y=2)].",
            "[a(x=1)] and later maybe [b(y=2)]",
            "[a(x=1)] and [b(y=2)] are the calls",
            "[a(x=1)] android [b(y=2)]",
        ] {
            assert!(run(t, &["a", "b"]).is_clean(), "{t}");
        }
        assert!(run("[a(x=1)] and [b(y=2)]", &["a"]).is_clean());
    }

    #[test]
    fn tool_must_be_enabled() {
        assert!(run("[get_weather(city='LA')]", &["other"]).is_clean());
    }

    #[test]
    fn prose_and_data_lists_stay() {
        let t = &["wikipedia", "x", "print"];
        assert!(run("Summary: wikipedia('French Revolution')", t).is_clean());
        assert!(run("[wikipedia('French Revolution')]", t).is_clean());
        assert!(run("[1, 2, 3]", t).is_clean());
        assert!(run("[x for x in range(3)]", t).is_clean());
        assert!(run("[link](https://example.com) is the docs", t).is_clean());
        assert!(run("a[print(x=1)] and then more text", t).is_clean());
        assert!(run("[print(x=1)](and then more text)", t).is_clean());
        assert!(run("[print(x==1)]", t).is_clean());
        assert!(run("[f(a='x 'y' 'z), g(b='p 'q' 'r)]", &["f", "g"]).is_clean());
    }

    #[test]
    fn python_tokens_wrap_the_list() {
        let d = run(
            "Sure.\n<|python_start|>[f(a=True, b=None, c={'k': (1, 2)})]<|python_end|>\nDone",
            &["f"],
        );
        assert_eq!(d.cleaned.as_deref(), Some("Sure.\n\nDone"));
        assert_eq!(
            d.leaks[0].calls[0].arguments,
            json!({"a": true, "b": null, "c": {"k": [1, 2]}})
        );
    }

    #[test]
    fn no_panic_on_odd_input() {
        for t in [
            "[",
            "[f(",
            "[f(a='",
            "[f(a=\\",
            "[f(a={",
            "[f(a={1:",
            "[é(a=1)]",
            "[f(a='\\x')]",
        ] {
            let _ = run(t, &["f"]);
        }
        let deep = format!("[f(a={})]", "[".repeat(10_000));
        assert!(run(&deep, &["f"]).is_clean());
    }
}
