//! Gemma's brace grammar: `call:NAME{key:value,...}` with bare keys, values in a
//! dialect's string delimiters (`<|"|>` for Gemma 4, `<escape>` for FunctionGemma), bare
//! JSON scalars, and nested `{}`/`[]`.
//!
//! May depend on: `super::text`, `super` (names and values), `crate::types`.

use super::text::{find_from, skip_ws};
use super::{is_tool_name, typed_param};
use crate::types::Call;
use serde_json::{Map, Value};

/// One `call:name{..}` dialect.
#[derive(Debug)]
pub struct BraceSyntax {
    /// The string delimiter (used on both sides).
    pub quote: &'static str,
    /// Whether a delimited value is typed like an XML parameter (`10` -> 10) or kept as a
    /// string.
    pub type_quoted: bool,
    /// The delimiters were stripped (`skip_special_tokens`), so a bare value may be a string
    /// that had `,` `{` `}` `:` in it: read only what the format's own serializer could have
    /// written unambiguously. A bare value ends right at `,` `}` `]` (no space before), a `,`
    /// is followed right away by the next key or value (Gemma's template writes none), and a
    /// value holding `:` or running into `{` `[` is refused.
    pub bare_strict: bool,
}

/// Deepest nesting of `{}`/`[]` accepted in arguments.
const MAX_DEPTH: usize = 32;

/// `call:name{..}` filling `text[pos..]` (whitespace around allowed): the call.
pub fn parse(text: &str, pos: usize, spec: &BraceSyntax) -> Option<Call> {
    let p = skip_ws(text, pos);
    let p = p + text.get(p..)?.strip_prefix("call:").map(|_| 5)?;
    // `call:NAME(key: value)`: the same members in parentheses, as Gemma 4 also writes.
    let open = p + text.get(p..)?.find(['{', '('])?;
    let name = text.get(p..open)?.trim();
    if !is_tool_name(name) {
        return None;
    }
    let mut parser = Parser {
        text,
        spec,
        i: open,
        paren: text.as_bytes()[open] == b'(',
    };
    let args = parser.object(0)?;
    if skip_ws(text, parser.i) != text.len() {
        return None;
    }
    Some(Call {
        name: name.to_string(),
        arguments: args,
    })
}

/// The `{key:value,...}` arguments object at `pos` (exactly there): the object and the offset
/// past its `}`.
pub fn parse_object(text: &str, pos: usize, spec: &BraceSyntax) -> Option<(Value, usize)> {
    let mut parser = Parser {
        text,
        spec,
        i: pos,
        paren: false,
    };
    let args = parser.object(0)?;
    Some((args, parser.i))
}

struct Parser<'a> {
    text: &'a str,
    spec: &'a BraceSyntax,
    i: usize,
    /// The outer object is in parentheses: `)` closes it and ends a bare value.
    paren: bool,
}

impl<'a> Parser<'a> {
    fn rest(&self) -> &'a str {
        self.text.get(self.i..).unwrap_or_default()
    }

    fn ws(&mut self) {
        self.i = skip_ws(self.text, self.i);
    }

    fn eat(&mut self, lit: &str) -> bool {
        if self.rest().starts_with(lit) {
            self.i += lit.len();
            true
        } else {
            false
        }
    }

    /// `{key:value, key:value}` (commas optional, `=` for `:` too); at the top, `(..)` when
    /// `paren`.
    fn object(&mut self, depth: usize) -> Option<Value> {
        let (open, close) = match depth == 0 && self.paren {
            true => ("(", ")"),
            false => ("{", "}"),
        };
        if depth > MAX_DEPTH || !self.eat(open) {
            return None;
        }
        let mut map = Map::new();
        loop {
            self.ws();
            if self.eat(close) {
                return Some(Value::Object(map));
            }
            let key = self.key()?;
            self.ws();
            // `key=value` as a tag's attributes are written, which models mix in.
            if !self.eat(":") && !self.eat("=") {
                return None;
            }
            self.ws();
            let v = self.value(depth)?;
            map.insert(key, v);
            self.ws();
            self.sep()?;
        }
    }

    /// The optional `,` between two members or items; with [`BraceSyntax::bare_strict`]
    /// nothing but the next member may follow it (`a, b` is a string's comma and a space).
    fn sep(&mut self) -> Option<()> {
        if self.eat(",")
            && self.spec.bare_strict
            && self.rest().starts_with(|c: char| c.is_whitespace())
        {
            return None;
        }
        Some(())
    }

    /// `[value, value]`.
    fn array(&mut self, depth: usize) -> Option<Value> {
        if depth > MAX_DEPTH || !self.eat("[") {
            return None;
        }
        let mut items = Vec::new();
        loop {
            self.ws();
            if self.eat("]") {
                return Some(Value::Array(items));
            }
            items.push(self.value(depth)?);
            self.ws();
            self.sep()?;
        }
    }

    /// A bare key, or one in string delimiters.
    fn key(&mut self) -> Option<String> {
        if self.eat(self.spec.quote) {
            let end = find_from(self.text, self.spec.quote, self.i)?;
            let k = self.text.get(self.i..end)?.to_string();
            self.i = end + self.spec.quote.len();
            return Some(k);
        }
        let len = self
            .rest()
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'$'))
            .count();
        if len == 0 {
            return None;
        }
        let k = self.text.get(self.i..self.i + len)?.to_string();
        self.i += len;
        Some(k)
    }

    fn value(&mut self, depth: usize) -> Option<Value> {
        let rest = self.rest();
        if rest.starts_with('{') {
            return self.object(depth + 1);
        }
        if rest.starts_with('[') {
            return self.array(depth + 1);
        }
        if self.eat(self.spec.quote) {
            let end = find_from(self.text, self.spec.quote, self.i)?;
            let raw = self.text.get(self.i..end)?;
            self.i = end + self.spec.quote.len();
            return Some(if self.spec.type_quoted {
                typed_param(raw)
            } else {
                Value::String(raw.to_string())
            });
        }
        // A string in plain JSON quotes (models drop the dialect's delimiter for them).
        if rest.starts_with('"') {
            if let Some((v @ Value::String(_), end)) = super::json::value_at(self.text, self.i) {
                self.i = end;
                return Some(v);
            }
        }
        // A bare scalar: up to the next separator.
        let stops: &[char] = match self.paren {
            true => &[',', '}', ']', '{', '[', ')'],
            false => &[',', '}', ']', '{', '['],
        };
        let len = rest.find(stops).unwrap_or(rest.len());
        let raw = rest.get(..len)?.trim();
        // A `:` in a bare value is a key's where members may run together (`a:b c:d`);
        // in one word it is the value's own (`D:\\dir`, `https://..`), but where the
        // value's end is read strictly, it stays ambiguous.
        let colon =
            raw.contains(':') && (self.spec.bare_strict || raw.contains(char::is_whitespace));
        if raw.is_empty() || raw.contains('<') || colon {
            return None;
        }
        if self.spec.bare_strict
            && (raw.len() != rest.get(..len)?.trim_start().len()
                || rest[len..].starts_with(['{', '[']))
        {
            return None;
        }
        self.i += len;
        Some(match super::json::whole(raw) {
            Some(v @ (Value::Bool(_) | Value::Number(_) | Value::Null)) => v,
            _ => Value::String(raw.to_string()),
        })
    }
}
