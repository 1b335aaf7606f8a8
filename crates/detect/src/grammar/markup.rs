//! A tolerant reader of markup tags and special tokens: one lexer for every spelling a
//! model or a server mangled, so that the formats' structure is read, not their spelling.
//!
//! A tag is `<` (one space may follow it), an optional `/`, an optional run of bars (`|`,
//! `｜`) and an optional namespace (`｜DSML｜`, `minimax:`), a name, then attributes in any quoting (`"`, `'`,
//! typographic quotes, bare), a `=VALUE` right after the name (`<function=NAME>`), or a JSON
//! object in attribute position (`<functioncall {..}>`), and its end: `>`, `/>`, a bar
//! before `>` (`<|x|>`, `<x|>`), or, where the `>` was lost, the end of the line or the
//! next `<`. Spaces inside the bars and the name's separators (`_`, `▁`, `-`, ` `) do not
//! matter to [`Tag::key`], so `<| tool▁call begin |>` and `<|tool_call_begin|>` are the
//! same token to a reader.
//!
//! Nothing here knows a format: `crate::families::markup` reads calls off the tags and the
//! driver's remnant rule takes the tags a call left around it; what a tag's name says
//! (a call, a parameter, an end) is `super::keys`.
//!
//! May depend on: `super::json`, `memchr`. No I/O.

use std::ops::Range;

/// Bytes a tag may span at most: markup tags are short, and a bound keeps the lexer
/// linear on hostile input.
const MAX_TAG: usize = 512;
/// Attributes a tag may carry at most.
const MAX_ATTRS: usize = 16;

/// What a lexed tag is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `<name ..>`.
    Open,
    /// `</name>`, and `<name|>`, which closes what `<|name>` opened.
    Close,
    /// `<name ../>`.
    SelfClose,
    /// A special token: `<|name|>`, `<｜name｜>`, `<|name>`.
    Special,
}

/// One tag as the lexer read it.
#[derive(Debug, Clone)]
pub struct Tag<'t> {
    /// The bytes of the tag, `<` through its end.
    pub span: Range<usize>,
    /// What it is.
    pub kind: Kind,
    /// The name as written, without bars and namespace.
    pub name: &'t str,
    /// Whether a namespace stood before the name (`｜DSML｜`, `minimax:`).
    pub namespaced: bool,
    /// Attributes, `(key, value)` with the quotes taken off.
    pub attrs: Vec<(&'t str, &'t str)>,
    /// The value of `=VALUE` right after the name (`<function=NAME>`, `<parameter=k>`).
    pub eq: Option<&'t str>,
    /// A JSON object in attribute position (`<functioncall {..}>`): its bytes.
    pub json: Option<Range<usize>>,
    /// Whether the tag ended with its `>` (false: it was lost).
    pub closed: bool,
}

impl Tag<'_> {
    /// The name folded for comparison: ASCII lowercase, letters and digits only.
    pub fn key(&self) -> String {
        fold(self.name)
    }

    /// An attribute's value by key (ASCII case-insensitive).
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| *v)
    }
}

/// A name folded for comparison: ASCII lowercase, letters and digits only
/// (`tool▁calls▁begin`, `Tool-Calls Begin` and `toolcallsbegin` are one key).
pub fn fold(name: &str) -> String {
    name.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

fn is_bar(c: char) -> bool {
    matches!(c, '|' | '｜')
}

/// A character of a tag name: letters and digits of any script, `_ - . ▁`.
fn is_tag_name_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '▁')
}

fn is_quote_open(c: char) -> Option<&'static [char]> {
    match c {
        '"' => Some(&['"', '”', '“']),
        '\'' => Some(&['\'', '’', '‘']),
        '“' | '”' => Some(&['”', '“', '"']),
        '‘' | '’' => Some(&['’', '‘', '\'']),
        '«' => Some(&['»']),
        _ => None,
    }
}

/// Reads the tag that starts at `pos` (a `<`), if one does.
pub fn tag_at(text: &str, pos: usize) -> Option<Tag<'_>> {
    let rest = text.get(pos..)?;
    let limit = pos + rest.len().min(MAX_TAG);
    let mut chars = rest.char_indices().peekable();
    if chars.next()?.1 != '<' {
        return None;
    }
    let at = |chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>| {
        chars.peek().map_or(rest.len(), |&(i, _)| i)
    };
    let mut kind = Kind::Open;
    // `< calls>`, `< /tool_call>`, `</ | DSML | invoke>`: one space a tokenizer put after
    // the `<` or the `/`.
    let one_space = |chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>| {
        if chars.peek().is_some_and(|&(_, c)| c == ' ') {
            let mut look = chars.clone();
            look.next();
            if look
                .peek()
                .is_some_and(|&(_, c)| c == '/' || is_bar(c) || c.is_alphabetic())
            {
                *chars = look;
            }
        }
    };
    one_space(&mut chars);
    if chars.peek().is_some_and(|&(_, c)| c == '/') {
        chars.next();
        kind = Kind::Close;
        one_space(&mut chars);
    }
    // Bars and spaces before the name (`<|`, `<｜`, `<| `).
    let mut barred = false;
    while let Some(&(_, c)) = chars.peek() {
        if is_bar(c) {
            barred = true;
            chars.next();
        } else if c == ' ' && barred {
            chars.next();
        } else {
            break;
        }
    }
    // `<| /tool_call |>`: the closer's slash inside the bars.
    if barred && kind == Kind::Open && chars.peek().is_some_and(|&(_, c)| c == '/') {
        chars.next();
        kind = Kind::Close;
        while chars.peek().is_some_and(|&(_, c)| c == ' ') {
            chars.next();
        }
    }
    let mut name = read_name(rest, &mut chars)?;
    let mut namespaced = false;
    // A namespace: `｜DSML｜name`, `|DSML|name`, `minimax:name`, `| DSML | name`.
    loop {
        let mut look = chars.clone();
        if barred {
            while look.peek().is_some_and(|&(_, c)| c == ' ') {
                look.next();
            }
        }
        match look.peek() {
            Some(&(_, c)) if (is_bar(c) || c == ':') && !name.is_empty() => {
                look.next();
                // `<｜｜DSML｜｜ invoke`: doubled bars and a space after the namespace.
                if is_bar(c) {
                    while look.peek().is_some_and(|&(_, n)| is_bar(n) || n == ' ') {
                        look.next();
                    }
                }
                if look
                    .peek()
                    .is_some_and(|&(_, n)| n.is_alphabetic() || n == '_')
                {
                    chars = look;
                    let next = read_name(rest, &mut chars)?;
                    if next.is_empty() {
                        return None;
                    }
                    name = next;
                    namespaced = true;
                    // `<｜DSML｜invoke ..>` is a tag in a namespace, not a special token.
                    barred = false;
                    continue;
                }
                break;
            }
            _ => break,
        }
    }
    // The name may hold spaces inside bars (`<| tool call begin |>`).
    if barred {
        let start = (name.as_ptr() as usize).checked_sub(rest.as_ptr() as usize)?;
        let mut look = chars.clone();
        let mut end = start + name.len();
        while let Some(&(i, c)) = look.peek() {
            if c == ' ' || is_tag_name_char(c) {
                if is_tag_name_char(c) {
                    end = i + c.len_utf8();
                }
                look.next();
            } else {
                break;
            }
        }
        if look.peek().is_some_and(|&(_, c)| is_bar(c)) {
            chars = look;
            name = rest.get(start..end)?;
        }
    }
    if name.is_empty() {
        return None;
    }
    let mut tag = Tag {
        span: pos..pos,
        kind,
        name,
        namespaced,
        attrs: Vec::new(),
        eq: None,
        json: None,
        closed: false,
    };
    // A bar right after the name ends a special token (`<|x|>`, `<x|>`).
    while chars.peek().is_some_and(|&(_, c)| c == ' ') && barred {
        chars.next();
    }
    if let Some(&(_, c)) = chars.peek() {
        if is_bar(c) {
            chars.next();
            if chars.peek().is_some_and(|&(_, c)| c == '>') {
                chars.next();
                // `<x|>` without a bar before its name closes what `<|x>` opened (Gemma
                // 4's `<|tool_call>` .. `<tool_call|>`).
                tag.kind = match (tag.kind, barred) {
                    (Kind::Close, _) | (_, false) => Kind::Close,
                    _ => Kind::Special,
                };
                tag.closed = true;
                tag.span.end = pos + at(&mut chars);
                return Some(tag);
            }
            // `<|tool_calls_section_end|` ending the text or its line (trailing blanks
            // aside): its `>` was cut, or written as the bar.
            let mut look = chars.clone();
            while look.peek().is_some_and(|&(_, c)| c == ' ' || c == '\t') {
                look.next();
            }
            if matches!(look.peek().map(|&(_, c)| c), None | Some('\n' | '\r')) {
                if tag.kind != Kind::Close {
                    tag.kind = Kind::Special;
                }
                tag.span.end = pos + at(&mut chars);
                return Some(tag);
            }
            return None;
        }
    }
    if barred && tag.kind == Kind::Open && chars.peek().is_some_and(|&(_, c)| c == '>') {
        // `<|name>`: Gemma 4's opener.
        chars.next();
        tag.kind = Kind::Special;
        tag.closed = true;
        tag.span.end = pos + at(&mut chars);
        return Some(tag);
    }
    if barred {
        // A bar run that never closed is not a token of any format.
        let next = chars.peek().map(|&(_, c)| c);
        if !matches!(next, None | Some('\n' | '\r')) {
            return None;
        }
        tag.kind = Kind::Special;
        tag.span.end = pos + at(&mut chars);
        return Some(tag);
    }
    // `=VALUE` right after the name.
    if chars.peek().is_some_and(|&(_, c)| c == '=') {
        chars.next();
        tag.eq = Some(read_value(rest, &mut chars)?);
    }
    loop {
        let before_ws = at(&mut chars);
        while chars.peek().is_some_and(|&(_, c)| c == ' ' || c == '\t') {
            chars.next();
        }
        let Some(&(i, c)) = chars.peek() else {
            // The text ended inside the tag: the `>` was lost (or cut).
            tag.span.end = pos + before_ws;
            return Some(tag);
        };
        if pos + i > limit {
            return None;
        }
        match c {
            '>' => {
                chars.next();
                tag.closed = true;
                tag.span.end = pos + at(&mut chars);
                return Some(tag);
            }
            '/' => {
                chars.next();
                if chars.peek().is_some_and(|&(_, c)| c == '>') {
                    chars.next();
                    tag.kind = Kind::SelfClose;
                    tag.closed = true;
                    tag.span.end = pos + at(&mut chars);
                    return Some(tag);
                }
                // `<parameter name="k"/tmp/a</parameter>`: the `>` lost before a value.
                tag.span.end = pos + i;
                return (!tag.attrs.is_empty()).then_some(tag);
            }
            '\n' | '\r' | '<' => {
                // The `>` was lost: the tag ends where its line or the next tag begins.
                tag.span.end = pos + before_ws;
                return Some(tag);
            }
            '{' if tag.json.is_none() => {
                let (_, end) = super::json::value_at(rest, i)?;
                tag.json = Some(pos + i..pos + end);
                while chars.peek().is_some_and(|&(j, _)| j < end) {
                    chars.next();
                }
            }
            _ if c.is_alphabetic() || c == '_' => {
                if tag.attrs.len() >= MAX_ATTRS {
                    return None;
                }
                let key_start = i;
                while chars
                    .peek()
                    .is_some_and(|&(_, c)| is_tag_name_char(c) || c == ':')
                {
                    chars.next();
                }
                let key = rest.get(key_start..at(&mut chars))?;
                let mut look = chars.clone();
                while look.peek().is_some_and(|&(_, c)| c == ' ') {
                    look.next();
                }
                if look.peek().is_some_and(|&(_, c)| c == '=') {
                    look.next();
                    while look.peek().is_some_and(|&(_, c)| c == ' ') {
                        look.next();
                    }
                    chars = look;
                    let value = read_value(rest, &mut chars)?;
                    tag.attrs.push((key, value));
                } else {
                    tag.attrs.push((key, ""));
                }
            }
            _ => return None,
        }
    }
}

fn read_name<'t>(
    rest: &'t str,
    chars: &mut std::iter::Peekable<std::str::CharIndices<'t>>,
) -> Option<&'t str> {
    let start = chars.peek().map_or(rest.len(), |&(i, _)| i);
    if chars
        .peek()
        .is_some_and(|&(_, c)| !(c.is_alphabetic() || c == '_'))
    {
        return rest.get(start..start);
    }
    while chars.peek().is_some_and(|&(_, c)| is_tag_name_char(c)) {
        chars.next();
    }
    let end = chars.peek().map_or(rest.len(), |&(i, _)| i);
    rest.get(start..end)
}

/// An attribute value: quoted (any quote, its closer any of the same kind) or bare.
fn read_value<'t>(
    rest: &'t str,
    chars: &mut std::iter::Peekable<std::str::CharIndices<'t>>,
) -> Option<&'t str> {
    let &(start, c) = chars.peek()?;
    if let Some(closers) = is_quote_open(c) {
        chars.next();
        let from = start + c.len_utf8();
        for (i, c) in chars.by_ref() {
            if closers.contains(&c) {
                return rest.get(from..i);
            }
            if c == '\n' || i - from > MAX_TAG {
                return None;
            }
        }
        return None;
    }
    while chars
        .peek()
        .is_some_and(|&(_, c)| !c.is_whitespace() && c != '>' && c != '<' && c != '/')
    {
        chars.next();
    }
    let end = chars.peek().map_or(rest.len(), |&(i, _)| i);
    (end > start).then(|| rest.get(start..end)).flatten()
}

/// The tags of `text` from `from`, in order, at most `max` (every `<` that starts one).
pub fn tags(text: &str, from: usize, max: usize) -> Vec<Tag<'_>> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut at = from;
    while out.len() < max {
        let Some(i) = bytes.get(at..).and_then(|b| memchr::memchr(b'<', b)) else {
            break;
        };
        let p = at + i;
        match tag_at(text, p) {
            Some(t) => {
                at = t.span.end.max(p + 1);
                out.push(t);
            }
            None => at = p + 1,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(s: &str) -> Tag<'_> {
        tag_at(s, 0).unwrap_or_else(|| panic!("no tag in {s:?}"))
    }

    #[test]
    fn plain_tags_and_attributes() {
        let t = one(r#"<invoke name="get_weather">"#);
        assert_eq!((t.kind, t.name, t.closed), (Kind::Open, "invoke", true));
        assert_eq!(t.attr("name"), Some("get_weather"));
        let t = one("</tool_call>");
        assert_eq!((t.kind, t.key().as_str()), (Kind::Close, "toolcall"));
        let t = one(r#"<city value="Paris"/>"#);
        assert_eq!((t.kind, t.attr("value")), (Kind::SelfClose, Some("Paris")));
    }

    #[test]
    fn spellings_fold_to_one_key() {
        for s in [
            "<|tool_call_begin|>",
            "<| tool_call_begin |>",
            "<｜tool▁call▁begin｜>",
            "<|tool call begin|>",
        ] {
            let t = one(s);
            assert_eq!(t.kind, Kind::Special, "{s}");
            assert_eq!(t.key(), "toolcallbegin", "{s}");
            assert_eq!(t.span.end, s.len(), "{s}");
        }
    }

    #[test]
    fn namespaces_quotes_eq_and_json() {
        let t = one("<｜DSML｜invoke name=“search”>");
        assert!(t.namespaced);
        assert_eq!((t.name, t.attr("name")), ("invoke", Some("search")));
        let t = one("<function=get_weather>");
        assert_eq!((t.name, t.eq), ("function", Some("get_weather")));
        let s = r#"<functioncall {"name": "f", "arguments": {}}>"#;
        let t = one(s);
        assert_eq!(
            t.json.map(|r| &s[r]),
            Some(r#"{"name": "f", "arguments": {}}"#)
        );
        let t = one("<minimax:tool_call>");
        assert_eq!((t.name, t.namespaced), ("tool_call", true));
        let t = one("<｜｜DSML｜｜ invoke name=\"read\">");
        assert_eq!(
            (t.name, t.namespaced, t.attr("name")),
            ("invoke", true, Some("read"))
        );
    }

    #[test]
    fn a_lost_closing_bracket_ends_at_the_line() {
        let s = "<｜DSML｜function_calls\n<x>";
        let t = one(s);
        assert!(!t.closed);
        assert_eq!(&s[t.span.clone()], "<｜DSML｜function_calls");
        assert!(tag_at("< 3 and 5 >", 0).is_none());
        assert!(tag_at("<|im", 0).is_some_and(|t| !t.closed));
    }

    #[test]
    fn one_space_after_the_bracket_is_read() {
        let t = one("< calls>");
        assert_eq!((t.kind, t.key().as_str()), (Kind::Open, "calls"));
        let t = one("< /tool_call>");
        assert_eq!((t.kind, t.key().as_str()), (Kind::Close, "toolcall"));
        assert!(tag_at("a <  b", 2).is_none());
        assert!(tag_at("a < 3", 2).is_none());
    }

    #[test]
    fn a_slash_inside_the_bars_closes() {
        let t = one("<| /tool_call |>");
        assert_eq!((t.kind, t.key().as_str()), (Kind::Close, "toolcall"));
    }

    #[test]
    fn prose_comparisons_are_not_tags() {
        assert!(tag_at("<= 5", 0).is_none());
        assert!(tag_at("<3", 0).is_none());
        assert!(tag_at("<- back", 0).is_none());
    }
}
