//! The kit's helpers under the names the families with finders of their own use.
//!
//! The control tokens that end a turn, and the merging of neighbouring blocks into one
//! leak, live here too: the engine and the own finders share them.
//!
//! May depend on: `crate::grammar`, `super::engine`, `crate::types`.

pub use super::engine::MAX_CANDIDATES;
pub use crate::grammar::json::{decode_arguments, value_at as json_value_at, whole as json_whole};
pub use crate::grammar::text::{
    at_lit, attr, find_bounded, find_from, preceded_by, rest_is_blank, skip_ws, Finder,
};
pub use crate::grammar::{is_tool_name, typed_param};

use crate::grammar::json::{call_of, Keys};
use crate::grammar::text::eat_any;
use crate::types::Call;
use crate::types::Family;
use crate::Leak;
use serde_json::Value;
use std::ops::Range;

/// One parsed block before neighbouring blocks are merged into one leak.
pub type Block = (Range<usize>, Vec<Call>);

/// A call object that is exactly a call (see [`Keys::Strict`]).
pub fn strict_call(v: &Value) -> Option<Call> {
    call_of(v, Keys::Strict)
}

/// The calls of a JSON value that is one strict call object (when `allow_object`) or a
/// non-empty array of them.
pub fn calls_of(v: &Value, allow_object: bool) -> Option<Vec<Call>> {
    match v {
        Value::Array(items) if !items.is_empty() => items.iter().map(strict_call).collect(),
        Value::Object(_) if allow_object => strict_call(v).map(|c| vec![c]),
        _ => None,
    }
}

/// Tokens that end a model's turn or message. Right after a leak (whitespace between)
/// they are part of it: the user must not see half of a control sequence. Elsewhere they
/// are left alone.
pub const END_OF_TURN: &[&str] = &[
    "<|eom_id|>",
    "<|eot_id|>",
    "<|eot|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<｜end▁of▁sentence｜>",
    "</s>",
];

/// Extends `end` over the control tokens that directly follow the markup.
pub fn with_trailing(text: &str, mut end: usize, own: &[&str]) -> usize {
    loop {
        let q = skip_ws(text, end);
        match eat_any(text, q, own).or_else(|| eat_any(text, q, END_OF_TURN)) {
            Some(after) => end = after,
            None => return end,
        }
    }
}

/// Pushes the blocks as leaks, merging neighbours separated only by whitespace (the
/// whitespace between calls of one block is markup).
pub fn merge(
    text: &str,
    family: Family,
    mut blocks: Vec<(Range<usize>, Vec<Call>)>,
    out: &mut Vec<Leak>,
) {
    blocks.sort_by_key(|(span, _)| span.start);
    let mut cur: Option<Leak> = None;
    for (span, calls) in blocks {
        match cur.as_mut() {
            Some(c) if span.start < c.span.end => {}
            Some(c)
                if text
                    .get(c.span.end..span.start)
                    .is_some_and(|g| g.trim().is_empty()) =>
            {
                c.span.end = span.end;
                c.calls.extend(calls);
            }
            _ => {
                out.extend(cur.take());
                cur = Some(Leak {
                    family,
                    span,
                    calls,
                    results: Vec::new(),
                });
            }
        }
    }
    out.extend(cur);
}
