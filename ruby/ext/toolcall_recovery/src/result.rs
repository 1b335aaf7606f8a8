//! `ToolcallRecovery::Result`: what `detect` (and a finished stream) returns.
//!
//! Most messages are clean, and then this object is all the binding adds to the scan, so
//! it is as small as Ruby allows: a typed-data object whose data pointer is itself the
//! one Ruby value it holds, marked by the GC like any reference:
//! - the text examined (a `String`) when nothing leaked;
//! - else the frozen array `[text, cleaned, calls, families, removed]` built by
//!   [`crate::convert`].
//!
//! Measured on the real replies against the alternatives (see ruby/README.md, Cost): an
//! object with instance variables, or magnus's typed data around a Rust struct (a malloc
//! and a free per result), or freezing the object, each cost as much again as the object
//! itself. It has no writer and what it holds never changes, so it is immutable unfrozen.
//!
//! `text`, `leaked?`, `changed?` and `_found` (the array, or nil) are native; the readers
//! that take the array apart are Ruby (ruby/lib/toolcall_recovery.rb).

use magnus::{
    method,
    prelude::*,
    rb_sys::{AsRawValue, FromRawValue},
    value::{Opaque, ReprValue},
    Error, RArray, RClass, RModule, RString, Ruby, Value,
};
use rb_sys::{rb_data_type_struct__bindgen_ty_1, rb_data_type_t, VALUE};
use std::ffi::c_void;
use std::sync::OnceLock;

/// The GC marks what a Result holds (which also pins it: the pointer never goes stale).
unsafe extern "C" fn mark(held: *mut c_void) {
    rb_sys::rb_gc_mark(held as VALUE);
}

struct DataType(rb_data_type_t);
// SAFETY: a constant that only Ruby reads.
unsafe impl Sync for DataType {}

/// No free function (nothing is allocated beside the Ruby object), and not write-barrier
/// protected (the reference is only ever set at creation).
static RESULT_TYPE: DataType = DataType(rb_data_type_t {
    wrap_struct_name: c"ToolcallRecovery::Result".as_ptr(),
    function: rb_data_type_struct__bindgen_ty_1 {
        dmark: Some(mark),
        // SAFETY: every other callback absent (null), as C's zero initialisation.
        ..unsafe { std::mem::zeroed() }
    },
    flags: rb_sys::rbimpl_typeddata_flags::RUBY_TYPED_FREE_IMMEDIATELY as VALUE,
    // SAFETY: no parent type, no type data: null, as C's zero initialisation.
    ..unsafe { std::mem::zeroed() }
});

/// `ToolcallRecovery::Result`, defined at load time.
static CLASS: OnceLock<Opaque<RClass>> = OnceLock::new();

/// Defines the class and its native readers (the Ruby file adds the rest).
pub fn define(ruby: &Ruby, module: RModule) -> Result<(), Error> {
    let class = module.define_class("Result", ruby.class_object())?;
    class.undef_default_alloc_func();
    class.define_method("text", method!(text, 0))?;
    class.define_method("leaked?", method!(is_leaked, 0))?;
    class.define_method("changed?", method!(is_changed, 0))?;
    class.define_method("_found", method!(found, 0))?;
    // A constant keeps the class alive; the static only remembers it.
    let _ = CLASS.set(class.into());
    Ok(())
}

/// A new result: `found` is nil for a clean text, else `[text, cleaned, calls, families,
/// removed]`.
pub fn wrap(ruby: &Ruby, text: RString, found: Option<RArray>) -> Result<Value, Error> {
    let class = CLASS.get().map(|c| ruby.get_inner(*c)).ok_or_else(|| {
        Error::new(
            ruby.exception_runtime_error(),
            "ToolcallRecovery::Result is not defined",
        )
    })?;
    let held = found.map_or_else(|| text.as_raw(), |f| f.as_raw());
    // SAFETY: `held` is alive (an argument of the running method, or made by it, so on
    // this stack) until the new object marks it. Like magnus's own wrapping of Rust data,
    // this is not under rb_protect: the only exception it can raise is NoMemoryError, and
    // a protect per clean message cost about 100 ns, as much as the rest of the object.
    let obj = unsafe {
        rb_sys::rb_data_typed_object_wrap(class.as_raw(), held as *mut c_void, &RESULT_TYPE.0)
    };
    // SAFETY: the live object just made.
    Ok(unsafe { Value::from_raw(obj) })
}

/// What `obj` holds, if it is a Result.
fn held(ruby: &Ruby, obj: Value) -> Result<Value, Error> {
    let raw = obj.as_raw();
    // SAFETY: only reads the object's type; then the data pointer of a Result, which
    // `wrap` set to a live (marked) value.
    unsafe {
        if rb_sys::rb_typeddata_is_kind_of(raw, &RESULT_TYPE.0) == 0 {
            return Err(Error::new(
                ruby.exception_type_error(),
                "not a ToolcallRecovery::Result",
            ));
        }
        Ok(Value::from_raw(rb_sys::RTYPEDDATA_GET_DATA(raw) as VALUE))
    }
}

/// `text`: the String examined, the very object passed to `detect`.
fn text(ruby: &Ruby, rb_self: Value) -> Result<Value, Error> {
    let held = held(ruby, rb_self)?;
    match RArray::from_value(held) {
        Some(found) => found.entry(0),
        None => Ok(held),
    }
}

/// `leaked?`: a leak was found (the text may still be kept as it is).
fn is_leaked(ruby: &Ruby, rb_self: Value) -> Result<bool, Error> {
    Ok(RArray::from_value(held(ruby, rb_self)?).is_some())
}

/// `changed?`: the cleaned text differs from the text.
fn is_changed(ruby: &Ruby, rb_self: Value) -> Result<bool, Error> {
    match RArray::from_value(held(ruby, rb_self)?) {
        Some(found) => Ok(!found.entry::<Value>(1)?.is_nil()),
        None => Ok(false),
    }
}

/// `_found`: nil when nothing leaked, else `[text, cleaned, calls, families, removed]`.
fn found(ruby: &Ruby, rb_self: Value) -> Result<Option<RArray>, Error> {
    Ok(RArray::from_value(held(ruby, rb_self)?))
}
