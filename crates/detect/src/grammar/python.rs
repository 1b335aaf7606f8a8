//! The Python call grammar: `name(kw=literal, ...)` calls, `[call, call]` lists, and the
//! literals inside them (strings with escapes and triple quotes, numbers, `True`/`None`,
//! lists, tuples, dicts, sets). Keyword arguments only: a positional argument is prose or
//! code, never a tool call we could name the parameters of.
//!
//! May depend on: `super::text`, `super::is_tool_name`, `crate::types`.

use super::text::skip_ws;
use super::{is_ident_char, is_tool_name};
use crate::types::Call;
use serde_json::{Map, Number, Value};

/// How forgiving the Python reader is.
#[derive(Debug, Clone, Copy)]
pub struct PyOpts {
    /// LFM2-style repairs: raw newlines inside quoted strings, and a quote of the string's
    /// own kind only closes it when a delimiter (`,` `)` `]` `}` `:`) or the end follows,
    /// so `'sed -n '1,2p' f'` reads as one string.
    pub lenient_strings: bool,
}

impl PyOpts {
    pub const STRICT: PyOpts = PyOpts {
        lenient_strings: false,
    };
    pub const LENIENT: PyOpts = PyOpts {
        lenient_strings: true,
    };
}

/// Deepest literal nesting accepted.
const MAX_DEPTH: usize = 64;

/// Parses `[call, call, ...]` at `pos` (exactly there, no leading whitespace). Returns the
/// calls (at least one) and the offset just past `]`.
pub fn parse_call_list(text: &str, pos: usize, opts: PyOpts) -> Option<(Vec<Call>, usize)> {
    let mut p = Py::new(text, pos, opts);
    p.eat(b'[')?;
    let mut calls = Vec::new();
    loop {
        p.ws();
        if p.peek()? == b']' && !calls.is_empty() {
            p.i += 1;
            return Some((calls, p.i));
        }
        calls.push(p.call()?);
        p.ws();
        match p.peek()? {
            b',' => p.i += 1,
            b']' => {}
            _ => return None,
        }
    }
}

/// Parses one `name(kw=value, ...)` call at `pos` (exactly there). Returns the call and the
/// offset just past `)`.
pub fn parse_call(text: &str, pos: usize, opts: PyOpts) -> Option<(Call, usize)> {
    let mut p = Py::new(text, pos, opts);
    let c = p.call()?;
    Some((c, p.i))
}

/// The one call a string of code holds, as Gemini writes it under `tool_code`:
/// `NAME(..)`, `default_api.NAME(..)`, in `print(..)` or not, and nothing else.
pub fn call_in_code(code: &str) -> Option<Call> {
    let code = code.trim();
    let code = code
        .strip_prefix("print(")
        .and_then(|c| c.strip_suffix(')'))
        .map_or(code, str::trim);
    let code = ["default_api.", "functions."]
        .iter()
        .find_map(|ns| code.strip_prefix(ns))
        .unwrap_or(code);
    let (call, end) = parse_call(code, 0, PyOpts::STRICT)?;
    (end == code.len()).then_some(call)
}

struct Py<'a> {
    s: &'a [u8],
    text: &'a str,
    i: usize,
    opts: PyOpts,
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The identifier character at the start of `s`, if it is one: its length.
fn ident_char_len(s: &str) -> Option<usize> {
    let c = s.chars().next()?;
    is_ident_char(c).then(|| c.len_utf8())
}

impl<'a> Py<'a> {
    fn new(text: &'a str, i: usize, opts: PyOpts) -> Self {
        Py {
            s: text.as_bytes(),
            text,
            i,
            opts,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn eat(&mut self, b: u8) -> Option<()> {
        (self.peek()? == b).then(|| self.i += 1)
    }

    fn ws(&mut self) {
        self.i = skip_ws(self.text, self.i);
    }

    /// A dotted identifier such as `grocery.orderIngredients` (letters of any script, as
    /// Python 3 allows).
    fn name(&mut self) -> Option<&'a str> {
        let start = self.i;
        let first = self.text.get(start..)?.chars().next()?;
        if !(first.is_alphabetic() || first == '_') {
            return None;
        }
        loop {
            let rest = self.text.get(self.i..).unwrap_or_default();
            if let Some(len) = ident_char_len(rest) {
                self.i += len;
            } else if rest.starts_with('.') && rest.get(1..).and_then(ident_char_len).is_some() {
                self.i += 1;
            } else {
                break;
            }
        }
        self.text.get(start..self.i)
    }

    fn call(&mut self) -> Option<Call> {
        let name = self.name()?;
        if !is_tool_name(name) {
            return None;
        }
        self.eat(b'(')?;
        let mut args = Map::new();
        loop {
            self.ws();
            if self.peek()? == b')' {
                self.i += 1;
                return Some(Call {
                    name: name.to_string(),
                    arguments: unwrapped(args),
                });
            }
            let key = self.name()?;
            if key.contains('.') {
                return None;
            }
            self.ws();
            self.eat(b'=')?;
            // `==` is a comparison, not a keyword argument.
            if self.peek()? == b'=' {
                return None;
            }
            let v = self.value(0)?;
            args.insert(key.to_string(), v);
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b')' => {}
                _ => return None,
            }
        }
    }

    fn value(&mut self, depth: usize) -> Option<Value> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.ws();
        match self.peek()? {
            b'[' => {
                self.i += 1;
                self.seq(b']', depth).map(Value::Array)
            }
            b'(' => {
                self.i += 1;
                self.seq(b')', depth).map(Value::Array)
            }
            b'{' => self.dict_or_set(depth),
            q @ (b'\'' | b'"') => self.string(q).map(Value::String),
            b'-' | b'+' | b'0'..=b'9' | b'.' => self.number(),
            b'r' | b'R' if matches!(self.s.get(self.i + 1), Some(b'\'' | b'"')) => {
                self.i += 1;
                let q = self.peek()?;
                self.raw_string(q).map(Value::String)
            }
            _ => {
                let start = self.i;
                while self.peek().is_some_and(is_ident_byte) {
                    self.i += 1;
                }
                match self.text.get(start..self.i)? {
                    "True" | "true" => Some(Value::Bool(true)),
                    "False" | "false" => Some(Value::Bool(false)),
                    "None" | "null" => Some(Value::Null),
                    _ => None,
                }
            }
        }
    }

    /// Items up to `close` (the opener is consumed); trailing comma allowed.
    fn seq(&mut self, close: u8, depth: usize) -> Option<Vec<Value>> {
        let mut items = Vec::new();
        loop {
            self.ws();
            if self.peek()? == close {
                self.i += 1;
                return Some(items);
            }
            items.push(self.value(depth + 1)?);
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b if b == close => {}
                _ => return None,
            }
        }
    }

    /// `{}` and `{k: v, ...}` are dicts; `{a, b}` is a set, read as a list in written order.
    fn dict_or_set(&mut self, depth: usize) -> Option<Value> {
        self.i += 1;
        self.ws();
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(Value::Object(Map::new()));
        }
        let first = self.value(depth + 1)?;
        self.ws();
        if self.peek()? != b':' {
            // A set.
            let mut items = vec![first];
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {}
                _ => return None,
            }
            items.extend(self.seq(b'}', depth)?);
            return Some(Value::Array(items));
        }
        let mut map = Map::new();
        let mut key = first;
        loop {
            self.eat(b':')?;
            let v = self.value(depth + 1)?;
            map.insert(key_string(key)?, v);
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(Value::Object(map));
                }
                _ => return None,
            }
            self.ws();
            if self.peek()? == b'}' {
                self.i += 1;
                return Some(Value::Object(map));
            }
            key = self.value(depth + 1)?;
            self.ws();
        }
    }

    fn number(&mut self) -> Option<Value> {
        let start = self.i;
        while let Some(b) = self.peek() {
            if b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E' | b'_') {
                self.i += 1;
            } else {
                break;
            }
        }
        let lit: String = self
            .text
            .get(start..self.i)?
            .chars()
            .filter(|&c| c != '_')
            .collect();
        let lit = lit.strip_prefix('+').unwrap_or(&lit);
        if let Ok(i) = lit.parse::<i64>() {
            return Some(Value::Number(i.into()));
        }
        lit.parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map(Value::Number)
    }

    /// Whether the quote at `self.i` closes the string (lenient mode's rule).
    fn closes_here(&self) -> bool {
        if !self.opts.lenient_strings {
            return true;
        }
        let next = skip_ws(self.text, self.i + 1);
        match self.s.get(next) {
            None => true,
            Some(b) => matches!(b, b',' | b')' | b']' | b'}' | b':'),
        }
    }

    fn string(&mut self, q: u8) -> Option<String> {
        // Triple-quoted strings may hold raw newlines and lone quotes.
        if self.s.get(self.i..self.i + 3) == Some(&[q, q, q][..]) {
            return self.triple_string(q);
        }
        self.i += 1;
        let mut out = String::new();
        let mut run = self.i;
        loop {
            let rel = memchr::memchr3(q, b'\\', b'\n', self.s.get(self.i..)?)?;
            self.i += rel;
            let b = self.s[self.i];
            match b {
                b'\n' => {
                    if !self.opts.lenient_strings {
                        return None;
                    }
                    self.i += 1;
                }
                b'\\' => {
                    out.push_str(self.text.get(run..self.i)?);
                    self.i += 1;
                    self.escape(&mut out)?;
                    run = self.i;
                }
                _ => {
                    if self.closes_here() {
                        out.push_str(self.text.get(run..self.i)?);
                        self.i += 1;
                        return Some(out);
                    }
                    self.i += 1;
                }
            }
        }
    }

    fn triple_string(&mut self, q: u8) -> Option<String> {
        self.i += 3;
        let mut out = String::new();
        let mut run = self.i;
        loop {
            let rel = memchr::memchr2(q, b'\\', self.s.get(self.i..)?)?;
            self.i += rel;
            if self.s[self.i] == b'\\' {
                out.push_str(self.text.get(run..self.i)?);
                self.i += 1;
                self.escape(&mut out)?;
                run = self.i;
            } else if self.s.get(self.i..self.i + 3) == Some(&[q, q, q][..]) {
                out.push_str(self.text.get(run..self.i)?);
                self.i += 3;
                return Some(out);
            } else {
                self.i += 1;
            }
        }
    }

    /// `r'...'`: backslashes stand for themselves (a backslash still protects a quote).
    fn raw_string(&mut self, q: u8) -> Option<String> {
        self.i += 1;
        let start = self.i;
        loop {
            let rel = memchr::memchr3(q, b'\\', b'\n', self.s.get(self.i..)?)?;
            self.i += rel;
            match self.s[self.i] {
                b'\n' => return None,
                b'\\' => self.i += 2,
                _ => {
                    let s = self.text.get(start..self.i)?.to_string();
                    self.i += 1;
                    return Some(s);
                }
            }
        }
    }

    /// Python escape after a backslash (already consumed). Unknown escapes keep the
    /// backslash, as Python does.
    fn escape(&mut self, out: &mut String) -> Option<()> {
        let b = self.peek()?;
        self.i += 1;
        match b {
            b'n' => out.push('\n'),
            b't' => out.push('\t'),
            b'r' => out.push('\r'),
            b'0' => out.push('\0'),
            b'\\' => out.push('\\'),
            b'\'' => out.push('\''),
            b'"' => out.push('"'),
            b'\n' => {}
            b'x' => {
                let h = self.text.get(self.i..self.i + 2)?;
                let cp = u32::from_str_radix(h, 16).ok()?;
                self.i += 2;
                out.push(char::from_u32(cp)?);
            }
            b'u' => {
                let h = self.text.get(self.i..self.i + 4)?;
                let cp = u32::from_str_radix(h, 16).ok()?;
                self.i += 4;
                out.push(char::from_u32(cp).unwrap_or('\u{FFFD}'));
            }
            _ => {
                self.i -= 1;
                out.push('\\');
                let ch = self.text.get(self.i..)?.chars().next()?;
                self.i += ch.len_utf8();
                out.push(ch);
            }
        }
        Some(())
    }
}

/// A dict key as a JSON object key: strings as they are, numbers and literals as written.
/// The arguments of a call whose one keyword is an arguments key holding an object
/// (`f(parameters={"path": ..})`, a JSON call's key written as a keyword): that object.
fn unwrapped(args: Map<String, Value>) -> Value {
    let wrapped = args.len() == 1
        && args.iter().all(|(k, v)| {
            matches!(k.as_str(), "parameters" | "arguments" | "args") && v.is_object()
        });
    match wrapped {
        true => args.into_iter().next().map_or(Value::Null, |(_, v)| v),
        false => Value::Object(args),
    }
}

fn key_string(v: Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(if b { "True" } else { "False" }.to_string()),
        Value::Null => Some("None".to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lenient_strings_only_when_asked() {
        let t = "bash(command='sed -n '360,450p' f.py')";
        assert!(parse_call(t, 0, PyOpts::STRICT).is_none());
        let (c, end) = parse_call(t, 0, PyOpts::LENIENT).unwrap();
        assert_eq!(end, t.len());
        assert_eq!(c.arguments, json!({"command": "sed -n '360,450p' f.py"}));
    }

    #[test]
    fn literals() {
        let (calls, _) = parse_call_list(
            "[f(a=True, b=None, c={'k': (1, 2)}, d={1, 2})]",
            0,
            PyOpts::STRICT,
        )
        .unwrap();
        assert_eq!(
            calls[0].arguments,
            json!({"a": true, "b": null, "c": {"k": [1, 2]}, "d": [1, 2]})
        );
        assert!(parse_call("f(x==1)", 0, PyOpts::STRICT).is_none());
        assert!(parse_call("f('positional')", 0, PyOpts::STRICT).is_none());
    }
}
