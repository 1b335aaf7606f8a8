//! The native half of the `toolcall_recovery` gem: `toolcall-detect` seen from Ruby.
//!
//! Ruby calls this through a thin Ruby layer (`ruby/lib/toolcall_recovery.rb`) that owns the
//! keyword arguments and the result classes; this crate only does what needs Rust:
//! - `ToolcallRecovery::Native.detect(text, tools)`: a `ToolcallRecovery::Result` (see
//!   [`result`] and [`convert`]); for clean text, the common case, one small object and
//!   nothing else; the tool list is read as [`tools`] says (a frozen one is remembered);
//! - `ToolcallRecovery::Native.might_leak?(text)`;
//! - `ToolcallRecovery::Stream`, one streamed reply (see [`stream`]).
//!
//! Every input is checked at this edge ([`text`]): a wrong type raises `TypeError`, text
//! that is not UTF-8 raises `ArgumentError`. Nothing on these paths unwraps or panics.

mod convert;
mod result;
mod stream;
mod text;
mod tools;

use magnus::{function, method, prelude::*, value::ReprValue, Error, Ruby, Value};
use std::sync::OnceLock;
use toolcall_detect::{detect, might_leak, Config, Input};

/// The detection policy, the default one, made once: `Config::default()` allocates (its
/// list of memory types), about 1,400 instructions a call (callgrind), more than the rest
/// of the binding costs a clean message.
fn config() -> &'static Config {
    static CONFIG: OnceLock<Config> = OnceLock::new();
    CONFIG.get_or_init(Config::default)
}

/// `ToolcallRecovery::Native.detect(text, enabled_tools)`.
fn native_detect(ruby: &Ruby, text: Value, tools: Value) -> Result<Value, Error> {
    let text = text::string(ruby, text, "text")?;
    let tools = tools::get(ruby, tools)?;
    // SAFETY (for every borrow below): no Ruby code runs and nothing is allocated on the
    // Ruby heap while the borrowed `&str` is alive; everything kept is copied out first.
    let found = {
        let content = unsafe { text::borrow(ruby, &text, "text")? };
        let run = |enabled_tools: &[String]| {
            let input = Input {
                content,
                tools_used: &[],
                enabled_tools,
            };
            convert::Found::new(content, detect(&input, config()))
        };
        match tools.remembered() {
            // The names are ready: `detect` alone, one scan (its own prefilter).
            Some(names) => run(names),
            // Else a clean message costs one scan and leaves the tool list uncopied.
            None if might_leak(content) => run(&unsafe { tools.copy(ruby)? }),
            None => None,
        }
    };
    // The remembered list's lock is not held while Ruby objects are made.
    drop(tools);
    let found = found.map(|f| f.into_ruby(ruby, text)).transpose()?;
    result::wrap(ruby, text, found)
}

/// `ToolcallRecovery::Native.might_leak?(text)`: `false` means `detect` finds nothing.
fn native_might_leak(ruby: &Ruby, text: Value) -> Result<bool, Error> {
    let text = text::string(ruby, text, "text")?;
    // SAFETY: the borrow ends before anything else happens.
    Ok(might_leak(unsafe { text::borrow(ruby, &text, "text")? }))
}

#[magnus::init(name = "toolcall_recovery")]
fn init(ruby: &Ruby) -> Result<(), Error> {
    let module = ruby.define_module("ToolcallRecovery")?;
    module.define_error("Error", ruby.exception_standard_error())?;
    result::define(ruby, module)?;
    tools::init();

    let native = module.define_module("Native")?;
    native.define_singleton_method("detect", function!(native_detect, 2))?;
    native.define_singleton_method("might_leak?", function!(native_might_leak, 1))?;

    let class = module.define_class("Stream", ruby.class_object())?;
    class.undef_default_alloc_func();
    class.define_singleton_method("_new", function!(stream::RbStream::new, 1))?;
    class.define_method("push", method!(stream::RbStream::push, 1))?;
    class.define_method("held", method!(stream::RbStream::held, 0))?;
    class.define_method("_finish", method!(stream::RbStream::finish, 0))?;
    class.define_method("finished?", method!(stream::RbStream::is_finished, 0))?;
    Ok(())
}

/// The gem's own error class (`ToolcallRecovery::Error`), `RuntimeError` should it be gone.
fn error_class(ruby: &Ruby) -> magnus::ExceptionClass {
    ruby.class_object()
        .const_get::<_, magnus::RModule>("ToolcallRecovery")
        .and_then(|m| m.const_get("Error"))
        .unwrap_or_else(|_| ruby.exception_runtime_error())
}

/// The class name of `value`, for error messages.
fn class_name(value: Value) -> String {
    value.class().inspect()
}
