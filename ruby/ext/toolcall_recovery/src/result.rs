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
//! Every reader is native, one call from Ruby each: `text`, `leaked?`, `changed?`,
//! `cleaned`, `calls`, `families`, `removed` and `_found` (the array, or nil); in Ruby
//! (ruby/lib/toolcall_recovery.rb) they took two to five calls each, and reading
//! `cleaned` and `calls` of a clean result cost more than making it. A clean result's
//! `calls`, `families` and `removed` are one shared frozen empty Array (`EMPTY`).

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

/// No free function (nothing is allocated beside the Ruby object). Write-barrier
/// protected: the one reference is set when the object is made (and the GC told, see
/// [`wrap`]) and never written again. Ruby 3.1 allocates only such objects on its fast
/// path; an unprotected one takes the VM lock and the slow path, about as much again as
/// the rest of a clean result.
static RESULT_TYPE: DataType = DataType(rb_data_type_t {
    wrap_struct_name: c"ToolcallRecovery::Result".as_ptr(),
    function: rb_data_type_struct__bindgen_ty_1 {
        dmark: Some(mark),
        // SAFETY: every other callback absent (null), as C's zero initialisation.
        ..unsafe { std::mem::zeroed() }
    },
    flags: rb_sys::rbimpl_typeddata_flags::RUBY_TYPED_FREE_IMMEDIATELY as VALUE
        | rb_sys::rbimpl_typeddata_flags::RUBY_TYPED_WB_PROTECTED as VALUE,
    // SAFETY: no parent type, no type data: null, as C's zero initialisation.
    ..unsafe { std::mem::zeroed() }
});

/// `ToolcallRecovery::Result`, defined at load time.
static CLASS: OnceLock<Opaque<RClass>> = OnceLock::new();

/// `ToolcallRecovery::Result::EMPTY`, `[].freeze`.
static EMPTY: OnceLock<Opaque<RArray>> = OnceLock::new();

/// Defines the class and its native readers (the Ruby file adds the rest).
pub fn define(ruby: &Ruby, module: RModule) -> Result<(), Error> {
    let class = module.define_class("Result", ruby.class_object())?;
    class.undef_default_alloc_func();
    class.define_method("text", method!(text, 0))?;
    class.define_method("leaked?", method!(is_leaked, 0))?;
    class.define_method("changed?", method!(is_changed, 0))?;
    class.define_method("_found", method!(found, 0))?;
    class.define_method("cleaned", method!(cleaned, 0))?;
    class.define_method("calls", method!(calls, 0))?;
    class.define_method("families", method!(families, 0))?;
    class.define_method("removed", method!(removed, 0))?;
    // A constant keeps the class alive; the static only remembers it.
    let _ = CLASS.set(class.into());
    // The empty Array of every clean result, kept alive by a private constant.
    let empty = ruby.ary_new();
    empty.freeze();
    class.const_set("EMPTY", empty)?;
    let _ = EMPTY.set(empty.into());
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
        let obj =
            rb_sys::rb_data_typed_object_wrap(class.as_raw(), held as *mut c_void, &RESULT_TYPE.0);
        // The reference was stored without a write barrier: tell the GC. Needed while an
        // incremental major GC is marking, when new objects are born marked and what
        // they hold must be marked too.
        rb_sys::RB_OBJ_WRITTEN(obj, rb_sys::Qundef as VALUE, held);
        obj
    };
    // SAFETY: the live object just made.
    Ok(unsafe { Value::from_raw(obj) })
}

/// What `obj` holds, if it is a Result.
fn held(ruby: &Ruby, obj: Value) -> Result<Value, Error> {
    let raw = obj.as_raw();
    // SAFETY: reads the object's type, inline: what rb_typeddata_is_kind_of checks for
    // a type without a parent type, without the call into libruby (a share of each
    // reader's cost); then the data pointer of a Result, which `wrap` set to a live
    // (marked) value.
    unsafe {
        if !rb_sys::RB_TYPE_P(raw, rb_sys::ruby_value_type::RUBY_T_DATA)
            || !rb_sys::RTYPEDDATA_P(raw)
            || !std::ptr::eq(rb_sys::RTYPEDDATA_TYPE(raw), &RESULT_TYPE.0)
        {
            return Err(Error::new(
                ruby.exception_type_error(),
                "not a ToolcallRecovery::Result",
            ));
        }
        Ok(Value::from_raw(rb_sys::RTYPEDDATA_GET_DATA(raw) as VALUE))
    }
}

/// The array `[text, cleaned, calls, families, removed]` of a result with a leak.
fn found_of(held: Value) -> Option<[Value; 5]> {
    RArray::from_value(held).and_then(|found| found.to_value_array().ok())
}

/// `text`: the String examined, the very object passed to `detect`.
fn text(ruby: &Ruby, rb_self: Value) -> Result<Value, Error> {
    let held = held(ruby, rb_self)?;
    Ok(found_of(held).map_or(held, |f| f[0]))
}

/// `leaked?`: a leak was found (the text may still be kept as it is).
fn is_leaked(ruby: &Ruby, rb_self: Value) -> Result<bool, Error> {
    Ok(RArray::from_value(held(ruby, rb_self)?).is_some())
}

/// `changed?`: the cleaned text differs from the text.
fn is_changed(ruby: &Ruby, rb_self: Value) -> Result<bool, Error> {
    Ok(found_of(held(ruby, rb_self)?).is_some_and(|f| !f[1].is_nil()))
}

/// `cleaned`: the text to show, in UTF-8: the input with every leaked span cut out or,
/// when nothing changed, the input String itself (the same object; a binary input comes
/// back as a UTF-8 copy).
fn cleaned(ruby: &Ruby, rb_self: Value) -> Result<Value, Error> {
    let held = held(ruby, rb_self)?;
    let text = match found_of(held) {
        Some(f) if !f[1].is_nil() => return Ok(f[1]),
        Some(f) => f[0],
        None => held,
    };
    // SAFETY: `text` is a String (detect took nothing else), alive: the result marks it.
    if unsafe { rb_sys::ENCODING_GET(text.as_raw()) != rb_sys::rb_ascii8bit_encindex() } {
        return Ok(text);
    }
    // Rare (a binary String whose bytes are UTF-8): a copy tagged UTF-8, through Ruby.
    let copy: RString = text.funcall("dup", ())?;
    copy.funcall::<_, _, Value>("force_encoding", (ruby.utf8_encoding(),))?;
    Ok(copy.as_value())
}

/// `calls`: `[{name: String, arguments: Hash (String keys) or the value as the model
/// wrote it}]`, in order.
fn calls(ruby: &Ruby, rb_self: Value) -> Result<Value, Error> {
    part(ruby, rb_self, 2)
}

/// `families`: the leak formats found ("hermes", ...), in order of first appearance.
fn families(ruby: &Ruby, rb_self: Value) -> Result<Value, Error> {
    part(ruby, rb_self, 3)
}

/// `removed`: `[{family: String, range: start...end (bytes), text: String}]`; empty
/// when nothing changed.
fn removed(ruby: &Ruby, rb_self: Value) -> Result<Value, Error> {
    part(ruby, rb_self, 4)
}

/// Entry `i` of the array of a result with a leak; for a clean one, the shared frozen
/// empty Array (nothing to allocate for the common case).
fn part(ruby: &Ruby, rb_self: Value, i: usize) -> Result<Value, Error> {
    match found_of(held(ruby, rb_self)?) {
        Some(f) => Ok(f[i]),
        None => EMPTY
            .get()
            .map(|e| ruby.get_inner(*e).as_value())
            .ok_or_else(|| Error::new(ruby.exception_runtime_error(), "not initialised")),
    }
}

/// `_found`: nil when nothing leaked, else `[text, cleaned, calls, families, removed]`.
fn found(ruby: &Ruby, rb_self: Value) -> Result<Option<RArray>, Error> {
    Ok(RArray::from_value(held(ruby, rb_self)?))
}
