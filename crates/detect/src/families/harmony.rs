//! `harmony`: OpenAI gpt-oss's Harmony messages (openai/harmony `docs/format.md`).
//!
//! A model output is a sequence of messages `<|start|>{header}<|message|>{body}<|end|>`
//! (`<|call|>` ends a tool call, `<|return|>` the final answer). The header holds the role,
//! `<|channel|>analysis|commentary|final`, optionally `<|constrain|>json` or a content type,
//! and for a tool call the recipient `to=functions.NAME` (in the role part or the channel
//! part). The first message of an output usually lacks `<|start|>assistant` (the prompt
//! ended with it), and the last one its `<|call|>` (a stop token servers strip).
//!
//! A message is a call when its header names a recipient other than a role and its body is
//! complete: a JSON object (`functions.NAME` is the tool `NAME`; another namespace keeps the
//! whole recipient, `browser.search`), or, for the built-in `python` tool, the code up to
//! `<|call|>` (`{"code": ..}`). An output with complete messages is a leak whether or not
//! one is a call, unless a message addressed to a tool does not parse (a call cut short: the
//! output stays whole). Then:
//! - every call message goes whole, header, body and terminator;
//! - every other message keeps its body as text and loses its header and terminator (the
//!   analysis and final text stay; no separator is inserted where the tokens were);
//! - after a terminator, words that can only be header (`commentary`, `to=..`, `json`)
//!   up to the next header token are header too (gpt-oss writes them, openai/harmony#68);
//! - a terminator with no header before it ends a headerless first message: it goes, the
//!   text before it stays.
//!
//! Each removed piece is its own leak (the call's piece carries the call), so the ledger
//! keeps exactly the bytes that went.
//!
//! May depend on: `crate::grammar`, `super::engine`, `crate::types`, `crate::Ctx`.

use super::util::merge;
use crate::grammar::json;
use crate::grammar::text::{skip_ws, AnyFinder};
use crate::types::{Call, Family};
use crate::{Ctx, Leak};
use serde_json::{json, Value};
use std::ops::Range;

/// Literal markers one of which any leak of this family contains.
pub(crate) const TRIGGERS: &[&str] = &[MESSAGE];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

const START: &str = "<|start|>";
const CHANNEL: &str = "<|channel|>";
const CONSTRAIN: &str = "<|constrain|>";
const MESSAGE: &str = "<|message|>";
const END: &str = "<|end|>";
const CALL: &str = "<|call|>";
const RETURN: &str = "<|return|>";
const TOKENS: &[&str] = &[START, CHANNEL, CONSTRAIN, MESSAGE, END, CALL, RETURN];

/// Most tokens read in one message: an output has a handful of messages; the bound keeps
/// a text made of tokens linear.
const MAX_TOKENS: usize = 1024;

/// Words that can only be part of a header.
const HEADER_WORDS: &[&str] = &[
    "assistant",
    "analysis",
    "commentary",
    "final",
    "json",
    "code",
];

/// One message of the output.
struct Message {
    /// Header, from its first byte to past `<|message|>`.
    header: Range<usize>,
    /// The body.
    body: Range<usize>,
    /// The terminator, if the message has one.
    term: Option<Range<usize>>,
    /// The recipient named in the header.
    recipient: Option<String>,
}

/// Appends the Harmony leaks of `text`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let (messages, orphans) = messages(text, ctx);
    let calls: Vec<Option<(Call, usize)>> = messages.iter().map(|m| call_of(text, m)).collect();
    if calls.iter().all(Option::is_none) {
        // An output of messages without a call still loses its frames (a server that kept
        // the special tokens showed them), unless a message addressed to a tool did not
        // parse: a call cut short is never read, so nothing of it goes.
        let addressed = messages.iter().any(|m| {
            m.recipient.is_some() && !is_tool_result(text.get(m.header.clone()).unwrap_or_default())
        });
        if messages.is_empty() || addressed {
            return;
        }
    }
    let mut pieces: Vec<(Range<usize>, Vec<Call>)> =
        orphans.into_iter().map(|r| (r, Vec::new())).collect();
    for (m, call) in messages.iter().zip(calls) {
        match call {
            Some((c, end)) => pieces.push((m.header.start..end, vec![c])),
            // A tool's message (`<|start|>functions.NAME to=assistant..`) in the model's own
            // output is a result it made up: it goes whole, with the call it answers.
            None if is_tool_result(text.get(m.header.clone()).unwrap_or_default()) => {
                let end = m.term.as_ref().map_or(m.body.end, |t| t.end);
                pieces.push((m.header.start..end, Vec::new()));
            }
            None => {
                pieces.push((m.header.clone(), Vec::new()));
                match &m.term {
                    Some(t) => pieces.push((t.clone(), Vec::new())),
                    // A terminator the end cut short (`<|ret`) goes as a whole one would.
                    None if crate::grammar::text::cut_tag_start(text) == Some(m.body.end) => {
                        pieces.push((m.body.end..text.len(), Vec::new()))
                    }
                    None => {}
                }
            }
        }
    }
    merge(text, Family::Harmony, pieces, out);
}

/// The messages of the output, and the terminators that end a headerless message.
fn messages(text: &str, ctx: &Ctx<'_>) -> (Vec<Message>, Vec<Range<usize>>) {
    let mut tokens = AnyFinder::new(text, TOKENS);
    let mut out = Vec::new();
    let mut orphans = Vec::new();
    // End of the last markup read: where a following header may begin.
    let mut boundary = 0;
    let mut header: Option<usize> = None;
    let mut body: Option<(usize, usize)> = None; // (header start, body start)
    let mut from = 0;
    let open_body = |out: &mut Vec<Message>, hs: usize, bs: usize, end: usize, term| {
        let recipient = recipient(text.get(hs..bs).unwrap_or_default());
        out.push(Message {
            header: hs..bs,
            body: bs..end,
            term,
            recipient,
        });
    };
    for _ in 0..MAX_TOKENS {
        let Some((pos, len)) = tokens.find(from) else {
            break;
        };
        from = pos + len;
        if ctx.quoted(pos) {
            continue;
        }
        let tok = text.get(pos..pos + len).unwrap_or_default();
        match tok {
            START | CHANNEL | CONSTRAIN => {
                if let Some((hs, bs)) = body.take() {
                    // The body ran into the next header: the message was not terminated.
                    open_body(&mut out, hs, bs, pos, None);
                    boundary = pos;
                }
                if header.is_none() && tok != CONSTRAIN {
                    header = Some(header_start(text, boundary, pos, out.is_empty()));
                }
            }
            MESSAGE => {
                if let Some((hs, bs)) = body.take() {
                    open_body(&mut out, hs, bs, pos, None);
                    boundary = pos;
                }
                let hs = match header.take() {
                    Some(h) => h,
                    None if is_header(text.get(boundary..pos).unwrap_or_default())
                        && (boundary > 0 || !out.is_empty() || !orphans.is_empty()) =>
                    {
                        boundary
                    }
                    // A header whose `<|channel|>` alone was lost (`commentary
                    // to=functions.f <|constrain|>json<|message|>`): only with a recipient,
                    // which prose does not write, standing apart from the text before it.
                    None => match recipient_header(text.get(boundary..pos).unwrap_or_default()) {
                        Some(i) => boundary + i,
                        None => continue,
                    },
                };
                body = Some((hs, pos + len));
            }
            _ => {
                // A terminator.
                match body.take() {
                    Some((hs, bs)) => open_body(&mut out, hs, bs, pos, Some(pos..pos + len)),
                    None if header.is_none() => orphans.push(pos..pos + len),
                    None => continue,
                }
                header = None;
                boundary = pos + len;
            }
        }
    }
    if let Some((hs, bs)) = body {
        // A terminator the end cut short (`<|ca`) is not the body's.
        let end = crate::grammar::text::cut_tag_start(text).filter(|&c| c >= bs);
        open_body(&mut out, hs, bs, end.unwrap_or(text.len()), None);
    }
    (out, orphans)
}

/// Where the header whose first token is at `pos` begins: at `boundary` when only header
/// words stand between (they belong to it), else at the token.
fn header_start(text: &str, boundary: usize, pos: usize, first: bool) -> usize {
    let gap = text.get(boundary..pos).unwrap_or_default();
    // At the very start of the output only a recipient (`to=..`, the prompt's
    // `<|start|>assistant` being already written) may stand before the first token.
    let ok = is_header(gap) && (!first || boundary > 0 || gap.contains("to="));
    if ok {
        return boundary;
    }
    // A recipient glued to the end of a sentence (`Checking.to=functions.f<|channel|>..`):
    // the header starts at `to=`.
    match gap.rfind("to=") {
        Some(i)
            if is_header(&gap[i..])
                && gap[..i]
                    .chars()
                    .next_back()
                    .is_none_or(|c| c.is_whitespace() || matches!(c, '.' | '!' | '?' | ':')) =>
        {
            boundary + i
        }
        _ => pos,
    }
}

/// Where the header ends `gap` that holds a recipient (`to=..`), its channel and role
/// words before it (glued or spaced), when what precedes them ends a sentence or a line.
fn recipient_header(gap: &str) -> Option<usize> {
    let to = gap.rfind("to=")?;
    if !is_header(gap.get(to..)?) {
        return None;
    }
    let mut before = gap.get(..to)?.trim_end_matches([' ', '\t']);
    if let Some(b) = CHANNELS.iter().find_map(|w| before.strip_suffix(w)) {
        before = b.trim_end_matches([' ', '\t']);
    }
    if let Some(b) = before.strip_suffix("assistant") {
        before = b.trim_end_matches([' ', '\t']);
    }
    let apart = before.is_empty() || before.ends_with(['.', '!', '?', ':', '\n']);
    apart.then_some(before.len())
}

/// Whether a message header is a tool's: its author a tool (`functions.NAME`, `browser.x`,
/// `python`) writing to the assistant.
fn is_tool_result(header: &str) -> bool {
    let h = header
        .trim_start()
        .strip_prefix(START)
        .unwrap_or(header)
        .trim_start();
    let author = h
        .split(|c: char| c.is_whitespace() || c == '<')
        .next()
        .unwrap_or("");
    recipient(h).as_deref() == Some("assistant")
        && !matches!(author, "assistant" | "user" | "system" | "developer" | "")
}

/// Whether `gap` holds nothing but header words.
fn is_header(gap: &str) -> bool {
    gap.split_whitespace()
        .all(|w| HEADER_WORDS.contains(&w) || w.starts_with("to=") || w.starts_with(CONSTRAIN))
}

/// The recipient `to=NAME` named in a header.
fn recipient(header: &str) -> Option<String> {
    let i = header.find("to=")?;
    let rest = header.get(i + 3..)?;
    let mut end = rest
        .find(|c: char| c.is_whitespace() || c == '<')
        .unwrap_or(rest.len());
    // A display name with spaces (`to=functions.Web Search <|constrain|>json`): the words
    // after it up to the next token, while none is a header word.
    let tail = rest.get(end..)?;
    let words = tail.get(..tail.find('<').unwrap_or(tail.len()))?;
    if !words.trim().is_empty()
        && words.split_whitespace().all(|w| {
            !HEADER_WORDS.contains(&w)
                && !w.starts_with("to=")
                && w.chars().all(char::is_alphanumeric)
        })
    {
        end += words.trim_end().len();
    }
    let r = rest.get(..end)?;
    (!r.is_empty()).then(|| r.to_string())
}

/// Channel words of a header.
pub(crate) const CHANNELS: &[&str] = &["commentary", "analysis", "final"];

/// Harmony with its special tokens stripped (a server decoded with `skip_special_tokens`):
/// `assistantcommentary to=functions.NAME json{..}`. For the `{` at `brace`: where the
/// header's residue starts (its role and channel words, glued or not) and the readings of the
/// tool's name (a glued `json` or channel word may end the recipient: `NAMEjson`). Only the
/// `functions.` namespace, or a bare name right after a channel word: a built-in's
/// arguments are not JSON-marked.
pub(crate) fn stripped(text: &str, brace: usize) -> Option<(usize, Vec<(usize, &str)>)> {
    let mut floor = brace.saturating_sub(256);
    while !text.is_char_boundary(floor) {
        floor += 1;
    }
    let head = text.get(floor..brace)?;
    let namespaced = head.contains("to=functions.");
    let (to, name_at) = match head.rfind("to=functions.") {
        Some(i) => (floor + i, floor + i + "to=functions.".len()),
        // A recipient without the namespace counts only right after a channel word
        // (`commentary to=read code {..}`), the header's own shape.
        None => {
            let i = floor + head.rfind("to=")?;
            let before = text.get(..i)?.trim_end_matches([' ', '\t']);
            if !CHANNELS.iter().any(|w| before.ends_with(w)) {
                return None;
            }
            (i, i + "to=".len())
        }
    };
    let rest = text.get(name_at..brace)?;
    let name_len = rest
        .char_indices()
        .find(|(_, c)| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':')))
        .map_or(rest.len(), |(i, _)| i);
    let gap = rest.get(name_len..)?;
    // Header words, and at most one other short word where the content type goes (a
    // constraint other than `json`, as a model garbled it). Under the `functions.`
    // namespace the header's words may be garbled further: a channel word in another
    // script, a word glued before `json` (`付款json`), two such words at most.
    let mut other = 0;
    let header = gap.split_whitespace().all(|w| {
        // Punctuation a garbled constraint token left around its word (`(json`).
        let w = match namespaced {
            true => w.trim_matches(|c: char| c.is_ascii_punctuation()),
            false => w,
        };
        w.is_empty() || header_words_only(w) || {
            other += 1;
            let plain = w.len() <= 16 && w.bytes().all(|b| b.is_ascii_lowercase());
            let garbled = w.chars().count() <= 24 && w.chars().all(char::is_alphabetic);
            (other == 1 && plain) || (namespaced && other <= 2 && garbled)
        }
    });
    if !header {
        return None;
    }
    let mut name = rest.get(..name_len)?;
    let mut names = vec![(0, name)];
    while let Some(shorter) = ["json", "code"]
        .iter()
        .chain(CHANNELS)
        .find_map(|w| name.strip_suffix(w))
    {
        name = shorter;
        names.push((0, name));
    }
    // Before `to=`: the channel word, then the role, each glued or spaced.
    let mut start = to;
    let mut before = text.get(..start)?.trim_end_matches([' ', '\t']);
    if let Some(b) = CHANNELS.iter().find_map(|w| before.strip_suffix(w)) {
        before = b.trim_end_matches([' ', '\t']);
        start = before.len();
    }
    if let Some(b) = before.strip_suffix("assistant") {
        start = b.len();
    }
    let lead = text.get(..start)?.trim_end_matches([' ', '\t']);
    // A header after a word of prose (`still to=functions.NAME ..`) is read only under the
    // namespace, which prose does not write; the word stays.
    let apart = start > lead.len() && namespaced;
    // Or glued to a sentence's end, as the other stripped forms are read (`Done.to=..`).
    let glued = namespaced && lead.ends_with(['.', '!', '?', '。']);
    let attached = start < to || lead.is_empty() || lead.ends_with('\n') || apart || glued;
    attached.then_some((start, names))
}

/// Whether `word` is header words run together (`commentary`, `json`, `assistantfinal`).
pub(crate) fn header_words_only(word: &str) -> bool {
    let mut w = word;
    while !w.is_empty() {
        match HEADER_WORDS.iter().find(|h| w.starts_with(**h)) {
            Some(h) => w = &w[h.len()..],
            None => return false,
        }
    }
    true
}

/// A tool's message right after a stripped call, its tokens stripped too
/// (`functions.NAME to=assistant commentary json{..}`, glued or spaced): a result the model
/// made up, which goes with the call. Returns where it ends.
pub(crate) fn stripped_result(text: &str, end: usize) -> Option<usize> {
    let rest = text.get(end..)?;
    let t = rest.trim_start();
    let author = t
        .find(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':')))
        .unwrap_or(t.len());
    if author == 0 {
        return None;
    }
    let mut r = t
        .get(author..)?
        .trim_start_matches([' ', '\t'])
        .strip_prefix("to=assistant")?;
    loop {
        let w = r.trim_start_matches([' ', '\t']);
        match HEADER_WORDS[1..].iter().find(|h| w.starts_with(**h)) {
            Some(h) => r = &w[h.len()..],
            None => {
                r = w;
                break;
            }
        }
    }
    if !r.starts_with('{') {
        return None;
    }
    let (_, e) = json::value_at(text, text.len() - r.len())?;
    Some(e)
}

/// Whether header words (a role or a channel, glued or not) follow `end`: the next message
/// of a stripped Harmony output.
pub(crate) fn header_follows(text: &str, end: usize) -> bool {
    let rest = text.get(end..).unwrap_or_default().trim_start();
    rest.starts_with("assistant") || CHANNELS.iter().any(|w| rest.starts_with(w))
}

/// In a stripped Harmony output that held a call (`calls`: the spans of its calls): the
/// header words the stripping glued to the text, which go too. A channel word opening a line
/// glued to what follows (`analysisWe need..`, `finalThe answer`), every role and channel
/// pair (`assistantfinal`), and the header words glued right after a call's arguments
/// (`}assistant`, `}commentary`).
pub(crate) fn stripped_frame_words(text: &str, calls: &[Range<usize>]) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let first = text.len() - text.trim_start().len();
    let mut line = first;
    for _ in 0..MAX_TOKENS {
        let rest = text.get(line..).unwrap_or_default();
        if let Some(w) = CHANNELS.iter().find(|w| rest.starts_with(**w)) {
            // The output's first channel is glued to whatever its body starts with; on a
            // later line only to a new sentence (a word may start with `final`).
            let next = rest[w.len()..].chars().next();
            let glued = |c: char| !(c == ' ' || c == '\t') && (line == first || !c.is_lowercase());
            if next.is_none_or(glued) {
                out.push(line..line + w.len());
            }
        }
        match memchr::memchr(b'\n', rest.as_bytes()) {
            Some(i) => line += i + 1,
            None => break,
        }
    }
    for w in CHANNELS {
        let pair = format!("assistant{w}");
        let mut from = 0;
        for _ in 0..super::MAX_CANDIDATES {
            let Some(i) = text.get(from..).and_then(|r| r.find(&pair)) else {
                break;
            };
            // `to=assistantcommentary` is a tool's header, not a frame of the reply.
            if !text.get(..from + i).is_some_and(|h| h.ends_with("to=")) {
                out.push(from + i..from + i + pair.len());
            }
            from += i + pair.len();
        }
    }
    for call in calls {
        let mut at = call.end;
        loop {
            let rest = text.get(at..).unwrap_or_default();
            let Some(w) = std::iter::once(&"assistant")
                .chain(CHANNELS)
                .find(|w| rest.starts_with(**w))
            else {
                break;
            };
            out.push(at..at + w.len());
            at += w.len();
        }
    }
    out.sort_by_key(|r| (r.start, r.end));
    out.dedup_by(|b, a| b.start < a.end);
    out
}

/// The call a message makes, if it is one and its body is complete, and where the call's
/// markup ends. A body without a terminator is the JSON alone: text on the lines after it
/// is not part of the call (the stop token was stripped and something else followed).
fn call_of(text: &str, m: &Message) -> Option<(Call, usize)> {
    let recipient = m.recipient.as_deref()?;
    if matches!(recipient, "assistant" | "user" | "system" | "developer") {
        return None;
    }
    let name = recipient.strip_prefix("functions.").unwrap_or(recipient);
    // The header's tokens say it is a call, so a display name with spaces is one too.
    if !crate::grammar::plausible_name(name) {
        return None;
    }
    let body = text.get(m.body.clone())?;
    let at = skip_ws(body, 0);
    let mut end = m.term.as_ref().map_or(m.body.end, |t| t.end);
    let parsed = json::value_at(body, at).filter(|(_, e)| {
        let rest = body.get(*e..).unwrap_or_default();
        if rest.trim().is_empty() {
            return true;
        }
        let next_line = rest.trim_start_matches([' ', '\t']).starts_with('\n');
        if m.term.is_none() && next_line {
            end = m.body.start + e;
            return true;
        }
        false
    });
    let arguments = match parsed {
        Some((v, _)) => match json::decode_arguments(v) {
            v @ Value::Object(_) => v,
            _ => return None,
        },
        // The built-in python tool takes code; without `<|call|>` it may be cut off.
        None if name == "python"
            && m.term
                .as_ref()
                .is_some_and(|t| text.get(t.clone()) == Some(CALL)) =>
        {
            json!({ "code": body.trim() })
        }
        None => return None,
    };
    let call = Call {
        name: name.to_string(),
        arguments,
    };
    Some((call, end))
}
