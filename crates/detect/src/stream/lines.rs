//! The stream's look at a line: whether a later line could complete it into a leak that
//! takes it too (a tool's name at an end, a label announcing a call), and the header words
//! of a Harmony output whose tokens were stripped.
//!
//! May depend on: `families::harmony`'s channel words, `remnant::lone_word`,
//! `grammar::markup`'s tag reader, `grammar::keys`, `grammar::text`'s front-end glyphs,
//! `aliases` (which names are aliased), `memchr`.

use crate::families::harmony::CHANNELS;

/// The last line of `window` that is not blank (`window` ends with a line break).
pub(super) fn last_line(window: &str) -> &str {
    let t = window.trim_end();
    let start = t.rfind('\n').map_or(0, |i| i + 1);
    &t[start..]
}

/// Whether `line` starts with header words of a Harmony output whose special tokens were
/// stripped: a channel word glued to the text (on a later line, only to a new sentence: a
/// word may start with `final`).
pub(super) fn harmony_frame(line: &str, first: bool) -> bool {
    // Most lines start with no channel word's first letter: one byte rejects them. The
    // bytes skipped are those `trim_start` trims below `0x80` (`\t` to `\r`, space); a
    // byte from `0x80` may start Unicode whitespace, so it takes the full look.
    match line.bytes().find(|b| !matches!(b, b'\t'..=b'\r' | b' ')) {
        None => return false,
        Some(b) if b < 0x80 && !CHANNELS.iter().any(|w| w.as_bytes().first() == Some(&b)) => {
            return false
        }
        Some(_) => {}
    }
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
pub(super) fn role_glued_to_channel(lines: &str) -> bool {
    static ROLE: std::sync::OnceLock<memchr::memmem::Finder<'static>> = std::sync::OnceLock::new();
    let role = ROLE.get_or_init(|| memchr::memmem::Finder::new("assistant"));
    // Most lines hold no `assistant`: one search says so without an iterator's setup.
    let Some(at) = role.find(lines.as_bytes()) else {
        return false;
    };
    role.find_iter(&lines.as_bytes()[at..]).any(|i| {
        let i = at + i;
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
/// fenced call), or one lower-case word alone (a wrapper opener as a model garbled it, or a
/// role header), or a role header glued to a sentence's end (`Done.assistant`).
pub(super) fn leads_in(line: &str, tools: &ToolNames) -> bool {
    let t = line.trim();
    // A front end's glyph alone on the reply's first line: a call on the next takes it.
    let mut chars = t.chars();
    if chars
        .next()
        .is_some_and(crate::grammar::text::is_front_glyph)
        && chars.next().is_none()
    {
        return true;
    }
    // A lone lower-case word may be a garbled wrapper opener: the call after it takes it.
    // A line opening with a parameter element, or closing one (a value's last line), may
    // be one of a call whose opener is gone: an orphan closer on a later line takes it.
    if announces_a_call(t) || crate::remnant::lone_word(t) || parameter_line(t) {
        return true;
    }
    // A role header glued to the sentence before it (`Done.assistant`): a call on the next
    // line takes it.
    if t.strip_suffix("assistant")
        .is_some_and(|b| b.ends_with(['.', '!', '?']))
    {
        return true;
    }
    if tools.names.is_empty() {
        return false;
    }
    // Read as bytes, which gives what the same reading of the `str` gives: every separator
    // and punctuation mark looked for is ASCII, and no byte of a non-ASCII character is
    // one (a window's last line is read at each of its checks).
    let b = t.as_bytes();
    let words = || b.split(u8::is_ascii_whitespace).filter(|w| !w.is_empty());
    let first = words().next().unwrap_or_default();
    let last = words().next_back().unwrap_or_default();
    // A line of one word (no ASCII space: many lines in Chinese) is read once.
    if tools.held_in(first) || last.as_ptr() != first.as_ptr() && tools.held_in(last) {
        return true;
    }
    // The words holding a `.`, `=` or `:` before their trailing punctuation count where the
    // line has a `=`, a `:` or `functions.`: they are found by a search for those bytes
    // rather than word by word, and the line is searched for `functions.` only once such
    // a word is found (most lines have none).
    let mut namespacing: Option<bool> = None;
    let mut at = 0;
    while let Some(i) = memchr::memchr3(b'.', b'=', b':', &b[at..]) {
        let p = at + i;
        let start = b[..p]
            .iter()
            .rposition(u8::is_ascii_whitespace)
            .map_or(0, |s| s + 1);
        let end = b[p..]
            .iter()
            .position(u8::is_ascii_whitespace)
            .map_or(b.len(), |e| p + e);
        // `p` is before the trailing punctuation when a byte that is not punctuation
        // follows it in the word (and then so is the word's first such mark, this one).
        if b[p + 1..end].iter().any(|c| !c.is_ascii_punctuation()) {
            let counts = *namespacing.get_or_insert_with(|| {
                memchr::memchr2(b'=', b':', b).is_some() || namespaced().find(b).is_some()
            });
            if !counts {
                return false;
            }
            if tools.held_in(&b[start..end]) {
                return true;
            }
        }
        at = end;
    }
    false
}

/// Whether `line` opens with a parameter element (`<parameter name="k">`, any spelling),
/// or ends with a parameter's closer.
fn parameter_line(line: &str) -> bool {
    use crate::grammar::keys::is_param_key;
    use crate::grammar::markup::{tag_at, Kind};
    let opens = line.starts_with('<')
        && tag_at(line, 0).is_some_and(|t| t.kind == Kind::Open && is_param_key(&t.key()));
    opens
        || line.ends_with('>')
            && line.rfind("</").is_some_and(|i| {
                tag_at(line, i).is_some_and(|t| {
                    t.kind == Kind::Close && t.span.end == line.len() && is_param_key(&t.key())
                })
            })
}

/// Whether `line` is a label announcing a call on the lines after it (RWKV's
/// `**Tool Call:**` above a fenced call): a few words ending with a colon, one of them
/// about a tool, a call, a function or an action. A colon line of prose (`Here's how:`)
/// announces nothing a format reads.
pub(super) fn announces_a_call(line: &str) -> bool {
    // Most lines do not end with a colon: the end, past the marks trimmed below (all
    // ASCII), says so before the trim of both ends and the look at the words.
    const MARKS: &[u8] = b"*#_` .";
    let b = line.as_bytes();
    let end = b
        .iter()
        .rposition(|c| !MARKS.contains(c))
        .map_or(0, |i| i + 1);
    if !(b[..end].ends_with(b":") || b[..end].ends_with("：".as_bytes())) {
        return false;
    }
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

/// The enabled tools' names, with the set of their lengths, which rejects most parts of
/// words at one look.
#[derive(Debug, Clone)]
pub(super) struct ToolNames {
    pub(super) names: Vec<String>,
    /// Bit `n` (`n` < 63): a name is `n` bytes long; bit 63: one is 63 bytes or longer.
    lengths: u64,
    /// A name is read under an alias (`crate::aliases`): the window checks look for it so.
    pub(super) aliased: bool,
}

impl ToolNames {
    pub(super) fn new(names: Vec<String>) -> ToolNames {
        let lengths = names.iter().fold(0, |m, n| m | length_bit(n.len()));
        let aliased = crate::aliases::any_odd(&names);
        ToolNames {
            names,
            lengths,
            aliased,
        }
    }

    /// Whether a part of `word` between non-word characters is an enabled tool's name (or
    /// `function` glued to one). Bytes from `0x80` (non-ASCII characters) are word bytes.
    fn held_in(&self, word: &[u8]) -> bool {
        let mut start = 0;
        for (i, &c) in word.iter().enumerate() {
            if !WORD_BYTES[usize::from(c)] {
                if i > start && self.is_name(&word[start..i]) {
                    return true;
                }
                start = i + 1;
            }
        }
        start < word.len() && self.is_name(&word[start..])
    }

    /// Whether `part` is an enabled tool's name, or `function` and one.
    fn is_name(&self, part: &[u8]) -> bool {
        let bare = part.strip_prefix(b"function").unwrap_or(part);
        self.lengths & (length_bit(part.len()) | length_bit(bare.len())) != 0
            && self
                .names
                .iter()
                .any(|n| n.as_bytes() == part || n.as_bytes() == bare)
    }
}

/// The bytes of a word's parts: ASCII letters, digits, `_`, `-`, and every byte from
/// `0x80` (non-ASCII characters).
static WORD_BYTES: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c >= 0x80 || c.is_ascii_alphanumeric() || c == b'_' || c == b'-';
        b += 1;
    }
    t
};

fn length_bit(len: usize) -> u64 {
    1 << len.min(63)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `leads_in` as it read the line before it was read as bytes: the reference.
    fn leads_in_as_str(line: &str, tools: &[String]) -> bool {
        let held = |word: &str| {
            word.split(|c: char| {
                c.is_ascii() && !(c.is_ascii_alphanumeric() || c == '_' || c == '-')
            })
            .filter(|part| !part.is_empty())
            .any(|part| {
                let bare = part.strip_prefix("function").unwrap_or(part);
                tools.iter().any(|n| n == part || n == bare)
            })
        };
        let t = line.trim();
        if announces_a_call(t) || crate::remnant::lone_word(t) || parameter_line(t) {
            return true;
        }
        if tools.is_empty() {
            return false;
        }
        let first = t.split_ascii_whitespace().next().unwrap_or_default();
        let last = t.split_ascii_whitespace().next_back().unwrap_or_default();
        held(first)
            || held(last)
            || (memchr::memchr2(b'=', b':', t.as_bytes()).is_some()
                || namespaced().find(t.as_bytes()).is_some())
                && t.split_ascii_whitespace()
                    .filter(|w| {
                        let inner = w.trim_end_matches(|c: char| c.is_ascii_punctuation());
                        inner.contains(['.', '=', ':'])
                    })
                    .any(held)
    }

    #[test]
    fn leads_in_reads_bytes_as_it_read_the_str() {
        const WORDS: &[&str] = &[
            "save_memory",
            "search",
            "functionsearch",
            "functions.search:0",
            "to=functions.x",
            "x=search",
            "e.g.",
            "end.",
            "search.",
            "search:",
            "**Tool",
            "Call:**",
            "Action:",
            "a.search",
            "séarch",
            "搜索search",
            "search。",
            "-search-",
            "search!?",
            "=",
            ":",
            "functions.",
            "Here's",
            "how:",
            "  ",
            "\t",
            "：",
            "web_search(",
            "(search)",
        ];
        let tools: Vec<String> = ["search", "save_memory", "x", "function"]
            .iter()
            .map(|t| t.to_string())
            .collect();
        let names = ToolNames::new(tools.clone());
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..20_000 {
            let mut line = String::new();
            for _ in 0..(seed % 6) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                line.push_str(WORDS[(seed as usize) % WORDS.len()]);
                if seed & 0x100 != 0 {
                    line.push(' ');
                }
            }
            seed = seed.wrapping_add(1);
            assert_eq!(
                leads_in(&line, &names),
                leads_in_as_str(&line, &tools),
                "{line:?}"
            );
            let none = ToolNames::new(Vec::new());
            assert_eq!(
                leads_in(&line, &none),
                leads_in_as_str(&line, &[]),
                "{line:?}"
            );
        }
    }
}
