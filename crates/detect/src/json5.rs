//! A lenient reader for the JSON a model writes when it imitates a tool result or a
//! Python call: strict JSON plus unquoted keys, single-quoted strings, trailing commas,
//! and Python's `True`/`False`/`None`. Produces `serde_json::Value`.
//!
//! Bounded: nesting deeper than [`MAX_DEPTH`] is an error, never a stack overflow, and
//! every byte is looked at a constant number of times.

use serde_json::{Map, Number, Value};

/// Deepest nesting accepted. Tool results and arguments are shallow; anything deeper is
/// not something we will rewrite a message for.
pub const MAX_DEPTH: usize = 64;

/// Why a lenient parse stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The input ended inside a value.
    Eof,
    /// An unexpected byte at this offset.
    Unexpected(usize),
    /// Nesting beyond [`MAX_DEPTH`].
    TooDeep,
}

/// Parses one value starting at `pos` (leading whitespace allowed). Returns the value and
/// the offset just past it.
pub fn parse_value_at(text: &str, pos: usize) -> Result<(Value, usize), Error> {
    let mut p = Parser {
        s: text.as_bytes(),
        text,
        i: pos,
    };
    let v = p.value(0)?;
    Ok((v, p.i))
}

struct Parser<'a> {
    s: &'a [u8],
    text: &'a str,
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn ws(&mut self) {
        while let Some(b) = self.peek() {
            if b.is_ascii_whitespace() {
                self.i += 1;
            } else {
                break;
            }
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, Error> {
        if depth > MAX_DEPTH {
            return Err(Error::TooDeep);
        }
        self.ws();
        match self.peek().ok_or(Error::Eof)? {
            b'{' => self.object(depth),
            b'[' => self.array(depth),
            q @ (b'"' | b'\'') => self.string(q).map(Value::String),
            b'-' | b'+' | b'0'..=b'9' | b'.' => self.number(),
            _ => self.word(),
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value, Error> {
        self.i += 1;
        let mut map = Map::new();
        loop {
            self.ws();
            match self.peek().ok_or(Error::Eof)? {
                b'}' => {
                    self.i += 1;
                    return Ok(Value::Object(map));
                }
                q @ (b'"' | b'\'') => {
                    let k = self.string(q)?;
                    self.colon_then_value(depth, k, &mut map)?;
                }
                b if is_ident_start(b) => {
                    let k = self.ident().to_string();
                    self.colon_then_value(depth, k, &mut map)?;
                }
                _ => return Err(Error::Unexpected(self.i)),
            }
            self.ws();
            match self.peek().ok_or(Error::Eof)? {
                b',' => self.i += 1,
                b'}' => {}
                _ => return Err(Error::Unexpected(self.i)),
            }
        }
    }

    fn colon_then_value(
        &mut self,
        depth: usize,
        key: String,
        map: &mut Map<String, Value>,
    ) -> Result<(), Error> {
        self.ws();
        if self.peek() != Some(b':') {
            return Err(self.unexpected());
        }
        self.i += 1;
        let v = self.value(depth + 1)?;
        map.insert(key, v);
        Ok(())
    }

    fn array(&mut self, depth: usize) -> Result<Value, Error> {
        self.i += 1;
        let mut items = Vec::new();
        loop {
            self.ws();
            if self.peek().ok_or(Error::Eof)? == b']' {
                self.i += 1;
                return Ok(Value::Array(items));
            }
            items.push(self.value(depth + 1)?);
            self.ws();
            match self.peek().ok_or(Error::Eof)? {
                b',' => self.i += 1,
                b']' => {}
                _ => return Err(Error::Unexpected(self.i)),
            }
        }
    }

    fn string(&mut self, quote: u8) -> Result<String, Error> {
        self.i += 1;
        let mut out = String::new();
        let mut run_start = self.i;
        loop {
            // Jump to the next byte that ends a literal run; UTF-8 continuation bytes never
            // equal an ASCII quote or backslash, so slicing at these offsets is safe.
            let rel = memchr::memchr3(quote, b'\\', b'\n', &self.s[self.i..]).ok_or(Error::Eof)?;
            self.i += rel;
            let b = self.s[self.i];
            out.push_str(self.slice(run_start, self.i)?);
            match b {
                b'\n' => return Err(Error::Unexpected(self.i)),
                b'\\' => {
                    self.i += 1;
                    self.escape(&mut out)?;
                    run_start = self.i;
                }
                _ => {
                    self.i += 1;
                    return Ok(out);
                }
            }
        }
    }

    fn escape(&mut self, out: &mut String) -> Result<(), Error> {
        let b = self.peek().ok_or(Error::Eof)?;
        self.i += 1;
        match b {
            b'n' => out.push('\n'),
            b't' => out.push('\t'),
            b'r' => out.push('\r'),
            b'b' => out.push('\u{8}'),
            b'f' => out.push('\u{c}'),
            b'0' => out.push('\0'),
            b'u' => {
                let cp = self.hex4()?;
                let ch = if (0xD800..0xDC00).contains(&cp)
                    && self.s.get(self.i..self.i + 2) == Some(b"\\u")
                {
                    self.i += 2;
                    let lo = self.hex4()?;
                    char::from_u32(
                        0x10000 + ((cp - 0xD800) << 10) + (lo.wrapping_sub(0xDC00) & 0x3FF),
                    )
                } else {
                    char::from_u32(cp)
                };
                out.push(ch.unwrap_or('\u{FFFD}'));
            }
            b'\n' => {}
            _ => {
                // `\'`, `\"`, `\\`, `\/` and any other escaped character stand for
                // themselves; step back so a multi-byte character is copied whole.
                self.i -= 1;
                let ch = self
                    .text
                    .get(self.i..)
                    .and_then(|r| r.chars().next())
                    .ok_or(Error::Eof)?;
                self.i += ch.len_utf8();
                out.push(ch);
            }
        }
        Ok(())
    }

    fn hex4(&mut self) -> Result<u32, Error> {
        let h = self.s.get(self.i..self.i + 4).ok_or(Error::Eof)?;
        let h = std::str::from_utf8(h).map_err(|_| Error::Unexpected(self.i))?;
        let v = u32::from_str_radix(h, 16).map_err(|_| Error::Unexpected(self.i))?;
        self.i += 4;
        Ok(v)
    }

    fn number(&mut self) -> Result<Value, Error> {
        let start = self.i;
        while let Some(b) = self.peek() {
            if b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E') {
                self.i += 1;
            } else {
                break;
            }
        }
        let lit = self.slice(start, self.i)?;
        let lit = lit.strip_prefix('+').unwrap_or(lit);
        if let Ok(i) = lit.parse::<i64>() {
            return Ok(Value::Number(i.into()));
        }
        lit.parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map(Value::Number)
            .ok_or(Error::Unexpected(start))
    }

    fn word(&mut self) -> Result<Value, Error> {
        let start = self.i;
        match self.ident() {
            "true" | "True" => Ok(Value::Bool(true)),
            "false" | "False" => Ok(Value::Bool(false)),
            "null" | "None" => Ok(Value::Null),
            _ => Err(Error::Unexpected(start)),
        }
    }

    fn ident(&mut self) -> &str {
        let start = self.i;
        while let Some(b) = self.peek() {
            if is_ident_start(b) || b.is_ascii_digit() {
                self.i += 1;
            } else {
                break;
            }
        }
        self.text.get(start..self.i).unwrap_or_default()
    }

    fn slice(&self, a: usize, b: usize) -> Result<&str, Error> {
        self.text.get(a..b).ok_or(Error::Unexpected(a))
    }

    fn unexpected(&self) -> Error {
        if self.i >= self.s.len() {
            Error::Eof
        } else {
            Error::Unexpected(self.i)
        }
    }
}

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b == b'$'
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(s: &str) -> Result<Value, Error> {
        parse_value_at(s, 0).map(|(v, _)| v)
    }

    #[test]
    fn reads_strict_json() {
        assert_eq!(
            parse(r#"{"a": [1, 2.5, "x"], "b": null}"#).unwrap(),
            json!({"a": [1, 2.5, "x"], "b": null})
        );
    }

    #[test]
    fn reads_json5ish() {
        assert_eq!(
            parse("{success: true, memory_type: 'journal', content: \"it's\",}").unwrap(),
            json!({"success": true, "memory_type": "journal", "content": "it's"})
        );
    }

    #[test]
    fn braces_and_escaped_quotes_in_strings() {
        let (v, end) = parse_value_at(r#"{content: "a } \" {"}rest"#, 0).unwrap();
        assert_eq!(v, json!({"content": "a } \" {"}));
        assert_eq!(end, r#"{content: "a } \" {"}"#.len());
    }

    #[test]
    fn python_literals() {
        assert_eq!(
            parse("{'a': True, 'b': None}").unwrap(),
            json!({"a": true, "b": null})
        );
    }

    #[test]
    fn depth_is_bounded() {
        let deep = "[".repeat(100_000);
        assert_eq!(parse(&deep), Err(Error::TooDeep));
    }

    #[test]
    fn set_notation_and_templates_are_not_objects() {
        assert!(parse("{x | x > 0}").is_err());
        assert!(parse("{name}, welcome").is_err());
    }
}
