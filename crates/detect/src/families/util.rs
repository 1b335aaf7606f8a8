//! The kit's helpers under the names the families with finders of their own use.
//!
//! The control tokens that end a turn, and the merging of neighbouring blocks into one
//! leak, live here too: the engine and the own finders share them.
//!
//! May depend on: `crate::grammar`, `super::format`, `super::bodies` (the keyed call),
//! `crate::types`, `crate::Ctx`.

pub use super::format::MAX_CANDIDATES;
pub use crate::grammar::json::{decode_arguments, value_at as json_value_at, whole as json_whole};
pub use crate::grammar::text::{
    at_lit, attr, find_bounded, find_from, past_doubled_gt, preceded_by, rest_is_blank_or_cut,
    skip_ws, Finder,
};
pub use crate::grammar::{is_tool_name, typed_param};

use super::format::{spellings, Spell};
use crate::grammar::json::{call_of, Keys};
use crate::grammar::text::{eat, eat_any};
use crate::types::Call;
use crate::types::Family;
use crate::{Ctx, Leak};
use serde_json::Value;
use std::ops::Range;

/// One parsed block before neighbouring blocks are merged into one leak.
pub type Block = (Range<usize>, Vec<Call>);

/// A call object that is exactly a call (see [`Keys::Strict`]), not a tool's definition
/// (arguments that are a JSON schema).
pub fn strict_call(v: &Value) -> Option<Call> {
    call_of(v, Keys::Strict).filter(|c| !is_schema(&c.arguments))
}

/// The calls of a JSON value that is one strict call object (when `allow_object`) or a
/// non-empty array of them.
pub fn calls_of(v: &Value, allow_object: bool) -> Option<Vec<Call>> {
    match v {
        Value::Array(items) if !items.is_empty() => items.iter().map(strict_call).collect(),
        Value::Object(_) if allow_object => strict_call(v).map(|c| vec![c]),
        _ => None,
    }
}

/// Tokens that end a model's turn or message. Right after a leak (whitespace between)
/// they are part of it: the user must not see half of a control sequence. Elsewhere they
/// are left alone.
pub const END_OF_TURN: &[&str] = &[
    "<|eom_id|>",
    "<|eot_id|>",
    "<|eot|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<｜end▁of▁sentence｜>",
    "</s>",
    // InternLM2's action closer: left after a call whose `<|action_start|><|plugin|>` a
    // server stripped, it ends that call as the turn's end would.
    "<|action_end|>",
];

/// [`END_OF_TURN`] with DeepSeek's token in every spelling its rows allow.
fn end_of_turn() -> &'static [&'static str] {
    static ALL: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    ALL.get_or_init(|| {
        let mut all: Vec<&'static str> = END_OF_TURN.to_vec();
        for s in spellings("<｜end▁of▁sentence｜>", Spell::Bars) {
            if !all.contains(&s) {
                all.push(s);
            }
        }
        all
    })
}

/// Extends `end` over the control tokens that directly follow the markup.
pub fn with_trailing(text: &str, mut end: usize, own: &[&str]) -> usize {
    loop {
        let q = skip_ws(text, end);
        match eat_any(text, q, own).or_else(|| eat_any(text, q, end_of_turn())) {
            Some(after) => end = after,
            None => return end,
        }
    }
}

/// Wrappers formats put around their calls, `(opener, closer)`; an empty closer: the format
/// has none. A leak read by a family that does not know the wrapper around it (a fenced JSON
/// call inside Hermes's `<tool_call>`, a DeepSeek-V3 fence whose tokens another reading
/// left) would leave the wrapper behind as litter; right around a leak, with only
/// whitespace between, it is markup of that leak: the opener goes, and the closer with it
/// when it follows (it is missing where the generation stopped).
pub const WRAPPERS: &[(&str, &str)] = &[
    ("<tool_call>", "</tool_call>"),
    ("<tool_calls>", "</tool_calls>"),
    ("<function_calls>", "</function_calls>"),
    ("<minimax:tool_call>", "</minimax:tool_call>"),
    ("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"),
    ("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"),
    ("<|tool_call>", "<tool_call|>"),
    ("<start_function_call>", "<end_function_call>"),
    ("<|tool_call|>", ""),
    ("<|python_tag|>", ""),
    ("[TOOL_CALLS]", ""),
];

/// The frames a tool's answer comes in, `(opener, closer)`, in the formats' own markup
/// (chat templates: Hermes/Qwen's `<tool_response>`, DeepSeek's tool outputs, Llama's
/// `ipython` turn, Mistral's `[TOOL_RESULTS]`, Gemma's responses, Cohere's and Anthropic's
/// result blocks, GLM's observation, MiniMax's tool turn, Google's ```` ```tool_output ````
/// fence). A model that writes one right after its call made the answer up: it is markup of
/// the same leak and goes with it. Anywhere else it is left alone.
pub const RESULT_FRAMES: &[(&str, &str)] = &[
    ("<tool_response>", "</tool_response>"),
    ("<|observation|>", "</tool_response>"),
    ("<tool_result>", "</tool_result>"),
    ("<function_results>", "</function_results>"),
    ("<｜tool▁outputs▁begin｜>", "<｜tool▁outputs▁end｜>"),
    ("<｜tool▁output▁begin｜>", "<｜tool▁output▁end｜>"),
    ("[TOOL_RESULTS]", "[/TOOL_RESULTS]"),
    ("<|start_header_id|>ipython<|end_header_id|>", "<|eot_id|>"),
    ("<|header_start|>ipython<|header_end|>", "<|eot|>"),
    ("<|im_start|>tool", "<|im_end|>"),
    // Qwen's template puts a tool's answer in a user turn.
    ("<|im_start|>user\n<tool_response>", "<|im_end|>"),
    ("<|im_system|>tool<|im_middle|>", "<|im_end|>"),
    ("<|tool_response>", "<tool_response|>"),
    ("<start_function_response>", "<end_function_response>"),
    ("<|START_TOOL_RESULT|>", "<|END_TOOL_RESULT|>"),
    // MiniMax-M2's tool turn (`]~b]tool` .. `[e~[`, its chat template).
    ("]~b]tool", "[e~["),
    // Gemma 3's and Gemini's answer to a ```tool_code fence.
    ("```tool_output", "```"),
];

/// Extends leaks over what follows them and belongs to them: end-of-turn tokens and fake
/// tool results. Each frame's closer is searched with a remembering [`Finder`], so the
/// leaks of one message cost one pass per frame kind.
pub struct Trailer<'t> {
    text: &'t str,
    closers: Vec<Option<Finder<'t>>>,
}

impl<'t> Trailer<'t> {
    /// A trailer over `text`.
    pub fn new(text: &'t str) -> Trailer<'t> {
        Trailer {
            text,
            closers: RESULT_FRAMES.iter().map(|_| None).collect(),
        }
    }

    /// The end of the markup that ends at `end`, over the end-of-turn tokens and the fake
    /// results (each with its closer) right after it.
    pub fn extend(&mut self, mut end: usize) -> usize {
        let text = self.text;
        loop {
            end = with_trailing(text, end, &[]);
            let q = skip_ws(text, end);
            let frame = RESULT_FRAMES
                .iter()
                .enumerate()
                .find_map(|(i, (open, close))| eat(text, q, open).map(|a| (i, a, *close)));
            let Some((i, after, close)) = frame else {
                return observation(text, end, q)
                    .or_else(|| labeled_answer(text, end, q))
                    .or_else(|| answer_object(text, q))
                    .unwrap_or(end);
            };
            let finder = self.closers[i].get_or_insert_with(|| Finder::new(text, close));
            match finder.find(after) {
                Some(c) => end = c + close.len(),
                // A frame whose closer the generation never wrote: its answer is one JSON
                // value, or one line that ends the text.
                None => return unclosed_answer(text, after).unwrap_or(end),
            }
        }
    }
}

/// The end of an `Observation:` line (the label a ReAct runtime writes before a tool's
/// answer) on the line after a call ending at `end` (`q`: the next non-blank byte), its
/// answer a JSON value (any lines) or the rest of its line: the model wrote it, so the
/// answer is made up, whatever format the call was in.
fn observation(text: &str, end: usize, q: usize) -> Option<usize> {
    let label = text.get(q..)?.strip_prefix("Observation:")?;
    if !text.get(end..q)?.contains('\n') {
        return None;
    }
    let from = q + "Observation:".len();
    let v = skip_ws(text, from);
    if matches!(label.trim_start().as_bytes().first(), Some(b'{' | b'[')) {
        if let Some((_, e)) = crate::grammar::json::value_at(text, v) {
            return Some(e);
        }
    }
    Some(
        text.get(from..)?
            .find('\n')
            .map_or(text.len(), |i| from + i),
    )
}

/// The end of a label naming a tool's answer and the JSON value after it, on the line after
/// a call ending at `end` (`q`: the next non-blank byte): `Result: {..}`, `Tool output:`,
/// `[Tool result]` then the value on the next line. A few words, the last about an answer;
/// only a JSON value counts after it (prose after `Result:` is the model's own).
fn labeled_answer(text: &str, end: usize, q: usize) -> Option<usize> {
    if !text.get(end..q)?.contains('\n') {
        return None;
    }
    let rest = text.get(q..)?;
    let (label, after) = match rest.strip_prefix('[') {
        Some(r) => r.split_once(']')?,
        None => rest.split_once(':')?,
    };
    let words: Vec<&str> = label.split_whitespace().collect();
    let last = words.last()?.to_ascii_lowercase();
    let about_answer = matches!(
        last.as_str(),
        "result" | "results" | "output" | "observation" | "response" | "returned"
    );
    if !(about_answer
        && words.len() <= 3
        && words.iter().all(|w| w.chars().all(char::is_alphabetic)))
    {
        return None;
    }
    let v = skip_ws(text, text.len() - after.len());
    if !matches!(text.as_bytes().get(v), Some(b'{' | b'[')) {
        return None;
    }
    crate::grammar::json::value_at(text, v).map(|(_, e)| e)
}

/// Top-level keys that make a JSON object a tool's answer.
const ANSWER_OBJECT_KEYS: &[&str] = &[
    "result",
    "results",
    "output",
    "observation",
    "tool_response",
];

/// The end of a tool's answer written as a JSON object at `q`, right after a call, bare or
/// in a ```` ```json ```` fence (a fenced call answered by a fenced result): an object with
/// one of [`ANSWER_OBJECT_KEYS`] at its top level.
fn answer_object(text: &str, q: usize) -> Option<usize> {
    let fence = ["```json\n", "```\n"].iter().find_map(|f| eat(text, q, f));
    let (v, end) = crate::grammar::json::value_at(text, skip_ws(text, fence.unwrap_or(q)))?;
    let obj = v.as_object()?;
    if !obj
        .keys()
        .any(|k| ANSWER_OBJECT_KEYS.contains(&k.to_ascii_lowercase().as_str()))
    {
        return None;
    }
    match fence {
        Some(_) => eat(text, skip_ws(text, end), "```"),
        None => Some(end),
    }
}

/// The end of the answer in a frame whose closer is missing, at `after`: a JSON value, or
/// one line that ends the text.
fn unclosed_answer(text: &str, after: usize) -> Option<usize> {
    let v = skip_ws(text, after);
    if let Some((_, e)) = crate::grammar::json::value_at(text, v) {
        return Some(e);
    }
    (!text.get(v..)?.trim_end().contains('\n')).then_some(text.len())
}

/// Pushes the blocks as leaks, merging neighbours separated only by whitespace (the
/// whitespace between calls of one block is markup).
pub fn merge(
    text: &str,
    family: Family,
    mut blocks: Vec<(Range<usize>, Vec<Call>)>,
    out: &mut Vec<Leak>,
) {
    blocks.sort_by_key(|(span, _)| span.start);
    let mut cur: Option<Leak> = None;
    for (span, calls) in blocks {
        match cur.as_mut() {
            Some(c) if span.start < c.span.end => {}
            Some(c)
                if text
                    .get(c.span.end..span.start)
                    .is_some_and(|g| g.trim().is_empty()) =>
            {
                c.span.end = span.end;
                c.calls.extend(calls);
            }
            _ => {
                out.extend(cur.take());
                cur = Some(Leak {
                    family,
                    span,
                    calls,
                    results: Vec::new(),
                });
            }
        }
    }
    out.extend(cur);
}

/// Whether a call (or section) opened at `open` whose body ends at `end` still counts
/// although its closer is missing and text follows: a server dropped the closer (a special
/// token) and the model went on writing. The opener stands and the body parsed completely,
/// so the span from the opener through the body is the call (the opener is no residue left
/// before the prose); but the closer was the marker that said where the markup ends, so,
/// like every reading that lost a marker, it counts only where every call names a tool the
/// agent has enabled. What follows must be prose (a word, after whitespace or glued to the
/// call: the body parsed completely, so it ended where its grammar says, and a model that
/// lost the closer often runs straight on); a call glued to more markup (`..}<`, the
/// closer being cut) is not known to have ended there.
pub fn lost_closer_ok(text: &str, open: usize, end: usize, calls: &[Call], ctx: &Ctx<'_>) -> bool {
    let rest = text.get(end..).unwrap_or_default();
    let next = rest.trim_start();
    let prose = next.starts_with(char::is_alphanumeric);
    if !prose {
        ctx.declined(open..end, || {
            "the closer is missing and what follows the call is not prose (markup, or \
             nothing but punctuation)"
                .into()
        });
        return false;
    }
    let enabled = !calls.is_empty() && calls.iter().all(|c| ctx.tool_enabled(&c.name));
    if !enabled {
        ctx.declined(open..end, || {
            "the closer is missing and text follows the call: without the closer only an \
             enabled tool's name says it is markup"
                .into()
        });
    }
    enabled
}

/// Whether a call whose closers are all missing still counts because the text ends right
/// after its last complete argument (`end`, whitespace after it): the serving stack stopped
/// on the call's closer (a stop sequence) or at its token limit. The argument's own closer
/// stands, so its value is whole (a value that runs to the end of the text may have been
/// cut and is never read here). But a generation cut between two arguments looks the same,
/// and the closer was the marker that said where the markup ends, so, like
/// [`lost_closer_ok`], it counts only where the call names a tool the agent has enabled.
pub fn cut_closers_ok(text: &str, open: usize, end: usize, call: &Call, ctx: &Ctx<'_>) -> bool {
    if !rest_is_blank_or_cut(text, end) {
        return false;
    }
    let enabled = ctx.tool_enabled(&call.name);
    if !enabled {
        ctx.declined(open..end, || {
            "the call's closers are missing at the end of the text: a cut between two \
             arguments looks the same, so only an enabled tool's name says it is a call"
                .into()
        });
    }
    enabled
}

/// Whether a run whose last invoke lost `</invoke>` and the wrapper's closer at the end of
/// the text counts: the calls before it carry their closers, the last one decides
/// ([`cut_closers_ok`]).
pub fn cut_run_ok(text: &str, open: usize, run_end: usize, calls: &[Call], ctx: &Ctx<'_>) -> bool {
    calls
        .last()
        .is_some_and(|last| cut_closers_ok(text, open, run_end, last, ctx))
}

/// The calls of an envelope a model wrote as text: one key about tools, calls, functions or
/// actions holding a non-empty list of calls (the API's `{"tool_calls": [..]}`, OpenAI's
/// parallel wrapper `{"tool_uses": [..]}`, `{"calls": [..]}`; each item a call object, or
/// OpenAI's `{"id", "type": "function", "function": {"name", "arguments"}}`), or one call
/// (`{"function_call": {..}}`, `{"tool_call": {..}}`, a JSON agent's `{"action": {"name":
/// NAME, ..}}` with its arguments flat), nothing else in it but a JSON agent's thought. The
/// arguments may be serialized JSON, as the API sends them. Whether the tools are enabled
/// is the caller's check.
pub fn envelope(v: &Value) -> Option<Vec<Call>> {
    let obj = v.as_object()?;
    // The one key of the envelope, a JSON agent's thought beside it aside.
    let mut keys = obj
        .iter()
        .filter(|(k, v)| !crate::grammar::json::is_thought(k, v));
    let (key, inner) = keys.next().filter(|_| keys.next().is_none())?;
    let k = key.to_ascii_lowercase();
    // `action` only as a whole word of the key (`action`, `action_sequence`,
    // `next_actions`): `transaction` holds it too.
    let action = k
        .split(['_', '-', ' '])
        .any(|w| w == "action" || w == "actions");
    if !action && !["tool", "call", "function"].iter().any(|w| k.contains(w)) {
        return None;
    }
    let calls: Vec<Call> = match inner {
        Value::Object(_) => vec![strict_call(inner).or_else(|| flat_call(inner, true))?],
        Value::Array(items) if !items.is_empty() => {
            items.iter().map(listed_call).collect::<Option<_>>()?
        }
        _ => return None,
    };
    // A list of tools' definitions (`{"tools": [{"name", "parameters": {schema}}]}`)
    // describes tools; it calls none.
    (!calls.iter().any(|c| is_schema(&c.arguments))).then_some(calls)
}

/// One item of an envelope's list: a call object, or OpenAI's `{"id", "type": "function",
/// "function": {..}}` (an `index` besides).
fn listed_call(item: &Value) -> Option<Call> {
    strict_call(item)
        .or_else(|| {
            let o = item.as_object()?;
            let bookkeeping = o
                .keys()
                .all(|k| matches!(k.as_str(), "id" | "type" | "function" | "index"));
            let typed = o.get("type").is_none_or(|t| t == "function");
            (bookkeeping && typed).then(|| strict_call(o.get("function")?))?
        })
        .or_else(|| flat_call(item, true))
        // A browser agent's action list: each item keyed by its tool (`{"click": {..}}`).
        .or_else(|| super::bodies::keyed_call(item))
}

/// Keys whose string value names the tool of a flat call object wherever it stands.
const FLAT_CALL_KEYS: &[&str] = &["tool", "tool_name", "toolname", "function", "function_name"];
/// Keys that name it only inside an envelope of calls: data has names and types too
/// (`{"name": "Alice", "age": 30}` is a record, whatever tools there are).
const FLAT_NAME_KEYS: &[&str] = &["name", "type", "action"];
/// Keys that make an object an answer, not a call.
const ANSWER_KEYS: &[&str] = &[
    "result",
    "results",
    "output",
    "error",
    "status",
    "success",
    "observation",
    "response",
];

/// A call written flat: one key names the tool (`{"name": NAME, "query": ..}`, an API's
/// `{"id", "type": NAME, ..}`) and every other key but the call's bookkeeping is an
/// argument. No key may be one of a call's arguments keys (then it is a call of another
/// spelling or none) or an answer's. Whether `NAME` is an enabled tool is the caller's
/// check; this shape is read only where the text is nothing else (a whole message, an
/// envelope of calls: `in_envelope`, where `name`, `type` and `action` name the tool too).
pub fn flat_call(v: &Value, in_envelope: bool) -> Option<Call> {
    let obj = v.as_object()?;
    let is = |keys: &[&str], k: &str| keys.iter().any(|w| w.eq_ignore_ascii_case(k));
    let mut named = obj.iter().filter(|(k, v)| {
        (is(FLAT_CALL_KEYS, k) || (in_envelope && is(FLAT_NAME_KEYS, k)))
            && v.as_str()
                .is_some_and(|n| n != "function" && is_tool_name(n))
    });
    let (name_key, name) = named.next()?;
    if named.next().is_some() {
        return None;
    }
    let mut arguments = serde_json::Map::new();
    for (k, v) in obj {
        let lower = k.to_ascii_lowercase();
        if k == name_key || matches!(lower.as_str(), "id" | "call_id" | "index") {
            continue;
        }
        if lower == "type" && v == "function" {
            continue;
        }
        if crate::grammar::keys::is_args_key(&lower) || ANSWER_KEYS.contains(&lower.as_str()) {
            return None;
        }
        arguments.insert(k.clone(), v.clone());
    }
    Some(Call {
        name: name.as_str()?.to_string(),
        arguments: Value::Object(arguments),
    })
}

/// A JSON schema (`{"type": "object", "properties": {..}}`) describes a tool; it is not a
/// call's arguments.
pub fn is_schema(args: &Value) -> bool {
    args.get("type").and_then(Value::as_str) == Some("object")
        && args.get("properties").is_some_and(Value::is_object)
}
