//! What is open at the end of the lines of a window: the stream cuts a reply only where
//! nothing that a later line could turn into a call is still open.
//!
//! May depend on: `code` (fence markers), `crate::grammar` (numbered placeholders), `memchr`.

use crate::code;

/// Most elements a window tracks open at once; past that it counts as open until the
/// reply ends (a reply does not nest markup that deep).
const MAX_OPEN_TAGS: usize = 32;

/// Whether a `{` after `before` opens a block of code, which no format's call is: after
/// `)` or `=>` (`main() {`, `() => {`), or after a word and a space that is not an enabled tool's
/// name (`} else {`, `class Car {`). Every format puts a call's `{` after a tool's name, a
/// token, a tag, a separator or nothing.
fn opens_a_block(before: &[u8], tools: &[String]) -> bool {
    let t = before.trim_ascii_end();
    if t.ends_with(b")") || t.ends_with(b"=>") {
        return true;
    }
    if t.len() == before.len() {
        return false;
    }
    let word_start = t
        .iter()
        .rposition(|b| !(b.is_ascii_alphanumeric() || *b == b'_'))
        .map_or(0, |p| p + 1);
    let word = &t[word_start..];
    !word.is_empty()
        && word[0].is_ascii_alphabetic()
        && !word.eq_ignore_ascii_case(b"json")
        && !tools.iter().any(|n| n.as_bytes() == word)
}

/// Words that make an element's name call markup: the formats' wrappers, calls, their
/// parameters and their answers (`<tool_call>`, `<function=..>`, `<invoke>`,
/// `<parameter>`, `<arg_key>`, `<tool_response>`, `<｜DSML｜function_calls>`, ...).
const CALL_WORDS: &[&[u8]] = &[
    b"tool",
    b"call",
    b"func",
    b"invoke",
    b"param",
    b"arg",
    b"result",
    b"response",
    b"output",
    b"observation",
    b"action",
];

/// Whether an element so named can be part of a call: its name holds a call word or an
/// enabled tool's name. Other elements (`<b>`, `<div>`, `#include <vector>`, `<think>`)
/// open nothing a later line could turn into a call; detection of the window still reads
/// them.
fn call_markup(name: &[u8], tools: &[String]) -> bool {
    let lower = name.to_ascii_lowercase();
    let holds = |w: &[u8]| !w.is_empty() && lower.windows(w.len()).any(|x| x == w);
    CALL_WORDS.iter().any(|w| holds(w))
        || tools
            .iter()
            .any(|t| holds(&t.as_bytes().to_ascii_lowercase()))
}

/// What is open at the end of the lines read: brackets (a `(` only after a name, as a
/// call opens it; quotes inside brackets skipped), call markup (an element whose `>` has
/// not come yet, or one named as call markup or with a `name` attribute that has not been
/// closed), special tokens, and fenced code (whose content is not read).
#[derive(Debug, Clone, Default)]
pub(super) struct Open {
    curly: u32,
    /// Code blocks opened by `) {`, which keep nothing open but must close their `}`.
    blocks: u32,
    square: u32,
    paren: u32,
    tags: Vec<Box<[u8]>>,
    too_deep: bool,
    /// Inside a tag: its name, whether it is a closer, and whether it has a `name`
    /// attribute.
    in_tag: Option<(Box<[u8]>, bool, bool)>,
    pub(super) fence: Option<(u8, usize)>,
    /// Inside a fenced block that no leak can start in or take: opened with nothing else
    /// open, and not ```` ```json ```` (the one fence a family reads as a call).
    pub(super) code: Option<(u8, usize)>,
    /// An opener (`{`, `[`, `<`, `(`) was read since the window began: without one, no
    /// detector's marker is in the window (each holds one of them, or is a command line
    /// whose first word names the tool, which `leads_in` holds back).
    pub(super) anchors: bool,
    /// A special token (`<|python_tag|>`, `<｜tool▁sep｜>`) was read: its pairs are the
    /// formats' own, so the window stays open to the end of the reply.
    token: bool,
}

impl Open {
    /// What stays open across a cut: only a fenced block no leak can be in.
    pub(super) fn after_cut(&self) -> Open {
        Open {
            code: self.code,
            ..Open::default()
        }
    }

    /// Whether nothing is open.
    pub(super) fn is_closed(&self) -> bool {
        self.curly == 0
            && self.square == 0
            && self.paren == 0
            && self.tags.is_empty()
            && !self.too_deep
            && self.in_tag.is_none()
            && self.fence.is_none()
            && !self.token
            && self.code.is_none()
    }

    pub(super) fn read_line(&mut self, line: &[u8], tools: &[String]) {
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        let marker = code::fence_marker(body);
        if let Some((och, olen)) = self.code {
            if marker.is_some_and(|(ch, len, rest)| ch == och && len >= olen && code::closes(rest))
            {
                self.code = None;
            }
            return;
        }
        if let Some((ch, len, rest)) = marker {
            match self.fence {
                None if self.is_closed() && !is_call_info(rest) => {
                    self.code = Some((ch, len));
                    return;
                }
                None if self.in_tag.is_none() => {
                    // Its content is not read; detection of the window will read it.
                    self.fence = Some((ch, len));
                    self.anchors = true;
                    return;
                }
                Some((och, olen)) if ch == och && len >= olen && code::closes(rest) => {
                    self.fence = None;
                    return;
                }
                _ => {}
            }
        }
        if self.fence.is_some() {
            return;
        }
        let mut quote: Option<u8> = None;
        let mut i = 0;
        // Where the next `{`/`[`/`<` and the next `(` were found, each searched again only
        // once passed (`None`: not searched yet; `Some(len)`: none left).
        let (mut next3, mut next_paren): (Option<usize>, Option<usize>) = (None, None);
        let find = |from: usize, f: &dyn Fn(&[u8]) -> Option<usize>| {
            f(&body[from..]).map_or(body.len(), |n| from + n)
        };
        while i < body.len() {
            if quote.is_none()
                && self.in_tag.is_none()
                && self.curly + self.square + self.paren == 0
            {
                // Nothing open: only an opener matters, and prose has few; skip to the next.
                if next3.is_none_or(|n| n < i) {
                    next3 = Some(find(i, &|r| memchr::memchr3(b'{', b'[', b'<', r)));
                }
                if next_paren.is_none_or(|n| n < i) {
                    next_paren = Some(find(i, &|r| memchr::memchr(b'(', r)));
                }
                let next = next3
                    .unwrap_or(body.len())
                    .min(next_paren.unwrap_or(body.len()));
                if next >= body.len() {
                    break;
                }
                i = next;
                self.anchors = true;
            }
            let b = body[i];
            if let Some((_, _, named)) = &mut self.in_tag {
                if b == b'=' && i >= 4 && body[i - 4..i].eq_ignore_ascii_case(b"name") {
                    *named = true;
                }
                if b == b'>' {
                    self.end_tag(i > 0 && body[i - 1] == b'/', tools);
                }
                i += 1;
                continue;
            }
            if let Some(q) = quote {
                if b == b'\\' {
                    i += 2;
                    continue;
                }
                if b == q {
                    quote = None;
                }
                i += 1;
                continue;
            }
            let depth = self.curly + self.square + self.paren;
            match b {
                b'"' if depth > 0 => quote = Some(b),
                b'\'' if depth > 0 && !(i > 0 && body[i - 1].is_ascii_alphanumeric()) => {
                    quote = Some(b)
                }
                // A block of code (`main() {`, `} else {`) is no call's body.
                b'{' if opens_a_block(&body[..i], tools) => self.blocks += 1,
                b'}' if self.blocks > 0 && self.curly == 0 => self.blocks -= 1,
                b'{' => self.curly += 1,
                b'}' => self.curly = self.curly.saturating_sub(1),
                // TeX's display math (`\[ .. \]`) is no list.
                b'[' | b']' if i > 0 && body[i - 1] == b'\\' => {}
                b'[' => match bracket_tag(body, i) {
                    Some((name, closer, next)) => {
                        self.in_tag = Some((name.into(), closer, false));
                        self.end_tag(false, tools);
                        i = next;
                        continue;
                    }
                    None => self.square += 1,
                },
                b']' => self.square = self.square.saturating_sub(1),
                b'(' if i > 0 && is_name_byte(body[i - 1]) => self.paren += 1,
                b')' => self.paren = self.paren.saturating_sub(1),
                b'<' => {
                    if let Some((name, closer, next)) = tag_start(body, i) {
                        self.in_tag = Some((name.into(), closer, false));
                        i = next;
                        continue;
                    }
                }
                _ => {}
            }
            i += 1;
        }
        // A tag left without its `>` at the line's end holds the window only when it may
        // be call markup (an opener that lost its `>`); `i<j` in prose is no tag.
        if self
            .in_tag
            .as_ref()
            .is_some_and(|(name, _, named)| !named && !call_markup(name, tools))
        {
            self.in_tag = None;
        }
    }

    /// The `>` of the tag being read: `self_closing` when `/` stands before it.
    fn end_tag(&mut self, self_closing: bool, tools: &[String]) {
        let Some((name, closer, named)) = self.in_tag.take() else {
            return;
        };
        // A decoder's numbered placeholder for a special token (`[UNUSED_TOKEN_144]`) is
        // one, whatever brackets it was printed in.
        let placeholder = || {
            std::str::from_utf8(&name).is_ok_and(|n| {
                crate::grammar::keys::is_placeholder_key(&crate::grammar::markup::fold(n))
            })
        };
        let token =
            name.first().is_some_and(|&b| is_bar_start(b)) && ends_with_bar(&name) || placeholder();
        self.token |= token;
        if closer {
            if let Some(at) = self
                .tags
                .iter()
                .rposition(|t| t.eq_ignore_ascii_case(&name))
            {
                self.tags.truncate(at);
            }
        } else if !self_closing && !token && (named || call_markup(&name, tools)) {
            if self.tags.len() >= MAX_OPEN_TAGS {
                self.too_deep = true;
            } else {
                self.tags.push(name);
            }
        }
    }
}

/// Whether a fence's info string may make it a call or a tool's answer: ```` ```json ````
/// (`json_fence`), ```` ```tool_code ```` (`named`), ```` ```tool_output ```` (a result
/// frame), and, to be safe with the next format, any info naming a tool, a function or a
/// call.
fn is_call_info(rest: &[u8]) -> bool {
    let info = rest.trim_ascii();
    info.eq_ignore_ascii_case(b"json") || crate::grammar::keys::names_call_markup(info)
}

/// A bracket tag at `body[at] == b'['`: `[TOOL_CALL]`, `[/TOOL_CALL]` (an upper-case
/// name of two or more characters): its name, whether it is a closer, and where it ends.
fn bracket_tag(body: &[u8], at: usize) -> Option<(&[u8], bool, usize)> {
    let mut i = at + 1;
    let closer = body.get(i) == Some(&b'/');
    if closer {
        i += 1;
    }
    let start = i;
    while body
        .get(i)
        .is_some_and(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || *b == b'_')
    {
        i += 1;
    }
    let name = &body[start..i];
    let upper = name.first().is_some_and(u8::is_ascii_uppercase);
    (upper && name.len() >= 2 && body.get(i) == Some(&b']')).then_some((name, closer, i + 1))
}

/// A name's bytes, as far as a `(` after it makes a call: ASCII word characters, `.`, and
/// any non-ASCII byte (names in other scripts).
pub(super) fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b >= 0x80
}

/// The bars that open and close special tokens: `|`, and the first byte of `｜` (U+FF5C).
fn is_bar_start(b: u8) -> bool {
    b == b'|' || b == 0xEF
}

fn ends_with_bar(name: &[u8]) -> bool {
    name.ends_with(b"|") || name.ends_with("｜".as_bytes())
}

/// A tag starting at `body[at] == b'<'`: its name, whether it is a closer, and where its
/// name ends. A name starts with a letter or a bar, runs to a space, `>`, `/` or `=`, and
/// must be followed by one of them or by the end of the line; `<https://..>`, `a<b`, `<3`
/// and `<a@b.c>` are not tags.
fn tag_start(body: &[u8], at: usize) -> Option<(&[u8], bool, usize)> {
    let mut i = at + 1;
    // `< tool_call>`: one space after the `<`, read (as the markup lexer does) only before
    // a name of call markup, so that `a < b` in prose opens nothing.
    let spaced = body.get(i) == Some(&b' ');
    i += usize::from(spaced);
    let closer = body.get(i) == Some(&b'/');
    if closer {
        i += 1;
    }
    let first = *body.get(i)?;
    if !(first.is_ascii_alphabetic() || first == b'|' || first >= 0x80) {
        return None;
    }
    let start = i;
    while let Some(&b) = body.get(i) {
        let name_byte =
            b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b':' | b'.' | b'|') || b >= 0x80;
        if !name_byte {
            break;
        }
        i += 1;
    }
    match body.get(i) {
        None | Some(b' ' | b'\t' | b'\r' | b'>' | b'=') => {}
        Some(b'/') if body.get(i + 1) == Some(&b'>') => {}
        Some(_) => return None,
    }
    let name = &body[start..i];
    let call_word = |w: &[u8]| name.windows(w.len()).any(|x| x.eq_ignore_ascii_case(w));
    if spaced
        && ![&b"call"[..], b"tool", b"func", b"invoke"]
            .iter()
            .any(|w| call_word(w))
    {
        return None;
    }
    Some((name, closer, i))
}
