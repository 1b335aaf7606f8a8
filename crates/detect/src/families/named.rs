//! The second anchor: a tool's name followed by a complete argument object or argument list,
//! standing as a line or a sentence of its own, with no wrapper around it. This is what
//! every format becomes once a server or a front end dropped its special tokens, and what
//! models write when a prompt taught them a bare form:
//!
//! - `NAME{json}`, `NAME {json}`: Mistral's `[TOOL_CALLS]NAME[ARGS]{..}` and DeepSeek V3.1's
//!   `NAME<｜tool▁sep｜>{..}` with their tokens stripped (reported as `mistral`);
//! - `functions.NAME:0{json}`: Kimi's call id with its tokens stripped (`kimi`);
//! - `NAME` on a line of its own, then `{json}` (GLM-4-0414, Functionary) (`glm`);
//! - `NAME({json})`, one positional object (`pythonic`);
//! - `[NAME]` on a line of its own, `{json}`, `[END_TOOL_REQUEST]`: LM Studio's request
//!   whose opener was mangled (`lmstudio`);
//! - `call:default_api:NAME{key:<ctrl46>v<ctrl46>}`: Gemini's own call syntax (`gemini`);
//! - `commentary to=functions.NAME json{..}`: Harmony with its tokens stripped (read by
//!   `harmony::stripped`, reported as `harmony`);
//! - `NAME(key="value", ...)`: a Python call without list brackets (Granite, Llama 3.2)
//!   (`pythonic`), keyword arguments only and a plain name (`main()` and `app.run(..)` end
//!   the scripts pasted into replies). This shape holds none of the prefilter's anchor bytes,
//!   so it is looked for only where a model writes a call before or after its prose: opening
//!   the message's first line, or opening its last line (or following a sentence's end on
//!   it) and ending the message (and on the lines of calls next to those), or as the whole
//!   message (then `NAME()` too). The name
//!   may stand in the tools' namespace (`functions.NAME(..)`, `tools.NAME(..)`,
//!   `default_api.NAME(..)`), and Gemini's code style wraps that in `print(..)`. The clean
//!   path pays a few byte comparisons for it, not a scan.
//!
//! The name alone is a weak marker: the call counts only for a tool the agent has enabled.
//! The tools are consulted only once a complete candidate stands in the text (arguments
//! parsed, the markup a line or sentence of its own), so ordinary prose never makes the
//! worker fetch them.
//!
//! May depend on: `super::util`, `super::harmony`, `super::gemini`, `crate::grammar`,
//! `crate::types`, `crate::Ctx`.

use super::util::{merge, with_trailing, Block, END_OF_TURN, MAX_CANDIDATES};
use super::{gemini, harmony};
use crate::grammar::brace::{self, BraceSyntax};
use crate::grammar::json;
use crate::grammar::python::{self, PyOpts};
use crate::grammar::text::{eat, skip_ws};
use crate::grammar::{is_ident_char, is_tool_name};
use crate::types::{Call, Family};
use crate::{Ctx, Leak};
use serde_json::Value;
use std::ops::Range;

/// A bare `{`, confirmed by [`probe`].
pub(crate) const TRIGGERS: &[&str] = &["{"];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

/// Gemini's string delimiter.
const GEMINI: BraceSyntax = BraceSyntax {
    quote: "<ctrl46>",
    type_quoted: false,
    bare_strict: false,
};

/// Gemma 4's call syntax with its special tokens stripped: `<|tool_call>` `<tool_call|>` and
/// the string delimiter `<|"|>` gone, `call:NAME{key:value,n:42}` left. Its values are read
/// only where they are unambiguous ([`BraceSyntax::bare_strict`]); numbers and booleans are
/// typed as the unstripped reader types bare ones.
const GEMMA4_STRIPPED: BraceSyntax = BraceSyntax {
    quote: "<|\"|>",
    type_quoted: false,
    bare_strict: true,
};

/// Gemma 4's verb before the name, all its stripping leaves of the markup.
const GEMMA4_VERB: &str = "call:";

/// How far before a `{` the name and what joins it to the object may start.
const LOOKBACK: usize = 192;

/// Appends the leaks found in `text`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let mut by_family: Vec<(Family, Block)> = Vec::new();
    let bytes = text.as_bytes();
    let mut from = 0;
    let mut seen = 0;
    while let Some(p) =
        memchr::memchr(b'{', bytes.get(from..).unwrap_or_default()).map(|i| from + i)
    {
        from = p + 1;
        if !probe(bytes, p) || ctx.quoted(p) {
            continue;
        }
        seen += 1;
        if seen > MAX_CANDIDATES {
            break;
        }
        let prev_end = by_family.last().map_or(usize::MAX, |(_, (s, _))| s.end);
        match at_brace(text, p, prev_end, ctx) {
            Some((family, span, call)) => {
                from = span.end;
                by_family.push((family, (span, vec![call])));
            }
            None => ctx.declined(p..p + 1, || {
                "no tool's name with a complete arguments object standing apart from the text"
                    .into()
            }),
        }
    }
    for (family, block) in python_lines(text, ctx) {
        by_family.push((family, block));
    }
    for block in tool_code_fences(text, ctx) {
        by_family.push((Family::JsonFence, block));
    }
    let harmony_calls: Vec<Range<usize>> = by_family
        .iter()
        .filter(|(f, _)| *f == Family::Harmony)
        .map(|(_, (span, _))| span.clone())
        .collect();
    if !harmony_calls.is_empty() {
        for r in harmony::stripped_frame_words(text, &harmony_calls) {
            if !harmony_calls
                .iter()
                .any(|c| c.start < r.end && r.start < c.end)
            {
                by_family.push((Family::Harmony, (r, Vec::new())));
            }
        }
    }
    for family in [
        Family::JsonFence,
        Family::Mistral,
        Family::Kimi,
        Family::Glm,
        Family::Pythonic,
        Family::Lmstudio,
        Family::Gemini,
        Family::Gemma4,
        Family::Harmony,
    ] {
        let blocks: Vec<Block> = by_family
            .iter()
            .filter(|(f, _)| *f == family)
            .map(|(_, b)| b.clone())
            .collect();
        if !blocks.is_empty() {
            merge(text, family, blocks, out);
        }
    }
}

/// The prefilter's look at a `{`: what a name could end with stands right before it (after
/// at most a few spaces): a name's last character, or `(`; after a line break, a name or
/// `[NAME]`'s `]`. And after it an object's first key (`"`) or its end (`}`): LaTeX's
/// `\frac{1}{2}`, code's `if x {` and templates' `{name}` stop here. Gemini's unquoted keys
/// pass only after its `default_api:` namespace.
pub(crate) fn probe(bytes: &[u8], p: usize) -> bool {
    if !name_before(bytes, p) {
        return false;
    }
    let mut q = p + 1;
    while q < p + 9 && bytes.get(q).is_some_and(u8::is_ascii_whitespace) {
        q += 1;
    }
    match bytes.get(q) {
        Some(b'"') => true,
        // An empty object only glued to its name (`get_time{}`): `{}` after a space is a
        // placeholder (`"{}".format`, `-exec rm {}`, `Foo {}`).
        Some(b'}') => (q == p + 1 && p > 0 && bytes[p - 1] != b' ') || kimi_id_before(bytes, p),
        // Gemini's `default_api:NAME{key:`: the namespace right before the name.
        Some(b) if b.is_ascii_alphabetic() || *b == b'_' => {
            let name = bytes[p.saturating_sub(128)..p]
                .iter()
                .rev()
                .take_while(|b| {
                    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.') || **b >= 0x80
                })
                .count();
            let head = &bytes[..p - name];
            head.ends_with(b"default_api:") || head.ends_with(GEMMA4_VERB.as_bytes())
        }
        _ => false,
    }
}

/// Whether Kimi's `NAME:N` call id stands before the `{` at `p` (spaces between).
fn kimi_id_before(bytes: &[u8], p: usize) -> bool {
    let head = bytes.get(..p).unwrap_or_default();
    let spaces = head
        .iter()
        .rev()
        .take(4)
        .take_while(|&&b| b == b' ')
        .count();
    let head = &head[..head.len() - spaces];
    let digits = head.iter().rev().take_while(|b| b.is_ascii_digit()).count();
    digits > 0 && head.len() > digits && head[head.len() - digits - 1] == b':'
}

/// Whether what a name could end with stands right before the `{` at `p`.
fn name_before(bytes: &[u8], p: usize) -> bool {
    let mut i = p;
    let floor = p.saturating_sub(8);
    let mut newlines = 0;
    while i > floor {
        match bytes[i - 1] {
            b' ' | b'\t' | b'\r' => i -= 1,
            b'\n' if newlines < 2 => {
                newlines += 1;
                i -= 1;
            }
            _ => break,
        }
    }
    let name = |b: &u8| b.is_ascii_alphanumeric() || *b == b'_' || *b >= 0x80;
    // The run of name bytes ending at `end`, and the byte before it.
    let run_before = |end: usize| {
        let start = end
            - bytes[end.saturating_sub(128)..end]
                .iter()
                .rev()
                .take_while(|b| name(b))
                .count();
        (start, start.checked_sub(1).and_then(|j| bytes.get(j)))
    };
    match i.checked_sub(1).and_then(|j| bytes.get(j)) {
        // A name on a line of its own (`functions.NAME:0` too): only spaces before it on its
        // line (not ```json).
        Some(b) if name(b) && newlines > 0 => {
            let word = |b: &u8| name(b) || matches!(b, b'.' | b':' | b'-');
            let mut k = i - bytes[i.saturating_sub(160)..i]
                .iter()
                .rev()
                .take_while(|b| word(b))
                .count();
            while k > 0 && matches!(bytes[k - 1], b' ' | b'\t') {
                k -= 1;
            }
            k == 0 || bytes[k - 1] == b'\n'
        }
        Some(b) if name(b) => true,
        // `NAME({`: a plain name, not a method (`x.find({`).
        Some(b'(') if newlines == 0 => {
            let (start, before) = run_before(i - 1);
            start < i - 1 && before != Some(&b'.')
        }
        Some(b']') => newlines > 0,
        _ => false,
    }
}

/// What joins a name to its object.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Join {
    /// Nothing, or spaces: `NAME{`, `NAME {`, `functions.NAME:0 {`.
    Glued,
    /// A line break: the name on a line of its own.
    Line,
    /// `NAME(`, closed by `)` after the object.
    Paren,
    /// `[NAME]` on a line of its own, closed by `[END_TOOL_REQUEST]`.
    Bracketed,
}

/// The call whose object starts at the `{` at `p`: its family, span and call.
fn at_brace(
    text: &str,
    p: usize,
    prev_end: usize,
    ctx: &Ctx<'_>,
) -> Option<(Family, Range<usize>, Call)> {
    let found = Found {
        text,
        ctx,
        prev_end,
    };
    if let Some((start, names)) = harmony::stripped(text, p) {
        let (args, end) = json_object(text, p)?;
        // The header words glued before `to=` are the boundary: no sentence check.
        return found.finish(Family::Harmony, start, end, &names, args, false);
    }
    let head = text.get(..p)?;
    let floor = p.saturating_sub(LOOKBACK);
    let spaced = head.trim_end_matches([' ', '\t']);
    let (join, name_end) = match spaced.as_bytes().last()? {
        b'(' => (Join::Paren, spaced.len() - 1),
        b'\n' => {
            let line = spaced.trim_end_matches(['\n', '\r']);
            let line = line.trim_end_matches([' ', '\t']);
            match line.as_bytes().last()? {
                b']' => (Join::Bracketed, line.len() - 1),
                _ => (Join::Line, line.len()),
            }
        }
        _ => (Join::Glued, spaced.len()),
    };
    let run = name_run(text, name_end, floor)?;
    let word = text.get(run.clone())?;
    // Before `(` a name is a plain one: `db.find({..})`, `x.sort({..})` are methods.
    if join == Join::Paren && (word.contains(['.', ':']) || text.get(..run.start)?.ends_with('.')) {
        return None;
    }
    let gemini = word.rfind("default_api:");
    if gemini.is_none() && join == Join::Glued {
        if let Some(call) = gemma4_stripped(&found, run.start, word, p) {
            return call;
        }
    }
    let mut family = match join {
        _ if gemini.is_some() => Family::Gemini,
        Join::Glued => Family::Mistral,
        Join::Line => Family::Glm,
        Join::Paren => Family::Pythonic,
        Join::Bracketed => Family::Lmstudio,
    };
    let (name_at, word) = match gemini {
        Some(i) => (
            run.start + i + "default_api:".len(),
            &word[i + "default_api:".len()..],
        ),
        None => (run.start, word),
    };
    let (counted, word) = strip_counter(word);
    if counted && gemini.is_none() {
        family = Family::Kimi;
    }
    let mut names: Vec<(usize, &str)> = Vec::new();
    match word.rfind("functions.") {
        // Kimi's namespace, maybe glued to a sentence's dot before it (`Done.functions.`).
        Some(i) if i == 0 || word[..i].ends_with('.') => {
            names.push((name_at + i, &word[i + "functions.".len()..]));
        }
        _ => {
            names.push((name_at, word));
            // Glued to the end of a sentence, `Done.NAME{` is the sentence's dot, then the
            // name. Before `(` a dot is a method's (`db.find({..})`), never a sentence's.
            if let Some((sentence, last)) = word.rsplit_once('.') {
                let glued = gemini.is_none() && join == Join::Glued;
                if glued && !last.is_empty() && !sentence.is_empty() {
                    names.push((name_at + sentence.len() + 1, last));
                }
            }
        }
    }
    let (args, mut end) = match gemini {
        Some(_) => brace::parse_object(text, p, &GEMINI)?,
        None => json_object(text, p)?,
    };
    match join {
        Join::Paren => end = eat(text, skip_ws(text, end), ")")?,
        Join::Bracketed => end = eat(text, skip_ws(text, end), "[END_TOOL_REQUEST]")?,
        Join::Glued | Join::Line => {}
    }
    if join == Join::Bracketed {
        // `[NAME]` opens its line.
        let open = text.get(..run.start)?.strip_suffix('[')?.len();
        names = vec![(open, word)];
    }
    if join == Join::Line && !names.first().is_some_and(|n| line_start(text, n.0)) {
        return None;
    }
    if let (Some(g), Some(first)) = (gemini, names.first_mut()) {
        // `call:default_api:NAME`, `declaration:default_api:NAME`, `startcall:..`: Gemini's
        // verb before the namespace is its markup; what the run holds before the verb is the
        // sentence it was glued to.
        let head = text.get(run.start..run.start + g).unwrap_or_default();
        let verb = ["startcall:", "declaration:", "call:"]
            .iter()
            .find_map(|v| head.rfind(v))
            .unwrap_or(g);
        first.0 = run.start + verb;
    }
    found.finish(family, 0, end, &names, args, true)
}

/// Gemma 4 stripped of its special tokens: `call:NAME{key:value}` (the run of name
/// characters `word` starting at `run_start`, the object at `p`), on a line of its own or
/// glued after a sentence's end like the other stripped forms (`Sure.call:NAME{..}`), for an
/// enabled tool. `None` where the run is no such call (then the other readings go on);
/// a call whose values are ambiguous is declined here, and no other reading takes it.
fn gemma4_stripped(
    found: &Found<'_, '_>,
    run_start: usize,
    word: &str,
    p: usize,
) -> Option<Option<(Family, Range<usize>, Call)>> {
    let text = found.text;
    // The verb starts the run, or follows the sentence's end glued to it (`look.call:`);
    // `startcall:` and `recall:` are other words.
    let verb = word.rfind(GEMMA4_VERB)?;
    if verb > 0 && !word[..verb].ends_with(['.', '!', '?', ':']) {
        return None;
    }
    let name = &word[verb + GEMMA4_VERB.len()..];
    if !is_tool_name(name) || name.contains(':') {
        return None;
    }
    let Some((args, end)) = brace::parse_object(text, p, &GEMMA4_STRIPPED) else {
        found.ctx.declined(run_start + verb..p + 1, || {
            "Gemma 4's call:NAME{..} with its <|\"|> delimiters stripped: a value holds `, ` \
             `{` `}` or `:` (or the object does not close), so where a string ends is ambiguous"
                .into()
        });
        return Some(None);
    };
    // What follows is a new line, the end, a sentence glued where `<tool_call|>` was, or
    // the next stripped call.
    let rest = text.get(end..).unwrap_or_default();
    let next = rest.chars().next();
    let glued_call = rest.starts_with(GEMMA4_VERB);
    if !glued_call && next.is_some_and(|c| !(c.is_whitespace() || c.is_uppercase() || c == '<')) {
        found.ctx.declined(run_start + verb..end, || {
            "Gemma 4's stripped call:NAME{..} runs into the text after it".into()
        });
        return Some(None);
    }
    let names = [(run_start + verb, name)];
    Some(found.finish(Family::Gemma4, 0, end, &names, args, true))
}

/// What every shape ends with: the text, the tools and where the previous call ended.
struct Found<'a, 't> {
    text: &'t str,
    ctx: &'a Ctx<'a>,
    /// A call starting right there (whitespace between) stands apart from the text: it
    /// follows another call whose tokens were stripped.
    prev_end: usize,
}

impl Found<'_, '_> {
    /// The common end of every shape: the markup stands apart, and the name is an enabled
    /// tool's. `names` are the readings of the name with where each starts (`Done.NAME{`
    /// reads `Done.NAME`, then `NAME` after the sentence's dot); `start` overrides them when
    /// non-zero.
    fn finish(
        &self,
        family: Family,
        start: usize,
        end: usize,
        names: &[(usize, &str)],
        args: Value,
        sentence: bool,
    ) -> Option<(Family, Range<usize>, Call)> {
        let text = self.text;
        // Text glued to the object (`..}I found it`) lost a token between: only a space then
        // a lower-case word says the sentence goes on about the call.
        let glued = text
            .get(end..)
            .and_then(|r| r.chars().next())
            .is_some_and(|c| !c.is_whitespace());
        let apart = glued
            || stands_after(text, end)
            || (family == Family::Harmony && harmony::header_follows(text, end));
        if !args.is_object() || !apart {
            return None;
        }
        let after_call = |s: usize| {
            self.prev_end <= s
                && text
                    .get(self.prev_end..s)
                    .is_some_and(|g| g.trim().is_empty())
        };
        let candidates: Vec<(usize, &str)> = names
            .iter()
            .map(|&(s, n)| (if start > 0 { start } else { s }, n))
            .filter(|&(s, n)| {
                is_tool_name(n) && (!sentence || stands_before(text, s) || after_call(s))
            })
            .collect();
        if candidates.is_empty() {
            return None;
        }
        let &(mut at, name) = candidates.iter().find(|(_, n)| self.ctx.tool_enabled(n))?;
        let mut end = end;
        if family == Family::Harmony {
            while let Some(e) = harmony::stripped_result(text, end) {
                end = e;
            }
        }
        if family == Family::Gemini {
            // Gemini frames its call with `<ctrlNN>` tokens glued to it: they go too.
            while let Some(tok) = text.get(..at).and_then(|h| h.rfind("<ctrl")) {
                match gemini::ctrl_token(text, tok) {
                    Some(e) if e == at => at = tok,
                    _ => break,
                }
            }
            while let Some(e) = gemini::ctrl_token(text, end) {
                end = e;
            }
        }
        let call = Call {
            name: name.to_string(),
            arguments: args,
        };
        // Kimi's closers the stripping left (`..}<|tool_call_end|><|tool_calls_section_end|>`)
        // are the call's.
        let own: &[&str] = match family {
            Family::Kimi => KIMI_CLOSERS,
            _ => &[],
        };
        Some((family, at..with_trailing(text, end, own), call))
    }
}

/// Kimi's closing tokens, which may outlive the stripping of its openers.
const KIMI_CLOSERS: &[&str] = &[
    "<|tool_call_end|>",
    "<|tool_calls_section_end|>",
    "<|tool_call_section_end|>",
];

/// A strict JSON object at `p` (a serialized object decoded once).
fn json_object(text: &str, p: usize) -> Option<(Value, usize)> {
    let (v, end) = json::value_at(text, p)?;
    match json::decode_arguments(v) {
        v @ Value::Object(_) => Some((v, end)),
        _ => None,
    }
}

/// The run of name characters (letters and digits of any script, `_ - . :`) ending at
/// `end`, no further back than `floor`.
fn name_run(text: &str, end: usize, floor: usize) -> Option<Range<usize>> {
    let head = text.get(..end)?;
    let mut start = end;
    for (i, c) in head.char_indices().rev() {
        if i < floor || !(is_ident_char(c) || matches!(c, '-' | '.' | ':')) {
            break;
        }
        start = i;
    }
    // A run starts with a letter or `_` (a sentence's dot or colon before it is not the
    // name's).
    let run = text.get(start..end)?;
    let lead = run.len() - run.trim_start_matches(['.', ':', '-']).len();
    (start + lead < end).then_some(start + lead..end)
}

/// `NAME:0` -> (true, `NAME`): Kimi's call counter.
fn strip_counter(word: &str) -> (bool, &str) {
    match word.rsplit_once(':') {
        Some((name, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => (true, name),
        _ => (false, word),
    }
}

/// Whether `start` begins a line (only spaces before it on its line).
fn line_start(text: &str, start: usize) -> bool {
    let head = text.get(..start).unwrap_or_default();
    let t = head.trim_end_matches([' ', '\t']);
    t.is_empty() || t.ends_with('\n')
}

/// Whether markup starting at `start` stands apart from the text before it: at the start of
/// the text or a line, or after the end of a sentence, a colon or a tag (glued to it or
/// not), in any script (`执行：NAME{..}`: full-width punctuation ends a clause too). A name inside a sentence (`use search {..}`) is prose about the tool, and one after
/// code (`map[string]string{..}`) is code.
pub(crate) fn stands_before(text: &str, start: usize) -> bool {
    let head = text.get(..start).unwrap_or_default();
    match head.trim_end_matches([' ', '\t']).chars().next_back() {
        None => true,
        Some(c) => matches!(
            c,
            '\n' | '\r' | '.' | '!' | '?' | ':' | '>' | '：' | '。' | '！' | '？' | '；' | '，'
        ),
    }
}

/// Whether markup ending at `end` stands apart from the text after it: the end of the text
/// or a line, a control token or more markup, or a new sentence.
pub(crate) fn stands_after(text: &str, end: usize) -> bool {
    let rest = text.get(end..).unwrap_or_default();
    let t = rest.trim_start_matches([' ', '\t']);
    match t.chars().next() {
        None => true,
        Some(c) if matches!(c, '\n' | '\r' | '<' | '[' | '{') || c.is_uppercase() => true,
        Some('.' | '!') => t[1..].chars().next().is_none_or(char::is_whitespace),
        Some(_) => false,
    }
}

/// How far back from the end of the message the start of its last line is looked for: a
/// bare call on a longer last line is not looked for (the look costs every message that
/// ends with `)`).
const LAST_LINE: usize = 384;

/// Where the message's text starts and ends, without surrounding whitespace and the
/// end-of-turn tokens after it. Bytes only: the prefilter asks this of every message.
fn core_bounds(text: &str) -> (usize, usize) {
    let bytes = text.as_bytes();
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    let mut end = bytes.len();
    loop {
        while end > start && bytes[end - 1].is_ascii_whitespace() {
            end -= 1;
        }
        // Every end-of-turn token ends with `>`.
        if end == start || bytes[end - 1] != b'>' {
            return (start, end);
        }
        let head = text.get(..end).unwrap_or_default();
        match END_OF_TURN.iter().find(|tok| head.ends_with(**tok)) {
            Some(tok) => end -= tok.len(),
            None => return (start, end),
        }
    }
}

/// The namespaces a prompt may put the tools in, which a bare call then writes before the
/// name: OpenAI-style `functions.`, `tools.`, Gemini's `default_api.` (a method of anything
/// else is code: `app.run(debug=True)`).
const NAMESPACES: &[&str] = &["default_api.", "functions.", "tools."];

/// Where the name of a bare call whose line starts at `start` begins, past a namespace of
/// [`NAMESPACES`], and whether the call is wrapped in `print(..)` (Gemini's code execution
/// writes `print(default_api.NAME(..))`; only with a namespace).
fn call_prefix(bytes: &[u8], start: usize) -> (usize, bool) {
    let rest = bytes.get(start..).unwrap_or_default();
    let (inner, printed) = match rest.strip_prefix(b"print(") {
        Some(r) => (r, true),
        None => (rest, false),
    };
    match NAMESPACES
        .iter()
        .find(|ns| inner.starts_with(ns.as_bytes()))
    {
        Some(ns) => (bytes.len() - inner.len() + ns.len(), printed),
        None => (start, false),
    }
}

/// The `(` of a bare call opening the line that starts at `start` (`NAME(key=`, with a
/// namespace or in `print(` as [`call_prefix`] reads them), if one may be there.
fn line_opens_call(bytes: &[u8], start: usize) -> Option<usize> {
    let start = call_prefix(bytes, start).0;
    let name = bytes
        .get(start..)?
        .iter()
        .take(129)
        .take_while(|&&b| b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80)
        .count();
    let open = start + name;
    (name > 0 && call_shape(bytes, open)).then_some(open)
}

/// Where the last line starts, when the message ends with `)` (a call may end it) and the
/// line is not longer than [`LAST_LINE`].
fn last_line(bytes: &[u8], start: usize, end: usize) -> Option<usize> {
    if end <= start || bytes.get(end - 1) != Some(&b')') {
        return None;
    }
    let floor = start.max(end.saturating_sub(LAST_LINE));
    let line = match memchr::memrchr(b'\n', bytes.get(floor..end)?) {
        Some(i) => floor + i + 1,
        None if floor == start => start,
        None => return None,
    };
    let spaces = bytes
        .get(line..end)?
        .iter()
        .take_while(|b| **b == b' ' || **b == b'\t')
        .count();
    Some(line + spaces)
}

/// The prefilter's check for bare Python calls, which hold no anchor byte: one may open the
/// message's first line (`NAME(key=` before the prose) or open its last line and end the
/// message (`NAME(key=..)` after the prose). A few byte comparisons per message, and a look
/// back over the last line only when the message ends with `)`.
pub(crate) fn lines_probe(text: &str) -> bool {
    let b = text.as_bytes();
    // The first line: a name, then `(` (plain loops: this runs for every message).
    let mut i = 0;
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    let line = i;
    let word = |mut i: usize| {
        let start = i;
        while i < b.len()
            && i - start < 129
            && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] >= 0x80)
        {
            i += 1;
        }
        i
    };
    let mut start = line;
    i = word(line);
    // A namespace (`functions.`) or `print(` before the name: read only when the first word
    // ends with one of their bytes, so plain prose pays nothing more.
    if i > line && matches!(b.get(i), Some(b'.' | b'(')) {
        let name = call_prefix(b, line).0;
        if name != line {
            start = name;
            i = word(name);
        }
    }
    if i > start && b.get(i) == Some(&b'(') && call_shape(b, i) {
        return true;
    }
    // `NAME()` is a call only as the whole message.
    if i > start && b.get(i) == Some(&b'(') && b.get(i + 1) == Some(&b')') {
        return core_bounds(text) == (line, i + 2);
    }
    let mut e = b.len();
    while e > line && b[e - 1].is_ascii_whitespace() {
        e -= 1;
    }
    // Most messages end with neither `)`, a token's `>` nor a fence: nothing more to look at.
    if e == line || !matches!(b[e - 1], b')' | b'>' | b'`') {
        return false;
    }
    if b[e - 1] == b'`' {
        return tool_code_ends(b, line, e);
    }
    let (start, end) = core_bounds(text);
    last_line(b, start, end)
        .is_some_and(|l| line_opens_call(b, l).is_some() || glued_call(b, l, end).is_some())
}

/// Where a bare call glued to the prose of the last line (the line starting at `line`,
/// the message ending at `end`) may start: right after a sentence's end, the first such
/// place where a call may open. Models that write their call after a sentence of their own
/// write it there: `Noted. NAME(key=..)`, `Noted!NAME(key=..)`. A `.` or `:` ends a
/// sentence only with a space after it (`app.run(debug=True)` is a method, `a:b(` no
/// sentence); `!` and `?` with or without.
fn glued_call(bytes: &[u8], line: usize, end: usize) -> Option<usize> {
    let seg = bytes.get(line..end)?;
    // Most last lines that end with `)` end with a link or an aside, whose `(` follows no
    // name and opens no `key=`: one SIMD look for a call's `(` before reading the line.
    if !memchr::memchr_iter(b'(', seg).any(|i| call_shape(bytes, line + i)) {
        return None;
    }
    seg.iter()
        .enumerate()
        .filter_map(|(i, b)| {
            let after = line + i + 1;
            let spaces = bytes
                .get(after..end)?
                .iter()
                .take_while(|&&c| c == b' ')
                .count();
            match b {
                b'!' | b'?' => Some(after + spaces),
                b'.' | b':' if spaces > 0 => Some(after + spaces),
                _ => None,
            }
        })
        .find(|&j| j < end && line_opens_call(bytes, j).is_some())
}

/// Whether the text (its bytes from `line` to `end`) ends with a fence whose
/// ```` ```tool_code ```` opener is near: the model stops after such a fence for the tool
/// to run, so it (or the made-up ```` ```tool_output ```` after it) ends the message. Out of
/// line: most messages never get here, and the search must not weigh on those that do not.
#[cold]
#[inline(never)]
fn tool_code_ends(b: &[u8], line: usize, end: usize) -> bool {
    if !b[line..end].ends_with(b"```") {
        return false;
    }
    let floor = end.saturating_sub(TOOL_CODE_LOOK).max(line);
    memchr::memmem::rfind(&b[floor..end], TOOL_CODE.as_bytes()).is_some()
}

/// Whether the `(` at `p` follows a name and opens a keyword argument list (`key=`, not
/// `==` or `=>`). The callers read the name from the line's start, where a method
/// (`app.run(`) stops at its dot. An empty list (`main()`) is too little markup: it ends
/// half the scripts ever pasted into a reply.
fn call_shape(bytes: &[u8], p: usize) -> bool {
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80;
    if bytes.get(p) != Some(&b'(')
        || !p
            .checked_sub(1)
            .and_then(|i| bytes.get(i))
            .is_some_and(|&b| ident(b))
    {
        return false;
    }
    let mut i = p + 1;
    while bytes.get(i).is_some_and(|b| *b == b' ') {
        i += 1;
    }
    let key = i;
    while bytes.get(i).is_some_and(|&b| ident(b)) && i < key + 64 {
        i += 1;
    }
    while bytes.get(i).is_some_and(|b| *b == b' ') {
        i += 1;
    }
    i > key && bytes.get(i) == Some(&b'=') && !matches!(bytes.get(i + 1), Some(b'=' | b'>'))
}

/// Bare Python calls where [`lines_probe`] looks (opening the first line or the last),
/// and on the lines of calls next to them. A message that is one bare call of an enabled
/// tool and nothing else is a call too (Granite's bare form, vLLM's `granite_pythonic`):
/// an assistant's whole reply is not an example of a call to its own tool. There, and only
/// there, an empty argument list (`list_files()`) counts as well.
fn python_lines(text: &str, ctx: &Ctx<'_>) -> Vec<(Family, Block)> {
    let mut found = python_candidates(text, ctx);
    if found.is_empty() {
        found.extend(whole_empty_call(text, ctx));
    }
    found
        .into_iter()
        .filter(|(_, c)| c.iter().all(|c| ctx.tool_enabled(&c.name)))
        .map(|b| (Family::Pythonic, b))
        .collect()
}

/// The complete bare calls standing where [`lines_probe`] looks, and on the lines of calls
/// after the first and before the last; tools not yet asked.
fn python_candidates(text: &str, ctx: &Ctx<'_>) -> Vec<Block> {
    let bytes = text.as_bytes();
    let (start, end) = core_bounds(text);
    let mut out: Vec<Block> = Vec::new();
    // Down from a call opening the first line, while each line opens with one.
    let mut at = start;
    for _ in 0..MAX_CANDIDATES {
        let Some(b) = line_opens_call(bytes, at).and_then(|_| call_at(text, at, ctx)) else {
            break;
        };
        at = skip_ws(text, b.0.end);
        out.push(b);
    }
    // Up from a call opening the last line and ending the message, while each line above
    // opens with a call that ends it.
    let mut line = last_line(bytes, start, end);
    let mut line_end = end;
    for round in 0..MAX_CANDIDATES {
        let Some(mut l) = line else {
            break;
        };
        // On the last line the call may follow a sentence of the model's own.
        if round == 0 && line_opens_call(bytes, l).is_none() {
            match glued_call(bytes, l, end) {
                Some(g) => l = g,
                None => break,
            }
        }
        let found = line_opens_call(bytes, l)
            .and_then(|_| call_at(text, l, ctx))
            .filter(|(span, _)| span.end >= line_end);
        let Some(b) = found else {
            break;
        };
        if out
            .iter()
            .any(|(s, _)| s.start < b.0.end && b.0.start < s.end)
        {
            break;
        }
        line_end = text.get(..b.0.start).unwrap_or_default().trim_end().len();
        let above = memchr::memrchr(b'\n', bytes.get(..line_end).unwrap_or_default());
        line = above
            .map(|i| skip_ws(text, i + 1))
            .filter(|_| line_end > start);
        out.push(b);
    }
    out.sort_by_key(|(s, _)| s.start);
    out
}

/// The call written as code at `start`: `NAME(key=..)`, in a tools' namespace, maybe in
/// Gemini's `print(..)` (see [`call_prefix`]); the call and where it ends. A plain name:
/// `app.run(debug=True)` is a method of the code around it.
pub(crate) fn code_call(text: &str, start: usize) -> Option<(Call, usize)> {
    let (name_at, printed) = call_prefix(text.as_bytes(), start);
    let (call, mut end) = python::parse_call(text, name_at, PyOpts::STRICT)?;
    if call.name.contains(['.', ':']) {
        return None;
    }
    if printed {
        end = eat(text, skip_ws(text, end), ")")?;
    }
    Some((call, end))
}

/// The opener of Google's code fence for calls (Gemma 3, Gemini).
const TOOL_CODE: &str = "```tool_code";

/// How far back from a fence ending the message its ```` ```tool_code ```` opener is looked
/// for.
const TOOL_CODE_LOOK: usize = 4096;

/// ```` ```tool_code ```` fences whose every line holding anything is one call written as
/// code ([`code_call`]) of an enabled tool: Gemma 3's and Gemini's way to call. A fence is
/// code, so this is the one place a code region is read; the leak is reported as
/// `json_fence` (a fence holding a call), which the driver lets stand in code.
fn tool_code_fences(text: &str, ctx: &Ctx<'_>) -> Vec<Block> {
    let mut out = Vec::new();
    for r in ctx.code.regions().iter().take(MAX_CANDIDATES) {
        let Some(fence) = text.get(r.clone()) else {
            continue;
        };
        let indent = fence.len() - fence.trim_start_matches(' ').len();
        let Some(rest) = fence[indent..].strip_prefix(TOOL_CODE) else {
            continue;
        };
        let Some(nl) = rest.find('\n') else {
            continue;
        };
        if !rest[..nl].trim().is_empty() || ctx.in_reasoning(r.start) {
            continue;
        }
        let from = r.start + indent + TOOL_CODE.len() + nl + 1;
        let to = text
            .get(..r.end)
            .and_then(|h| h.rfind('\n'))
            .unwrap_or(from);
        let Some(calls) = code_lines(text, from, to) else {
            continue;
        };
        if calls.is_empty() || !calls.iter().all(|c| ctx.tool_enabled(&c.name)) {
            continue;
        }
        out.push((r.start..with_trailing(text, r.end, &[]), calls));
    }
    out
}

/// The calls on the lines from `from` to `to` when every line holding anything is exactly
/// one call written as code.
fn code_lines(text: &str, from: usize, to: usize) -> Option<Vec<Call>> {
    let mut calls = Vec::new();
    let mut at = from;
    while at < to {
        let line_end = text.get(at..to)?.find('\n').map_or(to, |i| at + i);
        let line = text.get(at..line_end)?;
        if !line.trim().is_empty() {
            let start = at + (line.len() - line.trim_start().len());
            let (call, end) = code_call(text, start)?;
            if !text.get(end..line_end)?.trim().is_empty() {
                return None;
            }
            calls.push(call);
        }
        at = line_end + 1;
    }
    Some(calls)
}

/// `NAME()` as the whole message (end-of-turn tokens aside).
fn whole_empty_call(text: &str, ctx: &Ctx<'_>) -> Option<Block> {
    let bytes = text.as_bytes();
    let (start, end) = core_bounds(text);
    let open = end.checked_sub(2)?;
    let name = bytes.get(start..open)?;
    let plain = !name.is_empty()
        && name
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80)
        && bytes.get(open..end) == Some(b"()".as_slice());
    if !plain {
        return None;
    }
    call_at(text, start, ctx)
}

/// The bare call opening the line at `start`: complete, a plain name (maybe in a tools'
/// namespace, maybe in `print(..)`), standing apart.
fn call_at(text: &str, start: usize, ctx: &Ctx<'_>) -> Option<Block> {
    if ctx.quoted(start) {
        return None;
    }
    let (call, end) = code_call(text, start)?;
    if !stands_before(text, start) || !stands_after(text, end) {
        return None;
    }
    Some((start..with_trailing(text, end, &[]), vec![call]))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn run(text: &str, tools: &[&str]) -> crate::Detection {
        super::super::testing::detect_with(text, tools)
    }

    #[test]
    fn stripped_tokens_leave_a_name_and_its_object() {
        let d = run(
            "Let me look.functions.read_file:0{\"path\": \"a.md\"}",
            &["read_file"],
        );
        assert_eq!(d.leaks[0].calls[0].name, "read_file");
        assert_eq!(d.cleaned.as_deref(), Some("Let me look."));
        let d = run("get_weather{\"city\": \"Paris\"}", &["get_weather"]);
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"city": "Paris"}));
    }

    #[test]
    fn a_name_on_its_line_then_an_object() {
        let d = run(
            "I'll check.\nget_weather\n{\"city\": \"Paris\"}",
            &["get_weather"],
        );
        assert_eq!(d.cleaned.as_deref(), Some("I'll check."));
    }

    #[test]
    fn bare_python_calls_on_the_edge_lines() {
        let d = run(
            "get_weather(city=\"Paris\")\nLet me check.",
            &["get_weather"],
        );
        assert_eq!(d.cleaned.as_deref(), Some("Let me check."));
        let d = run("I'll check.\nget_weather(city=\"Paris\")", &["get_weather"]);
        assert_eq!(d.cleaned.as_deref(), Some("I'll check."));
        // A bare call opens its line, or follows a sentence's end on the last line and ends
        // the message (a look over that one line, only when the message ends with `)`).
        // Anywhere else in a line it is looked for nowhere: the clean path would have to scan
        // every line.
        let d = run("I'll check. get_weather(city=\"Paris\")", &["get_weather"]);
        assert_eq!(d.cleaned.as_deref(), Some("I'll check."));
        let d = run("Noted!get_weather(city=\"Paris\")\n", &["get_weather"]);
        assert_eq!(d.cleaned.as_deref(), Some("Noted!"));
        assert!(run("I'll check get_weather(city=\"Paris\")", &["get_weather"]).is_clean());
        assert!(run(
            "I'll check. get_weather(city=\"Paris\") now.",
            &["get_weather"]
        )
        .is_clean());
        assert!(run("Done. get_weather(city=\"Paris\")", &["search"]).is_clean());
        let d = run("a(x=1)\nb(y=2)\nc(z=3)", &["a", "b", "c"]);
        assert_eq!(d.leaks.iter().map(|l| l.calls.len()).sum::<usize>(), 3);
        // One bare call of an enabled tool and nothing else is a call (an empty argument
        // list too, there only); of another tool, or with text after it, it stays.
        let d = run("get_weather(city=\"Paris\")", &["get_weather"]);
        assert_eq!(d.cleaned.as_deref(), Some(""));
        let d = run(" list_files()\n<|eot_id|>", &["list_files"]);
        assert_eq!(d.leaks[0].calls[0].name, "list_files");
        assert!(run("get_weather(city=\"Paris\")", &["search"]).is_clean());
        assert!(run("list_files()", &["search"]).is_clean());
        assert!(run("list_files() is empty", &["list_files"]).is_clean());
        assert!(run("Run it.\nlist_files()", &["list_files"]).is_clean());
    }

    #[test]
    fn prose_and_other_tools_stay() {
        let tools = &["search", "get_weather"];
        for t in [
            "You can call get_weather(city=\"Paris\") to do it.",
            "Use search {\"q\": \"x\"} to find it.",
            "other{\"a\": 1}",
            "get_weather(\"Paris\")",
            "main() is where it starts",
            "search\n{\"q\": \"x\"",
        ] {
            assert!(run(t, tools).is_clean(), "{t}");
        }
    }

    #[test]
    fn the_tools_are_asked_only_for_a_complete_candidate() {
        let d = run("A plain answer (with parentheses) and {braces}.", &[]);
        assert!(!d.depends_on_tools);
        let d = run("Checking.\nget_weather(city=\"Paris\")", &[]);
        assert!(d.depends_on_tools && d.is_clean());
    }
}
