//! What detection does to the leaks its detectors found before it cleans: extends each
//! over the markup around it that no detector read as its own. A wrapper of another format
//! right around it, the end-of-turn tokens and made-up results right after it, and in a
//! text that held a leak, a chat template's turn tokens around the reply. Every step keeps
//! the leaks in order and apart, and takes nothing in code.
//!
//! May depend on: `crate::families` (the wrappers, the trailer of tokens and results, the
//! turn headers), `crate::grammar`, `crate::code`, `crate::types`. No I/O.

use crate::types::Leak;
use crate::{code, families, grammar};

/// Extends every leak over the end-of-turn tokens right after it (`<|eot_id|>`, `</s>`,
/// ...): they close the model's markup, and left alone they would show the user half of a
/// control sequence. A fake tool result the model wrote right after its call
/// (`<tool_response>..</tool_response>`, see `families::util::RESULT_FRAMES`) goes with the
/// call the same way. What is already inside the next leak stays with that one.
pub(crate) fn take_trailing_tokens(text: &str, leaks: &mut [Leak]) {
    let mut trailer = families::util::Trailer::new(text);
    for i in 0..leaks.len() {
        let limit = leaks.get(i + 1).map_or(text.len(), |n| n.span.start);
        let end = trailer.extend(leaks[i].span.end);
        if end <= limit {
            leaks[i].span.end = end;
        }
    }
}

/// In a text that held a leak, the end-of-turn tokens ending it (`<|im_end|>`, `</s>`,
/// `<end_of_turn>`, after the reply's last words) are the chat template's, shown because a
/// server kept special tokens: they go, as a leak with no call (the ledger keeps them), and
/// so do a begin token and an assistant header opening it. Right after a leak they are
/// already its own; in a clean text nothing is touched.
pub(crate) fn take_turn_end(text: &str, quoted: impl Fn(usize) -> bool, leaks: &mut Vec<Leak>) {
    // So do the sequence's begin token and the assistant's header opening it, where no
    // leak took them already.
    if let Some(h) = families::turn_header_end(text) {
        if leaks.first().is_some_and(|l| l.span.start >= h) && !quoted(0) {
            leaks.insert(0, Leak::markup_only(0..h));
        }
    }
    let Some(last) = leaks.last() else {
        return;
    };
    let end = text.trim_end().len();
    let content = grammar::keys::before_end_tokens(text, end);
    // What the last leak already took stays its own (`..<|end|>` then `<end_of_turn>`).
    let from = grammar::text::skip_ws(text, content.max(last.span.end));
    if from >= end || quoted(from) {
        return;
    }
    leaks.push(Leak::markup_only(from..text.len()));
}

/// Extends each leak over a wrapper right around it ([`families::util::WRAPPERS`]): its
/// opener just before the leak (only whitespace between, after the leak before it, not in
/// code), and its closer just after, before the next leak. Only a leak that starts bare (a
/// body, a fence, a name; not a token of its own such as `<invoke` or `[TOOL_CALLS]`)
/// takes one: a format's own tokens say whose markup it is, and another format's wrapper
/// before them is a fragment of something else. Leaks stay in order and apart.
pub(crate) fn take_wrappers(text: &str, code: &code::CodeRegions, leaks: &mut [Leak]) {
    let starts_bare = |l: &Leak| {
        let b = text.as_bytes();
        match b.get(l.span.start) {
            Some(b'<') | None => false,
            Some(b'[') => !b.get(l.span.start + 1).is_some_and(u8::is_ascii_uppercase),
            Some(_) => true,
        }
    };
    for i in 0..leaks.len() {
        if !starts_bare(&leaks[i]) {
            continue;
        }
        let floor = if i == 0 { 0 } else { leaks[i - 1].span.end };
        let limit = leaks.get(i + 1).map_or(text.len(), |n| n.span.start);
        let before = text.get(floor..leaks[i].span.start).unwrap_or_default();
        let head = before.trim_end();
        let Some((open, close)) = families::util::WRAPPERS
            .iter()
            .find(|(open, _)| head.ends_with(open))
        else {
            continue;
        };
        let start = floor + head.len() - open.len();
        if code.contains(start) {
            continue;
        }
        leaks[i].span.start = start;
        if close.is_empty() {
            continue;
        }
        let q = grammar::text::skip_ws(text, leaks[i].span.end);
        if let Some(end) = grammar::text::eat(text, q, close).filter(|&end| end <= limit) {
            leaks[i].span.end = end;
        }
    }
}
