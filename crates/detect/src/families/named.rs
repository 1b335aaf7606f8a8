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
//!   so it is looked for only on the first and the last line of a message (and the lines of
//!   calls next to them), where a model writes a call: the clean path stays one scan.
//!
//! The name alone is a weak marker: the call counts only for a tool the agent has enabled.
//! The tools are consulted only once a complete candidate stands in the text (arguments
//! parsed, the markup a line or sentence of its own), so ordinary prose never makes the
//! worker fetch them.
//!
//! May depend on: `super::util`, `super::harmony`, `super::gemini`, `crate::grammar`,
//! `crate::types`, `crate::Ctx`.

use super::util::{merge, with_trailing, Block, MAX_CANDIDATES};
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
};

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
        Family::Mistral,
        Family::Kimi,
        Family::Glm,
        Family::Pythonic,
        Family::Lmstudio,
        Family::Gemini,
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
/// at most a few spaces): a name's last character, or `(`; after one line break, a name or
/// `[NAME]`'s `]`.
pub(crate) fn probe(bytes: &[u8], p: usize) -> bool {
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
    let newline = newlines > 0;
    match i.checked_sub(1).and_then(|j| bytes.get(j)) {
        Some(b) if b.is_ascii_alphanumeric() || *b == b'_' || *b >= 0x80 => true,
        Some(b'(') => !newline,
        Some(b']') => newline,
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
        Some((family, at..with_trailing(text, end, &[]), call))
    }
}

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
/// not). A name inside a sentence (`use search {..}`) is prose about the tool, and one after
/// code (`map[string]string{..}`) is code.
pub(crate) fn stands_before(text: &str, start: usize) -> bool {
    let head = text.get(..start).unwrap_or_default();
    match head.trim_end_matches([' ', '\t']).chars().next_back() {
        None => true,
        Some(c) => matches!(c, '\n' | '\r' | '.' | '!' | '?' | ':' | '>'),
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

/// The lines a bare Python call is looked for on: the first and the last non-blank line.
fn edge_lines(text: &str) -> [Range<usize>; 2] {
    let start = text.len() - text.trim_start().len();
    let first_end = memchr::memchr(b'\n', text.as_bytes().get(start..).unwrap_or_default())
        .map_or(text.len(), |i| start + i);
    let end = text.trim_end().len();
    let last_start =
        memchr::memrchr(b'\n', text.as_bytes().get(..end).unwrap_or_default()).map_or(0, |i| i + 1);
    [start..first_end, last_start.max(start)..end]
}

/// The prefilter's check for bare Python calls: on the first or last line, a name directly
/// followed by `(` and then `)` or a keyword argument (`name=`).
pub(crate) fn lines_probe(text: &str) -> bool {
    let bytes = text.as_bytes();
    edge_lines(text).iter().any(|line| {
        let Some(seg) = bytes.get(line.clone()) else {
            return false;
        };
        memchr::memchr_iter(b'(', seg).any(|i| call_shape(bytes, line.start + i))
    })
}

/// Whether the `(` at `p` follows a name and opens a keyword argument list. An empty list
/// (`main()`) is too little markup: it ends half the scripts ever pasted into a reply.
fn call_shape(bytes: &[u8], p: usize) -> bool {
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80;
    if !p
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
    i > key && bytes.get(i) == Some(&b'=') && bytes.get(i + 1) != Some(&b'=')
}

/// Bare Python calls on the first and last lines, and on the lines of calls next to them.
/// A message that is one bare call and nothing else stays: that is how Llama's own parser
/// reads it (llama-models rejects a call outside a list), and nothing around it says the
/// model meant to call rather than to show the call.
fn python_lines(text: &str, ctx: &Ctx<'_>) -> Vec<(Family, Block)> {
    let found = python_candidates(text, ctx);
    let whole = text.trim();
    if let [(span, _)] = found.as_slice() {
        if text.get(span.clone()).is_some_and(|s| s.trim() == whole) {
            return Vec::new();
        }
    }
    found
        .into_iter()
        .filter(|(_, c)| c.iter().all(|c| ctx.tool_enabled(&c.name)))
        .map(|b| (Family::Pythonic, b))
        .collect()
}

/// The complete bare calls standing on the edge lines and their neighbours, tools not yet
/// asked.
fn python_candidates(text: &str, ctx: &Ctx<'_>) -> Vec<Block> {
    let mut out: Vec<Block> = Vec::new();
    let [first, last] = edge_lines(text);
    let mut line = first;
    for _ in 0..MAX_CANDIDATES {
        match line_call(text, line.clone(), ctx) {
            Some(b) => out.push(b),
            None => break,
        }
        let next = skip_ws(text, line.end);
        let end = memchr::memchr(b'\n', text.as_bytes().get(next..).unwrap_or_default())
            .map_or(text.len(), |i| next + i);
        if next >= text.len() {
            break;
        }
        line = next..end;
    }
    let mut line = last;
    for _ in 0..MAX_CANDIDATES {
        if out
            .iter()
            .any(|(s, _)| s.start < line.end && line.start < s.end)
        {
            break;
        }
        match line_call(text, line.clone(), ctx) {
            Some(b) => out.push(b),
            None => break,
        }
        let head = text.get(..line.start).unwrap_or_default().trim_end();
        if head.is_empty() {
            break;
        }
        let start = memchr::memrchr(b'\n', head.as_bytes()).map_or(0, |i| i + 1);
        line = start..head.len();
    }
    out
}

/// The bare Python call on one line: the first `(` with a call shape whose call is complete
/// and stands apart.
fn line_call(text: &str, line: Range<usize>, ctx: &Ctx<'_>) -> Option<Block> {
    let bytes = text.as_bytes();
    let seg = bytes.get(line.clone())?;
    for i in memchr::memchr_iter(b'(', seg).take(MAX_CANDIDATES) {
        let p = line.start + i;
        if !call_shape(bytes, p) || ctx.quoted(p) {
            continue;
        }
        let run = name_run(text, p, p.saturating_sub(LOOKBACK))?;
        // A plain name: `app.run(debug=True)` is a method of the code around it.
        if text.get(run.clone())?.contains(['.', ':']) || text.get(..run.start)?.ends_with('.') {
            return None;
        }
        let start = run.start;
        let (call, end) = python::parse_call(text, start, PyOpts::STRICT)?;
        if end > line.end || !stands_before(text, start) || !stands_after(text, end) {
            return None;
        }
        return Some((start..with_trailing(text, end, &[]), vec![call]));
    }
    None
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
        let d = run("I'll check. get_weather(city=\"Paris\")", &["get_weather"]);
        assert_eq!(d.cleaned.as_deref(), Some("I'll check."));
        let d = run("a(x=1)\nb(y=2)\nc(z=3)", &["a", "b", "c"]);
        assert_eq!(d.leaks.iter().map(|l| l.calls.len()).sum::<usize>(), 3);
        // One bare call and nothing else is how Llama's parser reads a shown call.
        assert!(run("get_weather(city=\"Paris\")", &["get_weather"]).is_clean());
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
