//! Special tokens and call tags spelled another way than their format writes them: a space
//! inside the brackets (`<tool_call >`, `<| channel |>`), the word's case or separators
//! changed (`<TOOL_CALL>`, `<tool-call>`, `<toolcall>`, `[TOOL-CALLS]`, `<|python-tag|>`),
//! the other bar (`<｜tool_call_begin｜>` for Kimi's `<|tool_call_begin|>`), one `call`
//! where the format writes `calls`. A token is read by its shape (its bracket, its bars,
//! whether it closes) and its word with case and separators set aside; when that names
//! exactly one token a format writes, detection reads the reply with the format's own
//! spelling there, and the spans found are mapped back onto the reply as written, so the
//! cut and the ledger keep the bytes the user saw.
//!
//! May depend on: `crate::families` (the markers the formats are found by and the tokens
//! the table's rows read: each is a spelling some format reads as written), `memchr`.
//! No I/O.

mod read;

use read::{read, read_name, Bar, FnvBuild, Key, Read};
use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::OnceLock;

/// The tokens and tag names as their formats write them. Where two read the same (same
/// shape and word), the first listed is the one a respelling is read as.
const TOKENS: &[&str] = &[
    // Tags.
    "<tool_call>",
    "</tool_call>",
    "<tool_calls>",
    "</tool_calls>",
    "<TOOLCALL>",
    "</TOOLCALL>",
    "<function_calls>",
    "</function_calls>",
    "<function_call>",
    "</function_call>",
    "<minimax:tool_call>",
    "</minimax:tool_call>",
    "<seed:tool_call>",
    "</seed:tool_call>",
    "<longcat_tool_call>",
    "</longcat_tool_call>",
    "<dots_function_call>",
    "</dots_function_call>",
    "<tool_response>",
    "</tool_response>",
    "<tool_result>",
    "</tool_result>",
    "<function_results>",
    "</function_results>",
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
    "<start_function_call>",
    "<end_function_call>",
    "<start_function_response>",
    "<end_function_response>",
    "<tool_sep>",
    "</invoke>",
    "</parameter>",
    "</function>",
    // Tags whose name is followed by attributes or `=NAME`: only the name is respelled.
    "<invoke",
    "<parameter",
    "<function",
    // Barred tokens.
    "<|tool_calls_section_begin|>",
    "<|tool_calls_section_end|>",
    "<|tool_call_section_begin|>",
    "<|tool_call_section_end|>",
    "<|tool_call_begin|>",
    "<|tool_call_end|>",
    "<|tool_call_argument_begin|>",
    "<|tool_call|>",
    "<|tool_call_start|>",
    "<|tool_call:start|>",
    "<|tool_call:end|>",
    "<|tool_arg:start|>",
    "<|tool_arg:value|>",
    "<|tool_arg:end|>",
    "<|tool_sep|>",
    "<|function_call|>",
    "<|python_tag|>",
    "<|python_start|>",
    "<|python_end|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|eot|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|im_middle|>",
    "<|start|>",
    "<|end|>",
    "<|channel|>",
    "<|message|>",
    "<|constrain|>",
    "<|call|>",
    "<|return|>",
    "<|observation|>",
    "<|START_ACTION|>",
    "<|END_ACTION|>",
    "<|action_end|>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|tool_call>",
    "<tool_call|>",
    "<|tool_response>",
    "<tool_response|>",
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁calls▁end｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁sep｜>",
    "<｜tool▁outputs▁begin｜>",
    "<｜tool▁outputs▁end｜>",
    "<｜tool▁output▁begin｜>",
    "<｜tool▁output▁end｜>",
    "<｜end▁of▁sentence｜>",
    // Bracketed words.
    "[TOOL_CALLS]",
    "[/TOOL_CALLS]",
    "[TOOL_CALL]",
    "[/TOOL_CALL]",
    "[TOOL_REQUEST]",
    "[END_TOOL_REQUEST]",
    "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]",
];

/// The spellings each key stands for, each with its bar.
type Table = HashMap<Key, Vec<(Bar, &'static str)>, FnvBuild>;

/// The tokens as their formats write them, by key, each with the bar it is written with (an
/// open-ended tag's name, `<invoke`, stands without its `>`).
fn table() -> &'static Table {
    static T: OnceLock<Table> = OnceLock::new();
    T.get_or_init(|| {
        let mut t = Table::default();
        for &tok in TOKENS {
            let read = match tok.ends_with(['>', ']']) {
                true => read(tok.as_bytes()),
                false => read_name(format!("{tok} ").as_bytes()),
            };
            if let Some(r) = read {
                t.entry(r.key).or_default().push((r.bar, tok));
            }
        }
        t
    })
}

/// Whether `s` is written as some format writes a token: listed here, a whole token a
/// detector is found by, or one a row of the format table reads (DeepSeek's reader takes
/// `<｜tool_calls_begin｜>` as written, and Step3 writes it so).
fn canonical(s: &[u8]) -> bool {
    static SET: OnceLock<HashSet<&'static [u8], FnvBuild>> = OnceLock::new();
    SET.get_or_init(|| {
        let rows = crate::families::rows().iter().flat_map(|r| r.tokens());
        let markers = crate::families::detectors()
            .iter()
            .flat_map(|d| d.triggers())
            .copied()
            .chain(rows)
            .filter(|t| t.starts_with(['<', '[']) && t.ends_with(['>', ']']));
        TOKENS
            .iter()
            .copied()
            .chain(markers)
            .map(str::as_bytes)
            .collect()
    })
    .contains(s)
}

/// The spellings the token `r` may stand for: its key's (or, failing that, its key's with one
/// `call` for `calls`, or the reverse), each with the bar it is written with.
fn respellings(r: &Read) -> Option<&'static [(Bar, &'static str)]> {
    let t = table();
    if let Some(list) = t.get(&r.key) {
        return Some(list);
    }
    let at = r
        .key
        .word
        .as_slice()
        .windows(4)
        .position(|p| p == b"call")?;
    let mut other = r.key.clone();
    other.word = r.key.word.with_s(at + 4);
    t.get(&other).map(Vec::as_slice)
}

/// A reply read with its respelled tokens written as their formats write them.
pub(crate) struct Respelled {
    pub(crate) text: String,
    /// Each token replaced: where it stands in `text`, and where in the reply as written.
    swaps: Vec<(Range<usize>, Range<usize>)>,
}

/// A token read in the reply that may be respelled.
struct Found {
    at: usize,
    len: usize,
    bar: Bar,
    options: &'static [(Bar, &'static str)],
    /// Some format reads it as written.
    read_as_written: bool,
}

/// The reply with every token-shaped span that reads as a format's token, but is not
/// written as one, replaced by the format's spelling; `None` when there is none.
pub(crate) fn respelled(text: &str) -> Option<Respelled> {
    let bytes = text.as_bytes();
    // First the tokens, and the bars of those that read as one format's only: Kimi's and
    // DeepSeek's tokens share words, and the reply's other tokens say which it writes.
    let mut found: Vec<Found> = Vec::new();
    let (mut ascii, mut full) = (0usize, 0usize);
    let mut from = 0;
    while let Some(n) = memchr::memchr2(b'<', b'[', &bytes[from..]) {
        let at = from + n;
        from = at + 1;
        let rest = &bytes[at..];
        // A token's word, bar or slash comes first (one space may stand before it).
        let next = match rest.get(1) {
            Some(b' ') => rest.get(2),
            b => b,
        };
        if !next.is_some_and(|&c| c.is_ascii_alphabetic() || matches!(c, b'|' | b'/' | 0xEF)) {
            continue;
        }
        let Some((r, options)) = [read(rest), read_name(rest)]
            .into_iter()
            .flatten()
            .find_map(|r| respellings(&r).map(|o| (r, o)))
        else {
            continue;
        };
        from = at + r.len;
        let written = &rest[..r.len];
        let listed = options.iter().find(|(_, s)| s.as_bytes() == written);
        match listed.map(|(b, _)| *b).or(match options {
            [(b, _)] => Some(*b),
            _ => None,
        }) {
            Some(Bar::Ascii) => ascii += 1,
            Some(Bar::Full) => full += 1,
            _ => {}
        }
        // `[Tool Calls](url)` is a link's text.
        let link = r.key.square && rest.get(r.len) == Some(&b'(');
        // A spelling a format reads as written stays, unless its word is both Kimi's and
        // DeepSeek's and the reply's other tokens are the other's.
        let read_as_written = canonical(written);
        let both = [Bar::Ascii, Bar::Full].map(|b| options.iter().any(|(o, _)| *o == b));
        if listed.is_none() && !link && (!read_as_written || both == [true, true]) {
            found.push(Found {
                at,
                len: r.len,
                bar: r.bar,
                options,
                read_as_written,
            });
        }
    }
    if found.is_empty() {
        return None;
    }
    let mut o = Respelled {
        text: String::with_capacity(text.len() + 16),
        swaps: Vec::new(),
    };
    let mut copied = 0;
    for f in found {
        let Found {
            at,
            len,
            bar,
            options,
            read_as_written,
        } = f;
        let prefer = match ascii.cmp(&full) {
            std::cmp::Ordering::Greater => Bar::Ascii,
            std::cmp::Ordering::Less => Bar::Full,
            std::cmp::Ordering::Equal => bar,
        };
        if read_as_written && prefer == bar {
            continue;
        }
        let Some(&(_, spelling)) = options
            .iter()
            .find(|(b, _)| *b == prefer)
            .or(options.first())
        else {
            continue;
        };
        o.text.push_str(&text[copied..at]);
        let start = o.text.len();
        o.text.push_str(spelling);
        o.swaps.push((start..o.text.len(), at..at + len));
        copied = at + len;
    }
    if o.swaps.is_empty() {
        return None;
    }
    o.text.push_str(&text[copied..]);
    Some(o)
}

impl Respelled {
    /// Where `p` of the view stands in the reply as written: a position inside a replaced
    /// token goes to the token's start (`end` false) or end (`end` true).
    fn original(&self, p: usize, end: bool) -> usize {
        let i = self.swaps.partition_point(|(v, _)| v.start < p);
        // Swaps before `i` start before `p`; the last of them may hold it.
        match i.checked_sub(1).map(|j| &self.swaps[j]) {
            None => p,
            Some((v, o)) if p < v.end => match end {
                true => o.end,
                false => o.start,
            },
            Some((v, o)) => o.end + (p - v.end),
        }
    }

    /// The span of the reply as written that `span` of the view covers.
    pub(crate) fn span(&self, span: &Range<usize>) -> Range<usize> {
        self.original(span.start, false)..self.original(span.end, true)
    }

    /// Whether a replaced token's spelling is in `s` (an argument read off the view would
    /// then hold bytes the reply does not).
    pub(crate) fn holds_a_spelling(&self, s: &str) -> bool {
        self.swaps
            .iter()
            .any(|(v, _)| s.contains(&self.text[v.clone()]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(s: &str) -> String {
        respelled(s).map_or_else(|| s.to_string(), |r| r.text)
    }

    #[test]
    fn tokens_spelled_another_way_read_as_their_format_writes_them() {
        assert_eq!(
            view("a <tool_call >x</tool_call >"),
            "a <tool_call>x</tool_call>"
        );
        assert_eq!(view("<TOOL-CALL>x</Tool_Call>"), "<tool_call>x</tool_call>");
        assert_eq!(view("<toolcall>x</toolcall>"), "<tool_call>x</tool_call>");
        assert_eq!(view("<| channel |>x<|Message|>"), "<|channel|>x<|message|>");
        // Kimi's and DeepSeek's tokens share words: the reply's other tokens say which.
        assert_eq!(
            view("<｜tool_calls_section_begin｜><｜tool_call_begin｜>"),
            "<|tool_calls_section_begin|><|tool_call_begin|>"
        );
        assert_eq!(
            view("<｜tool-calls-begin｜><｜tool-call-begin｜>"),
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>"
        );
        assert_eq!(view("[TOOL-CALLS] [x]"), "[TOOL_CALLS] [x]");
        assert_eq!(view("<|python-tag|>x"), "<|python_tag|>x");
        assert_eq!(view("<INVOKE name=\"x\">"), "<invoke name=\"x\">");
        assert_eq!(view("<Function=get>"), "<function=get>");
    }

    #[test]
    fn what_no_format_writes_stays() {
        for s in [
            "<div>x</div>",
            "<tool_call>x</tool_call>",
            "<|tool_call_end|> <｜tool▁call▁end｜>",
            "see [Tool Calls](https://x)",
            "a < b > c",
            "<toolbox>",
            "[1] [NOTE]",
            "<a href=\"x\">",
        ] {
            assert!(respelled(s).is_none(), "{s}");
        }
    }

    #[test]
    fn spans_map_back_onto_the_reply_as_written() {
        let t = "ok <TOOL CALL>{\"a\": 1}</ToolCall> done";
        let r = respelled(t).expect("respelled");
        let v = &r.text;
        let start = v.find('<').unwrap();
        let end = v.rfind('>').unwrap() + 1;
        assert_eq!(
            &t[r.span(&(start..end))],
            "<TOOL CALL>{\"a\": 1}</ToolCall>"
        );
        let brace = v.find('{').unwrap()..v.find('}').unwrap() + 1;
        assert_eq!(&t[r.span(&brace)], "{\"a\": 1}");
        assert_eq!(r.span(&(0..2)), 0..2);
        let tail = v.rfind("done").unwrap();
        assert_eq!(&t[r.span(&(tail..v.len()))], "done");
    }

    #[test]
    fn a_spelling_some_format_reads_as_written_stays() {
        // Step3 writes DeepSeek's words with `_`; Phi-4 writes `<|assistant|>`.
        for s in [
            "<｜tool_calls_begin｜><｜tool_call_begin｜>",
            "<|/tool_call|><|assistant|>",
        ] {
            assert!(respelled(s).is_none(), "{s}");
        }
    }

    #[test]
    fn every_listed_token_reads_as_itself() {
        for &tok in TOKENS {
            let s = match tok.ends_with(['>', ']']) {
                true => tok.to_string(),
                false => format!("{tok} name=\"x\">"),
            };
            assert!(respelled(&s).is_none(), "{tok}");
        }
    }
}
