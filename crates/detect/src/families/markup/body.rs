//! The inside of a call the markup net reads: its name when the opener did not give it, and
//! its arguments in any dialect (parameter elements, `<k>v</k>`, `<k value=v/>`,
//! `arg_key`/`arg_value` pairs, an arguments element, a JSON object, fenced or not, a Python
//! argument list), up to the first thing that is none of these.
//!
//! May depend on: `super` (the reader), `super::super::cli` (command-line arguments),
//! `crate::grammar`, `crate::types`.

use super::{Reader, MAX_PARTS};
use crate::grammar::json::{call_of, Keys};
use crate::grammar::keys::{
    is_args_key, is_call_key, is_name_key, is_param_key, is_placeholder_key,
};
use crate::grammar::markup::{fold, tag_at, Kind, Tag};
use crate::grammar::python::{parse_call, PyOpts};
use crate::grammar::text::{skip_ws, value_lines};
use crate::grammar::{is_ident_char, typed_param, xml};
use serde_json::{Map, Value};

/// What a call's body held.
#[derive(Default)]
pub(super) struct Body {
    pub(super) name: Option<String>,
    pub(super) args: Map<String, Value>,
    /// Something was read as arguments (an empty JSON object counts).
    pub(super) had_args: bool,
    pub(super) end: usize,
    /// The body closed itself: a command line ended by `/>`, its element's `<` lost.
    pub(super) closed: bool,
    /// Elements named after nothing of a call (`<city>Paris</city>`): its parameters,
    /// unless an arguments element holds them (`<arguments>{..}</arguments>`), which makes
    /// the others the call's routing (`<server_name>`), not its arguments.
    pub(super) loose: Vec<(String, Value)>,
    /// An arguments element was read.
    pub(super) explicit: bool,
}

impl Body {
    /// Adds one argument; a key written twice says the element is data (a list of
    /// records), not a call.
    fn put(&mut self, key: &str, value: Value) -> Option<()> {
        if self.args.insert(key.to_string(), value).is_some() {
            return None;
        }
        self.had_args = true;
        Some(())
    }
}

impl<'t> Reader<'_, 't> {
    /// Reads a call's body from `pos`: its name (when `want_name`) and its arguments, up to
    /// the first thing that is neither.
    pub(super) fn body(&self, mut pos: usize, want_name: bool) -> Option<Body> {
        let text = self.text;
        let mut body = Body {
            end: pos,
            ..Body::default()
        };
        for _ in 0..MAX_PARTS {
            let q = skip_ws(text, pos);
            let rest = text.get(q..).unwrap_or_default();
            // Arguments a bug report's paste left out (`...` where they stood): the call
            // carried some.
            if let Some(n) = crate::grammar::text::elision_at(text, q) {
                body.had_args = true;
                pos = q + n;
                body.end = pos;
                continue;
            }
            if rest.starts_with('<') {
                let Some(t) = tag_at(text, q) else { break };
                let k = t.key();
                match t.kind {
                    Kind::Special if is_separator(&k) => pos = t.span.end,
                    Kind::Open | Kind::SelfClose
                        if is_name_key(&k) && want_name && body.name.is_none() =>
                    {
                        let (v, end) = self.element_text(&t)?;
                        body.name = Some(self.tool(&v)?);
                        pos = end;
                    }
                    // GLM's pairs, under a vendor's prefix too (`<longcat_arg_key>`).
                    Kind::Open if k.ends_with("argkey") => {
                        let (key, end) = self.element_text(&t)?;
                        let vq = skip_ws(text, end);
                        let vt = tag_at(text, vq).filter(|v| v.key().ends_with("argvalue"))?;
                        let (value, end) = self.element_text(&vt)?;
                        body.put(key.trim(), typed_param(&value))?;
                        pos = end;
                    }
                    Kind::Open | Kind::SelfClose if is_param_key(&k) => {
                        let key = t.attr("name").or(t.eq).or_else(|| t.attr("key"))?;
                        let (value, end) = match t.kind {
                            Kind::SelfClose => (t.attr("value")?.to_string(), t.span.end),
                            _ => self.element_text(&t)?,
                        };
                        // DSML and GCML say a value is the raw text (`string="true"`).
                        let value = match t.attr("string") {
                            Some("true") => Value::String(value),
                            _ => typed_param(&value),
                        };
                        body.put(key, value)?;
                        pos = end;
                    }
                    Kind::Open if is_args_key(&k) => {
                        let (value, end) = match self.element_text(&t) {
                            Some((v, e)) if v.trim_start().starts_with('{') => (v, e),
                            // Parameter elements inside the arguments element.
                            _ => {
                                let inner = self.body(t.span.end, false)?;
                                let end = self.closer(inner.end, &k)?;
                                body.args.extend(inner.args);
                                body.had_args = true;
                                body.explicit = true;
                                pos = end;
                                body.end = pos;
                                continue;
                            }
                        };
                        match typed_param(&value) {
                            Value::Object(m) => body.args.extend(m),
                            _ => return None,
                        }
                        body.had_args = true;
                        body.explicit = true;
                        pos = end;
                    }
                    Kind::SelfClose if !is_call_key(&k) => {
                        let value = t.attr("value")?;
                        body.loose.push((t.name.to_string(), typed_param(value)));
                        body.had_args = true;
                        pos = t.span.end;
                    }
                    Kind::Open if !is_call_key(&k) => {
                        let (value, end) = self.element_text(&t)?;
                        body.loose.push((t.name.to_string(), typed_param(&value)));
                        body.had_args = true;
                        pos = end;
                    }
                    _ => break,
                }
            } else if rest.starts_with('{') && !body.had_args {
                let (v, end) = crate::grammar::json::value_at(text, q)?;
                match (call_of(&v, Keys::Strict), v) {
                    (Some(c), _) if want_name && body.name.is_none() => {
                        body.name = Some(self.tool(&c.name)?);
                        if let Value::Object(m) = c.arguments {
                            body.args.extend(m);
                        }
                    }
                    (_, Value::Object(m)) => body.args.extend(m),
                    _ => return None,
                }
                body.had_args = true;
                pos = end;
            } else if rest.starts_with("```") && !body.had_args {
                let line = q + rest.find('\n')?;
                let label = text.get(q + 3..line)?.trim();
                if !(label.is_empty() || label.eq_ignore_ascii_case("json")) {
                    break;
                }
                let (v, end) = crate::grammar::json::value_at(text, line)?;
                let Value::Object(m) = v else { return None };
                let close = skip_ws(text, end);
                let after = crate::grammar::text::eat(text, close, "```")?;
                body.args.extend(m);
                body.had_args = true;
                pos = after;
            } else if want_name && body.name.is_none() && !body.had_args {
                // The text right after the opener: `NAME`, `functions.NAME:0`,
                // `function<sep>NAME`, or a Python call `NAME(k=v)`.
                let word_end = q + rest
                    .find(|c: char| !(is_ident_char(c) || matches!(c, '.' | ':' | '-')))
                    .unwrap_or(rest.len());
                let word = text.get(q..word_end)?;
                if word == "function" {
                    pos = word_end;
                    continue;
                }
                let name = self.tool(word)?;
                if text.get(word_end..)?.starts_with('(') {
                    let (c, end) = parse_call(text, q, PyOpts::LENIENT)
                        .or_else(|| parse_call(text, word_end - name.len(), PyOpts::LENIENT))?;
                    if let Value::Object(m) = c.arguments {
                        body.args.extend(m);
                    }
                    body.had_args = true;
                    pos = end;
                } else if let Some((args, end, closed)) = self.command_line(word_end) {
                    // An attribute that only repeats the name (`tool="exec"`) is no argument.
                    body.args.extend(
                        args.into_iter()
                            .filter(|(k, v)| !(is_name_key(&fold(k)) && v == name.as_str())),
                    );
                    body.had_args = true;
                    body.closed = closed;
                    pos = end;
                } else {
                    pos = word_end;
                }
                body.name = Some(name);
            } else {
                break;
            }
            body.end = pos;
        }
        if !body.explicit {
            for (k, v) in std::mem::take(&mut body.loose) {
                body.put(&k, v)?;
            }
        }
        Some(body)
    }

    /// Arguments in command-line form right after a name inside a tag
    /// (`<tool_call>NAME key="v" n=2</tool_call>`): the text up to the next tag, where it
    /// ends, and whether it closed itself (`NAME key="v" />`: a self-closing element whose
    /// `<` was lost, attribute-style).
    fn command_line(&self, from: usize) -> Option<(Map<String, Value>, usize, bool)> {
        let rest = self.text.get(from..)?;
        if !rest.starts_with([' ', '\t']) {
            return None;
        }
        let seg = rest[..rest.find(['<', '\n']).unwrap_or(rest.len())].trim_end();
        let (seg, closed) = match seg.strip_suffix("/>") {
            Some(s) => (s, true),
            None => (seg, false),
        };
        let args = crate::families::cli::parse_args(seg)?;
        let end = from + seg.len() + if closed { 2 } else { 0 };
        Some((args, end.min(from + rest.len()), closed))
    }

    /// The text an element holds and the end of its closer: up to its own closer, or, where
    /// that was lost, up to the next tag (a closer or the next element). A value that runs
    /// to the end of the text was cut: none.
    pub(super) fn element_text(&self, open: &Tag<'t>) -> Option<(String, usize)> {
        let text = self.text;
        let from = open.span.end;
        let key = open.key();
        let mut at = from;
        loop {
            let i = at + memchr::memchr(b'<', text.as_bytes().get(at..)?)?;
            let Some(t) = tag_at(text, i) else {
                at = i + 1;
                continue;
            };
            let raw = text.get(from..i)?;
            let k = t.key();
            let end = match t.kind {
                // Its own closer, or a parameter closer of another spelling.
                Kind::Close if k == key || (is_param_key(&k) && is_param_key(&key)) => t.span.end,
                // The next part of the call before this one closed: the value was not
                // closed, and an unclosed value may be a cut one.
                Kind::Close | Kind::Open | Kind::SelfClose | Kind::Special
                    if is_param_key(&k) || is_call_key(&k) || k == "argvalue" || k == "argkey" =>
                {
                    return None;
                }
                _ => {
                    at = t.span.end;
                    continue;
                }
            };
            let value = value_lines(raw);
            return Some((xml::unescape(value).into_owned(), end));
        }
    }
}

/// Special tokens that separate a call's parts (`<|tool_call_argument_begin|>`,
/// `<｜tool▁sep｜>`), and placeholders printed for tokens that had no text.
fn is_separator(key: &str) -> bool {
    key.contains("sep")
        || key.contains("argument")
        || key.contains("args")
        || key == "constrain"
        || is_placeholder_key(key)
}
