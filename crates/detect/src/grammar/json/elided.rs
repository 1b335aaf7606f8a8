//! JSON with a person's elisions in it: a bug report's paste shortens a long call with `...`
//! or `…` where a member, an element or a value stood (`{"command": "ls", ...}`,
//! `"content": ...`), or stops the paste mid-string with one (`{"result": "I have
//! implemented...`). The elision is no part of the call; what stands around it is. A member
//! or element elided is left out, a value elided is the string `"..."`, and a paste that
//! stops in an elision is closed there: its string, then its open objects and lists.
//! An object or list of nothing but an elision (`{...}`) is a template's placeholder, not
//! a paste shortened: unread.
//! A text that merely stops (no elision at its end) stays unread: a call cut by the token
//! limit is not the call the model meant.
//!
//! May depend on: `crate::grammar::text`, `serde_json`. No I/O.

use crate::grammar::text::ends_with_elision;
use serde_json::Value;

/// Whether `s` holds an elision mark.
pub(super) fn has_mark(s: &str) -> bool {
    s.contains("...") || s.contains('\u{2026}')
}

/// The value at the start of `head` read with its elisions mended, and the offset past it in
/// `head`. `whole`: `head` is all there is (the end of a message or of a string value), so
/// a paste that stops in an elision may be closed.
pub(super) fn read(head: &str, whole: bool) -> Option<(Value, usize)> {
    if !has_mark(head) || !head.starts_with(['{', '[']) {
        return None;
    }
    let mut fixed = String::with_capacity(head.len() + 16);
    // The offset in `head` each byte of `fixed` came from.
    let mut from: Vec<usize> = Vec::with_capacity(head.len() + 17);
    let mut open: Vec<char> = Vec::new();
    let (mut in_string, mut escaped, mut mended, mut skip_comma) = (false, false, false, false);
    // The last thing read was an elision: a member's, or one ending a string.
    let mut last_elided = false;
    let mut string_start = 0;
    let mut chars = head.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => {
                    in_string = false;
                    let content = &fixed[string_start + 1..];
                    last_elided = ends_with_elision(content);
                }
                _ => {}
            }
            push(&mut fixed, &mut from, c, i);
            continue;
        }
        let mark = match c {
            '.' if head[i..].starts_with("...") => {
                Some(head[i..].bytes().take_while(|&b| b == b'.').count())
            }
            '\u{2026}' => Some(c.len_utf8()),
            _ => None,
        };
        if let Some(len) = mark {
            while chars.peek().is_some_and(|&(j, _)| j < i + len) {
                chars.next();
            }
            mended = true;
            last_elided = true;
            match fixed.trim_end().chars().next_back() {
                Some(':') => {
                    for ch in ['"']
                        .into_iter()
                        .chain(head[i..i + len].chars())
                        .chain(['"'])
                    {
                        push(&mut fixed, &mut from, ch, i);
                    }
                }
                Some(',') => {
                    let keep = fixed.trim_end().len() - 1;
                    fixed.truncate(keep);
                    from.truncate(keep);
                }
                // `{...}` alone is a template's placeholder for any value, not a paste
                // shortened: nothing of the value is there.
                Some('{' | '[') if head[i + len..].trim_start().starts_with(['}', ']']) => {
                    return None
                }
                Some('{' | '[') => skip_comma = true,
                _ => return None,
            }
            continue;
        }
        match c {
            ',' if skip_comma => {
                skip_comma = false;
                continue;
            }
            '"' => {
                in_string = true;
                string_start = fixed.len();
            }
            '{' => open.push('}'),
            '[' => open.push(']'),
            // The guard pops the closer it matches.
            '}' | ']' if open.pop() != Some(c) => return None,
            _ => {}
        }
        if !c.is_whitespace() {
            skip_comma = false;
            last_elided = false;
        }
        push(&mut fixed, &mut from, c, i);
        if open.is_empty() {
            break;
        }
    }
    if !open.is_empty() {
        // The paste stopped inside the value: only in an elision, and only at the end.
        let tail = fixed.trim_end();
        let stopped_in_mark = match in_string {
            true => tail.len() > string_start && ends_with_elision(tail),
            false => last_elided && !tail.ends_with(':'),
        };
        if !whole || !stopped_in_mark {
            return None;
        }
        mended = true;
        let keep = tail.len();
        fixed.truncate(keep);
        from.truncate(keep);
        if in_string {
            push(&mut fixed, &mut from, '"', head.len());
        }
        if fixed.ends_with(',') {
            fixed.pop();
            from.pop();
        }
        while let Some(closer) = open.pop() {
            push(&mut fixed, &mut from, closer, head.len());
        }
    }
    if !mended {
        return None;
    }
    let mut stream = serde_json::Deserializer::from_str(&fixed).into_iter::<Value>();
    let v = stream.next()?.ok()?;
    let end = stream.byte_offset();
    let last = *from.get(end.checked_sub(1)?)?;
    let len = head.get(last..)?.chars().next().map_or(0, char::len_utf8);
    Some((v, last + len))
}

fn push(fixed: &mut String, from: &mut Vec<usize>, c: char, i: usize) {
    from.extend(std::iter::repeat_n(i, c.len_utf8()));
    fixed.push(c);
}

#[cfg(test)]
mod tests {
    use super::read;
    use serde_json::json;

    fn value(s: &str, whole: bool) -> Option<serde_json::Value> {
        read(s, whole).map(|(v, _)| v)
    }

    #[test]
    fn an_elided_member_element_or_value_is_left_out_or_kept_as_written() {
        let s = r#"{"command": "glob **/x/**", ...} then prose"#;
        let (v, end) = read(s, false).expect("read");
        assert_eq!(v, json!({"command": "glob **/x/**"}));
        assert_eq!(&s[end..], " then prose");
        assert_eq!(value(r#"{..., "a": 1}"#, false), Some(json!({"a": 1})));
        assert_eq!(value("[1, 2, \u{2026}]", false), Some(json!([1, 2])));
        assert_eq!(
            value(r#"{"a": ..., "b": 2}"#, false),
            Some(json!({"a": "...", "b": 2}))
        );
    }

    #[test]
    fn a_paste_that_stops_in_an_elision_is_closed_there() {
        let s = r#"{"name": "f", "arguments": {"result": "I have implemented..."#;
        let v = value(s, true);
        assert_eq!(
            v,
            Some(json!({"name": "f", "arguments": {"result": "I have implemented..."}}))
        );
        assert_eq!(
            value(r#"{"name": "f", "arguments": {"a": 1, ..."#, true),
            Some(json!({"name": "f", "arguments": {"a": 1}}))
        );
        // Not at the end of what there is: not closed.
        assert_eq!(value(s, false), None);
    }

    #[test]
    fn a_cut_without_an_elision_or_dots_in_prose_stay_unread() {
        assert_eq!(
            value(
                r#"{"name": "f", "arguments": {"result": "I have implem"#,
                true
            ),
            None
        );
        assert_eq!(value(r#"{"a": "x"} and so on..."#, true), None);
        assert_eq!(value(r#"{"a": 1 ... }"#, true), None);
        assert_eq!(value(r#"{"a": "wait..."}"#, true), None);
        assert_eq!(value(r#"{"name": "f", "arguments": {...}}"#, true), None);
    }
}
