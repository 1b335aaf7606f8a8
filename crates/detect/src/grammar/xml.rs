//! The XML-ish call grammars: `<invoke name="f"><parameter name="k">v</parameter></invoke>`
//! and its dialects (MiniMax's prefixed and element forms, Step-3's `steptml:`, MiniCPM's
//! `<function name=..><param ..>`, DeepSeek's DSML and GigaChat's GCML with a `string`
//! attribute), and Qwen3-Coder's `<function=NAME><parameter=K>v</parameter></function>`.
//!
//! May depend on: `super::text`, `super` (names and values), `crate::types`.

use super::text::{at_lit, attr, cut_tag_start, find_bounded, find_from, skip_ws, Finder};
use super::{is_tool_name, typed_param, ValueMode};
use crate::types::Call;
use serde_json::{Map, Value};

/// Longest start tag (`<invoke name="...">`) accepted.
const MAX_TAG: usize = 512;

/// The tag names of one `<invoke>`-like syntax.
pub struct InvokeSyntax {
    pub invoke_open: &'static str,
    pub invoke_close: &'static str,
    pub param_open: &'static str,
    pub param_close: &'static str,
    /// A marker that may precede every tag (MiniMax-M3's `]<]minimax[>[`).
    pub prefix: Option<&'static str>,
    /// Parameters may also be written as `<key>value</key>` elements.
    pub element_params: bool,
    pub values: ValueMode,
    /// Parameters carry `string="true"` (the value is the raw text) or `string="false"`
    /// (the value is JSON), as DeepSeek's DSML and GigaChat's GCML declare.
    pub string_attr: bool,
    /// The last invoke may have lost its closers at the end of the text after a closed
    /// parameter (a stop sequence on them, as DeepSeek's servers set), for an enabled tool.
    pub cut_at_end: bool,
}

/// The Anthropic-style `<invoke name=..><parameter name=..>v</parameter></invoke>` syntax,
/// values typed; the dialects are this with other tags.
pub const INVOKE: InvokeSyntax = InvokeSyntax {
    invoke_open: "<invoke",
    invoke_close: "</invoke>",
    param_open: "<parameter",
    param_close: "</parameter>",
    prefix: None,
    element_params: false,
    values: ValueMode::Typed,
    string_attr: false,
    cut_at_end: false,
};

/// Reads a start tag `open` at `pos`: `open` must be followed by whitespace, `Ġ` (a
/// byte-level BPE space), `>` or directly `name=` (a lost space). Returns the attribute
/// text and the offset past `>`.
pub fn start_tag<'t>(text: &'t str, pos: usize, open: &str) -> Option<(&'t str, usize)> {
    if !at_lit(text, pos, open) {
        return None;
    }
    let after = pos + open.len();
    let rest = text.get(after..)?;
    let ok = rest.starts_with(|c: char| c.is_ascii_whitespace() || c == '>' || c == 'Ġ')
        || rest.starts_with("name=");
    if !ok {
        return None;
    }
    let limit = after.saturating_add(MAX_TAG);
    let gt = find_bounded(text, ">", after, limit)?;
    let body = text.get(after..gt)?;
    if body.contains('<') {
        return None;
    }
    Some((body, gt + 1))
}

/// The `name` attribute of a start tag's attribute text, as a tool or parameter name.
pub fn name_attr(body: &str) -> Option<String> {
    let norm;
    let body = if body.contains('Ġ') {
        norm = body.replace('Ġ', " ");
        norm.as_str()
    } else {
        body
    };
    let name = attr(body, "name")?.trim();
    (!name.is_empty() && name.len() <= 256 && !name.contains(['<', '>', '\n']))
        .then(|| name.to_string())
}

fn skip_prefix(text: &str, pos: usize, prefix: Option<&str>) -> usize {
    match prefix {
        Some(p) if at_lit(text, pos, p) => pos + p.len(),
        _ => pos,
    }
}

/// A value holding another invoke or parameter start tag: an earlier block was left
/// unclosed, and its "value" runs into the next one.
fn nested(raw: &str, syn: &InvokeSyntax) -> bool {
    [syn.invoke_open, syn.param_open].iter().any(|open| {
        let mut from = 0;
        while let Some(i) = find_from(raw, open, from) {
            from = i + open.len();
            let next = raw.get(from..).and_then(|r| r.chars().next());
            if matches!(next, Some(c) if c.is_ascii_whitespace() || c == '>' || c == 'Ġ')
                || raw.get(from..).is_some_and(|r| r.starts_with("name="))
            {
                return true;
            }
        }
        false
    })
}

/// `raw` with XML's character references decoded (`&lt;`, `&gt;`, `&amp;`, `&quot;`,
/// `&apos;`, `&#N;`, `&#xN;`): a parameter value as an XML reader gives it to the tool. What
/// is not a reference stays as written (`AT&T`, `&nbsp;`). The removed text is the markup
/// verbatim; only the recovered arguments are decoded.
pub fn unescape(raw: &str) -> std::borrow::Cow<'_, str> {
    if !raw.contains('&') {
        return std::borrow::Cow::Borrowed(raw);
    }
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let decoded = rest
            .get(1..rest.find(';').filter(|&e| e <= 10).unwrap_or(0))
            .and_then(|name| {
                let c = match name {
                    "lt" => '<',
                    "gt" => '>',
                    "amp" => '&',
                    "quot" => '"',
                    "apos" => '\'',
                    _ => {
                        let n = name.strip_prefix('#')?;
                        let code = match n.strip_prefix(['x', 'X']) {
                            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                            None => n.parse().ok()?,
                        };
                        char::from_u32(code)?
                    }
                };
                Some((c, name.len() + 2))
            });
        match decoded {
            Some((c, len)) => {
                out.push(c);
                rest = &rest[len..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

fn value_of(raw: &str, syn: &InvokeSyntax) -> Value {
    let raw = match syn.prefix {
        Some(p) => raw.strip_suffix(p).unwrap_or(raw),
        None => raw,
    };
    if let Some(inner) = cdata(raw) {
        return Value::String(inner.to_string());
    }
    syn.values.value(&unescape(raw))
}

/// A Qwen3-Coder parameter's value: typed, unless it is one CDATA section (text).
fn param_value(raw: &str) -> Value {
    match cdata(raw) {
        Some(inner) => Value::String(inner.to_string()),
        None => typed_param(&unescape(raw)),
    }
}

/// The inner text of a value that is one `<![CDATA[...]]>` section: text as written, by
/// XML's own rule, in every dialect (models wrap values so when the prompt's markup is
/// XML, whatever the format).
fn cdata(raw: &str) -> Option<&str> {
    raw.trim()
        .strip_prefix("<![CDATA[")
        .and_then(|r| r.strip_suffix("]]>"))
}

/// Parses one invoke at `pos` (an optional prefix first). `close` finds the invoke's
/// closing tag. Returns the call and the offset past the closing tag.
pub fn parse_invoke(
    text: &str,
    pos: usize,
    syn: &InvokeSyntax,
    close: &mut Finder<'_>,
) -> Option<(Call, usize)> {
    let (name, body_start) = invoke_head(text, pos, syn)?;
    let end_tag = close.find(body_start)?;
    let arguments = invoke_params(text, body_start, end_tag, syn)?;
    Some((Call { name, arguments }, end_tag + syn.invoke_close.len()))
}

/// Parses one invoke at `pos` whose closing tag (and its wrapper's) is missing at the end
/// of the text: at least one parameter, the last one closed, then only whitespace, or a
/// closer the end cut short (`</inv`, taken with the call). Returns the call and the end
/// of its last parameter (or of that cut closer). (A value still open is a cut, never read,
/// unless a person's elision ends it.)
pub fn parse_invoke_cut(text: &str, pos: usize, syn: &InvokeSyntax) -> Option<(Call, usize)> {
    let (name, body_start) = invoke_head(text, pos, syn)?;
    // A closer the end cut short (`</inv`) is the call's: the body stops before it.
    let cut_tag = cut_tag_start(text).filter(|&c| c >= body_start);
    let end = text[..cut_tag.unwrap_or(text.len())].trim_end().len();
    if end <= body_start {
        return None;
    }
    let arguments = invoke_params(text, body_start, cut_tag.unwrap_or(text.len()), syn)?;
    if arguments.as_object().is_none_or(|m| m.is_empty()) {
        return None;
    }
    Some((
        Call { name, arguments },
        cut_tag.map_or(end, |_| text.trim_end().len()),
    ))
}

/// The invoke's start tag at `pos` (an optional prefix first): the tool's name and the
/// offset past the tag.
fn invoke_head(text: &str, pos: usize, syn: &InvokeSyntax) -> Option<(String, usize)> {
    let pos = skip_prefix(text, pos, syn.prefix);
    let (tag, body_start) = start_tag(text, pos, syn.invoke_open)?;
    let name = name_attr(tag)?;
    is_tool_name(&name).then_some((name, body_start))
}

/// The parameters between an invoke's start tag and `end_tag`, as an object: nothing but
/// parameters (and whitespace, and prefixes) may stand there.
fn invoke_params(
    text: &str,
    body_start: usize,
    end_tag: usize,
    syn: &InvokeSyntax,
) -> Option<Value> {
    let mut args = Map::new();
    let mut i = body_start;
    loop {
        i = skip_ws(text, i);
        let j = skip_prefix(text, i, syn.prefix);
        if j >= end_tag {
            // Only whitespace (and a prefix before the closing tag) is left.
            if j > end_tag {
                return None;
            }
            break;
        }
        i = j;
        // Parameters a bug report's paste left out (`...` where they stood).
        if let Some(n) = super::text::elision_at(text, i) {
            i += n;
            continue;
        }
        if let Some((ptag, vstart)) = start_tag(text, i, syn.param_open) {
            let key = name_attr(ptag)?;
            // A value still open at the end of the text is a cut, unless the paste stopped
            // in an elision there.
            let vend = find_bounded(text, syn.param_close, vstart, end_tag).or_else(|| {
                let end = text.trim_end().len();
                (end_tag == text.len() && super::text::ends_in_elision(&text[vstart..]))
                    .then_some(end)
            })?;
            let raw = text.get(vstart..vend)?;
            if nested(raw, syn) {
                return None;
            }
            let value = match syn.string_attr.then(|| attr(ptag, "string")).flatten() {
                Some("true") => Value::String(match cdata(raw) {
                    Some(inner) => inner.to_string(),
                    None => unescape(raw).into_owned(),
                }),
                Some("false") => {
                    let raw = unescape(raw);
                    super::json::whole(&raw).unwrap_or_else(|| Value::String(raw.into_owned()))
                }
                _ => value_of(raw, syn),
            };
            args.insert(key, value);
            i = match text
                .get(vend..)
                .is_some_and(|r| r.starts_with(syn.param_close))
            {
                true => vend + syn.param_close.len(),
                false => end_tag,
            };
        } else if syn.element_params {
            let key_start = i + 1;
            let rest = text.as_bytes().get(key_start..end_tag)?;
            if text.as_bytes().get(i) != Some(&b'<') {
                return None;
            }
            let klen = rest
                .iter()
                .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
                .count();
            if klen == 0 || rest.get(klen) != Some(&b'>') {
                return None;
            }
            let key = text.get(key_start..key_start + klen)?;
            let closer = format!("</{key}>");
            let vstart = key_start + klen + 1;
            let vend = find_bounded(text, &closer, vstart, end_tag)?;
            let raw = text.get(vstart..vend)?;
            if nested(raw, syn) {
                return None;
            }
            args.insert(key.to_string(), value_of(raw, syn));
            i = vend + closer.len();
        } else {
            return None;
        }
    }
    Some(Value::Object(args))
}

/// Parses invokes following each other (whitespace between) from `pos`.
pub fn parse_invoke_run(
    text: &str,
    pos: usize,
    syn: &InvokeSyntax,
    close: &mut Finder<'_>,
) -> Option<(Vec<Call>, usize)> {
    let (first, mut end) = parse_invoke(text, pos, syn, close)?;
    let mut calls = vec![first];
    loop {
        let next = skip_ws(text, end);
        match parse_invoke(text, next, syn, close) {
            Some((c, e)) => {
                calls.push(c);
                end = e;
            }
            None => break,
        }
    }
    Some((calls, end))
}

/// Like [`parse_invoke_run`], and when the run's next invoke (or its first) lost its
/// closers at the end of the text ([`parse_invoke_cut`]), that one too: the flag says so,
/// for the caller to apply its rule for a call that lost its closers.
pub fn parse_invoke_run_to_end(
    text: &str,
    pos: usize,
    syn: &InvokeSyntax,
    close: &mut Finder<'_>,
) -> Option<(Vec<Call>, usize, bool)> {
    let run = parse_invoke_run(text, pos, syn, close);
    let next = run.as_ref().map_or(pos, |(_, end)| skip_ws(text, *end));
    match (run, parse_invoke_cut(text, next, syn)) {
        (Some((mut calls, _)), Some((cut, end))) => {
            calls.push(cut);
            Some((calls, end, true))
        }
        (None, Some((cut, end))) => Some((vec![cut], end, true)),
        (Some((calls, end)), None) => Some((calls, end, false)),
        (None, None) => None,
    }
}

/// Parses Qwen3-Coder's `<function=NAME>` at `pos` whose `</function>` is at `close`: only
/// `<parameter=K>v</parameter>` blocks (and whitespace) between them. A value whose closer
/// was forgotten ends at the next parameter or the end of the function.
pub fn parse_function_eq(
    text: &str,
    pos: usize,
    close: usize,
    pclose: &mut Finder<'_>,
    pnext: &mut Finder<'_>,
) -> Option<Call> {
    let name_start = pos + "<function=".len();
    let gt = find_bounded(text, ">", name_start, close.min(name_start + 256))?;
    let name = text.get(name_start..gt)?.trim();
    if !is_tool_name(name) {
        return None;
    }
    let mut args = Map::new();
    let mut i = gt + 1;
    loop {
        i = skip_ws(text, i);
        if i >= close {
            break;
        }
        let rest = text.get(i..close)?;
        if !rest.starts_with("<parameter=") {
            // Anthropic's `<parameter name="k">` inside Qwen's `<function=NAME>` (MiniMax
            // and Strix-prompted models mix the two): it must be closed.
            let (tag, vstart) = start_tag(text.get(..close)?, i, "<parameter")?;
            let key = name_attr(tag)?;
            let vend = pclose.find(vstart).filter(|&c| c < close)?;
            let raw = text.get(vstart..vend)?;
            if raw.contains("<function=") || raw.contains("<parameter") {
                return None;
            }
            let raw = super::text::value_lines(raw);
            args.insert(key, param_value(raw));
            i = vend + "</parameter>".len();
            continue;
        }
        let key_start = i + "<parameter=".len();
        let kgt = find_bounded(text, ">", key_start, close.min(key_start + 256))?;
        let key = text.get(key_start..kgt)?.trim();
        if key.is_empty() || key.contains(['<', '\n']) {
            return None;
        }
        let vstart = kgt + 1;
        // The value ends at its closer, or (closer forgotten) at the next parameter or the
        // end of the function.
        let by_close = pclose.find(vstart).filter(|&c| c < close);
        let by_next = pnext.find(vstart).filter(|&n| n < close);
        let (vend, next, closed) = match (by_close, by_next) {
            (Some(c), Some(n)) if n < c => (n, n, false),
            (Some(c), _) => (c, c + "</parameter>".len(), true),
            (None, Some(n)) => (n, n, false),
            (None, None) => (close, close, false),
        };
        let raw = text.get(vstart..vend)?;
        // Another call's markup inside a value whose closer is missing means the blocks
        // are broken, not nested (such a value must be plain text); inside a closed value
        // with no parameter of its own it is the value's content (a file of markup).
        let nested = closed && !raw.contains("<parameter");
        if !nested && (raw.contains("<function=") || raw.contains("<tool_call>"))
            || (!closed && raw.contains('<'))
        {
            return None;
        }
        // A one-line value whose closer was lost ends where the next tag's separator
        // starts (`<parameter=k>v </tool_call>`: the space stands for a line break), or at
        // its line's end, its padding the markup's (`<parameter=k> v` then the next one).
        let one_line = raw.trim_end_matches(['\n', '\r']);
        let raw = match closed || one_line.contains('\n') {
            true => super::text::value_lines(raw),
            false => one_line.trim_matches([' ', '\t']),
        };
        args.insert(key.to_string(), param_value(raw));
        i = next;
    }
    Some(Call {
        name: name.to_string(),
        arguments: Value::Object(args),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn references_are_decoded_and_the_rest_kept() {
        use super::unescape;
        assert_eq!(unescape("a &lt; b &amp;&amp; c &gt; d"), "a < b && c > d");
        assert_eq!(
            unescape("&quot;hi&quot; &apos;x&apos; &#233;&#x4E2D;"),
            "\"hi\" 'x' é中"
        );
        assert_eq!(
            unescape("AT&T &nbsp; & &#xZZ; &#1114112;"),
            "AT&T &nbsp; & &#xZZ; &#1114112;"
        );
        assert_eq!(unescape("plain"), "plain");
    }
}
