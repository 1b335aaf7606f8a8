//! A call written as two sibling elements with no wrapper: one naming the tool, the next
//! holding its arguments (`<tool_name>NAME</tool_name>` then `<parameters>{..}</parameters>`,
//! `<tool>NAME</tool><input>..</input>`): the inside of an `<invoke>` whose wrapper a model
//! left out. The name must be an enabled tool's, and the pair must stand apart from the
//! text, as an element named after a tool must.
//!
//! May depend on: `super` (the reader), `super::super::named` (what stands apart),
//! `crate::grammar`, `crate::types`.

use super::Reader;
use crate::grammar::keys::{is_args_key, is_name_key};
use crate::grammar::markup::{tag_at, Kind, Tag};
use crate::grammar::text::skip_ws;
use crate::grammar::typed_param;
use crate::types::Call;
use serde_json::Value;

impl<'t> Reader<'_, 't> {
    /// The call a name element opened by `open` and the arguments element right after it
    /// write: where it starts, where it ends, the call.
    pub(super) fn name_then_args(&self, open: &Tag<'t>) -> Option<(usize, usize, Call)> {
        if open.kind != Kind::Open || !is_name_key(&open.key()) || !open.attrs.is_empty() {
            return None;
        }
        let (written, name_end) = self.element_text(open)?;
        let name = self.tool(&written)?;
        let at = skip_ws(self.text, name_end);
        let args_tag = tag_at(self.text, at).filter(|t| t.kind == Kind::Open)?;
        let key = args_tag.key();
        if !(is_args_key(&key) || key == "actioninput") {
            return None;
        }
        let (arguments, end) = match self.element_text(&args_tag) {
            Some((v, e)) if v.trim_start().starts_with('{') => match typed_param(&v) {
                v @ Value::Object(_) => (v, e),
                _ => return None,
            },
            // Parameter elements inside the arguments element.
            _ => {
                let inner = self.body(args_tag.span.end, false)?;
                let end = self.closer(inner.end, &key)?;
                (Value::Object(inner.args), end)
            }
        };
        let apart = super::super::named::stands_before(self.text, open.span.start)
            && super::super::named::stands_after(self.text, end);
        apart.then_some((open.span.start, end, Call { name, arguments }))
    }
}
