//! Arguments written alone after the prose that names their tool: a short reply whose last
//! line of prose names one enabled tool (`Let's do web_search.`, `Use web_search
//! function.`), then, on lines of their own and ending the reply, the call's arguments as
//! one JSON object. What a reasoning model writes when its analysis leaks into the reply
//! and the call's header was lost.
//!
//! The object alone is data, so every mark of a call is asked for: the prose is short (at
//! most [`MAX_PROSE`] bytes and four lines, no code and no other object), ends a sentence or
//! announces what follows, and its last line names exactly one enabled tool as a word; the
//! object ends the reply, is no call or answer of its own (no arguments key, no answer
//! key) and holds only keys a tool's parameters could have. The prose stays.
//!
//! May depend on: `crate::grammar`, `crate::types`, `crate::Ctx`.

use crate::grammar::json;
use crate::grammar::keys::is_args_key;
use crate::types::Call;
use crate::Ctx;
use std::ops::Range;

/// The most bytes of prose before the object.
pub(super) const MAX_PROSE: usize = 300;

/// Keys that make an object an answer, not arguments.
const ANSWER_KEYS: &[&str] = &["result", "results", "output", "error", "status", "success"];

/// Where the object may start (just past the line break before it), for a reply whose
/// prose is as the module docs say: the prefilter's side, a look at the reply's first
/// [`MAX_PROSE`] bytes, asked only of a reply that ends with `}`.
#[inline]
pub(super) fn object_line(b: &[u8]) -> Option<usize> {
    let head = b.get(..b.len().min(MAX_PROSE + 2))?;
    // The prose holds no brace: the first one opens the object, at a line's start.
    let at = memchr::memchr(b'{', head)?;
    let nl = at.checked_sub(1).filter(|&i| head[i] == b'\n')?;
    let prose = head[..nl].trim_ascii();
    if !matches!(prose.last(), Some(b'.' | b':' | b'!' | b'?')) {
        return None;
    }
    let lines = memchr::memchr_iter(b'\n', prose).count();
    let plain = !prose.iter().any(|c| matches!(c, b'`' | b'<' | b'['));
    (lines <= 3 && plain).then_some(nl + 1)
}

/// The call such a reply holds: the object's span and the call.
pub(super) fn args_after_prose(text: &str, ctx: &Ctx<'_>) -> Option<(Range<usize>, Call)> {
    let end = text.trim_end().len();
    if !text[..end].ends_with('}') {
        return None;
    }
    let p = object_line(text.as_bytes())?;
    let (v, e) = json::value_at(text, p)?;
    let obj = v.as_object()?;
    if e != end || obj.is_empty() {
        return None;
    }
    let param = |k: &str| {
        let lower = k.to_ascii_lowercase();
        k.len() <= 64
            && k.chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-'))
            && !is_args_key(&lower.replace(['_', '-'], ""))
            && !ANSWER_KEYS.contains(&lower.as_str())
    };
    if !obj.keys().all(|k| param(k)) {
        return None;
    }
    let prose = text[..p].trim_end();
    let last = prose.rsplit('\n').next().unwrap_or(prose);
    let named: Vec<&String> = ctx
        .enabled_tools()
        .iter()
        .filter(|t| names_word(last, t))
        .collect();
    let [name] = named.as_slice() else {
        return None;
    };
    Some((
        p..e,
        Call {
            name: name.to_string(),
            arguments: v,
        },
    ))
}

/// Whether `line` holds `name` as a word of its own (not inside a longer name).
fn names_word(line: &str, name: &str) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    !name.is_empty()
        && line.match_indices(name).any(|(i, _)| {
            let before = line[..i].chars().next_back();
            let after = line[i + name.len()..].chars().next();
            !before.is_some_and(word) && !after.is_some_and(word)
        })
}
