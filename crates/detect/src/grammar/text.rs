//! Scanning helpers every grammar and the format engine share: literal search from a
//! position, whitespace, a forward-only finder that keeps repeated searches linear, and
//! the XML-ish attribute reader. Pure functions on `&str`; nothing here knows a format.
//!
//! May depend on: `memchr`. Nothing else in the crate.

/// Byte offset of the first `needle` at or after `from`.
pub fn find_from(text: &str, needle: &str, from: usize) -> Option<usize> {
    let hay = text.as_bytes().get(from..)?;
    memchr::memmem::find(hay, needle.as_bytes()).map(|i| from + i)
}

/// First `needle` in `text[from..limit]`.
pub fn find_bounded(text: &str, needle: &str, from: usize, limit: usize) -> Option<usize> {
    let hay = text.as_bytes().get(from..limit.min(text.len()))?;
    memchr::memmem::find(hay, needle.as_bytes()).map(|i| from + i)
}

/// The largest char boundary of `s` at most `n` (`str::floor_char_boundary`, which the
/// crate's rust-version predates).
pub fn floor_char(s: &str, n: usize) -> usize {
    let mut n = n.min(s.len());
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    n
}

/// Offset of the first non-whitespace byte at or after `pos` (or the length).
pub fn skip_ws(text: &str, pos: usize) -> usize {
    let bytes = text.as_bytes();
    let mut i = pos;
    while i < bytes.len() && bytes[i].is_ascii_whitespace() {
        i += 1;
    }
    i.max(pos.min(bytes.len()))
}

/// The length of a person's elision at `pos` (`...` or longer, `…`, as a bug report shortens
/// a paste), when one stands there on its own: whitespace, a tag or the end after it.
pub fn elision_at(text: &str, pos: usize) -> Option<usize> {
    let rest = text.get(pos..)?;
    let len = rest.len() - rest.trim_start_matches(['.', '\u{2026}']).len();
    let dots = rest[..len].chars().count();
    let ok = (rest.starts_with('\u{2026}') || dots >= 3)
        && rest[len..]
            .chars()
            .next()
            .is_none_or(|c| c.is_whitespace() || c == '<');
    ok.then_some(len)
}

/// Whether `s` ends in a person's elision (`...`, `…`), whitespace aside.
pub fn ends_in_elision(s: &str) -> bool {
    ends_with_elision(s.trim_end())
}

/// Whether `s`'s last characters are a person's elision (`...`, `…`).
pub fn ends_with_elision(s: &str) -> bool {
    s.ends_with("...") || s.ends_with('\u{2026}')
}

/// Whether only whitespace follows `pos`.
pub fn rest_is_blank(text: &str, pos: usize) -> bool {
    text.get(pos..).is_some_and(|r| r.trim().is_empty())
}

/// Where a closing tag or special token starts that the end of the text cut short
/// (`</｜DS`, `</inv`, `<|tool_call_e`): generation, or a paste, stopped while a closer was
/// being written. Nothing in a closer's name is whitespace or `>`, so a tail holding either
/// is text, not a cut closer; but a special token between bars may be spelled with spaces
/// (`<|tool calls end|>`, DeepSeek's `▁` read as a space), so a barred one may hold them.
pub fn cut_tag_start(text: &str) -> Option<usize> {
    let t = text.trim_end();
    let start = floor_char(t, t.len().saturating_sub(48));
    let lt = start + t[start..].rfind('<')?;
    let tail = &t[lt..];
    let barred = tail[1..].starts_with(['|', '\u{ff5c}']);
    let opens_closer = barred || tail[1..].starts_with('/');
    let spaced = |c: char| c.is_whitespace() && !(barred && c == ' ');
    let cut = tail.len() >= 2 && !tail.contains(|c: char| spaced(c) || c == '>');
    // A barred token's closing bar comes last: after it only its `>` may (`<|a|b` is text).
    let bar = |c: char| c == '|' || c == '\u{ff5c}';
    let name = tail[1..].trim_start_matches(bar);
    let closed_early = barred && name.trim_end_matches(bar).contains(bar);
    (opens_closer && cut && !closed_early).then_some(lt)
}

/// Whether only whitespace, then maybe a closer the end of the text cut short
/// ([`cut_tag_start`]), follows `pos`: nothing more was written after a call there.
pub fn rest_is_blank_or_cut(text: &str, pos: usize) -> bool {
    rest_is_blank(text, pos) || cut_tag_start(text).is_some_and(|c| rest_is_blank(&text[..c], pos))
}

/// Where the reply starts past a front end's glyph that opens it and the space after it
/// (`⏺ `, `● `, `➜ `): a terminal's or chat window's mark a bug report pasted with the
/// reply. A symbol (arrows, technical signs, shapes, dingbats, emoji), never a letter,
/// digit or punctuation of prose.
pub fn front_glyph(text: &str) -> Option<usize> {
    let lead = text.len() - text.trim_start().len();
    let mut chars = text[lead..].chars();
    let c = chars.next().filter(|&c| is_front_glyph(c))?;
    (chars.next() == Some(' ')).then_some(lead + c.len_utf8() + 1)
}

/// Whether `c` is a symbol a front end marks a reply with: arrows, technical signs, shapes,
/// dingbats, emoji, a bullet.
pub fn is_front_glyph(c: char) -> bool {
    matches!(
        c as u32,
        0x2022 | 0x2023 | 0x2043
            | 0x2190..=0x21FF
            | 0x2300..=0x23FF
            | 0x25A0..=0x25FF
            | 0x2600..=0x27BF
            | 0x2B00..=0x2BFF
            | 0x1F300..=0x1FAFF
    )
}

/// Whether `text` has `lit` at `pos`.
pub fn at_lit(text: &str, pos: usize, lit: &str) -> bool {
    text.as_bytes()
        .get(pos..)
        .is_some_and(|r| r.starts_with(lit.as_bytes()))
}

/// `pos + lit.len()` when `lit` occurs at `pos`.
pub fn eat(text: &str, pos: usize, lit: &str) -> Option<usize> {
    at_lit(text, pos, lit).then(|| pos + lit.len())
}

/// The first of `lits` found at `pos`, and the offset past it (and past a `>` written twice
/// at a tag's end, `<tool_call>>`, a tokenizer's stray: [`past_doubled_gt`]).
pub fn eat_any(text: &str, pos: usize, lits: &[&str]) -> Option<usize> {
    lits.iter()
        .find_map(|l| eat(text, pos, l).map(|e| past_doubled_gt(text, e, l)))
}

/// Past a second `>` right after `lit`, a tag that ended at `end`: `<tool_call>>` is the tag
/// with a stray `>`, not the tag and text.
pub fn past_doubled_gt(text: &str, end: usize, lit: &str) -> usize {
    let doubled = lit.ends_with('>') && text.as_bytes().get(end) == Some(&b'>');
    end + usize::from(doubled)
}

/// How far back over whitespace [`preceded_by`] looks.
const WS_LOOKBACK: usize = 256;

/// When `tag` ends right before `pos` (whitespace between allowed), its start.
pub fn preceded_by(text: &str, pos: usize, tag: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut i = pos.min(bytes.len());
    let floor = pos.saturating_sub(WS_LOOKBACK);
    while i > floor && bytes[i - 1].is_ascii_whitespace() {
        i -= 1;
    }
    let start = i.checked_sub(tag.len())?;
    (bytes.get(start..i)? == tag.as_bytes()).then_some(start)
}

/// Finds the next `needle` at or after a position, remembering the last answer so that a
/// sequence of searches from increasing positions costs one pass over the text.
pub struct Finder<'t> {
    text: &'t str,
    needle: &'t str,
    /// `(from, answer)` of the last search.
    last: Option<(usize, Option<usize>)>,
}

impl<'t> Finder<'t> {
    /// A finder of `needle` in `text`.
    pub fn new(text: &'t str, needle: &'t str) -> Finder<'t> {
        Finder {
            text,
            needle,
            last: None,
        }
    }

    /// The first `needle` at or after `from`.
    pub fn find(&mut self, from: usize) -> Option<usize> {
        if let Some((f, ans)) = self.last {
            if from >= f {
                match ans {
                    None => return None,
                    Some(p) if p >= from => return Some(p),
                    Some(_) => {}
                }
            }
        }
        let ans = find_from(self.text, self.needle, from);
        self.last = Some((from, ans));
        ans
    }
}

/// [`Finder`] over several needles: the earliest of them at or after a position.
pub struct AnyFinder<'t> {
    finders: Vec<Finder<'t>>,
}

impl<'t> AnyFinder<'t> {
    /// A finder of any of `needles` in `text`.
    pub fn new(text: &'t str, needles: &[&'t str]) -> AnyFinder<'t> {
        AnyFinder {
            finders: needles.iter().map(|n| Finder::new(text, n)).collect(),
        }
    }

    /// The earliest needle at or after `from`: its offset and its length.
    pub fn find(&mut self, from: usize) -> Option<(usize, usize)> {
        self.finders
            .iter_mut()
            .filter_map(|f| f.find(from).map(|p| (p, f.needle.len())))
            .min_by_key(|&(p, len)| (p, usize::MAX - len))
    }
}

/// The value of attribute `name` in an XML-ish start tag body such as
/// `invoke name="get_weather"` (double or single quotes).
pub fn attr<'t>(tag: &'t str, name: &str) -> Option<&'t str> {
    let mut from = 0;
    while let Some(i) = find_from(tag, name, from) {
        from = i + name.len();
        let before_ok = i == 0 || tag.as_bytes()[i - 1].is_ascii_whitespace();
        let rest = tag.get(from..)?.trim_start();
        if before_ok {
            if let Some(r) = rest.strip_prefix('=') {
                let r = r.trim_start();
                let q = r.chars().next()?;
                if q == '"' || q == '\'' {
                    let body = &r[1..];
                    let end = body.find(q)?;
                    return Some(&body[..end]);
                }
            }
        }
    }
    None
}

/// Unescapes the XML entities `&amp; &lt; &gt; &quot; &apos;` and numeric references.
pub fn unescape_xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(rest.get(..i).unwrap_or_default());
        let tail = rest.get(i..).unwrap_or_default();
        let entity = tail.find(';').filter(|&j| j <= 10).and_then(|j| {
            let name = tail.get(1..j)?;
            let c = match name {
                "amp" => '&',
                "lt" => '<',
                "gt" => '>',
                "quot" => '"',
                "apos" => '\'',
                _ => {
                    let n = name.strip_prefix('#')?;
                    let code = match n.strip_prefix(['x', 'X']) {
                        Some(h) => u32::from_str_radix(h, 16).ok()?,
                        None => n.parse().ok()?,
                    };
                    char::from_u32(code)?
                }
            };
            Some((c, j + 1))
        });
        match entity {
            Some((c, len)) => {
                out.push(c);
                rest = tail.get(len..).unwrap_or_default();
            }
            None => {
                out.push('&');
                rest = tail.get(1..).unwrap_or_default();
            }
        }
    }
    out.push_str(rest);
    out
}

/// A value without the one line break its markup puts on each side of it (`\n` or `\r\n`):
/// `<parameter=k>\nv\n</parameter>` holds `v`.
pub fn trim_one_newline(s: &str) -> &str {
    let s = s
        .strip_prefix("\r\n")
        .or_else(|| s.strip_prefix('\n'))
        .unwrap_or(s);
    s.strip_suffix("\r\n")
        .or_else(|| s.strip_suffix('\n'))
        .unwrap_or(s)
}

/// A value written on lines of its own inside indented markup (`<p>\n  v\n  </p>`): the
/// indent its first line shares with the closer's line is the markup's, not the value's.
/// (A first line indented deeper than the closer is the value's own: code.)
fn indent_trimmed(raw: &str) -> &str {
    let Some(rest) = raw.strip_prefix('\n').or_else(|| raw.strip_prefix("\r\n")) else {
        return raw;
    };
    let lead = &rest[..rest.len() - rest.trim_start_matches([' ', '\t']).len()];
    let body = rest.trim_end_matches([' ', '\t']);
    let tail = &rest[body.len()..];
    match !lead.is_empty() && lead == tail && body.ends_with('\n') {
        true => body[lead.len()..].trim_end_matches(['\n', '\r']),
        false => raw,
    }
}

/// A parameter's value as written between its tags: one line break after the opener and
/// one before the closer are the markup's ([`trim_one_newline`]), and so is the indent
/// of indented markup, and the spaces around a value padded on both sides on one line.
pub fn value_lines(raw: &str) -> &str {
    // All on one line between its tags (`<parameter=k> v </parameter>`): the spaces on
    // both sides stand where the line breaks do in the usual layout.
    let padded = |c: Option<char>| matches!(c, Some(' ' | '\t'));
    if !raw.contains('\n') && padded(raw.chars().next()) && padded(raw.chars().next_back()) {
        return raw.trim_matches([' ', '\t']);
    }
    trim_one_newline(indent_trimmed(raw))
}

/// Whether the last line with words before `p` (or the text before it on its
/// own line) says what follows is an example.
pub fn after_example(text: &str, p: usize) -> bool {
    let head = text[..p].trim_end();
    let line = &head[head.rfind('\n').map_or(0, |i| i + 1)..];
    let line = line.to_lowercase();
    [
        "example",
        "for instance",
        "e.g.",
        "示例",
        "例如",
        "比如",
        "例子",
    ]
    .iter()
    .any(|w| line.contains(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closer_the_end_cut_short_is_found_and_text_is_not() {
        let t = "<p>v</p>\n</｜DS";
        assert_eq!(cut_tag_start(t), Some(t.len() - "</｜DS".len()));
        assert_eq!(cut_tag_start("x</inv \n"), Some(1));
        assert_eq!(cut_tag_start("{..}<|tool_call_e"), Some(4));
        assert_eq!(cut_tag_start("x</"), Some(1));
        assert_eq!(cut_tag_start("x<|tool calls e"), Some(1));
        // A whole tag, a `<` in prose, a word after the `<`, a tail with a space: text.
        for t in ["a</b>", "if a < b", "a <b", "x </a b", "x <"] {
            assert_eq!(cut_tag_start(t), None, "{t}");
        }
        assert!(rest_is_blank_or_cut("a</p>\n</inv", 5));
        assert!(!rest_is_blank_or_cut("a</p> and</inv", 5));
    }

    #[test]
    fn a_tag_s_doubled_end_is_the_tag_s() {
        assert_eq!(eat_any("<t>>x", 0, &["<t>"]), Some(4));
        assert_eq!(eat_any("<t>x", 0, &["<t>"]), Some(3));
        // Only after a literal that ends a tag.
        assert_eq!(eat_any("ab>", 0, &["ab"]), Some(2));
    }

    #[test]
    fn the_indent_a_value_shares_with_its_closer_is_the_markups() {
        assert_eq!(value_lines("\n  a.txt\n  "), "a.txt");
        assert_eq!(value_lines("\nplain\n"), "plain");
        // Code indented deeper than the closer keeps its indent.
        assert_eq!(value_lines("\n    return x\n"), "    return x");
        assert_eq!(value_lines(" ls -la "), "ls -la");
        assert_eq!(value_lines(" leading only"), " leading only");
    }

    #[test]
    fn attr_reads_quoted_values() {
        assert_eq!(
            attr(r#"invoke name="get_weather""#, "name"),
            Some("get_weather")
        );
        assert_eq!(attr("invoke name='x'", "name"), Some("x"));
        assert_eq!(attr(r#"invoke rename="x""#, "name"), None);
    }

    #[test]
    fn any_finder_prefers_the_earliest_then_the_longest() {
        let t = "a <x> <xy> <x>";
        let mut f = AnyFinder::new(t, &["<x>", "<xy>"]);
        assert_eq!(f.find(0), Some((2, 3)));
        assert_eq!(f.find(3), Some((6, 4)));
        assert_eq!(f.find(7), Some((11, 3)));
        assert_eq!(f.find(12), None);
    }

    #[test]
    fn entities_are_unescaped() {
        assert_eq!(
            unescape_xml("a&amp;b&lt;&#65;&#x42;&bogus;"),
            "a&b<AB&bogus;"
        );
    }
}
