//! The table of formats: each row is one leak format as data, its tokens around one of
//! the kit's grammars (see `engine` for what every row gets for free). A new format is a
//! row here plus its vectors in `tests/data/`.
//!
//! Where a format's call body needs a reading of its own (DeepSeek's two header styles,
//! Kimi's call ids, Step-3's optional header, Llama's `<|python_tag|>` bodies), the row
//! names a small function below; everything around the body is still the engine's.
//!
//! May depend on: `super::engine`, `crate::grammar`, `crate::types`, `crate::Ctx`.

use super::engine::{Format, Grammar, Missing, Tools};
use crate::grammar::brace::BraceSyntax;
use crate::grammar::json::{self, JsonCalls, Keys, NamedJson, Shape};
use crate::grammar::kv::KvSyntax;
use crate::grammar::python::{self, PyOpts};
use crate::grammar::text::{eat, find_bounded, find_from, skip_ws, Finder};
use crate::grammar::xml::{self, InvokeSyntax};
use crate::grammar::{is_tool_name, ValueMode};
use crate::types::{Call, Family};
use crate::Ctx;
use serde_json::{json, Value};

const fn strict(shape: Shape) -> Grammar {
    Grammar::Json(JsonCalls {
        shape,
        keys: Keys::Strict,
        lenient: false,
    })
}

const HERMES_JSON: Grammar = Grammar::Json(JsonCalls {
    shape: Shape::Object,
    keys: Keys::Loose,
    lenient: false,
});

const INVOKE: InvokeSyntax = InvokeSyntax {
    invoke_open: "<invoke",
    invoke_close: "</invoke>",
    param_open: "<parameter",
    param_close: "</parameter>",
    prefix: None,
    element_params: false,
    values: ValueMode::Typed,
    cdata: false,
    string_attr: false,
};

const MINICPM: InvokeSyntax = InvokeSyntax {
    invoke_open: "<function",
    invoke_close: "</function>",
    param_open: "<param",
    param_close: "</param>",
    cdata: true,
    ..INVOKE
};

const STEPTML: InvokeSyntax = InvokeSyntax {
    invoke_open: "<steptml:invoke",
    invoke_close: "</steptml:invoke>",
    param_open: "<steptml:parameter",
    param_close: "</steptml:parameter>",
    ..INVOKE
};

const DSML: InvokeSyntax = InvokeSyntax {
    invoke_open: "<｜DSML｜invoke",
    invoke_close: "</｜DSML｜invoke>",
    param_open: "<｜DSML｜parameter",
    param_close: "</｜DSML｜parameter>",
    string_attr: true,
    ..INVOKE
};

const GCML: InvokeSyntax = InvokeSyntax {
    invoke_open: "<｜GCML｜invoke",
    invoke_close: "</｜GCML｜invoke>",
    param_open: "<｜GCML｜parameter",
    param_close: "</｜GCML｜parameter>",
    string_attr: true,
    ..INVOKE
};

const GLM_KV: KvSyntax = KvSyntax {
    name_end: None,
    key: ("<arg_key>", "</arg_key>"),
    type_tags: None,
    value: ("<arg_value>", "</arg_value>"),
    value_close_optional: false,
    values: ValueMode::Typed,
    first_wins: false,
};

const HY_KV: KvSyntax = KvSyntax {
    name_end: Some("<tool_sep>"),
    ..GLM_KV
};

const K2H_KV: KvSyntax = KvSyntax {
    key: ("<ifm|arg_key>", "</ifm|arg_key>"),
    type_tags: Some(("<ifm|arg_type>", "</ifm|arg_type>")),
    value: ("<ifm|arg_value>", "</ifm|arg_value>"),
    ..GLM_KV
};

/// Solar Open 2 keeps an undeclared value as the string written (vLLM asserts this without
/// a schema), keeps the first of repeated keys and tolerates a dropped `<|tool_arg:end|>`.
const SOLAR_KV: KvSyntax = KvSyntax {
    name_end: None,
    key: ("<|tool_arg:start|>", "<|tool_arg:value|>"),
    type_tags: None,
    value: ("", "<|tool_arg:end|>"),
    value_close_optional: true,
    values: ValueMode::Raw,
    first_wins: true,
};

/// `NAME\n{json}` after GLM's `<tool_call>` (Laguna writes the arguments as one object).
const NAME_LINE_JSON: Grammar = Grammar::Named(NamedJson {
    name_open: None,
    name_end: &["\n"],
    before_args: &[],
    args_close: None,
});

/// Every table row, in registry order.
pub static FORMATS: &[Format] = &[
    Format {
        triggers: &["<tool_call>"],
        call_open: &["<tool_call>"],
        call_close: &["</tool_call>"],
        call_close_missing: Missing::AtEnd,
        ..Format::new(Family::Hermes, HERMES_JSON)
    },
    // llama.cpp's Hermes parser takes these wrappers too, because models write them; they
    // are ordinary tag names, so only for tools the agent has.
    Format {
        triggers: &["<tool>", "<response>", "<json>", "<JSON>", "<xml>"],
        call_open: &["<tool>", "<response>", "<json>", "<JSON>", "<xml>"],
        call_close: &["</tool>", "</response>", "</json>", "</JSON>", "</xml>"],
        tools: Tools::Enabled,
        ..Format::new(Family::Hermes, strict(Shape::Object))
    },
    Format {
        triggers: &["<function name=\""],
        bare_call: &["<function name=\""],
        call_close: &["</function>"],
        tools: Tools::Enabled,
        ..Format::new(Family::Hermes, Grammar::Custom(function_attr_json))
    },
    Format {
        triggers: &["<longcat_tool_call>"],
        call_open: &["<longcat_tool_call>"],
        call_close: &["</longcat_tool_call>"],
        call_close_missing: Missing::AtEnd,
        ..Format::new(Family::Longcat, HERMES_JSON)
    },
    Format {
        triggers: &["<|python_tag|>"],
        call_open: &["<|python_tag|>"],
        sep: &[";"],
        ..Format::new(Family::Llama3PythonTag, Grammar::Custom(python_tag_call))
    },
    Format {
        triggers: &["<|python_start|>"],
        call_open: &["<|python_start|>"],
        call_close: &["<|python_end|>"],
        call_close_missing: Missing::AtEnd,
        sep: &[";"],
        ..Format::new(Family::Llama3Json, strict(Shape::Either))
    },
    Format {
        triggers: &["<function="],
        call_open: &["<function="],
        call_close: &["</function>"],
        call_close_missing: Missing::AtEnd,
        tools: Tools::Enabled,
        ..Format::new(
            Family::Llama3FunctionTag,
            Grammar::Named(NamedJson {
                name_open: None,
                name_end: &[">"],
                before_args: &[],
                args_close: None,
            }),
        )
    },
    Format {
        triggers: &["<|tool_call|>", "<tool_call>"],
        call_open: &["<|tool_call|>", "<tool_call>"],
        // Phi-4-mini closes the same token pair with `<|/tool_call|>`.
        call_close: &["</tool_call>", "<|/tool_call|>"],
        call_close_missing: Missing::Always,
        ..Format::new(Family::Granite, strict(Shape::Array))
    },
    Format {
        triggers: &["<function_call>"],
        call_open: &["<function_call>"],
        call_close: &["</function_call>"],
        call_close_missing: Missing::Always,
        ..Format::new(Family::Granite20bFc, strict(Shape::Object))
    },
    Format {
        triggers: &["<tool_calls>"],
        call_open: &["<tool_calls>"],
        call_close: &["</tool_calls>"],
        ..Format::new(Family::Jamba, strict(Shape::Array))
    },
    Format {
        triggers: &["<tool_calls>"],
        call_open: &["<tool_calls>"],
        call_close: &["</tool_calls>"],
        ..Format::new(Family::Hunyuan, strict(Shape::Array))
    },
    Format {
        triggers: &["<|tool_call_start|>"],
        call_open: &["<|tool_call_start|>"],
        call_close: &["<|tool_call_end|>"],
        ..Format::new(Family::Pangu, strict(Shape::Array))
    },
    Format {
        triggers: &["<TOOLCALL>"],
        call_open: &["<TOOLCALL>"],
        call_close: &["</TOOLCALL>"],
        ..Format::new(Family::NemotronJson, strict(Shape::Either))
    },
    Format {
        triggers: &["<tools>"],
        call_open: &["<tools>"],
        call_close: &["</tools>"],
        ..Format::new(Family::Qwen25Coder, strict(Shape::Many))
    },
    Format {
        triggers: &["functools["],
        call_open: &["functools"],
        ..Format::new(Family::Phi4mini, strict(Shape::Array))
    },
    Format {
        triggers: &["<|plugin|>"],
        call_open: &[
            "<|action_start|><|plugin|>",
            "<|action_start|> <|plugin|>",
            "<|action_start|>\n<|plugin|>",
        ],
        call_close: &["<|action_end|>"],
        call_close_missing: Missing::AtEnd,
        tools: Tools::Enabled,
        ..Format::new(Family::Internlm, strict(Shape::Object))
    },
    Format {
        triggers: &["<|function_call|>"],
        call_open: &["<|function_call|>"],
        tools: Tools::Enabled,
        ..Format::new(Family::Gigachat3, strict(Shape::Object))
    },
    Format {
        triggers: &["<|role_sep|>"],
        call_open: &["<|message_sep|>"],
        tools: Tools::Enabled,
        ..Format::new(Family::Gigachat3, Grammar::Custom(gigachat_header))
    },
    Format {
        triggers: &["<|START_ACTION|>"],
        call_open: &["<|START_ACTION|>"],
        call_close: &["<|END_ACTION|>"],
        ..Format::new(
            Family::Cohere,
            Grammar::Json(JsonCalls {
                shape: Shape::Either,
                keys: Keys::ToolName,
                lenient: false,
            }),
        )
    },
    Format {
        triggers: &["<dots_function_call>"],
        call_open: &["<dots_function_call>"],
        call_close: &["</dots_function_call>"],
        tools: Tools::Enabled,
        ..Format::new(
            Family::Dots,
            Grammar::Either(&[strict(Shape::Object), Grammar::Invoke(&INVOKE)]),
        )
    },
    Format {
        triggers: &["<start_function_call>"],
        call_open: &["<start_function_call>"],
        call_close: &["<end_function_call>"],
        ..Format::new(
            Family::Functiongemma,
            Grammar::Brace(&BraceSyntax {
                quote: "<escape>",
                type_quoted: true,
            }),
        )
    },
    Format {
        triggers: &["<|tool_call>"],
        call_open: &["<|tool_call>"],
        call_close: &["<tool_call|>"],
        ..Format::new(
            Family::Gemma4,
            Grammar::Brace(&BraceSyntax {
                quote: "<|\"|>",
                type_quoted: false,
            }),
        )
    },
    Format {
        triggers: &["<tool_call>"],
        call_open: &["<tool_call>"],
        call_close: &["</tool_call>"],
        tools: Tools::ArgsOrEnabled,
        ..Format::new(
            Family::Glm,
            Grammar::Either(&[Grammar::Kv(&GLM_KV), NAME_LINE_JSON]),
        )
    },
    // Laguna sometimes writes `<user>` where GLM's `<tool_call>` belongs.
    Format {
        triggers: &["<user>"],
        call_open: &["<user>"],
        call_close: &["</user>"],
        tools: Tools::Enabled,
        ..Format::new(
            Family::Glm,
            Grammar::Either(&[Grammar::Kv(&GLM_KV), strict(Shape::Object)]),
        )
    },
    Format {
        triggers: &["<tool_sep>"],
        section_open: &["<tool_calls>"],
        section_close: &["</tool_calls>"],
        section_close_missing: Missing::AtEnd,
        call_open: &["<tool_call>"],
        call_close: &["</tool_call>"],
        ..Format::new(Family::HyV3, Grammar::Kv(&HY_KV))
    },
    Format {
        triggers: &["<function_calls>"],
        call_open: &["<function_calls>"],
        call_close: &["</function_calls>"],
        ..Format::new(Family::Olmo3, Grammar::PyCalls)
    },
    Format {
        triggers: &["<function name=", "<functionĠname=", "<functionname="],
        bare_call: &["<function ", "<function\t", "<functionĠ", "<functionname="],
        tools: Tools::Enabled,
        ..Format::new(Family::Minicpm5, Grammar::Invoke(&MINICPM))
    },
    Format {
        triggers: &[
            "<｜tool▁calls▁begin｜>",
            "<｜tool▁calls｜>",
            "<｜tool▁call▁begin｜>",
        ],
        section_open: &["<｜tool▁calls▁begin｜>", "<｜tool▁calls｜>"],
        section_close: &["<｜tool▁calls▁end｜>"],
        section_close_missing: Missing::AtEnd,
        section_open_optional: true,
        call_open: &["<｜tool▁call▁begin｜>"],
        call_close: &["<｜tool▁call▁end｜>"],
        ..Format::new(Family::Deepseek, Grammar::Custom(deepseek_call))
    },
    Format {
        triggers: &["<｜DSML｜function_calls>"],
        section_open: &["<｜DSML｜function_calls>"],
        section_close: &["</｜DSML｜function_calls>"],
        section_close_missing: Missing::AtEnd,
        ..Format::new(Family::Deepseek, Grammar::Invoke(&DSML))
    },
    Format {
        triggers: &["<｜DSML｜tool_calls>"],
        section_open: &["<｜DSML｜tool_calls>"],
        section_close: &["</｜DSML｜tool_calls>"],
        section_close_missing: Missing::AtEnd,
        ..Format::new(Family::Deepseek, Grammar::Invoke(&DSML))
    },
    Format {
        triggers: &[
            "<|tool_calls_section_begin|>",
            "<|tool_call_section_begin|>",
        ],
        section_open: &[
            "<|tool_calls_section_begin|>",
            "<|tool_call_section_begin|>",
        ],
        section_close: &["<|tool_calls_section_end|>", "<|tool_call_section_end|>"],
        section_close_missing: Missing::AtEnd,
        noise: 256,
        call_open: &["<|tool_call_begin|>"],
        call_close: &["<|tool_call_end|>"],
        ..Format::new(Family::Kimi, Grammar::Custom(kimi_call))
    },
    Format {
        triggers: &["<steptml:invoke"],
        section_open: &["<｜tool_calls_begin｜>"],
        section_close: &["<｜tool_calls_end｜>"],
        section_close_missing: Missing::AtEnd,
        call_open: &["<｜tool_call_begin｜>"],
        call_close: &["<｜tool_call_end｜>"],
        sep: &["<｜tool_sep｜>"],
        ..Format::new(Family::Step3, Grammar::Custom(step3_call))
    },
    Format {
        triggers: &["<|plamo:begin_tool_requests:plamo|>"],
        section_open: &["<|plamo:begin_tool_requests:plamo|>"],
        section_close: &["<|plamo:end_tool_requests:plamo|>"],
        section_close_missing: Missing::AtEnd,
        call_open: &["<|plamo:begin_tool_request:plamo|>"],
        call_close: &["<|plamo:end_tool_request:plamo|>"],
        trailing: &["<|plamo:tag|>"],
        ..Format::new(
            Family::Plamo3,
            Grammar::Named(NamedJson {
                name_open: Some("<|plamo:begin_tool_name:plamo|>"),
                name_end: &["<|plamo:end_tool_name:plamo|>"],
                before_args: &[
                    "<|plamo:begin_tool_arguments:plamo|>",
                    "<|plamo:constrain|>json<|plamo:msg|>",
                ],
                args_close: Some("<|plamo:end_tool_arguments:plamo|>"),
            }),
        )
    },
    Format {
        triggers: &["<|tool_call:start|>"],
        call_open: &["<|tool_call:start|>"],
        call_close: &["<|tool_call:end|>"],
        ..Format::new(Family::SolarOpen2, Grammar::Kv(&SOLAR_KV))
    },
    Format {
        triggers: &["<ifm|tool_calls>"],
        section_open: &["<ifm|tool_calls>"],
        section_close: &["</ifm|tool_calls>"],
        call_open: &["<ifm|tool_call>"],
        call_close: &["</ifm|tool_call>"],
        // vLLM's parser fails closed on a tool the request does not define.
        tools: Tools::Enabled,
        ..Format::new(
            Family::K2Horizon,
            Grammar::Either(&[strict(Shape::Object), Grammar::Kv(&K2H_KV)]),
        )
    },
    Format {
        triggers: &["<｜GCML｜tool_calls>"],
        section_open: &["<｜GCML｜tool_calls>"],
        section_close: &["</｜GCML｜tool_calls>"],
        section_close_missing: Missing::AtEnd,
        ..Format::new(Family::Gigachat35, Grammar::Invoke(&GCML))
    },
    Format {
        triggers: &["[TOOL_CALL]"],
        call_open: &["[TOOL_CALL]"],
        call_close: &["[/TOOL_CALL]"],
        ..Format::new(
            Family::Minimax,
            Grammar::Json(JsonCalls {
                shape: Shape::Object,
                keys: Keys::Tool,
                lenient: false,
            }),
        )
    },
];

/// An arguments value as a call needs it: an object (a serialized object decoded once).
fn object_args(v: Value) -> Option<Value> {
    match json::decode_arguments(v) {
        v @ Value::Object(_) => Some(v),
        _ => None,
    }
}

/// DeepSeek V3 `function<｜tool▁sep｜>NAME\n```json\n{..}\n```` or V3.1 `NAME<｜tool▁sep｜>{..}`,
/// filling the call up to its closer.
fn deepseek_call(
    text: &str,
    pos: usize,
    limit: Option<usize>,
    _: &Ctx<'_>,
) -> Option<(Vec<Call>, usize)> {
    const SEP: &str = "<｜tool▁sep｜>";
    let l = limit?;
    let body = text.get(pos..l)?;
    let sep = body.find(SEP)?;
    let head = body.get(..sep)?.trim();
    let tail = body.get(sep + SEP.len()..)?;
    if tail.contains(SEP) || !is_tool_name(head) {
        return None;
    }
    let v3 = tail.split_once('\n').and_then(|(name, rest)| {
        let name = name.trim();
        let rest = rest.trim().strip_prefix("```")?;
        let rest = rest.strip_prefix("json").unwrap_or(rest);
        let inner = rest.strip_suffix("```")?;
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

/// Kimi-K2's `functions.NAME:0 <|tool_call_argument_begin|>{..}`. A bare counter `0`
/// names no tool: it is read as the agent's only enabled tool, and with none or several
/// enabled nothing says which tool it is.
fn kimi_call(
    text: &str,
    pos: usize,
    limit: Option<usize>,
    ctx: &Ctx<'_>,
) -> Option<(Vec<Call>, usize)> {
    const ARG: &str = "<|tool_call_argument_begin|>";
    let l = limit?;
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
fn step3_call(
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
fn gigachat_header(
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
fn function_attr_json(
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
fn python_tag_call(
    text: &str,
    pos: usize,
    _: Option<usize>,
    _: &Ctx<'_>,
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
