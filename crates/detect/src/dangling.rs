//! Call markup with no call in it, ending the message: the openers a generation stopped
//! in (`<function` `<function`), a wrapper around an empty body (`<tool_call>[{}]`), an
//! orphan closer a parser left in the content (`</_call>`). No call can be read from them,
//! but they are no prose either, and a user who sees half a control sequence sees a bug;
//! the ledger keeps them.
//!
//! Read by structure, as the remnant rule reads tokens (`crate::grammar::markup`): a tag
//! whose name is call markup with no attributes and no text of its own, a special token of
//! call markup or one ending a turn, a bracketed call token (`[TOOL_CALLS]`), and right
//! after an opener an empty body (`[]`, `{}`, `[{}]`). They must end the message, stand
//! on lines of their own after prose, hold at least one opener or orphan closer of call
//! markup, and lie outside code and closed reasoning and apart from every leak already
//! found, or be the whole message (a reply of nothing but `<tool_call>` or an opener cut
//! before its `>`: the user was shown half a control sequence and nothing else, which
//! vLLM's parsers return as content). Tokens after other markup stay: they belong to a call
//! this reading does not know.
//!
//! May depend on: `crate::grammar`, `crate::remnant`, `crate::types`. No I/O.

use crate::grammar::keys::{is_call_key, is_end_key, is_param_key};
use crate::grammar::markup::{tag_at, Kind};
use crate::types::Leak;

/// The longest token read back from the end, in bytes.
const MAX_TOKEN: usize = 96;

/// Tokens read back from the end at most.
const MAX_TOKENS: usize = 8;

/// Empty bodies a wrapper may hold.
const EMPTY_BODIES: &[&str] = &["[{}]", "[]", "{}"];

/// Takes the dangling call markup ending `text`: as a leak with no call, or, where the
/// last leak ends the text, as the start of that leak.
/// `quoted` says whether a byte lies in code or closed reasoning.
pub(crate) fn take(text: &str, quoted: impl Fn(usize) -> bool, leaks: &mut Vec<Leak>) {
    let mut end = text.trim_end().len();
    let joined = leaks.last().is_some_and(|l| l.span.end >= end);
    if let Some(l) = leaks.last().filter(|_| joined) {
        end = l.span.start;
    }
    let Some(start) = run_before(text, end)
        .filter(|&s| !quoted(s) && leaks.iter().all(|l| l.span.end <= s || l.span.start >= end))
    else {
        return;
    };
    match leaks.last_mut() {
        Some(l) if joined => l.span.start = start,
        _ => leaks.push(Leak::markup_only(start..end)),
    }
}

/// The start of the markup-only tokens (and at most one empty body) that end right
/// before `end`, on lines of their own.
fn run_before(text: &str, end: usize) -> Option<usize> {
    let end = text.get(..end)?.trim_end().len();
    // A clean message pays one byte's look: the markup ends in `>`, `]`, `}` or a name.
    let last = *text.as_bytes().get(end.checked_sub(1)?)?;
    if !(matches!(last, b'>' | b']' | b'}') || last.is_ascii_alphabetic()) {
        return None;
    }
    let (mut start, mut call, mut body, mut tokens) = (end, false, false, 0);
    let mut after_body = false;
    for _ in 0..MAX_TOKENS {
        let head = text.get(..start)?.trim_end();
        if let Some(b) = EMPTY_BODIES.iter().find(|b| head.ends_with(**b)) {
            if body {
                break;
            }
            (body, after_body) = (true, true);
            start = head.len() - b.len();
            continue;
        }
        let Some((at, is_call)) = token_ending(text, head) else {
            break;
        };
        // An empty body stands right after an opener of call markup.
        if after_body && !is_call {
            return None;
        }
        after_body = false;
        call |= is_call;
        tokens += 1;
        start = at;
    }
    // After prose, on lines of its own, or as the whole message: markup before it is a
    // call this reading does not know (a tool not enabled, a body that did not parse),
    // whose tokens stay with it.
    let head = text.get(..start)?;
    let own_line = head.trim_end_matches([' ', '\t']).ends_with('\n');
    // The prose ends a sentence or announces what follows: a sentence cut before the
    // markup (`Wrap each call in\n<tool_call>`) is writing about it.
    let prose = head.trim_end().chars().next_back().is_some_and(|c| {
        matches!(
            c,
            '.' | '!' | '?' | ':' | '…' | '。' | '！' | '？' | '：' | ')'
        )
    });
    let alone = head.trim().is_empty();
    (tokens > 0 && !after_body && call && (alone || own_line && prose)).then_some(start)
}

/// The markup-only token that ends `head` (a prefix of `text`): where it starts, and
/// whether it is call markup (else it ends a turn).
fn token_ending(text: &str, head: &str) -> Option<(usize, bool)> {
    // A token is short: only the head's last bytes are looked at, whatever its length.
    let mut floor = head.len().saturating_sub(MAX_TOKEN);
    while !head.is_char_boundary(floor) {
        floor += 1;
    }
    let tail = &head[floor..];
    if let Some((open, _)) = crate::remnant::bracket_token_ending(tail) {
        return Some((floor + open, true));
    }
    let lt = floor + tail.rfind('<')?;
    let t = tag_at(text, lt).filter(|t| t.span.end == head.len())?;
    let key = t.key();
    let call = match t.kind {
        // A section's closing token pairs with an opener before it: only openers count.
        Kind::Special if is_end_key(&key) => false,
        Kind::Special => is_call_key(&key),
        Kind::Open => is_call_key(&key) && t.attrs.is_empty() && t.eq.is_none(),
        // A closer whose opener stands before it closes an element with text of its own,
        // unless the element is empty.
        Kind::Close => (is_call_key(&key) || is_param_key(&key)) && !holds_text(text, lt, t.name),
        _ => return None,
    };
    (call || t.kind == Kind::Special).then_some((lt, call))
}

/// Whether the element `name` closed at `pos` opened before it (any spelling, a
/// namespace too) with text in it, not only an empty body.
fn holds_text(text: &str, pos: usize, name: &str) -> bool {
    let head = text.get(..pos).unwrap_or_default();
    let key = crate::grammar::markup::fold(name);
    let opener = memchr::memrchr_iter(b'<', head.as_bytes())
        .take(MAX_LOOK)
        .filter_map(|lt| tag_at(text, lt))
        .find(|t| t.kind == Kind::Open && t.key() == key && t.span.end <= pos);
    let Some(open) = opener else {
        return false;
    };
    let inner = head.get(open.span.end..).unwrap_or_default().trim();
    !(inner.is_empty() || EMPTY_BODIES.contains(&inner))
}

/// Tags looked at before a closer for its opener.
const MAX_LOOK: usize = 64;

#[cfg(test)]
mod tests {
    use crate::families::testing::detect_with;

    fn cleaned(t: &str) -> Option<String> {
        detect_with(t, &["f"]).cleaned
    }

    #[test]
    fn openers_a_generation_stopped_in_go() {
        assert_eq!(
            cleaned("Let me try another way.\n\n<function\n<function").as_deref(),
            Some("Let me try another way.")
        );
    }

    #[test]
    fn a_wrapper_around_an_empty_body_goes() {
        assert_eq!(
            cleaned("Trying.\n<tool_call>[{}]").as_deref(),
            Some("Trying.")
        );
        assert_eq!(
            cleaned("Done.\n<tool_call>\n[]\n</tool_call>").as_deref(),
            Some("Done.")
        );
    }

    #[test]
    fn an_orphan_closer_after_prose_goes() {
        assert_eq!(cleaned("Done.\n\n</_call>").as_deref(), Some("Done."));
    }

    #[test]
    fn a_reply_of_nothing_but_call_markup_goes() {
        for t in [
            "<tool_call>",
            "<tool_call>\n</tool_call>",
            "</_call>",
            "\n\n</parameter>\n</function>\n</tool_call>",
            "<｜DSML｜tool_calls",
        ] {
            assert_eq!(cleaned(t).as_deref(), Some(""), "{t:?}");
        }
    }

    #[test]
    fn markup_named_in_prose_or_code_stays() {
        for t in [
            "Wrap the call in <tool_call>",
            "Wrap each call in\n<tool_call>",
            "The parser emits `<tool_call>`",
            "```\n<tool_call>\n```",
            "Use an empty list: []",
            "The tag is\n<b>",
            "<think>\n<tool_call></think>",
            "Returns {}",
            "List:\n[]",
            "<tool_calls>\nI will call the weather tool.\n</tool_calls>",
            "Ok.\n<parameter=a>\nx\n</parameter>",
            "Ok.\n<|action_start|>\nprint(1)\n<|action_end|>",
            "<parameter=a>x</parameter>\n</function>",
        ] {
            assert_eq!(cleaned(t), None, "{t:?}");
        }
    }
}
