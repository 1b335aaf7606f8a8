//! The ends of a message as the prefilter's look at bare calls ([`super::lines_probe`])
//! reads them, where a fence or a front end's bracket closes the message: which closer of
//! call markup ends it (`[/TOOL_CALL]`), and whether a fence ending it was opened as a call
//! (```` ```tool_code ````, a generic call word's call in it, ```` ```tool_call ````). Out of
//! line: most messages never get here.
//!
//! May depend on: `crate::envelope` (generic call words), `crate::grammar`.

use crate::grammar::bytes::{self as class, WORD};
use std::sync::OnceLock;

/// The opener of Google's code fence for calls (Gemma 3, Gemini).
pub(super) const TOOL_CODE: &str = "```tool_code";

/// How far back from a fence ending the message its ```` ```tool_code ```` opener is looked
/// for.
const TOOL_CODE_LOOK: usize = 4096;

/// The length of the bracketed closer of call markup that `b` ends with (`[/TOOL_CALL]`,
/// `[/tool_calls]`): a front end's label closing what its opener labelled.
pub(super) fn bracket_closer(b: &[u8]) -> Option<usize> {
    let word = b
        .iter()
        .rev()
        .skip(1)
        .take(32)
        .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
        .count();
    let open = b.len().checked_sub(word + 3)?;
    (b.get(open..open + 2) == Some(b"[/")
        && crate::grammar::keys::names_call_markup(&b[open + 2..b.len() - 1]))
    .then_some(word + 3)
}

/// Whether the text (its bytes from `line` to `end`) ends with a fence whose
/// ```` ```tool_code ```` opener is near: the model stops after such a fence for the tool
/// to run, so it (or the made-up ```` ```tool_output ```` after it) ends the message. Out of
/// line: most messages never get here, and the search must not weigh on those that do not.
#[cold]
#[inline(never)]
pub(super) fn tool_code_ends(b: &[u8], line: usize, end: usize) -> bool {
    if !b[line..end].ends_with(b"```") {
        return false;
    }
    // ChatGLM3's fence (`named_fence`): its last code line a generic call word's call.
    let code_end = b[..end - 3].trim_ascii_end().len();
    let code = &b[b[..code_end]
        .iter()
        .rposition(|&c| c == b'\n')
        .map_or(0, |i| i + 1)..code_end];
    let code = code.trim_ascii_start();
    let word = class::run(code, WORD, 32);
    if word > 0
        && code.get(word) == Some(&b'(')
        && std::str::from_utf8(&code[..word]).is_ok_and(crate::envelope::is_call_word)
    {
        return true;
    }
    let floor = end.saturating_sub(TOOL_CODE_LOOK).max(line);
    // Only whether the opener is there: a forward search with a finder built once, where
    // a reverse one was built per call and scanned a byte at a time.
    static OPENER: OnceLock<memchr::memmem::Finder<'static>> = OnceLock::new();
    OPENER
        .get_or_init(|| memchr::memmem::Finder::new(TOOL_CODE.as_bytes()))
        .find(&b[floor..end])
        .is_some()
        || labelled_call_fence(b, floor, end)
}

/// Whether the fence closed at `end` was opened (at or after `floor`) by a line labelling
/// it a call's wrapper (```` ```tool_call ````): what it holds is read as a reply of its
/// own (`crate::views::in_call_fences`), whatever grammar it is in. The opener is the
/// backtick run before the closing one that opens its line: a look back from backtick to
/// backtick, most blocks holding few.
fn labelled_call_fence(b: &[u8], floor: usize, end: usize) -> bool {
    let mut to = end - b[..end].iter().rev().take_while(|&&c| c == b'`').count();
    while let Some(p) = memchr::memrchr(b'`', &b[floor..to]).map(|p| floor + p) {
        let run = b[floor..=p]
            .iter()
            .rev()
            .take_while(|&&c| c == b'`')
            .count();
        let start = p + 1 - run;
        let indent = b[floor..start]
            .iter()
            .rev()
            .take_while(|&&c| c == b' ')
            .count();
        let at_line = start - indent == 0 || b[start - indent - 1] == b'\n';
        if run >= 3 && indent <= 3 && at_line {
            let info = &b[p + 1..end];
            let info = &info[..memchr::memchr(b'\n', info).unwrap_or(info.len())];
            return std::str::from_utf8(info)
                .is_ok_and(|i| crate::grammar::keys::labels_a_call_fence(i.trim()));
        }
        to = start;
    }
    false
}
