//! `markup`: the net under the format table. One reader of markup by its structure,
//! anchored on the agent's enabled tool names, for the spellings, nestings and mixtures of
//! the known formats that no row lists: a space inside a token, a word of it changed
//! (`toolcall`, `calls`), typographic quotes, a lost `>`, a namespace (`｜DSML｜`), one
//! format's opener around another's parameters.
//!
//! Tags are lexed loosely (`crate::grammar::markup`). A call is an element or a token
//! section that names an enabled tool:
//! - as its element name (`<NAME>`, `<｜DSML｜NAME>`), its children or attributes being the
//!   arguments;
//! - in a call-shaped element (`<tool_call>`, `<invoke>`, `<function>`, `<|tool_call_begin|>`,
//!   any spelling) by a `name` attribute, `=NAME`, a JSON object in attribute position, a
//!   `<name>` child, the text right after the opener (`functions.NAME:0`,
//!   `function<sep>NAME`), or a JSON call object as its body;
//! - as a name element's text, an arguments element right after it (`pair.rs`).
//!
//! The arguments are what the element holds and nothing else: parameter elements in any
//! dialect (`<parameter name=k>`, `<parameter=k>`, `<k>v</k>`, `<k value="v"/>`,
//! `<arg_key>k</arg_key><arg_value>v</arg_value>`), an arguments element or a JSON object
//! (fenced or not), or a Python argument list. A value that runs to the end of the text
//! was cut and is never read. Only enabled tools count, and markup in code or closed
//! reasoning is never read; the exact rows of the table come first (the driver drops what
//! this reader finds where a row found a leak), so this is where a new spelling is read
//! without a new row.
//!
//! May depend on: its own `body`, `pair`, `shape`; `super::util`, `super::tag_names` (tag names that are no tools),
//! `super::named` (what stands apart), `crate::grammar`,
//! `crate::types`, `crate::Ctx`.

use super::util::{is_schema, merge, skip_ws, typed_param, Block};
use crate::grammar::bytes as class;
use crate::grammar::json::{call_of, Keys};
use crate::grammar::keys::{
    is_args_key, is_call_key, is_end_key, is_name_key, is_param_key, is_placeholder_key,
    rest_ends_turn, strip_edge,
};
use crate::grammar::markup::{fold, tag_at, tags, Kind, Tag};
use crate::grammar::{is_ident_char, xml};
use crate::types::{Call, Family};
use crate::{Ctx, Leak};
use serde_json::{Map, Value};

mod body;
mod pair;
mod shape;

use body::Body;
use shape::{call_shaped, closes_a_call};

/// A bare `<`, confirmed by [`probe`].
pub(crate) const TRIGGERS: &[&str] = &["<", "[TOOL", "[Tool", "[tool"];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

/// Tags read per message at most (linear time on hostile input).
const MAX_TAGS: usize = 2048;
/// Elements a call may hold at most.
const MAX_PARTS: usize = 64;

/// A byte of a tag's name as [`probe`] reads it.
const TAG_NAME: u8 = class::KEY | class::DASH | class::COLON;

/// The words of call markup, lower-case, as little-endian words (`b | 0x20` lower-cases a
/// letter and leaves the other bytes of a name that could match unchanged).
const CALL_WORDS: [u32; 4] = [
    u32::from_le_bytes(*b"call"),
    u32::from_le_bytes(*b"tool"),
    u32::from_le_bytes(*b"func"),
    u32::from_le_bytes(*b"invo"),
];

/// The prefilter's confirmation of a bare `<`: a bar (`<|`, `<｜`) or a tag name
/// holding a word of call markup (`call`, `tool`, `func`, `invoke`, in any case and
/// spelling: `<tool_call`, `<toolcall`, `<functioncall`, `</TOOL-CALLS`). Elements named after
/// a tool are confirmed by `cline_xml`'s probe, and read by the same reader; so code's
/// generics and HTML answers wake neither.
pub(crate) fn probe(bytes: &[u8], p: usize) -> bool {
    // One space after the `<` (`< calls>`), as the lexer reads it.
    let p = p + usize::from(bytes.get(p + 1) == Some(&b' '));
    let q = p + 1 + usize::from(bytes.get(p + 1) == Some(&b'/'));
    match bytes.get(q) {
        Some(b'|') => true,
        Some(0xEF) => bytes.get(q + 1..q + 3) == Some(&[0xBD, 0x9C]),
        Some(&b) if b.is_ascii_alphabetic() || b == b'_' => {
            // The name's first 40 bytes (one table lookup a byte), then each four of them,
            // lower-cased, as one word against the four call words: most names in replies
            // (`<div`, `<p>`, `<T>`) are too short to hold one and stop at their length.
            let rest = bytes.get(q..).unwrap_or_default();
            let name = &rest[..class::run(rest, TAG_NAME, 40)];
            name.windows(4).any(|w| {
                let w = u32::from_le_bytes([w[0], w[1], w[2], w[3]]) | 0x2020_2020;
                CALL_WORDS.contains(&w)
            })
        }
        _ => false,
    }
}

/// Appends the calls the reader finds.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let all = tags(text, 0, MAX_TAGS);
    // The tools are asked only once markup of a call's shape stands outside code, so that
    // generics in prose and HTML answers never make the worker fetch them.
    let candidates: Vec<&Tag<'_>> = all
        .iter()
        .filter(|t| call_shaped(text, t) && !ctx.quoted(t.span.start))
        .collect();
    if candidates.is_empty() {
        return;
    }
    let tools = ctx.enabled_tools();
    // The anchor: no enabled tool's name in the text, no call of one.
    if !tools
        .iter()
        .any(|t| !t.is_empty() && memchr::memmem::find(text.as_bytes(), t.as_bytes()).is_some())
    {
        return;
    }
    let reader = Reader { text, ctx, tools };
    let mut blocks: Vec<Block> = Vec::new();
    let mut after = 0;
    for tag in candidates {
        if tag.span.start < after {
            continue;
        }
        if let Some((end, calls)) = reader.list(tag) {
            blocks.push((tag.span.start..end, calls));
            after = end;
            continue;
        }
        let found = match tag.kind {
            Kind::Close | Kind::Special if closes_a_call(tag) => reader.before_closer(tag),
            Kind::Open if is_name_key(&tag.key()) => reader.name_then_args(tag).or_else(|| {
                reader
                    .call(tag)
                    .map(|(end, call)| (tag.span.start, end, call))
            }),
            _ => reader
                .call(tag)
                .map(|(end, call)| (tag.span.start, end, call)),
        };
        // Parameters that are a JSON schema describe the tool; they call nothing.
        let found = found.filter(|(start, _, c)| *start >= after && !is_schema(&c.arguments));
        if let Some((start, end, call)) = found {
            blocks.push((start..end, vec![call]));
            after = end;
        }
    }
    merge(text, Family::Markup, blocks, out);
}

/// The call an element named after a tool writes (`<read_file><path>a</path></read_file>`),
/// read at `p` by the same reader, and where its markup ends. The structure is read first,
/// as if the element's own name were a tool; the tools are asked only of a complete
/// element, so XML answers rarely make the worker fetch them (`cline_xml`).
pub(crate) fn tool_element(text: &str, p: usize, ctx: &Ctx<'_>) -> Option<(usize, Call)> {
    let open = tag_at(text, p).filter(|t| t.kind == Kind::Open && t.closed)?;
    let own = [open.name.to_string()];
    let reader = Reader {
        text,
        ctx,
        tools: &own,
    };
    let (end, call) = reader.call(&open)?;
    ctx.tool_enabled(&call.name).then_some((end, call))
}

struct Reader<'a, 't> {
    text: &'t str,
    ctx: &'a Ctx<'a>,
    tools: &'a [String],
}

impl<'t> Reader<'_, 't> {
    fn enabled(&self, name: &str) -> bool {
        self.tools.iter().any(|t| t == name)
    }

    /// The enabled tool a written name stands for: as written, or in the tools' namespace
    /// (`functions.NAME`), or with a call counter (`NAME:0`).
    fn tool(&self, written: &str) -> Option<String> {
        let w = written.trim();
        let w =
            w.rsplit_once(':')
                .map_or(w, |(n, i)| match i.bytes().all(|b| b.is_ascii_digit()) {
                    true => n,
                    false => w,
                });
        let w = ["functions.", "tools.", "default_api.", "functions:"]
            .iter()
            .find_map(|p| w.strip_prefix(p))
            .unwrap_or(w);
        self.enabled(w).then(|| w.to_string())
    }

    /// The call the element opened by `open` is, and where its markup ends.
    fn call(&self, open: &Tag<'t>) -> Option<(usize, Call)> {
        let key = open.key();
        let own_name = self.tool(open.name);
        let placeholder = open.kind == Kind::Special && is_placeholder_key(&key);
        let call_shaped =
            (is_call_key(&key) || placeholder) && !(open.kind == Kind::Special && is_end_key(&key));
        // An element whose `=NAME` names an enabled tool, whatever its word (a model that
        // wrote `<parameter=NAME>` where `<function=NAME>` belongs): a call only where a
        // closer of call markup ends it.
        let eq_tool = open.kind == Kind::Open && open.eq.and_then(|v| self.tool(v)).is_some();
        let renamed = eq_tool && !call_shaped && own_name.is_none();
        if own_name.is_none() && !call_shaped && !renamed {
            return None;
        }
        if own_name.is_some() && super::tag_names::not_a_tool(open.name) {
            return None;
        }
        let mut args = Map::new();
        let mut name = own_name.clone();
        // An attribute's value is text, as XML writes it: quoted, never typed.
        let text_of = |v: &str| Value::String(xml::unescape(v).into_owned());
        if own_name.is_some() {
            for (k, v) in &open.attrs {
                args.insert((*k).to_string(), text_of(v));
            }
        } else {
            name = open
                .attrs
                .iter()
                .filter(|(k, _)| is_name_key(&fold(k)))
                .find_map(|(_, v)| self.tool(v))
                .or_else(|| open.eq.and_then(|v| self.tool(v)));
            // Arguments in an attribute (`arguments='{"q": "x"}'`), as JSON; in a call
            // element that closes itself, every other attribute but an id is one
            // (`<tool name="bash" command="ls" />`).
            for (k, v) in &open.attrs {
                let key = fold(k);
                if is_args_key(&key) {
                    match typed_param(&xml::unescape(v)) {
                        Value::Object(m) => args.extend(m),
                        _ => return None,
                    }
                } else if open.kind == Kind::SelfClose && !is_name_key(&key) && !is_id(k) {
                    args.insert((*k).to_string(), text_of(v));
                }
            }
        }
        let mut had_args = !args.is_empty();
        if let Some(r) = open.json.clone() {
            let (v, _) = crate::grammar::json::value_at(self.text, r.start)?;
            match call_of(&v, Keys::Strict) {
                Some(c) if self.enabled(&c.name) && name.is_none() => {
                    name = Some(c.name);
                    if let Value::Object(m) = c.arguments {
                        args.extend(m);
                    }
                    had_args = true;
                }
                _ => return None,
            }
        }
        let body_from = open.span.end;
        // A tag that carries its whole call (`<x/>`, `<functioncall {..}>`) has no body.
        let whole_tag = open.kind == Kind::SelfClose || open.json.is_some();
        let body = match whole_tag {
            true => Body {
                end: open.span.end,
                ..Body::default()
            },
            false => self.body(body_from, name.is_none())?,
        };
        if name.is_none() {
            name = body.name;
        }
        let name = name?;
        args.extend(body.args);
        had_args |= body.had_args;
        // Where the call's markup ends: its closer, when one follows; a closer of call
        // markup for an `=NAME` element (`<function=NAME></function>`, `<parameter=NAME>`
        // then `</function>`).
        let call_closer = || {
            tag_at(self.text, skip_ws(self.text, body.end))
                .filter(|c| c.kind == Kind::Close && closes_a_call(c))
                .map(|c| c.span.end)
        };
        let end = match open.kind {
            Kind::SelfClose => open.span.end,
            _ if renamed => call_closer()?,
            _ => self
                .closer(body.end, &key)
                .or_else(|| eq_tool.then(call_closer).flatten())
                .unwrap_or(body.end),
        };
        // A control token's call that is whole (every value closed, the arguments read)
        // where the turn ends lost its closer to a stop sequence, as the rows'
        // `Missing::AtEnd` has it; the net's anchor, an enabled tool, is already there. So
        // does a tag in a model's namespace (`<｜DSML｜toolcall>`), a control token written
        // in ordinary ones. A plain tag's call cut there stays to its row (vLLM keeps
        // `<function ..>` without its closer as text).
        let turn_ended = call_shaped
            && (open.kind == Kind::Special || (open.kind == Kind::Open && open.namespaced))
            && body.had_args
            && rest_ends_turn(self.text, body.end);
        // An element named after a tool whose attributes are its arguments, left open where
        // the text ends (`<list_files path="src">`): the turn ended the call.
        let attributes_end_turn = own_name.is_some()
            && !open.attrs.is_empty()
            && crate::grammar::text::rest_is_blank(self.text, open.span.end);
        let closed =
            end > body.end || whole_tag || body.closed || turn_ended || attributes_end_turn;
        // Otherwise a call whose closer is missing may be a cut one, and the formats' own
        // rows decide where their cut calls count; the net reads closed calls only.
        if !closed {
            self.ctx.declined(open.span.start..body.end, || {
                "the call's closer is missing: the format's own rows decide cut calls".into()
            });
            return None;
        }
        // A call with nothing in it: a call-shaped element holding only a name is a word
        // in markup; an element named after a tool (`<list_memories></list_memories>`) is
        // a call where the turn ends.
        let named_and_closed = eq_tool && end > body.end;
        if !had_args
            && !named_and_closed
            && (own_name.is_none() || !crate::grammar::text::rest_is_blank(self.text, end))
        {
            self.ctx.declined(open.span.start..end, || {
                "a call with no arguments, not an element named after the tool that ends the \
                 text"
                    .into()
            });
            return None;
        }
        // Any tag may be named after a tool: such an element is a call only standing apart
        // from the text, on its own lines or as a sentence of its own; so is a call that
        // is all attributes (`<tool name="bash" command="ls" />` in a sentence is an example).
        if (own_name.is_some() || open.kind == Kind::SelfClose)
            && !(super::named::stands_before(self.text, open.span.start)
                && super::named::stands_after(self.text, end))
        {
            self.ctx.declined(open.span.start..end, || {
                "an element named after an enabled tool inside a sentence".into()
            });
            return None;
        }
        Some((
            end,
            Call {
                name,
                arguments: Value::Object(args),
            },
        ))
    }

    /// The call whose opener was stripped and whose closer `close` was left: a Python call
    /// (`NAME(k='v')`, its list's `]` left too) or a JSON call object that opens its line
    /// and ends right before the closer.
    fn before_closer(&self, close: &Tag<'t>) -> Option<(usize, usize, Call)> {
        if let Some(found) = self.labelled_parameters(close) {
            return Some(found);
        }
        let text = self.text;
        let head = text.get(..close.span.start)?.trim_end();
        let head = head.strip_suffix(']').map_or(head, str::trim_end);
        let stop = head.len();
        let line = head.rfind('\n').map_or(0, |i| i + 1);
        let open = skip_ws(text, line);
        let listed = text.get(open..)?.starts_with('[');
        let start = if listed {
            skip_ws(text, open + 1)
        } else {
            open
        };
        if start >= stop || self.ctx.quoted(start) {
            return None;
        }
        // The call's own inside, read as the body of a call whose opener is gone: a JSON
        // call, `NAME(k=v)`, `NAME{json}`, `NAME:0<sep>{json}`.
        let body = match glued_call(text, start) {
            Some((c, end)) => Body {
                name: Some(c.name),
                args: match c.arguments {
                    Value::Object(m) => m,
                    _ => return None,
                },
                had_args: true,
                end,
                ..Body::default()
            },
            None => self.body(start, true)?,
        };
        if body.end != stop || !body.had_args {
            return None;
        }
        let name = self.tool(&body.name?)?;
        Some((
            open,
            close.span.end,
            Call {
                name,
                arguments: Value::Object(body.args),
            },
        ))
    }

    /// A list of JSON call objects between a call opener and its closer
    /// (`<|FunctionCallBegin|>[{"name", "parameters"}, ..]<|FunctionCallEnd|>`), every call
    /// of an enabled tool: where the closer ends, and the calls.
    fn list(&self, open: &Tag<'t>) -> Option<(usize, Vec<Call>)> {
        if !matches!(open.kind, Kind::Open | Kind::Special) || !is_call_key(&open.key()) {
            return None;
        }
        let q = skip_ws(self.text, open.span.end);
        if self.text.as_bytes().get(q) != Some(&b'[') {
            return None;
        }
        let (v, end) = crate::grammar::json::value_at(self.text, q)?;
        let calls = super::util::calls_of(&v, false)?;
        if !calls.iter().all(|c| self.enabled(&c.name)) {
            return None;
        }
        Some((self.closer(end, &open.key())?, calls))
    }

    /// Parameter elements, one per line, whose call's opener is gone and whose closer
    /// `close` was left, under a line that names the tool (`[Tool Use: NAME]`, `NAME`): a
    /// front end's label where the opener was. The label's line goes with the call.
    fn labelled_parameters(&self, close: &Tag<'t>) -> Option<(usize, usize, Call)> {
        let text = self.text;
        let mut run = text.get(..close.span.start)?.trim_end().len();
        // Back over the lines that open with a parameter element, and the lines of a value
        // that runs over several (from its closer's line up to its opener's).
        let mut inside = false;
        // A line holding a parameter's closer (a value's last line).
        let ends_value = |line: usize, end: usize| {
            let closer = text.get(line..end).and_then(|l| l.rfind("</"));
            closer
                .and_then(|i| tag_at(text, line + i))
                .is_some_and(|t| t.kind == Kind::Close && is_param_key(&t.key()))
        };
        loop {
            let line = text.get(..run)?.rfind('\n').map_or(0, |i| i + 1);
            let t = tag_at(text, skip_ws(text, line));
            let opens = t.is_some_and(|t| t.kind == Kind::Open && is_param_key(&t.key()));
            if opens {
                inside = false;
            } else if inside || ends_value(line, run) {
                inside = true;
            } else {
                break;
            }
            if line == 0 {
                break;
            }
            run = line - 1;
        }
        if inside {
            return None;
        }
        let first = text.get(run..)?.find('\n').map(|i| run + i + 1)?;
        let mut label_start = text.get(..run)?.rfind('\n').map_or(0, |i| i + 1);
        let line = text.get(label_start..run)?.trim_end();
        // A bracketed label may be glued to a sentence (`Sure.[Tool Use: NAME]`): only the
        // brackets go. Otherwise the line is the label: a few words, no sentence.
        let label = match line.ends_with(']').then(|| line.rfind('[')).flatten() {
            Some(i) => {
                label_start += i;
                &line[i..]
            }
            None if line.split_whitespace().count() <= 4 && !line.contains(['.', '!', '?']) => {
                line.trim_start()
            }
            None => return None,
        };
        let word = label
            .rsplit([' ', ':', '[', '*'])
            .next()?
            .trim_end_matches([']', '*', ':']);
        if label.len() > 64 || label.contains('<') || self.ctx.quoted(first) {
            return None;
        }
        let name = self.tool(word)?;
        let body = self.body(first, false)?;
        let closed = skip_ws(text, body.end) == close.span.start;
        (closed && body.had_args).then(|| {
            let call = Call {
                name,
                arguments: Value::Object(body.args),
            };
            (label_start, close.span.end, call)
        })
    }

    /// The end of the closer of the element whose folded key is `key`, right at `pos`
    /// (whitespace before): its own closer, its special end token, or another format's
    /// call closer (a mixed dialect).
    fn closer(&self, pos: usize, key: &str) -> Option<usize> {
        let q = skip_ws(self.text, pos);
        let t = tag_at(self.text, q)?;
        let k = t.key();
        let ends = match t.kind {
            Kind::Close => k == key || is_call_key(&k),
            Kind::Special => {
                (is_end_key(&k) && (strip_edge(&k) == strip_edge(key) || is_call_key(&k)))
                    || (is_placeholder_key(&k) && is_placeholder_key(key))
            }
            _ => false,
        };
        ends.then_some(t.span.end)
    }
}

/// `NAME{json}`, `functions.NAME:0 {json}`: a name and its arguments object, spaces between.
fn glued_call(text: &str, start: usize) -> Option<(Call, usize)> {
    let rest = text.get(start..)?;
    let name_len = rest.find(|c: char| !(is_ident_char(c) || matches!(c, '.' | ':' | '-')))?;
    let brace = skip_ws(text, start + name_len);
    let (v, end) = crate::grammar::json::value_at(text, brace)?;
    let name = rest.get(..name_len)?;
    (text.as_bytes().get(brace) == Some(&b'{') && v.is_object() && !name.is_empty()).then(|| {
        (
            Call {
                name: name.to_string(),
                arguments: v,
            },
            end,
        )
    })
}

#[cfg(test)]
mod tests;

/// Whether an attribute is a call's bookkeeping id (`id`, `call_id`, `toolUseId`), not an
/// argument (`uuid`, `grid`, `paid` are arguments).
fn is_id(key: &str) -> bool {
    key.eq_ignore_ascii_case("id")
        || key.ends_with("_id")
        || key.ends_with("-id")
        || key.ends_with("Id")
}
