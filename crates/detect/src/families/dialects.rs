//! The dialects the table's rows name: the kit's syntaxes spelled with each format's
//! tokens, and the few call bodies that need a reading of their own (DeepSeek's two header
//! styles, Kimi's call ids, Step-3's optional header, GigaChat's role header, Llama's
//! `<|python_tag|>` bodies). Everything around a body is the engine's.
//!
//! May depend on: `super::bodies`, `super::format`, `crate::grammar`, `crate::types`,
//! `crate::Ctx`.

use super::bodies::Grammar;
use crate::grammar::json::{self, JsonCalls, Keys, NamedJson, Shape};
use crate::grammar::kv::KvSyntax;
use crate::grammar::python::{self, PyOpts};
use crate::grammar::text::{eat, find_bounded, find_from, skip_ws, Finder};
use crate::grammar::xml::{self, InvokeSyntax, INVOKE};
use crate::grammar::{is_tool_name, ValueMode};
use crate::types::Call;
use crate::Ctx;
use serde_json::{json, Value};

pub(super) const fn strict(shape: Shape) -> Grammar {
    Grammar::Json(JsonCalls {
        shape,
        keys: Keys::Strict,
        lenient: false,
    })
}

pub(super) const HERMES_JSON: Grammar = Grammar::Json(JsonCalls {
    shape: Shape::Object,
    keys: Keys::Loose,
    lenient: false,
});

pub(super) const MINICPM: InvokeSyntax = InvokeSyntax {
    invoke_open: "<function",
    invoke_close: "</function>",
    param_open: "<param",
    param_close: "</param>",
    ..INVOKE
};

pub(super) const STEPTML: InvokeSyntax = InvokeSyntax {
    invoke_open: "<steptml:invoke",
    invoke_close: "</steptml:invoke>",
    param_open: "<steptml:parameter",
    param_close: "</steptml:parameter>",
    ..INVOKE
};

pub(super) const DSML: InvokeSyntax = InvokeSyntax {
    invoke_open: "<｜DSML｜invoke",
    invoke_close: "</｜DSML｜invoke>",
    param_open: "<｜DSML｜parameter",
    param_close: "</｜DSML｜parameter>",
    string_attr: true,
    cut_at_end: true,
    ..INVOKE
};

pub(super) const GCML: InvokeSyntax = InvokeSyntax {
    invoke_open: "<｜GCML｜invoke",
    invoke_close: "</｜GCML｜invoke>",
    param_open: "<｜GCML｜parameter",
    param_close: "</｜GCML｜parameter>",
    string_attr: true,
    ..INVOKE
};

pub(super) const GLM_KV: KvSyntax = KvSyntax {
    name_end: None,
    key: ("<arg_key>", "</arg_key>"),
    type_tags: None,
    value: ("<arg_value>", "</arg_value>"),
    value_close_optional: false,
    values: ValueMode::Typed,
    first_wins: false,
};

pub(super) const HY_KV: KvSyntax = KvSyntax {
    name_end: Some("<tool_sep>"),
    ..GLM_KV
};

pub(super) const K2H_KV: KvSyntax = KvSyntax {
    key: ("<ifm|arg_key>", "</ifm|arg_key>"),
    type_tags: Some(("<ifm|arg_type>", "</ifm|arg_type>")),
    value: ("<ifm|arg_value>", "</ifm|arg_value>"),
    ..GLM_KV
};

/// Solar Open 2 keeps an undeclared value as the string written (vLLM asserts this without
/// a schema), keeps the first of repeated keys and tolerates a dropped `<|tool_arg:end|>`.
pub(super) const SOLAR_KV: KvSyntax = KvSyntax {
    name_end: None,
    key: ("<|tool_arg:start|>", "<|tool_arg:value|>"),
    type_tags: None,
    value: ("", "<|tool_arg:end|>"),
    value_close_optional: true,
    values: ValueMode::Raw,
    first_wins: true,
};

/// `NAME\n{json}` after GLM's `<tool_call>` (Laguna writes the arguments as one object).
pub(super) const NAME_LINE_JSON: Grammar = Grammar::Named(NamedJson {
    name_open: None,
    name_end: &["\n"],
    before_args: &[],
    args_close: None,
});

/// An arguments value as a call needs it: an object (a serialized object decoded once).
pub(super) fn object_args(v: Value) -> Option<Value> {
    match json::decode_arguments(v) {
        v @ Value::Object(_) => Some(v),
        _ => None,
    }
}

/// DeepSeek V3 `function<｜tool▁sep｜>NAME\n```json\n{..}\n```` or V3.1 `NAME<｜tool▁sep｜>{..}`,
/// filling the call up to its closer.
pub(super) fn deepseek_call(
    text: &str,
    pos: usize,
    limit: Option<usize>,
    _: &Ctx<'_>,
) -> Option<(Vec<Call>, usize)> {
    // No closer found: the call runs to the end of the text, which the engine allows only
    // where the generation stopped (`Missing::AtEnd`).
    let l = limit.unwrap_or(text.len());
    let body = text.get(pos..l)?;
    let seps = deepseek_seps();
    let (sep, sep_len) = seps
        .iter()
        .filter_map(|s| body.find(s).map(|i| (i, s.len())))
        .min()?;
    let head = body.get(..sep)?.trim();
    let tail = body.get(sep + sep_len..)?;
    if seps.iter().any(|s| tail.contains(s)) || !is_tool_name(head) {
        return None;
    }
    let v3 = tail.split_once('\n').and_then(|(name, rest)| {
        let name = name.trim();
        let rest = rest.trim();
        // V3's template fences the arguments (```json); servers and fine-tunes also write
        // them bare on the line after the name.
        let inner = match rest.strip_prefix("```") {
            Some(fenced) => {
                let fenced = fenced.strip_prefix("json").unwrap_or(fenced);
                fenced.strip_suffix("```")?
            }
            None => rest,
        };
        is_tool_name(name).then_some((name, json::whole(inner)?))
    });
    let (name, args) = match v3 {
        Some(v) => v,
        None => (head, json::whole(tail)?),
    };
    let arguments = object_args(args)?;
    Some((
        vec![Call {
            name: name.to_string(),
            arguments,
        }],
        l,
    ))
}

/// DeepSeek's `<｜tool▁sep｜>` in every spelling its row allows.
fn deepseek_seps() -> &'static [&'static str] {
    static SEPS: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    SEPS.get_or_init(|| super::format::spellings("<｜tool▁sep｜>", super::format::Spell::Bars))
}

/// Kimi-K2's `functions.NAME:0 <|tool_call_argument_begin|>{..}`. A bare counter `0`
/// names no tool: it is read as the agent's only enabled tool, and with none or several
/// enabled nothing says which tool it is. Without a `<|tool_call_end|>` after it (a stop
/// sequence or the token limit took it) the arguments may run to the end of the text; the
/// engine decides whether a call without its closer counts.
pub(super) fn kimi_call(
    text: &str,
    pos: usize,
    limit: Option<usize>,
    ctx: &Ctx<'_>,
) -> Option<(Vec<Call>, usize)> {
    const ARG: &str = "<|tool_call_argument_begin|>";
    let l = limit.unwrap_or(text.len());
    let arg = find_bounded(text, ARG, pos, l)?;
    let id = text.get(pos..arg)?.trim();
    if id.contains("<|") {
        return None;
    }
    let is_counter = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let name = if is_counter(id) {
        match ctx.enabled_tools() {
            [only] => only.clone(),
            _ => return None,
        }
    } else {
        let (name, counter) = id.rsplit_once(':')?;
        let name = name.strip_prefix("functions.").unwrap_or(name);
        if !is_counter(counter) || !is_tool_name(name) {
            return None;
        }
        name.to_string()
    };
    let (value, end) = json::value_at(text.get(..l)?, arg + ARG.len())?;
    Some((
        vec![Call {
            name,
            arguments: object_args(value)?,
        }],
        end,
    ))
}

/// Step-3's call: an optional `function<｜tool▁sep｜>` header (with or without the name
/// after it), then one `<steptml:invoke>`.
pub(super) fn step3_call(
    text: &str,
    pos: usize,
    limit: Option<usize>,
    _: &Ctx<'_>,
) -> Option<(Vec<Call>, usize)> {
    let scope = text.get(..limit?)?;
    let mut i = skip_ws(scope, pos);
    if let Some(after) = eat(scope, i, "function") {
        i = eat(scope, after, "<｜tool_sep｜>")?;
        let lt = find_bounded(scope, "<", i, i + 256)?;
        let name = scope.get(i..lt)?.trim();
        if !name.is_empty() && !is_tool_name(name) {
            return None;
        }
        i = lt;
    }
    let mut close = Finder::new(scope, STEPTML.invoke_close);
    let (call, end) = xml::parse_invoke(scope, i, &STEPTML, &mut close)?;
    Some((vec![call], end))
}

/// GigaChat 3's turn header after `<|message_sep|>`: `function call<|role_sep|>` and one
/// JSON call object.
pub(super) fn gigachat_header(
    text: &str,
    pos: usize,
    _: Option<usize>,
    _: &Ctx<'_>,
) -> Option<(Vec<Call>, usize)> {
    let p = eat(text, skip_ws(text, pos), "function call")?;
    let p = eat(text, skip_ws(text, p), "<|role_sep|>")?;
    json::parse(
        text,
        p,
        &JsonCalls {
            shape: Shape::Object,
            keys: Keys::Strict,
            lenient: false,
        },
    )
}

/// `<function name="NAME">{json}</function>`: a JSON body in a named function tag.
pub(super) fn function_attr_json(
    text: &str,
    pos: usize,
    limit: Option<usize>,
    _: &Ctx<'_>,
) -> Option<(Vec<Call>, usize)> {
    let (tag, body) = xml::start_tag(text, skip_ws(text, pos), "<function")?;
    let name = xml::name_attr(tag)?;
    let scope = text.get(..limit?)?;
    let at = skip_ws(scope, body);
    if scope.as_bytes().get(at) != Some(&b'{') {
        return None;
    }
    let (args, end) = json::value_at(scope, at)?;
    (is_tool_name(&name)).then_some(())?;
    Some((
        vec![Call {
            name,
            arguments: object_args(args)?,
        }],
        end,
    ))
}

/// What follows Llama 3's `<|python_tag|>` (Meta's `chat_format.py`): a JSON call
/// (`{"name", "parameters"}`, also with `"type": "function"`), a built-in tool call
/// `brave_search.call(query="...")`, or else code for `code_interpreter`. Code has no end
/// of its own, so it counts only when the model ended the message with `<|eom_id|>` (it
/// expects the tool's answer): without that it may as well be prose about the token.
pub(super) fn python_tag_call(
    text: &str,
    pos: usize,
    _: Option<usize>,
    ctx: &Ctx<'_>,
) -> Option<(Vec<Call>, usize)> {
    const EOM: &str = "<|eom_id|>";
    let at = skip_ws(text, pos);
    if text.as_bytes().get(at) == Some(&b'{') {
        let (v, end) = json::value_at(text, at)?;
        let call = json::call_of(&v, Keys::Strict)?;
        return Some((vec![call], end));
    }
    // Meta's decoder reads code only in a message that starts with the tag.
    let at_start = text
        .get(..pos)
        .is_some_and(|b| b.trim() == "<|python_tag|>");
    if let Some((call, end)) = python::parse_call(text, at, PyOpts::STRICT) {
        if let Some(name) = call.name.strip_suffix(".call") {
            let call = Call {
                name: name.to_string(),
                arguments: call.arguments,
            };
            return Some((vec![call], end));
        }
    }
    if let Some(run) = python_tag_pythonic(text, at, ctx) {
        return Some(run);
    }
    if !at_start {
        return None;
    }
    let eom = find_from(text, EOM, at)?;
    let code = text.get(at..eom)?;
    let next_tag = code.contains("<|python_tag|>") || code.contains("<|eot_id|>");
    if code.trim().is_empty() || next_tag {
        return None;
    }
    let call = Call {
        name: "code_interpreter".to_string(),
        arguments: json!({ "code": code.trim() }),
    };
    Some((vec![call], eom))
}

/// Llama 3.2's and 3.3's calls of custom tools after `<|python_tag|>` in Python syntax
/// (llama-models' prompt_format docs: `<|python_tag|>NAME(k="v")`, several separated by `;`,
/// the row's separator, or by line breaks; or a list `[a(..), b(..)]` as Llama 3.2 writes
/// them). Code for `code_interpreter` looks the same, so a call counts only where its name
/// is a tool the agent has enabled; every call of the run must be one.
fn python_tag_pythonic(text: &str, at: usize, ctx: &Ctx<'_>) -> Option<(Vec<Call>, usize)> {
    let enabled = |calls: &[Call]| calls.iter().all(|c| ctx.tool_enabled(&c.name));
    if text.as_bytes().get(at) == Some(&b'[') {
        let (calls, end) = python::parse_call_list(text, at, PyOpts::STRICT)?;
        return enabled(&calls).then_some((calls, end));
    }
    let (first, mut end) = python::parse_call(text, at, PyOpts::STRICT)?;
    let mut calls = vec![first];
    if !enabled(&calls) {
        return None;
    }
    // Further calls each on a line of their own; a line that is not such a call ends the
    // run (it is the model's text after the calls).
    loop {
        let line_end =
            end + text.get(end..)?.len() - text.get(end..)?.trim_start_matches([' ', '\t']).len();
        if !text
            .get(line_end..)
            .is_some_and(|r| r.starts_with(['\n', '\r']))
        {
            break;
        }
        let next = skip_ws(text, line_end);
        match python::parse_call(text, next, PyOpts::STRICT) {
            Some((call, e)) if enabled(std::slice::from_ref(&call)) => {
                calls.push(call);
                end = e;
            }
            _ => break,
        }
    }
    Some((calls, end))
}

/// Gemini CLI's `[tool_call: NAME for PARAM 'value' and PARAM2 'value2']`. The form without a
/// parameter's name (`for 'node server.js'`) names no argument and stays text.
pub(super) fn tool_call_for(
    text: &str,
    pos: usize,
    _: Option<usize>,
    _: &Ctx<'_>,
) -> Option<(Vec<Call>, usize)> {
    let mut i = eat(text, skip_ws(text, pos), "[tool_call:")?;
    i = skip_ws(text, i);
    let name_len = text
        .get(i..)?
        .char_indices()
        .find(|&(_, c)| !(crate::grammar::is_ident_char(c) || c == '-'))
        .map(|(n, _)| n)?;
    let name = text.get(i..i + name_len)?;
    if !is_tool_name(name) {
        return None;
    }
    i += name_len;
    let mut joiner = " for ";
    let mut args = serde_json::Map::new();
    loop {
        let rest = text.get(i..)?;
        if let Some(r) = rest.trim_start().strip_prefix(']') {
            if args.is_empty() {
                return None;
            }
            let end = text.len() - r.len();
            let call = Call {
                name: name.to_string(),
                arguments: Value::Object(args),
            };
            return Some((vec![call], end));
        }
        i = eat(text, i, joiner)?;
        joiner = " and ";
        let key_len = text
            .get(i..)?
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
            .count();
        let key = text.get(i..i + key_len)?;
        if key.is_empty() {
            return None;
        }
        i = skip_ws(text, i + key_len);
        let q = *text.as_bytes().get(i)?;
        if q != b'\'' && q != b'"' {
            return None;
        }
        let close = find_bounded(text, if q == b'"' { "\"" } else { "'" }, i + 1, i + 4096)?;
        let value = text.get(i + 1..close)?;
        if value.contains('\n') {
            return None;
        }
        args.insert(key.to_string(), Value::String(value.to_string()));
        i = close + 1;
    }
}
