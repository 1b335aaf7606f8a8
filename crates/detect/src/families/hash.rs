//! `{tool => "NAME", args => {--key "value" ...}}`: a call as a hash in Perl's spelling,
//! which MiniMax models write inside `[TOOL_CALL]`..`[/TOOL_CALL]`.
//!
//! Read by its structure, not one spelling: the name in any quotes (JSON's, single,
//! typographic), the arguments as `--key value` pairs (a word processor's dash too) or as
//! a JSON object. A pair's value is a quoted string when the quote closes it, else the bare
//! text up to the next `--key`, the line's end or the hash's closing braces (a command
//! line: `--command echo "hello"`). Extra closing braces before the call's closer are
//! tolerated (models write `}}}`).
//!
//! May depend on: `crate::grammar`, `crate::types`, `crate::Ctx`.

use crate::grammar::json;
use crate::grammar::text::{eat, skip_ws};
use crate::grammar::{is_tool_name, typed_param};
use crate::types::Call;
use crate::Ctx;
use serde_json::Value;

/// The hash call at `pos`, which must fill the call's body up to `limit` (its closer).
pub(super) fn hash_call(
    text: &str,
    pos: usize,
    limit: Option<usize>,
    _: &Ctx<'_>,
) -> Option<(Vec<Call>, usize)> {
    let l = limit?;
    let scope = text.get(..l)?;
    let mut i = eat(scope, skip_ws(scope, pos), "{")?;
    i = eat(scope, skip_ws(scope, i), "tool")?;
    i = eat(scope, skip_ws(scope, i), "=>")?;
    let (name, after) = match quoted_at(scope, skip_ws(scope, i))? {
        (Value::String(n), e) => (n, e),
        _ => return None,
    };
    if !is_tool_name(&name) {
        return None;
    }
    i = eat(scope, skip_ws(scope, after), ",")?;
    i = eat(scope, skip_ws(scope, i), "args")?;
    i = eat(scope, skip_ws(scope, i), "=>")?;
    i = skip_ws(scope, i);
    let (arguments, end) = match json::value_at(scope, i) {
        Some((v @ Value::Object(_), e)) => (v, e),
        _ => dashed_pairs(scope, eat(scope, i, "{")?)?,
    };
    // The hash's own brace, and any extra a model wrote.
    let rest = scope.get(end..)?;
    if !rest.trim_start().starts_with('}') || !rest.trim().chars().all(|c| c == '}') {
        return None;
    }
    Some((vec![Call { name, arguments }], l))
}

/// `--key value` pairs from `i` (just inside their `{`) to their `}`: the arguments and
/// where the `}` ends.
fn dashed_pairs(scope: &str, mut i: usize) -> Option<(Value, usize)> {
    let mut args = serde_json::Map::new();
    // One pair a line: a bare value runs to its line's end, `--flags` of a command in it.
    let one_a_line = scope.get(i..skip_ws(scope, i))?.contains('\n');
    loop {
        i = skip_ws(scope, i);
        if let Some(after) = eat(scope, i, "}") {
            return Some((Value::Object(args), after));
        }
        i = dash_at(scope, i)?;
        let key_len = scope
            .get(i..)?
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
            .count();
        let key = scope.get(i..i + key_len)?;
        if key.is_empty() {
            return None;
        }
        let v = skip_ws_in_line(scope, i + key_len);
        let quoted = quoted_at(scope, v).filter(|(value, e)| {
            value.is_string() && {
                // The quote closes the value only where the value ends there.
                let next = skip_ws_in_line(scope, *e);
                let rest = scope.get(next..).unwrap_or_default();
                rest.is_empty()
                    || rest.starts_with(['\n', '\r', '}'])
                    || dash_at(scope, next).is_some()
            }
        });
        let (value, end) = match quoted {
            Some(q) => q,
            None => {
                let end = bare_end(scope, v, one_a_line);
                let raw = scope.get(v..end)?.trim_end();
                if raw.is_empty() {
                    return None;
                }
                (typed_param(raw), end)
            }
        };
        args.insert(key.to_string(), value);
        i = end;
    }
}

/// Past a key's dash at `i`: `--`, or a word processor's `–`/`—`.
fn dash_at(scope: &str, i: usize) -> Option<usize> {
    ["--", "–", "—"].iter().find_map(|d| eat(scope, i, d))
}

/// Where a bare value from `v` ends: at the line's end, before ` --key` (unless the pairs
/// stand one a line), or before the closing braces that end its line.
fn bare_end(scope: &str, v: usize, one_a_line: bool) -> usize {
    let rest = scope.get(v..).unwrap_or_default();
    let line = rest.find(['\n', '\r']).unwrap_or(rest.len());
    let mut end = line;
    let b = rest.as_bytes();
    for i in (0..line).filter(|_| !one_a_line) {
        if b[i].is_ascii_whitespace()
            && dash_at(rest, i + 1)
                .is_some_and(|k| b.get(k).is_some_and(|c| c.is_ascii_alphabetic()))
        {
            end = i;
            break;
        }
    }
    // Braces that end the line close the hash, all but those closing a brace of the value.
    let mut value = rest[..end].trim_end();
    let opens = value.matches('{').count();
    while value.ends_with('}') && value.matches('}').count() > opens {
        value = &value[..value.len() - 1];
    }
    v + value.len()
}

fn skip_ws_in_line(scope: &str, i: usize) -> usize {
    let rest = scope.get(i..).unwrap_or_default();
    i + (rest.len() - rest.trim_start_matches([' ', '\t']).len())
}

/// A JSON value at `pos`, or a string in single or typographic quotes (`'v'`, `“v”`): its
/// text as written.
fn quoted_at(text: &str, pos: usize) -> Option<(Value, usize)> {
    let rest = text.get(pos..)?;
    let Some(open) = rest
        .chars()
        .next()
        .filter(|c| matches!(c, '“' | '”' | '\''))
    else {
        return json::value_at(text, pos);
    };
    let body = &rest[open.len_utf8()..];
    let close = match open {
        '\'' => body.find(['\'', '\n'])?,
        _ => body.find(['”', '“', '\n'])?,
    };
    let closer = body[close..].chars().next()?;
    (closer != '\n').then(|| {
        let end = pos + open.len_utf8() + close + closer.len_utf8();
        (Value::String(body[..close].to_string()), end)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one call read from `body` inside `[TOOL_CALL]`, with the text all taken.
    fn read(body: &str) -> Option<Value> {
        let text = format!("[TOOL_CALL]{body}[/TOOL_CALL]");
        let d = crate::families::testing::detect_with(&text, &["exec", "shell", "f"]);
        let calls: Vec<_> = d.calls_to_run().map(|(_, c)| c.clone()).collect();
        (calls.len() == 1 && d.cleaned.as_deref() == Some(""))
            .then(|| serde_json::json!({"name": calls[0].name, "arguments": calls[0].arguments}))
    }

    #[test]
    fn the_name_in_any_quotes_and_the_arguments_as_pairs_or_json() {
        use serde_json::json;
        let want = json!({"name": "exec", "arguments": {"command": "echo test"}});
        for body in [
            r#"{tool => "exec", args => {--command "echo test"}}"#,
            r#"{tool => 'exec', args => {--command "echo test"}}"#,
            "{tool => “exec”, args => {\n  —command “echo test”\n}}",
            "{tool => \"exec\", args => {\n  --command echo test\n}}",
            r#"{tool => "exec", args => {"command": "echo test"}}"#,
            r#"{tool => "exec", args => {--command echo test}}}"#,
        ] {
            assert_eq!(read(body), Some(want.clone()), "{body}");
        }
        assert_eq!(
            read("{tool => \"shell\", args => {\n  --command echo \"hello\"\n}}"),
            Some(json!({"name": "shell", "arguments": {"command": "echo \"hello\""}}))
        );
        assert_eq!(
            read(r#"{tool => "f", args => {--a 1 --b "x y" --c {k}}}"#),
            Some(json!({"name": "f", "arguments": {"a": 1, "b": "x y", "c": "{k}"}}))
        );
    }

    #[test]
    fn what_is_no_hash_call_stays() {
        for body in [
            r#"{tool => "exec", args => {command "x"}}"#,
            r#"{tool => "exec"}"#,
            r#"{tool => "exec", args => {--command "x"}} and more"#,
            r#"{tool => "", args => {}}"#,
        ] {
            assert_eq!(read(body), None, "{body}");
        }
    }
}
