//! Which tags the markup net looks at before any tool name is known, and which close a
//! call: the net's cheap filter, kept apart from its reader.
//!
//! May depend on: `super::super::tag_names` (HTML's tag names), `crate::grammar`.

use super::super::tag_names::is_html;
use crate::grammar::keys::{is_call_key, is_end_key, is_name_key};
use crate::grammar::markup::{tag_at, Kind, Tag};
use crate::grammar::text::skip_ws;

/// Whether a tag could open a call before any tool name is known: a special token, a tag
/// of call markup (any spelling), a namespaced tag, or an element that is not HTML and
/// holds elements or attributes.
pub(super) fn call_shaped(text: &str, t: &Tag<'_>) -> bool {
    let key = t.key();
    let valued = !t.attrs.is_empty() && t.attrs.iter().all(|(_, v)| !v.is_empty());
    match t.kind {
        _ if closes_a_call(t) => true,
        Kind::Close => false,
        Kind::Special => !is_end_key(&key),
        _ if is_call_key(&key) || t.namespaced => true,
        // A name element, the first of a pair whose second holds the arguments.
        Kind::Open if is_name_key(&key) && t.closed => true,
        // Beyond call markup only a whole tag counts: generics (`Vec<T>`, `<typename T>`)
        // and comparisons lose their `>` or carry bare words, HTML is the answer's own.
        _ if !t.closed || is_html(t.name) => false,
        Kind::SelfClose => valued,
        Kind::Open => {
            valued
                || t.json.is_some()
                || t.eq.is_some()
                || tag_at(text, skip_ws(text, t.span.end))
                    .is_some_and(|c| c.kind == Kind::Open && c.closed)
        }
    }
}

/// Whether a tag closes call markup (`</tool_call>`, `<|tool_call_end|>`): left after a
/// call whose opener a server stripped, it says where that call ends.
pub(super) fn closes_a_call(t: &Tag<'_>) -> bool {
    let key = t.key();
    match t.kind {
        Kind::Close => is_call_key(&key),
        Kind::Special => is_end_key(&key) && is_call_key(&key),
        _ => false,
    }
}
