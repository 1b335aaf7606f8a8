//! A [`Detection`] as Ruby values.
//!
//! Built in two steps so that no Ruby object is allocated while the message text is
//! borrowed from Ruby: [`Found::new`] copies out of the text what the result needs (only
//! for a message with a leak), then [`Found::into_ruby`] builds the Ruby values.
//!
//! What a `ToolcallRecovery::Result` ([`crate::result`]) holds when something leaked: the
//! frozen array `[text, cleaned, calls, families, removed]` where `text` is the text
//! examined and
//! - `cleaned`: the text to show (a new UTF-8 `String`), or `nil` when it stays as it is;
//! - `calls`: `[{name: String, arguments: <JSON as Ruby>}]`, objects as `Hash`es with
//!   `String` keys, arrays as `Array`s, integers as `Integer`, other numbers as `Float`;
//! - `families`: the leak formats found, `String`s, in order of first appearance;
//! - `removed`: `[{family: String, range: start...end (bytes), text: String}]`, the leaked
//!   spans cut out of the text, verbatim; empty when the text stays as it is.

use magnus::{value::ReprValue, Error, IntoValue, RArray, RString, Ruby, Value};
use serde_json::Value as Json;
use std::ops::Range;
use toolcall_detect::{Call, Detection};

/// What a detection with leaks hands to Ruby, owned by Rust.
pub struct Found {
    cleaned: Option<String>,
    calls: Vec<Call>,
    families: Vec<&'static str>,
    removed: Vec<(&'static str, Range<usize>, String)>,
}

impl Found {
    /// `None` for a clean detection (nothing to build); `content` is the text detected.
    pub fn new(content: &str, detection: Detection) -> Option<Found> {
        if detection.is_clean() {
            return None;
        }
        let removed = match detection.cleaned {
            None => Vec::new(),
            Some(_) => detection
                .leaks
                .iter()
                .map(|l| {
                    let text = content.get(l.span.clone()).unwrap_or_default().to_owned();
                    (l.family.as_str(), l.span.clone(), text)
                })
                .collect(),
        };
        Some(Found {
            families: detection
                .families()
                .into_iter()
                .map(|f| f.as_str())
                .collect(),
            calls: detection.calls_to_run().map(|(_, c)| c.clone()).collect(),
            cleaned: detection.cleaned,
            removed,
        })
    }

    /// The Ruby form described in the module docs, for `text`.
    pub fn into_ruby(self, ruby: &Ruby, text: RString) -> Result<RArray, Error> {
        let calls = ruby.ary_new_capa(self.calls.len());
        for call in &self.calls {
            let h = ruby.hash_new();
            h.aset(ruby.sym_new("name"), ruby.str_new(&call.name))?;
            h.aset(ruby.sym_new("arguments"), json(ruby, &call.arguments)?)?;
            calls.push(h)?;
        }
        let families = ruby.ary_new_capa(self.families.len());
        for f in &self.families {
            families.push(ruby.str_new(f))?;
        }
        let removed = ruby.ary_new_capa(self.removed.len());
        for (family, span, text) in &self.removed {
            let h = ruby.hash_new();
            h.aset(ruby.sym_new("family"), ruby.str_new(family))?;
            h.aset(
                ruby.sym_new("range"),
                ruby.range_new(span.start, span.end, true)?,
            )?;
            h.aset(ruby.sym_new("text"), ruby.str_new(text))?;
            removed.push(h)?;
        }
        let cleaned = self.cleaned.as_deref().map(|c| ruby.str_new(c));
        let out = ruby.ary_new_capa(5);
        out.push(text)?;
        out.push(cleaned)?;
        out.push(calls)?;
        out.push(families)?;
        out.push(removed)?;
        out.freeze();
        Ok(out)
    }
}

/// A JSON value as Ruby data. Nesting is bounded by the detector's JSON depth limit.
pub fn json(ruby: &Ruby, value: &Json) -> Result<Value, Error> {
    Ok(match value {
        Json::Null => ruby.qnil().as_value(),
        Json::Bool(b) => b.into_value_with(ruby),
        Json::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => ruby.integer_from_i64(i).as_value(),
            (None, Some(u), _) => ruby.integer_from_u64(u).as_value(),
            (None, None, Some(f)) => ruby.float_from_f64(f).as_value(),
            // Not reachable without serde_json's arbitrary_precision; the digits then.
            (None, None, None) => ruby.str_new(&n.to_string()).as_value(),
        },
        Json::String(s) => ruby.str_new(s).as_value(),
        Json::Array(items) => {
            let a = ruby.ary_new_capa(items.len());
            for item in items {
                a.push(json(ruby, item)?)?;
            }
            a.as_value()
        }
        Json::Object(map) => {
            let h = ruby.hash_new();
            for (k, v) in map {
                h.aset(ruby.str_new(k), json(ruby, v)?)?;
            }
            h.as_value()
        }
    })
}
