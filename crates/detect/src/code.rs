//! Where the model is quoting rather than acting: fenced blocks (```` ``` ```` / `~~~`),
//! inline code spans, and closed reasoning blocks (`<think>`..`</think>` and kin). Markup
//! inside code is an example the model is showing, and markup inside its reasoning is the
//! model thinking about a call, never the call it made.
//!
//! Pure and linear: one pass over the line starts for fences, one over backtick runs for
//! inline spans (each run looks ahead a bounded number of runs for its closer).
//!
//! May depend on: `grammar::keys` (what a fence's info string labels). No I/O.

use std::ops::Range;

/// How many later backtick runs an opening run may look at for its closer. Inline code
/// closes within its paragraph; the bound keeps a text full of stray backticks linear.
const INLINE_LOOKAHEAD: usize = 32;

/// The code regions of one text, sorted and disjoint.
#[derive(Debug, Default, Clone)]
pub struct CodeRegions {
    regions: Vec<Range<usize>>,
    /// Whether a fenced block's info string labels it a call's wrapper
    /// (```` ```tool_call ````, `grammar::keys::labels_a_call_fence`).
    call_fence: bool,
}

impl CodeRegions {
    /// Maps the code regions of `text`.
    pub fn find(text: &str) -> CodeRegions {
        let bytes = text.as_bytes();
        if memchr::memchr2(b'`', b'~', bytes).is_none() {
            return CodeRegions::default();
        }
        let (fences, call_fence) = fenced_blocks(bytes);
        let runs = backtick_runs(bytes, &fences);
        let mut regions = fences;
        let mut i = 0;
        while i < runs.len() {
            let (start, len) = runs[i];
            let closer = runs
                .iter()
                .enumerate()
                .skip(i + 1)
                .take(INLINE_LOOKAHEAD)
                .find(|(_, &(_, l))| l == len)
                .map(|(j, &(s, l))| (j, s + l));
            match closer {
                Some((j, end)) => {
                    regions.push(start..end);
                    i = j + 1;
                }
                None => i += 1,
            }
        }
        regions.sort_by_key(|r| r.start);
        CodeRegions {
            regions,
            call_fence,
        }
    }

    /// Whether a fenced block is labelled as a call's wrapper (```` ```tool_call ````).
    pub fn holds_call_fence(&self) -> bool {
        self.call_fence
    }

    /// Whether byte `pos` is inside a code region.
    pub fn contains(&self, pos: usize) -> bool {
        let idx = self.regions.partition_point(|r| r.start <= pos);
        idx > 0 && self.regions[idx - 1].end > pos
    }

    /// The regions, sorted by start.
    pub fn regions(&self) -> &[Range<usize>] {
        &self.regions
    }
}

/// Whether what code `text` holds is closed within it: no fenced block left open and every
/// inline backtick run outside fences paired with a closer, as [`CodeRegions::find`] pairs
/// them. Where this holds, what follows `text` starts outside code, whatever it is
/// (`stream` cuts a reply only at such points).
pub(crate) fn closed(text: &str) -> bool {
    let bytes = text.as_bytes();
    if memchr::memchr2(b'`', b'~', bytes).is_none() {
        return true;
    }
    let (fences, _) = fenced_blocks(bytes);
    if fences
        .last()
        .is_some_and(|f| f.end == bytes.len() && !fence_closed_at_end(bytes, f))
    {
        return false;
    }
    let runs = backtick_runs(bytes, &fences);
    let mut i = 0;
    while i < runs.len() {
        let (_, len) = runs[i];
        let closer = runs
            .iter()
            .enumerate()
            .skip(i + 1)
            .take(INLINE_LOOKAHEAD)
            .find(|(_, &(_, l))| l == len);
        match closer {
            Some((j, _)) => i = j + 1,
            None => return false,
        }
    }
    true
}

/// Whether the fenced block `f`, which runs to the end of `bytes`, ends with its closing
/// fence line (rather than being cut open by the end of the text).
fn fence_closed_at_end(bytes: &[u8], f: &Range<usize>) -> bool {
    let block = &bytes[f.start..f.end];
    let last_start = memchr::memrchr(b'\n', block).map_or(0, |i| i + 1);
    if last_start == 0 {
        return false;
    }
    let (Some((och, olen, _)), Some((ch, len, rest))) =
        (fence_marker(block), fence_marker(&block[last_start..]))
    else {
        return false;
    };
    ch == och && len >= olen && closes(rest)
}

/// Fenced code blocks: a line opening with three or more backticks or tildes (after at
/// most three spaces) up to a line holding only a fence of the same character at least as
/// long, or to the end of the text when it is never closed.
fn fenced_blocks(bytes: &[u8]) -> (Vec<Range<usize>>, bool) {
    let mut out = Vec::new();
    let mut call_fence = false;
    let mut open: Option<(usize, u8, usize)> = None; // (start, fence char, fence length)
    let mut line_start = 0;
    while line_start < bytes.len() {
        let line_end =
            memchr::memchr(b'\n', &bytes[line_start..]).map_or(bytes.len(), |i| line_start + i);
        let line = &bytes[line_start..line_end];
        if let Some((ch, len, rest)) = fence_marker(line) {
            match open {
                None => {
                    open = Some((line_start, ch, len));
                    call_fence |= ch == b'`'
                        && !rest.trim_ascii().is_empty()
                        && std::str::from_utf8(rest.trim_ascii())
                            .is_ok_and(crate::grammar::keys::labels_a_call_fence);
                }
                Some((start, och, olen)) if ch == och && len >= olen && closes(rest) => {
                    // A token glued to the closing run is markup, not the block's.
                    let end = match rest.iter().all(u8::is_ascii_whitespace) {
                        true => line_end,
                        false => line_end - rest.len(),
                    };
                    out.push(start..end);
                    open = None;
                }
                Some(_) => {}
            }
        }
        line_start = line_end + 1;
    }
    if let Some((start, _, _)) = open {
        out.push(start..bytes.len());
    }
    (out, call_fence)
}

/// Whether what follows a fence's closing run lets it close: nothing but whitespace, or a
/// control token glued to it (DeepSeek V3 writes ```` ```<｜tool▁call▁end｜> ````; a
/// template's end of turn, ```` ```</s> ````, ```` ```<end_of_turn> ````).
pub(crate) fn closes(rest: &[u8]) -> bool {
    rest.iter().all(u8::is_ascii_whitespace)
        || rest.starts_with("<｜".as_bytes())
        || rest.starts_with(b"<|")
        || rest.starts_with(b"</s>")
        || rest.starts_with(b"<end_of_turn>")
}

/// `(fence char, run length, rest of line)` when the line opens with a fence.
pub(crate) fn fence_marker(line: &[u8]) -> Option<(u8, usize, &[u8])> {
    let indent = line.iter().take(4).take_while(|&&b| b == b' ').count();
    if indent > 3 {
        return None;
    }
    let line = &line[indent..];
    let ch = *line.first()?;
    if ch != b'`' && ch != b'~' {
        return None;
    }
    let len = line.iter().take_while(|&&b| b == ch).count();
    (len >= 3).then(|| (ch, len, &line[len..]))
}

/// Backtick runs `(start, length)` outside fenced blocks.
fn backtick_runs(bytes: &[u8], fences: &[Range<usize>]) -> Vec<(usize, usize)> {
    let mut runs = Vec::new();
    let mut pos = 0;
    let mut fence_idx = 0;
    while let Some(off) = memchr::memchr(b'`', &bytes[pos..]) {
        let start = pos + off;
        let len = bytes[start..].iter().take_while(|&&b| b == b'`').count();
        pos = start + len;
        while fence_idx < fences.len() && fences[fence_idx].end <= start {
            fence_idx += 1;
        }
        let in_fence = fences
            .get(fence_idx)
            .is_some_and(|f| f.start <= start && start < f.end);
        if !in_fence {
            runs.push((start, len));
        }
    }
    runs
}

/// Closed reasoning blocks of one text.
#[derive(Debug, Default, Clone)]
pub struct Reasoning {
    blocks: Vec<Range<usize>>,
}

/// The reasoning tag pairs models use.
const REASONING_TAGS: &[(&str, &str)] = &[
    ("<think>", "</think>"),
    ("<thinking>", "</thinking>"),
    ("<seed:think>", "</seed:think>"),
    ("<|START_THINKING|>", "<|END_THINKING|>"),
];

/// At most this many blocks per tag pair are mapped: a message has one or two; the bound
/// keeps `contains` cheap whatever a message repeats.
const MAX_REASONING_BLOCKS: usize = 16;

impl Reasoning {
    /// Maps the closed reasoning blocks of `text`: one forward pass per tag pair.
    pub fn find(text: &str) -> Reasoning {
        let mut blocks = Vec::new();
        if memchr::memmem::find(text.as_bytes(), b"THINK").is_none()
            && memchr::memmem::find(text.as_bytes(), b"think>").is_none()
        {
            return Reasoning { blocks };
        }
        for (open, close) in REASONING_TAGS {
            let mut at = 0;
            for _ in 0..MAX_REASONING_BLOCKS {
                let Some(s) = find_from(text, open, at) else {
                    break;
                };
                let Some(e) = find_from(text, close, s + open.len()) else {
                    break;
                };
                blocks.push(s..e + close.len());
                at = e + close.len();
            }
        }
        Reasoning { blocks }
    }

    /// Whether byte `pos` is inside a closed reasoning block.
    pub fn contains(&self, pos: usize) -> bool {
        self.blocks.iter().any(|r| r.contains(&pos))
    }
}

fn find_from(text: &str, needle: &str, from: usize) -> Option<usize> {
    let hay = text.as_bytes().get(from..)?;
    memchr::memmem::find(hay, needle.as_bytes()).map(|i| from + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_code_is_a_region() {
        let t = "use `<tool_call>` here";
        let c = CodeRegions::find(t);
        assert!(c.contains(t.find('<').unwrap()));
        assert!(!c.contains(t.find("here").unwrap()));
    }

    #[test]
    fn fenced_block_is_a_region_until_its_closer() {
        let t = "text\n```xml\n<invoke name=\"x\">\n```\nafter";
        let c = CodeRegions::find(t);
        assert!(c.contains(t.find("<invoke").unwrap()));
        assert!(!c.contains(t.find("after").unwrap()));
    }

    #[test]
    fn unclosed_fence_runs_to_the_end() {
        let t = "a\n```\n<tool_call>{}";
        let c = CodeRegions::find(t);
        assert!(c.contains(t.len() - 1));
    }

    #[test]
    fn closed_reasoning_blocks_are_mapped() {
        let t = "<think>maybe <tool_call>{}</tool_call></think> then <tool_call>";
        let r = Reasoning::find(t);
        assert!(r.contains(t.find("<tool_call>").unwrap()));
        assert!(!r.contains(t.rfind("<tool_call>").unwrap()));
        assert!(!Reasoning::find("<think> never closed <tool_call>").contains(10));
    }

    #[test]
    fn lone_backtick_is_not_code() {
        let t = "it`s <tool_call>";
        let c = CodeRegions::find(t);
        assert!(!c.contains(t.find('<').unwrap()));
    }
}
