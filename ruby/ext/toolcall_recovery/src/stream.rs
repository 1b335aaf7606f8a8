//! `ToolcallRecovery::Stream`: one reply read delta by delta, over [`toolcall_detect::Stream`].
//!
//! The binding keeps its own copy of the text received, because the finished result
//! reports the removed spans verbatim and the text itself when nothing changed, and
//! `toolcall_detect::Finished` carries neither. After `finish` the stream is spent: any
//! further `push` or `finish` raises `ToolcallRecovery::Error`.

use crate::{convert::Found, error_class, result, text};
use magnus::{Error, RArray, RString, Ruby, Value};
use std::cell::RefCell;
use toolcall_detect::{Config, Stream};

/// The Ruby object; `None` once finished.
#[magnus::wrap(class = "ToolcallRecovery::Stream", free_immediately, size)]
pub struct RbStream(RefCell<Option<State>>);

struct State {
    stream: Stream,
    received: String,
}

impl RbStream {
    /// `Stream._new(enabled_tools)`.
    pub fn new(ruby: &Ruby, tools: Value) -> Result<RbStream, Error> {
        let tools = text::check_tools(ruby, tools)?;
        // SAFETY: copies the names; nothing runs or allocates on the Ruby heap meanwhile.
        let tools = unsafe { text::tools_vec(ruby, tools)? };
        Ok(RbStream(RefCell::new(Some(State {
            stream: Stream::new(Config::default(), tools),
            received: String::new(),
        }))))
    }

    /// `push(delta)`: the text safe to show now (possibly empty).
    pub fn push(ruby: &Ruby, rb_self: &RbStream, delta: Value) -> Result<RString, Error> {
        let mut slot = rb_self.state(ruby)?;
        let state = slot.as_mut().ok_or_else(|| finished(ruby, "push"))?;
        let delta = text::string(ruby, delta, "delta")?;
        let shown = {
            // SAFETY: the delta is copied into Rust before anything is allocated in Ruby.
            let delta = unsafe { text::borrow(ruby, &delta, "delta")? };
            state.received.push_str(delta);
            state.stream.push(delta)
        };
        Ok(ruby.str_new(shown))
    }

    /// `held`: bytes received and not shown yet.
    pub fn held(ruby: &Ruby, rb_self: &RbStream) -> Result<usize, Error> {
        let slot = rb_self.state(ruby)?;
        Ok(slot.as_ref().map_or(0, |s| s.stream.held()))
    }

    /// `finished?`.
    pub fn is_finished(ruby: &Ruby, rb_self: &RbStream) -> Result<bool, Error> {
        Ok(rb_self.state(ruby)?.is_none())
    }

    /// `_finish`: `[rest, the Result of the whole reply, as `Native.detect` gives it]`.
    pub fn finish(ruby: &Ruby, rb_self: &RbStream) -> Result<RArray, Error> {
        let state = rb_self
            .state(ruby)?
            .take()
            .ok_or_else(|| finished(ruby, "finish"))?;
        let done = state.stream.finish();
        let found = Found::new(&state.received, done.detection);
        let text = ruby.str_new(&state.received);
        let found = found.map(|f| f.into_ruby(ruby, text)).transpose()?;
        let result = result::wrap(ruby, text, found)?;
        let out = ruby.ary_new_capa(2);
        out.push(ruby.str_new(&done.rest))?;
        out.push(result)?;
        Ok(out)
    }

    fn state(&self, ruby: &Ruby) -> Result<std::cell::RefMut<'_, Option<State>>, Error> {
        // Nothing here calls back into Ruby while borrowed, so this only fails if that
        // changes; an error then, never a panic.
        self.0
            .try_borrow_mut()
            .map_err(|_| Error::new(error_class(ruby), "the stream is in use"))
    }
}

fn finished(ruby: &Ruby, what: &str) -> Error {
    Error::new(
        error_class(ruby),
        format!("{what} after finish: this stream is finished, start a new one for the next reply"),
    )
}
