//! The shapes around a `{`: a tool's name glued to its object, on the line above it, in
//! `NAME(..)` or `[NAME]`, in Kimi's, Gemini's and Gemma 4's stripped spellings, and what
//! every shape ends with (standing apart, an enabled tool, the tokens left around it).
//!
//! May depend on: `super::apart`, `crate::families::util`, `crate::families::harmony`,
//! `crate::families::gemini`, `crate::grammar`, `crate::json5` (a script's object
//! literal), `crate::types`, `crate::Ctx`.

use super::apart::{stands_after, stands_before};
use crate::families::util::with_trailing;
use crate::families::{gemini, harmony};
use crate::grammar::brace::{self, BraceSyntax};
use crate::grammar::json;
use crate::grammar::keys::is_call_key;
use crate::grammar::text::{eat, skip_ws};
use crate::grammar::{is_ident_char, is_tool_name};
use crate::types::{Call, Family};
use crate::Ctx;
use serde_json::Value;
use std::ops::Range;

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
pub(super) const GEMMA4_VERB: &str = "call:";

/// How far before a `{` the name and what joins it to the object may start.
const LOOKBACK: usize = 192;

/// What joins a name to its object.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Join {
    /// Nothing, or spaces: `NAME{`, `NAME {`, `functions.NAME:0 {`.
    Glued,
    /// A line break: the name on a line of its own.
    Line,
    /// `NAME(`, closed by `)` after the object.
    Paren,
    /// `[NAME]` on a line of its own, closed by `[END_TOOL_REQUEST]` or `[/NAME]`.
    Bracketed,
}

/// The call whose object starts at the `{` at `p`: its family, span and call.
pub(super) fn at_brace(
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
        b'>' | b':' if super::name_closed_in_wrapper(text.as_bytes(), spaced.len() - 1) => {
            return in_wrapper(&found, spaced.len() - 1, p);
        }
        // A name and a mark glued to it (`NAME>{`, `NAME:{`), the wrapper's tokens
        // stripped: the name stands as a glued one does.
        b'>' | b':' if spaced.len() == head.len() || spaced.ends_with(':') => {
            let sep = spaced.len() - 1;
            let run = name_run(text, sep, floor)?;
            let word = text.get(run.clone())?;
            if run.end != sep || word.contains(':') {
                return None;
            }
            let (args, end) = json_object(text, p)?;
            return found.finish(Family::Glm, 0, end, &[(run.start, word)], args, true);
        }
        // `<function=NAME={..}`: the element's `=NAME` and one more `=` before its object.
        b'=' if spaced.len() == head.len() => {
            let sep = spaced.len() - 1;
            let run = name_run(text, sep, floor)?;
            let lt = tag_eq_open(text, run.start).filter(|_| run.end == sep)?;
            return tag_glued(&found, lt, text.get(run)?, p);
        }
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
    if join == Join::Glued {
        if let Some(lt) = tag_eq_open(text, run.start) {
            return tag_glued(&found, lt, word, p);
        }
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
            // Glued to a sentence in a script without spaces (`我来执行search{`): the Latin
            // name after the last character of that script.
            let tail = word.len()
                - word
                    .chars()
                    .rev()
                    .take_while(|c| c.is_ascii())
                    .map(char::len_utf8)
                    .sum::<usize>();
            if tail > 0 && tail < word.len() && join == Join::Glued {
                names.push((name_at + tail, &word[tail..]));
            }
        }
    }
    let (args, mut end) = match gemini {
        Some(_) => brace::parse_object(text, p, &GEMINI)?,
        // Inside `NAME(..)` the object may be a script's literal (`{ key: "v" }`): the
        // parentheses already say it is an argument, so the lenient reading is safe there.
        None if join == Join::Paren => json_object(text, p).or_else(|| script_object(text, p))?,
        None => json_object(text, p)?,
    };
    match join {
        Join::Paren => end = eat(text, skip_ws(text, end), ")")?,
        // LM Studio's closer, or the bracket tag's own (`[NAME]` .. `[/NAME]`).
        Join::Bracketed => {
            let q = skip_ws(text, end);
            end = eat(text, q, "[END_TOOL_REQUEST]").or_else(|| {
                let after = eat(text, eat(text, q, "[/")?, word)?;
                eat(text, after, "]")
            })?;
        }
        Join::Glued | Join::Line => {}
    }
    // The whole message, an enabled name glued to a word and its object (`bashikian{..}`:
    // Mistral's `[TOOL_CALLS]` stripped, its `[ARGS]` decoded as a word): that name.
    if join == Join::Glued && gemini.is_none() && text[..run.start].trim().is_empty() {
        let garbled = |t: &String| {
            let rest = word.strip_prefix(t.as_str()).unwrap_or_default();
            (1..=16).contains(&rest.len()) && rest.bytes().all(|b| b.is_ascii_lowercase())
        };
        if crate::grammar::text::rest_is_blank(text, end) {
            let tools = found.ctx.enabled_tools().iter();
            names.extend(
                tools
                    .filter(|t| garbled(t))
                    .map(|t| (name_at, &word[..t.len()])),
            );
        }
    }
    if join == Join::Bracketed {
        // `[NAME]` opens its line.
        let open = text.get(..run.start)?.strip_suffix('[')?.len();
        names = vec![(open, word)];
    }
    // Functionary's recipient marker before the name (`>>>NAME` above the object) is the
    // call's markup, and so is a bracketed call token.
    let mut token_apart = false;
    if join == Join::Line {
        if let Some(first) = names.first_mut() {
            let head = text.get(..first.0).unwrap_or_default();
            if head.ends_with(">>>") && line_start(text, first.0 - 3) {
                first.0 -= 3;
            }
            // So is a bracketed call token standing apart (`[TOOL_CALL_START]NAME`).
            if let Some((open, false)) = crate::remnant::bracket_token_ending(head) {
                if super::apart::stands_before(text, open) {
                    first.0 = open;
                    token_apart = true;
                }
            }
            // And a chat template's special token right before the name (GLM-4's turns,
            // `<|assistant|>NAME` above the object): no prose holds one.
            if let Some(open) = special_token_ending(text, first.0) {
                first.0 = open;
                token_apart = true;
            }
        }
    }
    if join == Join::Line && !token_apart && !names.first().is_some_and(|n| line_start(text, n.0)) {
        return None;
    }
    if let (Some(g), Some(first)) = (gemini, names.first_mut()) {
        // `call:default_api:NAME`, `declaration:default_api:NAME`, `startcall:..`: Gemini's
        // verb before the namespace is its markup; what the run holds before the verb is the
        // sentence it was glued to.
        let head = text.get(run.start..run.start + g).unwrap_or_default();
        // A word glued to the namespace by a colon is that verb as a model garbled it
        // (`Lie:default_api:NAME{..}`, `Done.Lie:default_api:..`): nothing of a sentence is
        // glued to a namespace.
        let word_at = head.rfind('.').map_or(0, |i| i + 1);
        let garbled = head[word_at..].strip_suffix(':').is_some_and(|w| {
            (1..=16).contains(&w.len()) && w.bytes().all(|b| b.is_ascii_alphabetic())
        });
        let verb = ["startcall:", "declaration:", "call:"]
            .iter()
            .find_map(|v| head.rfind(v))
            .unwrap_or(if garbled { word_at } else { g });
        first.0 = run.start + verb;
        // The verb as an element opener that lost its `=` and `>` (`<function:default_api:
        // NAME{..}`): the `<` is the markup's too.
        if verb == 0 && text.get(..run.start).is_some_and(|h| h.ends_with('<')) {
            first.0 -= 1;
        }
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

/// `<tool_call>NAME>{..}` (or `NAME:{`): the name closed like a tag of its own right after
/// a call wrapper's opener, the object after it; the wrapper's tags are the remnant rule's.
fn in_wrapper(found: &Found<'_, '_>, sep: usize, p: usize) -> Option<(Family, Range<usize>, Call)> {
    let text = found.text;
    let gt = text.get(..sep)?.rfind('>')?;
    let lt = text.get(..gt)?.rfind('<')?;
    let tag = crate::grammar::markup::tag_at(text, lt).filter(|t| t.span.end == gt + 1)?;
    if tag.kind != crate::grammar::markup::Kind::Open || !is_call_key(&tag.key()) {
        return None;
    }
    let name = text.get(gt + 1..sep)?.trim();
    let (args, end) = json_object(text, p)?;
    found.finish(Family::Glm, 0, end, &[(gt + 1, name)], args, true)
}

/// Where the element opener of call markup whose `=NAME` ends at `run_start` starts
/// (`<function=NAME`).
fn tag_eq_open(text: &str, run_start: usize) -> Option<usize> {
    let head = text.get(..run_start)?.strip_suffix('=')?;
    let tag = head.len()
        - head
            .bytes()
            .rev()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
            .count();
    let lt = tag.checked_sub(1)?;
    let key = crate::grammar::markup::fold(head.get(tag..)?);
    (head.as_bytes().get(lt) == Some(&b'<') && is_call_key(&key)).then_some(lt)
}

/// `<function=NAME{..}` (or `=NAME={..}`): an element opener whose name runs into its arguments, written in
/// JSON or as members (`key="v"`, `key:v`), with the tag's `>` or a stray `}` after them.
/// The tags and tokens left around it are the remnant rule's.
fn tag_glued(
    found: &Found<'_, '_>,
    lt: usize,
    word: &str,
    p: usize,
) -> Option<(Family, Range<usize>, Call)> {
    let text = found.text;
    let (args, mut end) =
        json_object(text, p).or_else(|| brace::parse_object(text, p, &TAG_BODY))?;
    for closer in ["}", ">"] {
        end = eat(text, end, closer).unwrap_or(end);
    }
    found.finish(Family::XmlInvoke, 0, end, &[(lt, word)], args, true)
}

/// The members of a tag-glued object: JSON strings, Gemma's delimiter, bare values.
const TAG_BODY: BraceSyntax = BraceSyntax {
    quote: "<|\"|>",
    type_quoted: false,
    bare_strict: false,
};

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
        let (mut at, call) = match candidates.iter().find(|(_, n)| self.ctx.tool_enabled(n)) {
            Some(&(at, name)) => (
                at,
                Call {
                    name: name.to_string(),
                    arguments: args,
                },
            ),
            // A generic call word wrapping an enabled tool's call (`call:tool_call{args:..,
            // id:NAME}` with its tokens stripped): that tool's call.
            None => {
                let &(at, name) = candidates.first()?;
                let mut call = Call {
                    name: name.to_string(),
                    arguments: args,
                };
                self.ctx.unwrap_envelope(&mut call);
                (call.name != name && self.ctx.tool_enabled(&call.name)).then_some((at, call))?
            }
        };
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

/// An object literal as scripts write it (unquoted keys, single quotes) at `p`.
fn script_object(text: &str, p: usize) -> Option<(Value, usize)> {
    match crate::json5::parse_value_at(text, p).ok()? {
        (v @ Value::Object(_), end) => Some((v, end)),
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

/// Where the special token (`<|assistant|>`, `<｜..｜>`) that ends right at `end` starts.
fn special_token_ending(text: &str, end: usize) -> Option<usize> {
    let head = text.get(..end)?;
    if !(head.ends_with("|>") || head.ends_with("｜>")) {
        return None;
    }
    let lt = head.rfind('<')?;
    crate::grammar::markup::tag_at(text, lt)
        .filter(|t| t.span.end == end && t.kind == crate::grammar::markup::Kind::Special)
        .map(|_| lt)
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
