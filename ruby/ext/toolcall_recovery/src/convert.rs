//! A [`Detection`] as Ruby values.
//!
//! Built in two steps so that no Ruby object is allocated while the message text is
//! borrowed from Ruby: [`Found::new`] copies out of the text what the result needs (only
//! for a message with a leak), then [`Found::into_ruby`] builds the Ruby values.
//!
//! The result is a frozen `ToolcallRecovery::Result` (its methods are Ruby, in
//! ruby/lib/toolcall_recovery.rb) with two instance variables: `@text`, the text examined,
//! and `@raw`, `nil` when nothing leaked, else `[cleaned, calls, families, removed]` where
//! - `cleaned`: the text to show (a new UTF-8 `String`), or `nil` when it stays as it is;
//! - `calls`: `[{name: String, arguments: <JSON as Ruby>}]`, objects as `Hash`es with
//!   `String` keys, arrays as `Array`s, integers as `Integer`, other numbers as `Float`;
//! - `families`: the leak formats found, `String`s, in order of first appearance;
//! - `removed`: `[{family: String, range: start...end (bytes), text: String}]`, the leaked
//!   spans cut out of the text, verbatim; empty when the text stays as it is.

use magnus::{
    prelude::*,
    rb_sys::{protect as rb_protect_values, AsRawId, AsRawValue, FromRawValue},
    value::{LazyId, Opaque, ReprValue},
    Error, IntoValue, RArray, RClass, RModule, RString, Ruby, Value,
};
use serde_json::Value as Json;
use std::ops::Range;
use std::sync::OnceLock;
use toolcall_detect::{Call, Detection};

/// `ToolcallRecovery::Result`, defined at load time.
static RESULT_CLASS: OnceLock<Opaque<RClass>> = OnceLock::new();
static TEXT: LazyId = LazyId::new("@text");
static RAW: LazyId = LazyId::new("@raw");

/// Defines `ToolcallRecovery::Result` (the Ruby file adds its methods).
pub fn define_result_class(ruby: &Ruby, module: RModule) -> Result<(), Error> {
    let class = module.define_class("Result", ruby.class_object())?;
    // Interned now, on Ruby's thread, so that no later use can fail.
    LazyId::force(&TEXT, ruby);
    LazyId::force(&RAW, ruby);
    // A constant keeps the class alive; the static only remembers it.
    let _ = RESULT_CLASS.set(class.into());
    Ok(())
}

/// A new frozen `ToolcallRecovery::Result`. Built here rather than through `Result.new`,
/// and with the C API under one `rb_protect` rather than magnus's one per call: most
/// messages are clean, and then this object is all the binding adds to the detection, so
/// it is kept to an allocation and two instance variables.
pub fn result(ruby: &Ruby, text: RString, raw: Option<RArray>) -> Result<Value, Error> {
    let class = RESULT_CLASS
        .get()
        .map(|c| ruby.get_inner(*c))
        .ok_or_else(|| {
            Error::new(
                ruby.exception_runtime_error(),
                "ToolcallRecovery::Result is not defined",
            )
        })?;
    let (class, text) = (class.as_raw(), text.as_raw());
    let raw = raw.map_or_else(|| ruby.qnil().as_raw(), |r| r.as_raw());
    let text_id = LazyId::get_inner_with(&TEXT, ruby).as_raw();
    let raw_id = LazyId::get_inner_with(&RAW, ruby).as_raw();
    // SAFETY: plain C API calls on live values (arguments of the running method, the class
    // held by a constant); a Ruby exception (out of memory) is caught by `protect`. The new
    // object lives on this stack until returned, where the GC's stack scan sees it.
    let obj = rb_protect_values(|| unsafe {
        let obj = rb_sys::rb_obj_alloc(class);
        rb_sys::rb_ivar_set(obj, text_id, text);
        rb_sys::rb_ivar_set(obj, raw_id, raw);
        rb_sys::rb_obj_freeze(obj)
    })?;
    // SAFETY: a live object just made.
    Ok(unsafe { Value::from_raw(obj) })
}

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

    /// The Ruby form described in the module docs.
    pub fn into_ruby(self, ruby: &Ruby) -> Result<RArray, Error> {
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
        let out = ruby.ary_new_capa(4);
        out.push(cleaned)?;
        out.push(calls)?;
        out.push(families)?;
        out.push(removed)?;
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
