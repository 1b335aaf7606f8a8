//! `gemma4`: Gemma 4's tool-call tokens.
//!
//! `<|tool_call>call:get_weather{location:<|"|>London<|"|>,count:3,opts:{a:true},tags:[<|"|>x<|"|>]}<tool_call|>`
//!
//! Keys are bare identifiers; `<|"|>` delimits a string (taken verbatim); undelimited
//! values are JSON scalars (`true`, `42`, `3.14`; anything else stays a string); `{..}` and
//! `[..]` nest. Each call is its own leak; a call without its `<tool_call|>` is prose.
//!
//! The call grammar is shared with `functiongemma` (same shape, other tokens), see
//! [`find_calls`].
//!
//! May depend on: `crate::families::util`, `crate::json5`, `crate::types`, `crate::Ctx`.

use super::util::{find_from, is_tool_name, json_whole, skip_ws, typed_param};
use super::MAX_CANDIDATES;
use crate::types::{Call, Family};
use crate::{Ctx, Leak};
use serde_json::{Map, Value};

const OPEN: &str = "<|tool_call>";
const CLOSE: &str = "<tool_call|>";
const QUOTE: &str = "<|\"|>";

/// Literal markers one of which any leak of this family contains.
pub(crate) const TRIGGERS: &[&str] = &[OPEN];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

/// Appends the leaks of this family found in `text` to `out`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    find_calls(
        text,
        ctx,
        out,
        &Spec {
            family: Family::Gemma4,
            open: OPEN,
            close: CLOSE,
            quote: QUOTE,
            type_quoted: false,
        },
    );
}

/// One `call:name{..}` dialect.
pub(super) struct Spec {
    /// The family the leaks are reported as.
    pub family: Family,
    /// Token before `call:`.
    pub open: &'static str,
    /// Token after the arguments.
    pub close: &'static str,
    /// The string delimiter (used on both sides).
    pub quote: &'static str,
    /// Whether a delimited value is typed like an XML parameter (`10` -> 10) or kept as a
    /// string.
    pub type_quoted: bool,
}

/// Deepest nesting of `{}`/`[]` accepted in arguments.
const MAX_DEPTH: usize = 32;

/// Finds `open call:name{..} close` calls.
pub(super) fn find_calls(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>, spec: &Spec) {
    let mut from = 0;
    for _ in 0..MAX_CANDIDATES {
        let Some(start) = find_from(text, spec.open, from) else {
            return;
        };
        from = start + spec.open.len();
        if ctx.quoted(start) {
            continue;
        }
        // The closing token: without it no candidate from here on is complete.
        let Some(close_at) = find_from(text, spec.close, from) else {
            return;
        };
        // The call must end right at the first closing token.
        let Some(bounded) = text.get(..close_at) else {
            return;
        };
        if let Some(call) = parse_call(bounded, from, spec) {
            let end = close_at + spec.close.len();
            out.push(Leak {
                family: spec.family,
                span: start..end,
                calls: vec![call],
                results: Vec::new(),
            });
            from = end;
        }
    }
}

/// `call:name{..}` filling `text[pos..]` (whitespace around allowed).
fn parse_call(text: &str, pos: usize, spec: &Spec) -> Option<Call> {
    let p = skip_ws(text, pos);
    let p = p + text.get(p..)?.strip_prefix("call:").map(|_| 5)?;
    let brace = find_from(text, "{", p)?;
    let name = text.get(p..brace)?.trim();
    if !is_tool_name(name) {
        return None;
    }
    let mut parser = Parser {
        text,
        spec,
        i: brace,
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

struct Parser<'a> {
    text: &'a str,
    spec: &'a Spec,
    i: usize,
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

    /// `{key:value, key:value}` (commas optional).
    fn object(&mut self, depth: usize) -> Option<Value> {
        if depth > MAX_DEPTH || !self.eat("{") {
            return None;
        }
        let mut map = Map::new();
        loop {
            self.ws();
            if self.eat("}") {
                return Some(Value::Object(map));
            }
            let key = self.key()?;
            self.ws();
            if !self.eat(":") {
                return None;
            }
            self.ws();
            let v = self.value(depth)?;
            map.insert(key, v);
            self.ws();
            self.eat(",");
        }
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
            self.eat(",");
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
        // A bare scalar: up to the next separator.
        let len = rest.find([',', '}', ']', '{', '[']).unwrap_or(rest.len());
        let raw = rest.get(..len)?.trim();
        if raw.is_empty() || raw.contains('<') || raw.contains(':') {
            return None;
        }
        self.i += len;
        Some(match json_whole(raw) {
            Some(v @ (Value::Bool(_) | Value::Number(_) | Value::Null)) => v,
            _ => Value::String(raw.to_string()),
        })
    }
}

#[cfg(test)]
mod tests {

    use super::super::testing::{run_family, Out};

    fn run_with(text: &str, tools: &[&str]) -> Out {
        run_family(super::find, text, tools)
    }
    use serde_json::json;

    fn run(text: &str) -> Out {
        run_with(text, &[])
    }

    #[test]
    fn nested_and_typed_values() {
        let t = "Sure. <|tool_call>call:f{a:<|\"|>x, y<|\"|>,b:{c:[1,2,<|\"|>z<|\"|>]},d:false,e:-2.5}<tool_call|> Done.";
        let d = run(t);
        assert_eq!(
            d.leaks[0].calls[0].arguments,
            json!({"a": "x, y", "b": {"c": [1, 2, "z"]}, "d": false, "e": -2.5})
        );
        assert_eq!(d.cleaned.as_deref(), Some("Sure.  Done."));
    }

    #[test]
    fn delimited_numbers_stay_strings() {
        let t = "<|tool_call>call:f{zip:<|\"|>007<|\"|>,n:<|\"|>5<|\"|>}<tool_call|>";
        assert_eq!(
            run(t).leaks[0].calls[0].arguments,
            json!({"zip": "007", "n": "5"})
        );
    }

    #[test]
    fn unterminated_call_is_prose() {
        assert!(run("<|tool_call>call:f{a:1}").is_clean());
        assert!(run("<|tool_call>call:f{a:<|\"|>x}<tool_call|>").is_clean());
    }

    #[test]
    fn prose_about_the_token_is_not_a_leak() {
        let t = "Gemma 4 opens a call with <|tool_call> and closes it with <tool_call|>.";
        assert!(run(t).is_clean());
    }

    #[test]
    fn code_fence_is_not_a_leak() {
        let t = "```\n<|tool_call>call:f{a:1}<tool_call|>\n```";
        assert!(run(t).is_clean());
    }

    #[test]
    fn deep_nesting_is_rejected_without_overflow() {
        let t = format!(
            "<|tool_call>call:f{{a:{}1{}}}<tool_call|>",
            "[".repeat(5000),
            "]".repeat(5000)
        );
        assert!(run(&t).is_clean());
    }
}
