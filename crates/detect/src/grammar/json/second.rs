//! Second readings of a JSON value serde_json refused, where a model's usual slip stopped
//! it: a backslash that escapes nothing JSON knows (a Windows path written as is), strings
//! in typographic double quotes, a value serialized into a string whose inner quotes were
//! never escaped (`"arguments": "{"q": "x"}"`), braces a template doubled to escape them
//! (`{{"name": ..}}`), strings holding unescaped quotes or raw line breaks (a file's text
//! written into a string as is), a dict or list in Python's spelling, a trailing comma. Asked only for a syntax error, and only where the bytes
//! at the error show the slip, so a failed read of prose costs a look, not a copy.
//!
//! A person's elisions (`...`) are `super::elided`'s.
//!
//! May depend on: `super::elided`, `serde_json`, `memchr`, `crate::json5` (the lenient reader, for Python's
//! spelling and trailing commas). No I/O.

use serde_json::Value;

/// How much of the text a second reading copies at most: a call's arguments are short,
/// and the bound keeps many failed candidates linear.
const MAX: usize = 64 * 1024;

/// The value serde_json refused with `e` (a syntax error, or the end of the text inside it)
/// at the start of `rest`, read once more where the slip it stopped at is one of those above; the value and the offset past it in `rest`.
pub(super) fn read(rest: &str, e: &serde_json::Error) -> Option<(Value, usize)> {
    let bytes = rest.as_bytes();
    let at = stopped_at(bytes, e)?;
    let near = bytes.get(at.saturating_sub(3)..(at + 3).min(bytes.len()))?;
    if e.is_eof() || near.contains(&b'.') || near.contains(&0xE2) {
        let h = head(rest);
        if let Some(read) = super::elided::read(h, h.len() == rest.len()) {
            return Some(read);
        }
    }
    // Text that stops inside a value is read only where a person's elision stopped it.
    if e.is_eof() {
        return None;
    }
    if near.contains(&b'\\') {
        lone_backslashes(head(rest))
    } else if near.contains(&0xE2) && rest.starts_with(['{', '[']) {
        typographic_quotes(head(rest))
    } else if rest.starts_with("{{") {
        doubled_braces(head(rest))
    } else if near.contains(&b'"') && rest.starts_with('{') {
        unescaped_inner(head(rest)).or_else(|| {
            quote_slip(bytes, at)
                .then(|| loose_strings(head(rest)))
                .flatten()
        })
    } else if rest.starts_with('{') && control_slip(bytes, at, e) {
        loose_strings(head(rest))
    } else if python_or_trailing_comma(rest, near) {
        crate::json5::parse_value_at(head(rest), 0).ok()
    } else {
        None
    }
}

/// Whether a value serde_json refused was written as Python writes a dict or a list
/// (`{'name': 'f'}`, `[{'a': 1}]`), or with a trailing comma before its closer (`{"a": 1,}`):
/// the lenient reader reads both as the model meant them.
fn python_or_trailing_comma(rest: &str, near: &[u8]) -> bool {
    let python = rest.starts_with("{'") || rest.starts_with("[{'") || rest.starts_with("{ '");
    let trailing = near
        .windows(2)
        .any(|w| w[0] == b',' && matches!(w[1], b'}' | b']'))
        || near
            .windows(3)
            .any(|w| w[0] == b',' && w[1] == b' ' && matches!(w[2], b'}' | b']'));
    (python || trailing) && rest.starts_with(['{', '['])
}

/// The offset where serde_json stopped (its line and byte column), to see what stopped it
/// without formatting its message.
fn stopped_at(bytes: &[u8], e: &serde_json::Error) -> Option<usize> {
    let line_start = match e.line() {
        0 | 1 => 0,
        n => memchr::memchr_iter(b'\n', bytes).nth(n - 2)? + 1,
    };
    Some(line_start + e.column().saturating_sub(1))
}

/// Whether serde_json stopped at a raw control character in a string: a tab or carriage
/// return at its column (`at`), or a line break, after which it counts column 0 of the
/// next line.
fn control_slip(bytes: &[u8], at: usize, e: &serde_json::Error) -> bool {
    (e.line() > 1 && e.column() == 0) || bytes.get(at).is_some_and(|&b| b < b' ')
}

/// Whether serde_json stopped (at `at`) right after a string that a quote inside it closed
/// too early: the quote, then a byte that cannot follow a string (`lang="en"` read as
/// `"lang="` then `en`).
fn quote_slip(bytes: &[u8], at: usize) -> bool {
    let before = bytes[..at.min(bytes.len())].trim_ascii_end();
    before.ends_with(b"\"")
        && bytes
            .get(at)
            .is_some_and(|b| !matches!(b, b',' | b':' | b'}' | b']'))
}

/// At most [`MAX`] bytes of `rest`, on a character boundary.
fn head(rest: &str) -> &str {
    let mut n = rest.len().min(MAX);
    while !rest.is_char_boundary(n) {
        n -= 1;
    }
    &rest[..n]
}

/// One value read from the start of a mended text, and the offset past it there.
fn first_value(fixed: &str) -> Option<(Value, usize)> {
    let mut stream = serde_json::Deserializer::from_str(fixed).into_iter::<Value>();
    let v = stream.next()?.ok()?;
    Some((v, stream.byte_offset()))
}

/// A value whose strings a word processor or a model wrote in typographic double quotes
/// (`{“name”: “x”}`): `“` opens a string and `”` closes it, and an ASCII `"` inside such a
/// string is a character of it. `None` when it holds none or still does not parse.
fn typographic_quotes(head: &str) -> Option<(Value, usize)> {
    if !head.contains('\u{201C}') {
        return None;
    }
    let mut fixed = String::with_capacity(head.len());
    // The offset in `head` each byte of `fixed` came from.
    let mut from = Vec::with_capacity(head.len() + 1);
    let mut curly = false;
    for (i, c) in head.char_indices() {
        let mut b = [0; 4];
        let put: &str = match c {
            '\u{201C}' if !curly => {
                curly = true;
                "\""
            }
            '\u{201D}' if curly => {
                curly = false;
                "\""
            }
            '"' if curly => "\\\"",
            _ => c.encode_utf8(&mut b),
        };
        from.extend(std::iter::repeat_n(i, put.len()));
        fixed.push_str(put);
    }
    let (v, end) = first_value(&fixed)?;
    // Past the last byte read: the offset after the character it came from.
    let last = *from.get(end.checked_sub(1)?)?;
    let len = head.get(last..)?.chars().next()?.len_utf8();
    Some((v, last + len))
}

/// A value whose strings hold backslashes that escape nothing JSON knows (a Windows path
/// written as is, `"dir %USERPROFILE%\Pictures"`): read with each such backslash taken as
/// itself, as the model meant it. A writer that left such backslashes raw left `\b` and `\f`
/// raw too (`D:\code\bishe`: a backspace or a form feed is never what an argument holds),
/// and `\'` is a quote escaped the way Python and scripts escape it. `None` when there is
/// none, or the value still does not parse.
fn lone_backslashes(head: &str) -> Option<(Value, usize)> {
    let bytes = head.as_bytes();
    let mut fixed = Vec::with_capacity(bytes.len() + 8);
    // Where a backslash was doubled, and where one was dropped, in `fixed`'s offsets.
    let (mut added, mut dropped) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'\\' && bytes.get(i + 1) == Some(&b'\'') {
            dropped.push(fixed.len());
            i += 1;
            continue;
        }
        fixed.push(b);
        if b == b'\\' {
            match bytes.get(i + 1) {
                Some(b'"' | b'\\' | b'/' | b'n' | b'r' | b't' | b'u') => {
                    fixed.push(bytes[i + 1]);
                    i += 1;
                }
                _ => {
                    added.push(fixed.len());
                    fixed.push(b'\\');
                }
            }
        }
        i += 1;
    }
    // Nothing JSON refuses: `\b` and `\f` alone are JSON's own escapes.
    if added
        .iter()
        .all(|&a| matches!(fixed.get(a + 1), Some(b'b' | b'f')))
        && dropped.is_empty()
    {
        return None;
    }
    let (v, end) = first_value(&String::from_utf8(fixed).ok()?)?;
    let before = |at: &Vec<usize>| at.iter().filter(|&&a| a < end).count();
    Some((v, end - before(&added) + before(&dropped)))
}

/// A value whose braces a prompt template escaped by doubling them (`{{"name": "f",
/// "arguments": {{}}}}`): outside strings each `{{` read as `{` and `}}` as `}`.
fn doubled_braces(head: &str) -> Option<(Value, usize)> {
    let bytes = head.as_bytes();
    let mut fixed = Vec::with_capacity(bytes.len());
    // Where a doubled brace was halved, in `head`'s offsets.
    let mut halved = Vec::new();
    let (mut i, mut in_str) = (0, false);
    while i < bytes.len() {
        let b = bytes[i];
        fixed.push(b);
        match b {
            b'\\' if in_str => {
                if let Some(&n) = bytes.get(i + 1) {
                    fixed.push(n);
                }
                i += 1;
            }
            b'"' => in_str = !in_str,
            b'{' | b'}' if !in_str && bytes.get(i + 1) == Some(&b) => {
                halved.push(i);
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    if halved.is_empty() {
        return None;
    }
    let (v, end) = first_value(&String::from_utf8(fixed).ok()?)?;
    // Back to `head`'s offsets: each pair halved before the end was one byte longer.
    let mut back = end;
    for &h in &halved {
        if h < back {
            back += 1;
        }
    }
    Some((v, back))
}

/// An object with a member whose value is an object or array serialized into a string
/// without escaping its quotes (`{"arguments": "{"q": "x"}"}`): each such string read as the
/// value it holds, which is what decoding the string would give. `None` when there is
/// none, or the whole still does not parse.
fn unescaped_inner(head: &str) -> Option<(Value, usize)> {
    let bytes = head.as_bytes();
    let mut fixed = String::with_capacity(head.len());
    // Offsets in `head` of the quotes dropped, in order.
    let mut dropped = Vec::new();
    let mut copied = 0;
    let mut at = 0;
    while let Some(i) = memchr::memmem::find(&bytes[at..], b"\"{\"").map(|i| at + i) {
        at = i + 1;
        // A member's value: `:` and spaces before the quote.
        let before = head[..i].trim_end_matches([' ', '\t']);
        if !before.ends_with(':') || i < copied {
            continue;
        }
        let Some((_, end)) = super::value_at(head, i + 1) else {
            continue;
        };
        if bytes.get(end) != Some(&b'"') {
            continue;
        }
        fixed.push_str(&head[copied..i]);
        fixed.push_str(&head[i + 1..end]);
        dropped.extend([i, end]);
        copied = end + 1;
        at = copied;
    }
    if dropped.is_empty() {
        return None;
    }
    fixed.push_str(&head[copied..]);
    let (v, end) = first_value(&fixed)?;
    // Back to `head`'s offsets: every dropped quote before the end moves it by one.
    let mut back = end;
    for &d in &dropped {
        if d <= back {
            back += 1;
        }
    }
    Some((v, back))
}

/// An object whose strings hold quotes never escaped (`"content": "<html lang="en">"`)
/// or raw line breaks and tabs: a model that wrote a file's text into a string as is. A
/// quote inside a string closes it only where what follows (spaces and line breaks
/// aside) can follow a string: `,` `:` `}` `]` or the end; any other is a character of the
/// string, and so is every raw control character. `None` when nothing was mended, or the
/// whole still does not parse.
fn loose_strings(head: &str) -> Option<(Value, usize)> {
    // A serialized object in a string is `unescaped_inner`'s: where that reading failed,
    // the object is broken, not a text.
    if head.contains("\"{\"") {
        return None;
    }
    let mut fixed = String::with_capacity(head.len() + 16);
    // The offset in `head` each byte of `fixed` came from.
    let mut from = Vec::with_capacity(head.len() + 17);
    let (mut in_string, mut escaped, mut mended) = (false, false, false);
    for (i, c) in head.char_indices() {
        let mut b = [0; 4];
        let put: &str = match c {
            _ if escaped => {
                escaped = false;
                c.encode_utf8(&mut b)
            }
            '\\' if in_string => {
                escaped = true;
                "\\"
            }
            '"' if !in_string => {
                in_string = true;
                "\""
            }
            '"' => {
                let next = head[i + 1..].trim_start().chars().next();
                if next.is_none_or(|n| matches!(n, ',' | ':' | '}' | ']')) {
                    in_string = false;
                    "\""
                } else {
                    mended = true;
                    "\\\""
                }
            }
            '\n' if in_string => {
                mended = true;
                "\\n"
            }
            '\r' if in_string => {
                mended = true;
                "\\r"
            }
            '\t' if in_string => {
                mended = true;
                "\\t"
            }
            _ => c.encode_utf8(&mut b),
        };
        from.extend(std::iter::repeat_n(i, put.len()));
        fixed.push_str(put);
    }
    if !mended {
        return None;
    }
    let (v, end) = first_value(&fixed)?;
    let last = *from.get(end.checked_sub(1)?)?;
    let len = head.get(last..)?.chars().next()?.len_utf8();
    Some((v, last + len))
}

#[cfg(test)]
mod tests {
    use super::super::value_at;

    #[test]
    fn typographic_quotes_delimit_strings() {
        let t = "{\u{201C}name\u{201D}: \u{201C}run\u{201D}, \u{201C}code\u{201D}: \u{201C}f(a=\"x\")\u{201D}} tail";
        let (v, end) = value_at(t, 0).expect("read");
        assert_eq!(v["name"], "run");
        assert_eq!(v["code"], "f(a=\"x\")");
        assert_eq!(&t[end..], " tail");
        assert!(value_at("{\u{201C}a\u{201D}: ", 0).is_none());
    }

    #[test]
    fn a_string_holding_unescaped_quotes_and_line_breaks_is_read_as_written() {
        let t = "{\"path\": \"a.html\", \"content\": \"<p class=\"x\">\n hi</p>\"} tail";
        let (v, end) = value_at(t, 0).expect("read");
        assert_eq!(v["content"], "<p class=\"x\">\n hi</p>");
        assert_eq!(&t[end..], " tail");
        // A quote before a word that cannot follow a string is no closer; where every
        // reading fails, nothing is read.
        assert!(value_at("{\"a\": \"b\" c", 0).is_none());
        assert!(value_at("{\"a\": \"line\nbreak", 0).is_none());
    }

    #[test]
    fn pythons_spelling_and_trailing_commas_are_read() {
        let (v, end) = value_at("{'name': 'f', 'arguments': {'q': True}} tail", 0).expect("read");
        assert_eq!(v["arguments"]["q"], true);
        assert_eq!(end, "{'name': 'f', 'arguments': {'q': True}}".len());
        let (v, _) = value_at("{\"a\": 1,}", 0).expect("read");
        assert_eq!(v["a"], 1);
        assert!(value_at("{'a': ", 0).is_none());
    }

    #[test]
    fn a_string_holding_unescaped_json_is_that_json() {
        let t = r#"{"tool": "search", "arguments": "{"query": "a b"}"} tail"#;
        let (v, end) = value_at(t, 0).expect("read");
        assert_eq!(v["arguments"]["query"], "a b");
        assert_eq!(&t[end..], " tail");
        // A string that only starts like one stays refused.
        assert!(value_at(r#"{"a": "{"b" c}"}"#, 0).is_none());
    }

    #[test]
    fn doubled_braces_are_a_template_s_escape() {
        let t = r#"{{"name": "f", "arguments": {{"q": "{{x}}"}}}} tail"#;
        let (v, end) = value_at(t, 0).expect("read");
        assert_eq!(v["arguments"]["q"], "{{x}}");
        assert_eq!(&t[end..], " tail");
        assert!(value_at("{{x}}", 0).is_none());
    }

    #[test]
    fn a_backslash_that_escapes_nothing_is_itself() {
        let t = r#"{"code": "dir %USERPROFILE%\Pictures", "n": "a\"b"} tail"#;
        let (v, end) = value_at(t, 0).expect("read");
        assert_eq!(v["code"], r"dir %USERPROFILE%\Pictures");
        assert_eq!(v["n"], "a\"b");
        assert_eq!(&t[end..], " tail");
        assert!(value_at(r#"{"a": "x\"#, 0).is_none());
        // On a later line too (serde_json's line and column say where it stopped).
        let t = "{\n  \"a\": 1,\n  \"p\": \"C:\\Users\\me\"\n}";
        let (v, _) = value_at(t, 0).expect("read");
        assert_eq!(v["p"], r"C:\Users\me");
        // A raw path's `\b` is a backslash too; a Python-escaped quote is the quote.
        let t = r#"{"p": "D:\code\bishe\x.md", "q": "ILIKE \'%a%\'"} tail"#;
        let (v, end) = value_at(t, 0).expect("read");
        assert_eq!(v["p"], r"D:\code\bishe\x.md");
        assert_eq!(v["q"], "ILIKE '%a%'");
        assert_eq!(&t[end..], " tail");
    }
}
