//! Streaming detection: a reply read delta by delta, shown as soon as what is shown can no
//! longer turn out to be part of a leak, and at the end the same [`Detection`] as the
//! one-shot [`crate::detect`].
//!
//! How it decides what is safe. The reply is cut only at line ends, into *windows*: the
//! text since the last cut. A window is cut off (its text becomes final and is shown) when
//! 1. nothing opened in it is still open ([`Open`]: brackets, tags, fenced code), and its
//!    inline code spans are closed (`code::closed`), so that what follows it starts at
//!    top level, as it would in the whole reply;
//! 2. its last line holds no marker of a leak and does not name an enabled tool at an end,
//!    since a later line may complete what such a line starts (`Action: save_memory` then
//!    `Action Input: {..}`, a wrapper token alone on its line, ...);
//! 3. detection of the window alone finds nothing (a window with no marker at all costs
//!    that one scan).
//!
//! Once a window holds a leak, the rest of the reply waits for [`Stream::finish`], which
//! runs the one-shot detection over the whole reply and returns what was not shown. Text
//! shown is never taken back, so the trailing whitespace of what is shown is held (a
//! removal right after it may trim it), and so is everything of a reply that starts with
//! whitespace (the cleaned text of a reply with a leak is trimmed).
//!
//! Cost: each byte is read by the line tracker once, and by the windows' checks about
//! once; a check that fails (an inline code span still open) is retried only when the
//! window has doubled, so a reply costs a bounded multiple of its length, plus the one
//! detection at the end.
//!
//! May depend on: the crate root (`detect`, `might_leak`, `Input`), `code`, `config`,
//! `types`, and `families::harmony`'s channel words.

use crate::code;
use crate::families::harmony::CHANNELS;
use crate::{detect, might_leak, Config, Detection, Input};

/// One reply read as it arrives: [`Stream::push`] each delta and show what it returns,
/// then [`Stream::finish`] and show its `rest`.
///
/// ```
/// use toolcall_detect::{Config, Stream};
///
/// let mut stream = Stream::new(Config::default(), vec!["save_memory".into()]);
/// let mut shown = String::new();
/// for delta in ["Noted, I will rem", "ember that.\n<tool_call>{\"name\": \"save_memory\", ",
///               "\"arguments\": {\"content\": \"likes tea\"}}</tool_call>"] {
///     shown.push_str(stream.push(delta));
/// }
/// assert_eq!(shown, "Noted, I will remember that.");
/// let end = stream.finish();
/// shown.push_str(&end.rest);
/// assert_eq!(shown, "Noted, I will remember that.");
/// assert_eq!(end.detection.leaks[0].calls[0].name, "save_memory");
/// ```
#[derive(Debug, Clone)]
pub struct Stream {
    config: Config,
    enabled_tools: Vec<String>,
    text: String,
    /// Bytes of `text` returned by pushes so far.
    shown: usize,
    /// `text[..settled]` is final: no leak starts in it.
    settled: usize,
    /// `settled` less the whitespace it ends with: what may be shown.
    visible: usize,
    /// Where the next line to read starts.
    line_start: usize,
    /// What is open in the window `text[settled..line_start]`.
    open: Open,
    /// The window's expensive checks failed at this length: retry only past twice that.
    retry_at: usize,
    /// A leak was found, or the reply starts with whitespace: the rest waits for `finish`.
    waiting: bool,
}

/// What [`Stream::finish`] returns.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    /// The text no push returned: after everything the pushes returned, it completes the
    /// cleaned text (or the text as received, when nothing leaked).
    pub rest: String,
    /// The detection of the whole reply, equal to what [`crate::detect`] returns for it.
    pub detection: Detection,
}

impl Stream {
    /// A stream for one reply of an agent with these tools enabled.
    pub fn new(config: Config, enabled_tools: Vec<String>) -> Stream {
        Stream {
            config,
            enabled_tools,
            text: String::with_capacity(1024),
            shown: 0,
            settled: 0,
            visible: 0,
            line_start: 0,
            open: Open::default(),
            retry_at: 0,
            waiting: false,
        }
    }

    /// Takes the next delta; returns the text that is safe to show now (often empty).
    pub fn push(&mut self, delta: &str) -> &str {
        let read_from = self.text.len();
        self.text.push_str(delta);
        // Most deltas are a token or two: a plain look is cheaper than a SIMD search's setup.
        let has_line_end = match delta.len() < 64 {
            true => delta.as_bytes().contains(&b'\n'),
            false => memchr::memchr(b'\n', delta.as_bytes()).is_some(),
        };
        if self.waiting || !has_line_end {
            return "";
        }
        // Lines are read as they complete; the window is checked once per push, at the last
        // line end where nothing was open (or, if that check fails short of a leak, at the
        // one before it).
        let lines_end = memchr::memrchr(b'\n', self.text.as_bytes()).map_or(0, |i| i + 1);
        if role_glued_to_channel(&self.text[self.line_start..lines_end]) {
            // A Harmony output with its tokens stripped: a call anywhere later takes these
            // header words, wherever they stand.
            self.waiting = true;
            return "";
        }
        let mut at = read_from.max(self.line_start);
        let mut ends: [Option<usize>; 2] = [None, None];
        while let Some(nl) = memchr::memchr(b'\n', &self.text.as_bytes()[at..]) {
            let end = at + nl + 1;
            if self.read_line(end) {
                ends = [Some(end), ends[0]];
            } else if self.settled == end {
                ends = [None, None];
            }
            if self.waiting {
                return "";
            }
            at = end;
        }
        for end in ends.into_iter().flatten() {
            if end <= self.settled || end < self.retry_at {
                break;
            }
            if self.settles(end, false) {
                self.cut(end);
                self.reread(end);
                break;
            }
            if self.waiting {
                return "";
            }
        }
        let visible = self.visible;
        let from = self.shown;
        if visible <= from {
            return "";
        }
        self.shown = visible;
        &self.text[from..visible]
    }

    /// Bytes received and not shown yet.
    pub fn held(&self) -> usize {
        self.text.len() - self.shown
    }

    /// Ends the reply: the rest to show, and the detection of the whole reply.
    pub fn finish(self) -> Finished {
        let detection = detect(
            &Input {
                content: &self.text,
                tools_used: &[],
                enabled_tools: &self.enabled_tools,
            },
            &self.config,
        );
        let whole = detection.cleaned.as_deref().unwrap_or(&self.text);
        // What was shown is a prefix of `whole` (the module docs say why; the tests check
        // it on every corpus). Were it ever not, the rest after their common prefix is the
        // least wrong answer: nothing shown twice, nothing dropped past the mismatch.
        debug_assert!(whole.starts_with(&self.text[..self.shown]));
        let shown = &self.text[..self.shown];
        let common = match whole.starts_with(shown) {
            true => shown.len(),
            false => common_prefix(whole, shown),
        };
        let rest = whole.get(common..).unwrap_or_default().to_string();
        Finished { rest, detection }
    }

    /// Reads the line ending at `end` (just past its `\n`): cuts the window there when the
    /// line belongs to a fenced block no leak can be in; returns whether nothing is open
    /// at its end (a place to check the window).
    fn read_line(&mut self, end: usize) -> bool {
        let first = self.line_start == 0;
        let line = &self.text[self.line_start..end];
        self.line_start = end;
        if harmony_frame(line, first) {
            // As `role_glued_to_channel` in `push`.
            self.waiting = true;
            return false;
        }
        let in_code = self.open.code.is_some();
        self.open.read_line(line.as_bytes(), &self.enabled_tools);
        if in_code {
            // A line of a fenced block no leak can start in (or its closing line).
            self.cut(end);
            return false;
        }
        if self.open.code.is_some() {
            // The line opened such a block: it shows with what came before it, once that
            // settles (no line before a fence that is not ```json leads into a call).
            let line_start = end - line.len();
            let blank = self.text[self.settled..line_start].trim().is_empty();
            match blank || self.settles(line_start, true) {
                true => self.cut(end),
                false => self.open.fence = self.open.code.take(),
            }
            return false;
        }
        self.open.is_closed()
    }

    /// After a cut at `from`, reads again what came after it (lines that left something
    /// open), so that what is open describes the new window.
    fn reread(&mut self, from: usize) {
        if from < self.line_start {
            let lines = &self.text.as_bytes()[from..self.line_start];
            for line in lines.split_inclusive(|&b| b == b'\n') {
                self.open.read_line(line, &self.enabled_tools);
            }
        }
    }

    /// Whether the window `text[settled..end]` (up to a line end with nothing open) may be
    /// cut off and shown. Records a failed check that should wait for the window to
    /// double, and a leak (the rest then waits for `finish`). `fence_next`: a fenced block
    /// that is not ```` ```json ```` follows, so the last line leads into nothing.
    fn settles(&mut self, end: usize, fence_next: bool) -> bool {
        let window = &self.text[self.settled..end];
        if window.trim().is_empty() {
            return false;
        }
        if !code::closed(window) {
            self.retry_at = end + window.len();
            return false;
        }
        let last = last_line(window);
        if !fence_next && leads_in(last, &self.enabled_tools) {
            return false;
        }
        if !self.open.anchors || !might_leak(window) {
            return true;
        }
        if !fence_next && might_leak(last) {
            return false;
        }
        let d = detect(
            &Input {
                content: window,
                tools_used: &[],
                enabled_tools: &self.enabled_tools,
            },
            &self.config,
        );
        if !d.is_clean() {
            self.waiting = true;
        }
        d.is_clean()
    }

    fn cut(&mut self, end: usize) {
        self.settled = end;
        self.visible = self.text[..end].trim_end().len();
        self.open = Open {
            code: self.open.code,
            ..Open::default()
        };
        self.retry_at = 0;
    }
}

/// The last line of `window` that is not blank (`window` ends with a line break).
fn last_line(window: &str) -> &str {
    let t = window.trim_end();
    let start = t.rfind('\n').map_or(0, |i| i + 1);
    &t[start..]
}

/// Whether `line` starts with header words of a Harmony output whose special tokens were
/// stripped: a channel word glued to the text (on a later line, only to a new sentence: a
/// word may start with `final`).
fn harmony_frame(line: &str, first: bool) -> bool {
    let t = line.trim_start();
    CHANNELS.iter().any(|w| {
        t.strip_prefix(w).is_some_and(|rest| {
            let next = rest.chars().next();
            // A later line's channel word is glued to a new sentence: a capital, not a
            // name's `_` or digit (`final_inputs = ..` is code).
            next.is_some_and(|c| !c.is_whitespace() && (first || c.is_uppercase()))
        })
    })
}

/// Whether `lines` hold a role glued to its channel (`assistantcommentary`), the other
/// header words of a stripped Harmony output.
fn role_glued_to_channel(lines: &str) -> bool {
    static ROLE: std::sync::OnceLock<memchr::memmem::Finder<'static>> = std::sync::OnceLock::new();
    let role = ROLE.get_or_init(|| memchr::memmem::Finder::new("assistant"));
    role.find_iter(lines.as_bytes()).any(|i| {
        let rest = &lines[i + "assistant".len()..];
        CHANNELS.iter().any(|w| rest.starts_with(w))
    })
}

/// Whether a later line could complete `line` into a leak that takes `line` too: its
/// first or last word, or a word that namespaces it (`to=functions.NAME`), holds the name
/// of an enabled tool (`save_memory` then `{..}` on the
/// next line, ReAct's `Action: save_memory` then `Action Input:`, Kimi's
/// `functions.search:0` with its tokens stripped, DeepSeek's `functionNAME`, a command
/// line's first word), or it is a label that announces a call (`**Tool Call:**` before a
/// fenced call).
fn leads_in(line: &str, tools: &[String]) -> bool {
    let t = line.trim();
    if announces_a_call(t) {
        return true;
    }
    if tools.is_empty() {
        return false;
    }
    let first = t.split_ascii_whitespace().next().unwrap_or_default();
    let last = t.split_ascii_whitespace().next_back().unwrap_or_default();
    holds_name(first, tools)
        || holds_name(last, tools)
        || (memchr::memchr2(b'=', b':', t.as_bytes()).is_some()
            || namespaced().find(t.as_bytes()).is_some())
            && t.split_ascii_whitespace()
                .filter(|w| {
                    let inner = w.trim_end_matches(|c: char| c.is_ascii_punctuation());
                    inner.contains(['.', '=', ':'])
                })
                .any(|w| holds_name(w, tools))
}

/// Whether `line` is a label announcing a call on the lines after it (RWKV's
/// `**Tool Call:**` above a fenced call): a few words ending with a colon, one of them
/// about a tool, a call, a function or an action. A colon line of prose (`Here's how:`)
/// announces nothing a format reads.
fn announces_a_call(line: &str) -> bool {
    let label = line.trim_matches(['*', '#', '_', '`', ' ', '.']);
    let Some(words) = label.strip_suffix([':', '：']) else {
        return false;
    };
    words.split_whitespace().count() <= 4
        && words.split_whitespace().any(|w| {
            let w = w.to_ascii_lowercase();
            ["tool", "call", "function", "action"]
                .iter()
                .any(|k| w.contains(k))
        })
}

/// The prefix OpenAI-style stacks write before a tool's name.
fn namespaced() -> &'static memchr::memmem::Finder<'static> {
    static NS: std::sync::OnceLock<memchr::memmem::Finder<'static>> = std::sync::OnceLock::new();
    NS.get_or_init(|| memchr::memmem::Finder::new("functions."))
}

/// Whether a part of `word` between non-word characters is an enabled tool's name (or
/// `function` glued to one).
fn holds_name(word: &str, tools: &[String]) -> bool {
    word.split(|c: char| c.is_ascii() && !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .filter(|part| !part.is_empty())
        .any(|part| {
            let bare = part.strip_prefix("function").unwrap_or(part);
            tools.iter().any(|n| n == part || n == bare)
        })
}

fn common_prefix(a: &str, b: &str) -> usize {
    let mut n = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    while !a.is_char_boundary(n) {
        n -= 1;
    }
    n
}

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
struct Open {
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
    fence: Option<(u8, usize)>,
    /// Inside a fenced block that no leak can start in or take: opened with nothing else
    /// open, and not ```` ```json ```` (the one fence a family reads as a call).
    code: Option<(u8, usize)>,
    /// An opener (`{`, `[`, `<`, `(`) was read since the window began: without one, no
    /// detector's marker is in the window (each holds one of them, or is a command line
    /// whose first word names the tool, which `leads_in` holds back).
    anchors: bool,
    /// A special token (`<|python_tag|>`, `<｜tool▁sep｜>`) was read: its pairs are the
    /// formats' own, so the window stays open to the end of the reply.
    token: bool,
}

impl Open {
    fn is_closed(&self) -> bool {
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

    fn read_line(&mut self, line: &[u8], tools: &[String]) {
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
        let token = name.first().is_some_and(|&b| is_bar_start(b)) && ends_with_bar(&name);
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
    let info = rest.trim_ascii().to_ascii_lowercase();
    info == b"json"
        || [&b"tool"[..], b"function", b"call"]
            .iter()
            .any(|w| info.windows(w.len()).any(|x| x == *w))
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
fn is_name_byte(b: u8) -> bool {
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
    Some((&body[start..i], closer, i))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream_all(text: &str, tools: &[&str], step: usize) -> (Vec<String>, Finished) {
        let mut s = Stream::new(
            Config::default(),
            tools.iter().map(|t| t.to_string()).collect(),
        );
        let mut shown = Vec::new();
        let mut at = 0;
        while at < text.len() {
            let mut end = (at + step).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            shown.push(s.push(&text[at..end]).to_string());
            at = end;
        }
        (shown, s.finish())
    }

    #[test]
    fn clean_lines_are_shown_at_their_end() {
        let (shown, end) = stream_all("Hello there.\nHow are you?\nBye", &[], 1);
        let joined: String = shown.concat();
        assert_eq!(joined, "Hello there.\nHow are you?");
        assert_eq!(end.rest, "\nBye");
        // "Hello there." is shown by the push that delivered its line break.
        assert_eq!(shown[12], "Hello there.");
    }

    #[test]
    fn a_call_is_never_shown() {
        let t = "Sure.\n<tool_call>\n{\"name\": \"save_memory\", \"arguments\": {\"content\": \"tea\"}}\n</tool_call>\nDone.\nMore.\n";
        let (shown, end) = stream_all(t, &["save_memory"], 3);
        let joined: String = shown.concat();
        assert_eq!(joined, "Sure.");
        assert_eq!(format!("{joined}{}", end.rest), "Sure.\n\nDone.\nMore.");
        assert_eq!(end.detection.leaks.len(), 1);
    }

    #[test]
    fn a_line_naming_a_tool_waits_for_the_next() {
        let t = "Ok.\nAction: save_memory\nAction Input: {\"content\": \"x\"}\nThanks\n";
        let (shown, end) = stream_all(t, &["save_memory"], 1);
        let joined: String = shown.concat();
        assert_eq!(joined, "Ok.");
        assert!(!end.detection.leaks.is_empty());
    }

    #[test]
    fn open_markup_holds_until_it_closes() {
        let mut o = Open::default();
        o.read_line(b"<tool_call>\n", &[]);
        assert!(!o.is_closed());
        o.read_line(b"{\"a\": \"}\"\n", &[]);
        assert!(!o.is_closed());
        o.read_line(b"}</tool_call>\n", &[]);
        assert!(o.is_closed());
        let mut o = Open::default();
        o.read_line(
            b"a<b, <br> <https://x.y> <3 :( f(x) <x/> [1] [NOTE] [/NOTE]\n",
            &[],
        );
        assert!(o.is_closed(), "{o:?}");
        o.read_line(b"[TOOL_CALLS]\n", &[]);
        assert!(
            !o.is_closed(),
            "an upper-case bracket tag opens until its closer"
        );
        let mut o = Open::default();
        o.read_line(b"<|python_tag|>\n", &[]);
        assert!(!o.is_closed(), "a special token keeps the window open");
        let mut o = Open::default();
        o.read_line(b"```\n(\n", &[]);
        assert!(!o.is_closed());
        o.read_line(b"```\n", &[]);
        assert!(o.is_closed());
    }

    #[test]
    fn only_what_could_become_a_call_waits_for_the_next_line() {
        let shown_after_first_line = |t: &str| {
            let mut s = Stream::new(Config::default(), vec!["save_memory".into()]);
            s.push(t).to_string()
        };
        // Prose and code that open nothing a call could grow from show at their line end.
        for t in [
            "Here's how:\nrest",
            "#include <iostream>\nrest",
            "} else {\nrest",
            "int main() {\nrest",
            "if i<j then\nrest",
            "\\[ x^2 \\]\nrest",
        ] {
            let first = t.split('\n').next().unwrap_or_default();
            assert_eq!(shown_after_first_line(t), first, "{t:?}");
        }
        // What a later line may complete into a call waits.
        for t in [
            "**Tool Call:**\nrest",
            "<tool_call>\nrest",
            "<invoke name=\"x\">\nrest",
            "{\"name\": \"save_memory\",\nrest",
            "Action: save_memory\nrest",
            "functions.save_memory:0\nrest",
            "[TOOL_CALLS]\nrest",
            "```json\nrest",
        ] {
            assert_eq!(shown_after_first_line(t), "", "{t:?}");
        }
    }

    #[test]
    fn a_reply_starting_with_whitespace_shows_it_with_its_first_line() {
        let (shown, end) = stream_all("\n\nHello.\nBye.\n", &[], 2);
        assert_eq!(shown.concat(), "\n\nHello.\nBye.");
        assert_eq!(end.rest, "\n");
        let (shown, _) = stream_all("  \n", &[], 1);
        assert_eq!(shown.concat(), "", "whitespace alone shows nothing yet");
    }
}
