//! The kit's helpers under the names the families with finders of their own use.
//!
//! May depend on: `crate::grammar`, `super::engine`.

pub use super::engine::{merge, MAX_CANDIDATES};
pub use crate::grammar::json::{decode_arguments, value_at as json_value_at, whole as json_whole};
pub use crate::grammar::text::{
    at_lit, attr, find_bounded, find_from, preceded_by, rest_is_blank, skip_ws, Finder,
};
pub use crate::grammar::{is_tool_name, typed_param};

use crate::grammar::json::{call_of, Keys};
use crate::types::Call;
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
