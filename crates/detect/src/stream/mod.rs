//! Streaming detection: a reply read delta by delta, shown as soon as what is shown can no
//! longer turn out to be part of a leak, and at the end the same [`Detection`] as the
//! one-shot [`crate::detect`].
//!
//! How it decides what is safe. The reply is cut only at line ends, into *windows*: the
//! text since the last cut. Once per push, at the last line end where nothing was open, a
//! window is cut off (its text becomes final and is shown) when
//! 1. nothing opened in it is still open (`open::Open`: brackets a call's arguments could
//!    be in, call markup, special tokens, a fence that may be a call), and its inline code
//!    spans are closed (`code::closed`), so that what follows it starts at top level, as
//!    it would in the whole reply;
//! 2. its last line leads into nothing (`lines::leads_in`: no tool's name at an end, no
//!    label announcing a call) and holds no marker of a leak, since a later line may
//!    complete what such a line starts (`Action: save_memory` then `Action Input: {..}`, a
//!    wrapper token alone on its line, ...);
//! 3. detection of the window alone finds nothing (a window without an opener costs no
//!    detection at all).
//!
//! A reply opening with data (`{..}`, elements) is held for its first 4 KiB: a made-up
//! result whose frame lost its opener is known only at the orphan closer after it.
//!
//! A fenced block that no format reads as a call (any info string but ```` ```json ```` and
//! kin) shows line by line. Once a window holds a leak, the rest of the reply waits for
//! [`Stream::finish`], which runs the one-shot detection over the whole reply and returns
//! what was not shown. Text shown is never taken back, so the trailing whitespace of what
//! is shown is held (a removal right after it may end the reply there).
//!
//! Cost: a delta without a line end costs its copy and a look at it eight bytes at a time.
//! Each byte is read once by the line tracker (lines before the next opener, with nothing
//! open, for Harmony's header words only) and about once by the windows' checks (one that
//! fails on an open inline span is retried once the window doubles); then the one
//! detection at the end. `BENCHMARKS.md` §1 has the figures.
//!
//! May depend on: the crate root (`detect`, `might_leak`, `Input`), `views`
//! (`might_leak_for`), `code`, `config`, `families` (`lone_recipient_possible`,
//! `lost_opener_possible`), `types`, its own `lines` and `open`.

mod lines;
mod open;

use crate::code;
use crate::views::might_leak_for;
use crate::{detect, might_leak, Config, Detection, Input};
use lines::{harmony_frame, last_line, leads_in, role_glued_to_channel, ToolNames};
use open::Open;
use std::sync::Arc;

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
    policy: StreamPolicy,
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
    /// A leak was found (or Harmony header words with their tokens stripped): the rest
    /// waits for `finish`.
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

/// The policy and the enabled tools that the streams of one agent share: made once,
/// then each [`Stream::with_policy`] costs no copy of them (and dropping a stream frees
/// none), where [`Stream::new`] makes one of its own.
///
/// ```
/// use toolcall_detect::{Config, Stream, StreamPolicy};
///
/// let policy = StreamPolicy::new(Config::default(), vec!["save_memory".into()]);
/// for reply in ["Hello.\n", "Noted.\n"] {
///     let mut stream = Stream::with_policy(&policy);
///     let mut shown = stream.push(reply).to_string();
///     shown.push_str(&stream.finish().rest);
///     assert_eq!(shown, reply);
/// }
/// ```
#[derive(Debug, Clone)]
pub struct StreamPolicy(Arc<Policy>);

#[derive(Debug)]
struct Policy {
    config: Config,
    tools: ToolNames,
}

impl StreamPolicy {
    /// The policy for the replies of an agent with these tools enabled.
    pub fn new(config: Config, enabled_tools: Vec<String>) -> StreamPolicy {
        StreamPolicy(Arc::new(Policy {
            config,
            tools: ToolNames::new(enabled_tools),
        }))
    }
}

impl Stream {
    /// A stream for one reply of an agent with these tools enabled.
    pub fn new(config: Config, enabled_tools: Vec<String>) -> Stream {
        Stream::with_policy(&StreamPolicy::new(config, enabled_tools))
    }

    /// A stream for one reply under a policy shared with other streams.
    pub fn with_policy(policy: &StreamPolicy) -> Stream {
        Stream {
            policy: policy.clone(),
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
        // Most deltas end no line: the copy and this look (reading lines is a call of its
        // own, so this path saves few registers).
        if self.waiting || !has_line_end(delta.as_bytes()) {
            return "";
        }
        self.read_lines(read_from);
        let visible = self.visible;
        let from = self.shown;
        if self.waiting || visible <= from {
            return "";
        }
        self.shown = visible;
        &self.text[from..visible]
    }

    /// Reads the lines completed by the text from `read_from` (which holds a line end)
    /// and checks the window once, at the last line end where nothing was open (or, if
    /// that check fails short of a leak, at the one before it).
    #[inline(never)]
    fn read_lines(&mut self, read_from: usize) {
        let lines_end = memchr::memrchr(b'\n', &self.text.as_bytes()[read_from..])
            .map_or(read_from, |i| read_from + i + 1);
        if role_glued_to_channel(&self.text[self.line_start..lines_end]) {
            // A Harmony output with its tokens stripped: a call anywhere later takes these
            // header words, wherever they stand.
            self.waiting = true;
            return;
        }
        let mut at = read_from.max(self.line_start);
        let mut ends: [Option<usize>; 2] = [None, None];
        // Where the next byte a line's reading acts on stands (an opener); lines before it,
        // with nothing open, leave nothing open: read for Harmony's header words only.
        let mut hot = 0;
        while let Some(nl) = memchr::memchr(b'\n', &self.text.as_bytes()[at..]) {
            let end = at + nl + 1;
            if self.open.is_closed() {
                if hot < self.line_start {
                    hot = next_hot(self.text.as_bytes(), self.line_start, lines_end);
                }
                let line = &self.text[self.line_start..end];
                if end <= hot && code::fence_marker(line.as_bytes()).is_none() {
                    if harmony_frame(line, self.line_start == 0) {
                        self.waiting = true;
                        return;
                    }
                    self.line_start = end;
                    ends = [Some(end), ends[0]];
                    at = end;
                    continue;
                }
            }
            if self.read_line(end) {
                ends = [Some(end), ends[0]];
            } else if self.settled == end {
                ends = [None, None];
            }
            if self.waiting {
                return;
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
                return;
            }
        }
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
                enabled_tools: &self.policy.0.tools.names,
            },
            &self.policy.0.config,
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

    /// Reads the line ending at `end` (past its `\n`): cuts the window there when the line
    /// is of a fenced block no leak can be in; returns whether nothing is open at its end.
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
        self.open
            .read_line(line.as_bytes(), &self.policy.0.tools.names);
        if in_code {
            // A line of a fenced block no leak can start in (or its closing line).
            self.cut(end);
            return false;
        }
        if self.open.code.is_some() {
            let line_start = end - line.len();
            // A bare or ```python fence may be a call where it is the whole reply or stands
            // under a line naming a tool (ChatGLM3): read as a fence that may be one.
            if self.call_fence(line, line_start) {
                self.open.fence = self.open.code.take();
                self.open.anchors = true;
                return false;
            }
            // The line opened such a block: it shows with what came before it, once that
            // settles (no line before a fence that is not ```json leads into a call).
            let blank = self.text[self.settled..line_start].trim().is_empty();
            match blank || self.settles(line_start, true) {
                true => self.cut(end),
                false => self.open.fence = self.open.code.take(),
            }
            return false;
        }
        self.open.is_closed()
    }

    /// Whether the fence opened by `line` (at `line_start`) may hold a call though its info
    /// string is no call's: a bare one opening the reply, or a bare or ```` ```python ````
    /// one right under a line that is an enabled tool's name.
    fn call_fence(&self, line: &str, line_start: usize) -> bool {
        let info = line.trim().trim_start_matches('`').trim();
        if !(info.is_empty() || info.eq_ignore_ascii_case("python")) {
            return false;
        }
        let head = self.text[..line_start].trim_end();
        let above = &head[head.rfind('\n').map_or(0, |i| i + 1)..];
        (head.is_empty() && info.is_empty())
            || self.policy.0.tools.names.iter().any(|n| n == above.trim())
    }

    /// After a cut at `from`, reads again what came after it, so that what is open
    /// describes the new window.
    fn reread(&mut self, from: usize) {
        if from < self.line_start {
            let lines = &self.text.as_bytes()[from..self.line_start];
            for line in lines.split_inclusive(|&b| b == b'\n') {
                self.open.read_line(line, &self.policy.0.tools.names);
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
        if !fence_next && leads_in(last, &self.policy.0.tools) {
            return false;
        }
        // A short reply that may be one stripped Harmony recipient header, a call as the
        // whole message, holds no anchor byte: it waits for its end.
        if crate::families::lone_recipient_possible(&self.text) {
            return false;
        }
        // A reply opening with data (`{..}`, `<path>..</path>`) may be a made-up result
        // whose frame lost its opener: it waits for the frame's closer, or its bound.
        if self.settled == 0 && crate::families::lost_opener_possible(&self.text[..end]) {
            return false;
        }
        let tools = &self.policy.0.tools;
        let leaks = |t: &str| match tools.aliased {
            true => might_leak_for(t, &tools.names),
            false => might_leak(t),
        };
        if !self.open.anchors || !leaks(window) {
            return true;
        }
        if !fence_next && leaks(last) {
            return false;
        }
        let d = detect(
            &Input {
                content: window,
                tools_used: &[],
                enabled_tools: &self.policy.0.tools.names,
            },
            &self.policy.0.config,
        );
        if !d.is_clean() {
            self.waiting = true;
        }
        d.is_clean()
    }

    fn cut(&mut self, end: usize) {
        self.settled = end;
        self.visible = self.text[..end].trim_end().len();
        self.open = self.open.after_cut();
        self.retry_at = 0;
    }
}

/// The first byte from `from` to `to` that a line's reading (`Open::read_line`) acts on
/// with nothing open: an opener (`{`, `[`, `<`, or a `(` after a name, as a call opens
/// it); `to` when there is none. (A fence opens only at a line's start: the caller looks.)
fn next_hot(bytes: &[u8], from: usize, to: usize) -> usize {
    let b = &bytes[from..to];
    let a = memchr::memchr3(b'{', b'[', b'<', b).unwrap_or(b.len());
    let call = memchr::memchr_iter(b'(', &b[..a])
        .find(|&i| i > 0 && open::is_name_byte(b[i - 1]))
        .unwrap_or(a);
    from + call
}

/// Whether `bytes` hold a `\n`: eight bytes at a time (a word holds one where a byte xor
/// `\n` is zero), cheaper for a token or two than a SIMD search's setup or a byte loop.
#[inline]
fn has_line_end(bytes: &[u8]) -> bool {
    if bytes.len() >= 64 {
        return memchr::memchr(b'\n', bytes).is_some();
    }
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    const LINE_ENDS: u64 = u64::from_ne_bytes([b'\n'; 8]);
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(chunk);
        let x = u64::from_ne_bytes(w) ^ LINE_ENDS;
        if x.wrapping_sub(ONES) & !x & HIGHS != 0 {
            return true;
        }
    }
    chunks.remainder().contains(&b'\n')
}

fn common_prefix(a: &str, b: &str) -> usize {
    let mut n = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    while !a.is_char_boundary(n) {
        n -= 1;
    }
    n
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
