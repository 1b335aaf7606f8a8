//! `cli`: a call written in command-line form, `NAME key="value" other=42` (or
//! `NAME --key value`, pairs maybe parted by commas), as the whole message or as its first
//! or last line, or as an aside in parentheses ending the last line (`Done. **(NAME
//! key="v")**`). Small local
//! models write it when a prompt listed the tools as commands, and agents' front ends show
//! it when they flattened a call for display.
//!
//! The shape holds none of the prefilter's anchor bytes, so it is looked for only where a
//! model writes a call before or after its prose: the first and the last line. The
//! prefilter's look is `named`'s look at those lines ([`args_open`] after the first word it
//! reads anyway, [`last_line_opens`] where the message ends with a quoted value), and
//! `named`'s finder runs this one: one look at the lines for every bare form. The line must be the
//! name and its arguments and nothing else, the name an enabled tool's, and the line not in
//! code: `grep --color auto` in a sentence, or a command in a fence, stays.
//!
//! May depend on: `super::util`, `crate::grammar`, `crate::types`, `crate::Ctx`, `memchr`.

use super::util::{merge, typed_param, Block};
use crate::grammar::bytes::{self as class, KEY};
use crate::grammar::is_ident_char;
use crate::grammar::keys::is_args_key;
use crate::types::{Call, Family};
use crate::{Ctx, Leak};
use serde_json::{Map, Value};

/// How far back from the end the last line's start is looked for.
const LAST_LINE: usize = 512;
/// Arguments a line may hold at most.
const MAX_ARGS: usize = 32;

/// For the prefilter's look at the first line (`named`'s, which has read the line's first
/// word, ending at `i` before a space): whether arguments follow it (`key=` or `--key`).
#[inline]
pub(crate) fn args_open(b: &[u8], i: usize) -> bool {
    // Plain loops with early exits and the key's bytes from one table: this runs after
    // the first word of most messages.
    let mut j = i;
    while b.get(j) == Some(&b' ') {
        j += 1;
    }
    let rest = b.get(j..).unwrap_or_default();
    if rest.first() == Some(&b'-') {
        return rest.get(1) == Some(&b'-') && rest.get(2).is_some_and(u8::is_ascii_alphabetic);
    }
    let key = class::run(rest, KEY, MAX_WORD);
    key > 0 && rest.get(key) == Some(&b'=')
}

/// For the prefilter, in a message (from `line` to `end`) that ends with a quoted value:
/// whether its last line opens with a name and arguments.
pub(crate) fn last_line_opens(b: &[u8], line: usize, end: usize) -> bool {
    let floor = line.max(end.saturating_sub(LAST_LINE));
    let start = match memchr::memrchr(b'\n', b.get(floor..end).unwrap_or_default()) {
        Some(i) => floor + i + 1,
        None if floor == line => line,
        None => return false,
    };
    let rest = b.get(start..end).unwrap_or_default();
    let lead = rest
        .iter()
        .take_while(|&&c| c == b' ' || c == b'\t')
        .count();
    name_then_args(b, start + lead)
}

/// For the prefilter, in a message whose last line (from `line`) ends at `end` with `)`,
/// maybe in emphasis: whether that `)` closes an aside that opens with a name and
/// arguments (`.. done. **(NAME key="v")**`).
pub(crate) fn aside_opens(b: &[u8], line: usize, end: usize) -> bool {
    let mut e = end;
    while e > line && b[e - 1] == b'*' {
        e -= 1;
    }
    if e == line || b[e - 1] != b')' {
        return false;
    }
    // An aside is short: its `(` is near the end, after a space or emphasis.
    let floor = line.max(e.saturating_sub(ASIDE));
    memchr::memrchr(b'(', &b[floor..e - 1]).is_some_and(|i| {
        let open = floor + i;
        (open == line || matches!(b[open - 1], b' ' | b'*')) && name_then_args(b, open + 1)
    })
}

/// How far back from the end of an aside its `(` is looked for.
const ASIDE: usize = 256;

/// Whether a name starting at `at` is followed by arguments: a space, then `key=` or
/// `--key`, maybe after a connective word.
fn name_then_args(b: &[u8], at: usize) -> bool {
    let rest = b.get(at..).unwrap_or_default();
    // A tool's name may be in any script (`查询订单 q="x"`); its arguments' keys are ASCII.
    let name = rest
        .iter()
        .take(4 * MAX_WORD)
        .take_while(|&&c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.' || c >= 0x80)
        .count();
    if name == 0 || rest.get(name) != Some(&b' ') {
        return false;
    }
    let after = at + name;
    args_open(b, after) || connective(&b[after + 1..]).is_some_and(|w| args_open(b, after + 1 + w))
}

/// The length of one lowercase word (maybe with a colon) and its space between a name and
/// its arguments (`NAME with key="v"`, `NAME intent: key="v"`), as a front end flattening a
/// call writes it.
fn connective(b: &[u8]) -> Option<usize> {
    let w = b
        .iter()
        .take(9)
        .take_while(|c| c.is_ascii_lowercase())
        .count();
    let colon = usize::from(b.get(w) == Some(&b':'));
    ((2..=8).contains(&w) && b.get(w + colon) == Some(&b' ')).then_some(w + colon)
}

/// A call in command-line form as an aside ending `line`: in parentheses, maybe in
/// emphasis (`**(NAME key="v")**`), alone or after a sentence's end. Where the aside starts
/// (its emphasis's), and its inside.
fn aside(line: &str) -> Option<(usize, &str)> {
    let t = line.trim_end();
    let inner = t.trim_end_matches('*');
    let stars = t.len() - inner.len();
    let inner = inner.strip_suffix(')')?;
    let open = inner.rfind('(')?;
    let lead = &t[..open];
    let bare = lead.trim_end_matches('*');
    if lead.len() - bare.len() != stars {
        return None;
    }
    let before = bare.trim_end();
    let sentence = before.is_empty()
        || (before.len() < bare.len() && before.ends_with(['.', '!', '?', '。', '！', '？']));
    sentence.then(|| (bare.len(), &inner[open + 1..]))
}

/// Longest name read.
const MAX_WORD: usize = 64;

/// Appends the calls in command-line form on the first and last lines.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let core_start = text.len() - text.trim_start().len();
    // End-of-turn tokens after the last line (`<|im_end|>`) go with a call there.
    let core_end = crate::grammar::keys::turn_end(text);
    if core_start >= core_end {
        return;
    }
    let first_end = text
        .get(core_start..core_end)
        .and_then(|t| t.find('\n'))
        .map_or(core_end, |i| core_start + i);
    let last_start = text
        .get(core_start..core_end)
        .and_then(|t| t.rfind('\n'))
        .map_or(core_start, |i| core_start + i + 1);
    let mut blocks: Vec<Block> = Vec::new();
    for (start, end) in [(core_start, first_end), (last_start, core_end)] {
        if blocks.iter().any(|(s, _)| s.start == start) {
            continue;
        }
        let Some(line) = text.get(start..end) else {
            continue;
        };
        let lead = line.len() - line.trim_start().len();
        let (lead, call) = match parse_line(line.trim()) {
            Some(call) => (lead, call),
            // An aside ends only the last line.
            None if start == last_start => {
                let Some((at, call)) =
                    aside(line).and_then(|(at, inner)| Some((at, parse_line(inner.trim())?)))
                else {
                    continue;
                };
                (at, call)
            }
            None => continue,
        };
        let start = match lead == line.len() - line.trim_start().len() {
            true => start,
            // The aside's sentence stays.
            false => start + lead,
        };
        if ctx.quoted(start + lead) || !ctx.tool_enabled(&call.name) {
            continue;
        }
        // The line's own line break goes with it, so no blank line is left in its place.
        let end = match text.get(end..).is_some_and(|r| r.starts_with('\n')) {
            true => end + 1,
            false if end == core_end => text.len(),
            false => end,
        };
        blocks.push((start..end, vec![call]));
    }
    merge(text, Family::Cli, blocks, out);
}

/// A whole line `NAME key=value ...` or `NAME --key value ...`, or a call's fields as pairs
/// (`[Tool Call] name=NAME id=.. args={json}`): the call, or `None`.
fn parse_line(line: &str) -> Option<Call> {
    parse_named(line).or_else(|| fields(line))
}

/// A call written as its fields in pairs, maybe after a bracketed label of a few words
/// (`[Tool Call] name=NAME id=7 args={"k": "v"}`): a name key naming the tool, an arguments
/// key holding an object, and bookkeeping (an id, a type, an index) and nothing else.
fn fields(line: &str) -> Option<Call> {
    let rest = match line.strip_prefix('[') {
        Some(r) => {
            let (label, after) = r.split_once(']')?;
            let words = label.split_whitespace().count();
            let letters = label
                .chars()
                .all(|c| c.is_alphabetic() || c == ' ' || c == '_');
            ((1..=3).contains(&words) && letters).then_some(after)?
        }
        None => line,
    };
    let pairs = parse_args(rest)?;
    let mut name = None;
    let mut arguments = None;
    for (k, v) in pairs {
        let key = crate::grammar::markup::fold(&k);
        match (v, key.as_str()) {
            (Value::String(n), "name" | "tool" | "toolname" | "function") if name.is_none() => {
                name = Some(n)
            }
            (v @ Value::Object(_), _) if is_args_key(&key) && arguments.is_none() => {
                arguments = Some(v)
            }
            (_, "id" | "callid" | "toolcallid" | "type" | "index") => {}
            _ => return None,
        }
    }
    Some(Call {
        name: name?,
        arguments: arguments?,
    })
}

/// `NAME key=value ...` or `NAME --key value ...`.
fn parse_named(line: &str) -> Option<Call> {
    let name_end = line.find(' ')?;
    let name = line.get(..name_end)?;
    if !name.chars().all(|c| is_ident_char(c) || c == '.') || name.is_empty() {
        return None;
    }
    let name = ["functions.", "tools.", "default_api."]
        .iter()
        .find_map(|p| name.strip_prefix(p))
        .unwrap_or(name);
    let rest = line.get(name_end..)?;
    let args = parse_args(rest).or_else(|| {
        let w = connective(rest.trim_start().as_bytes())?;
        parse_args(rest.trim_start().get(w..)?)
    })?;
    Some(Call {
        name: name.to_string(),
        arguments: Value::Object(args),
    })
}

/// Arguments in command-line form, the whole of `s`: `key=value` or `--key value` pairs,
/// at least one, each key once. The markup net reads them after a name inside a tag too
/// (`<tool_call>NAME key="v"</tool_call>`).
pub(crate) fn parse_args(s: &str) -> Option<Map<String, Value>> {
    let mut rest = s.trim();
    let mut args = Map::new();
    while !rest.is_empty() {
        if args.len() >= MAX_ARGS {
            return None;
        }
        let (key, after, dashed) = match rest.strip_prefix("--") {
            Some(r) => {
                let k = r.find(|c: char| !(is_ident_char(c) || c == '-'))?;
                (r.get(..k)?, r.get(k..)?, true)
            }
            None => {
                let k = rest.find('=')?;
                (rest.get(..k)?, rest.get(k..)?, false)
            }
        };
        if key.is_empty() || !key.chars().all(|c| is_ident_char(c) || c == '-') {
            return None;
        }
        let after = match (after.strip_prefix('='), dashed) {
            (Some(a), _) => a,
            (None, true) => after.strip_prefix(' ')?.trim_start(),
            (None, false) => return None,
        };
        let (value, tail) = value(after)?;
        // Pairs may be parted by commas, as keyword arguments are (`a="x", b=2`).
        let tail = tail.strip_prefix(',').unwrap_or(tail);
        if !(tail.is_empty() || tail.starts_with(char::is_whitespace)) {
            return None;
        }
        if args.insert(key.to_string(), value).is_some() {
            return None;
        }
        rest = tail.trim_start();
    }
    (!args.is_empty()).then_some(args)
}

/// A value: quoted (its quotes taken off, a string) or a bare word (typed: `42`, `true`).
fn value(s: &str) -> Option<(Value, &str)> {
    let mut chars = s.char_indices();
    let (_, c) = chars.next()?;
    // An object or a list, as JSON (`args={"k": "v"}`).
    if matches!(c, '{' | '[') {
        let (v, end) = crate::grammar::json::value_at(s, 0)?;
        return Some((v, s.get(end..)?));
    }
    let close = match c {
        '"' => '"',
        '\'' => '\'',
        '“' => '”',
        '‘' => '’',
        _ => {
            let end = s
                .find(|c: char| c.is_whitespace() || c == ',')
                .unwrap_or(s.len());
            let word = s.get(..end)?;
            return Some((typed_param(word), s.get(end..)?));
        }
    };
    let from = c.len_utf8();
    let end = from + s.get(from..)?.find(close)?;
    let raw = s.get(from..end)?;
    Some((
        Value::String(raw.to_string()),
        s.get(end + close.len_utf8()..)?,
    ))
}

#[cfg(test)]
mod tests {
    use crate::families::testing::detect_with;
    use serde_json::json;

    fn calls(text: &str, tools: &[&str]) -> (Option<String>, Vec<serde_json::Value>) {
        let d = detect_with(text, tools);
        let calls = d
            .leaks
            .iter()
            .flat_map(|l| &l.calls)
            .map(|c| json!([c.name, c.arguments]))
            .collect();
        (d.cleaned, calls)
    }

    #[test]
    fn a_call_written_as_its_fields_in_pairs() {
        assert!(super::fields("[Tool Call] name=run id=7 args={\"k\": \"v\"}").is_some());
        let (cleaned, c) = calls("[Tool Call] name=run id=7 args={\"k\": \"v\"}", &["run"]);
        assert_eq!(c, vec![json!(["run", {"k": "v"}])]);
        assert_eq!(cleaned.as_deref(), Some(""));
    }

    #[test]
    fn one_lowercase_word_may_stand_between_the_name_and_its_arguments() {
        let (cleaned, c) = calls("Ok.\nWrite with path=\"a.txt\"<|im_end|>", &["Write"]);
        assert_eq!(cleaned.as_deref(), Some("Ok."));
        assert_eq!(c, vec![json!(["Write", {"path": "a.txt"}])]);
        // Two words, a capitalised word or one longer than eight letters: a sentence.
        for t in [
            "Ok.\nWrite it with path=\"a.txt\"",
            "Ok.\nWrite With path=\"a.txt\"",
            "Ok.\nWrite carefully path=\"a.txt\"",
        ] {
            assert!(calls(t, &["Write"]).1.is_empty(), "{t}");
        }
    }

    #[test]
    fn the_whole_message_or_its_first_or_last_line() {
        let (cleaned, c) = calls("search q=\"cats\" limit=5", &["search"]);
        assert_eq!(cleaned.as_deref(), Some(""));
        assert_eq!(c, vec![json!(["search", {"q": "cats", "limit": 5}])]);
        let (cleaned, c) = calls("Let me look.\nsearch --q \"cats\"\n", &["search"]);
        assert_eq!(cleaned.as_deref(), Some("Let me look."));
        assert_eq!(c, vec![json!(["search", {"q": "cats"}])]);
        let (cleaned, _) = calls("read_file path=a.txt\nReading it now.", &["read_file"]);
        assert_eq!(cleaned.as_deref(), Some("Reading it now."));
    }

    #[test]
    fn prose_code_and_tools_not_enabled_stay() {
        for (t, tools) in [
            ("search q=\"cats\"", &["other"][..]),
            ("Then search q=\"cats\" would match nothing.", &["search"]),
            ("Run:\n```\nsearch q=\"cats\"\n```", &["search"]),
            ("search the web for cats", &["search"]),
            ("search q=\"cats\" and then stop", &["search"]),
            ("name=Bob age=3", &["name"]),
        ] {
            assert!(detect_with(t, tools).is_clean(), "{t}");
        }
    }
}
