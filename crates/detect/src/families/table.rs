//! The table of formats: each row is one leak format as data, its tokens around one of
//! the kit's grammars (see `engine` for what every row gets for free, `dialects` for the
//! syntaxes and the few call bodies the rows name). A new format is a row here plus its
//! vectors in `tests/data/`.
//!
//! May depend on: `super::format`, `super::bodies`, `super::dialects`, `crate::grammar`,
//! `crate::types`.

use super::bodies::Grammar;
use super::dialects::*;
use super::format::{Format, Missing, Spell, Tools};
use crate::grammar::brace::BraceSyntax;
use crate::grammar::json::{JsonCalls, Keys, NamedJson, Shape};
use crate::grammar::xml::INVOKE;
use crate::types::Family;

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
        call_close_missing: Missing::AtEnd,
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
        // Its stop token: a server that stops on it drops it.
        call_close_missing: Missing::AtEndEnabled,
        ..Format::new(
            Family::Functiongemma,
            Grammar::Brace(&BraceSyntax {
                quote: "<escape>",
                type_quoted: true,
                bare_strict: false,
            }),
        )
    },
    Format {
        triggers: &["<|tool_call>"],
        call_open: &["<|tool_call>"],
        call_close: &["<tool_call|>"],
        call_close_missing: Missing::AtEndEnabled,
        ..Format::new(
            Family::Gemma4,
            Grammar::Brace(&BraceSyntax {
                quote: "<|\"|>",
                type_quoted: false,
                bare_strict: false,
            }),
        )
    },
    Format {
        triggers: &["<tool_call>"],
        call_open: &["<tool_call>"],
        call_close: &["</tool_call>"],
        // A stop sequence on `</tool_call>` (or `<|observation|>`) drops it; the last
        // `</arg_value>` closed at the end of the text, for an enabled tool, is a call.
        call_close_missing: Missing::AtEndEnabled,
        tools: Tools::ArgsOrEnabled,
        // GLM-4.5's tokens are special: a server may drop `<tool_call>` and keep the rest.
        inner: &["<arg_key>"],
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
        section_open_optional: true,
        call_open: &["<tool_call>"],
        call_close: &["</tool_call>"],
        inner: &["<tool_sep>"],
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
        // Cut with the section's closer: the generation stopped after the arguments.
        call_close_missing: Missing::AtEnd,
        spell: Spell::Bars,
        // V3.1 `NAME<｜tool▁sep｜>{..}` and V3 `function<｜tool▁sep｜>NAME` without their opener.
        inner: &["<｜tool▁sep｜>"],
        ..Format::new(Family::Deepseek, Grammar::Custom(deepseek_call))
    },
    // DSML is written in ordinary tokens; an `invoke` may come without its wrapper.
    Format {
        triggers: &["<｜DSML｜function_calls>", "<｜DSML｜invoke"],
        section_open: &["<｜DSML｜function_calls>"],
        section_close: &["</｜DSML｜function_calls>"],
        section_close_missing: Missing::AtEnd,
        section_open_optional: true,
        bare_call: &["<｜DSML｜invoke"],
        foreign: &["<｜DSML｜tool_calls>"],
        spell: Spell::Bars,
        ..Format::new(Family::Deepseek, Grammar::Invoke(&DSML))
    },
    Format {
        triggers: &["<｜DSML｜tool_calls>", "<｜DSML｜invoke"],
        section_open: &["<｜DSML｜tool_calls>"],
        section_close: &["</｜DSML｜tool_calls>"],
        section_close_missing: Missing::AtEnd,
        section_open_optional: true,
        bare_call: &["<｜DSML｜invoke"],
        foreign: &["<｜DSML｜function_calls>"],
        spell: Spell::Bars,
        ..Format::new(Family::Deepseek, Grammar::Invoke(&DSML))
    },
    Format {
        triggers: &[
            "<|tool_calls_section_begin|>",
            "<|tool_call_section_begin|>",
            "<|tool_call_argument_begin|>",
        ],
        section_open: &[
            "<|tool_calls_section_begin|>",
            "<|tool_call_section_begin|>",
        ],
        section_close: &["<|tool_calls_section_end|>", "<|tool_call_section_end|>"],
        section_close_missing: Missing::AtEnd,
        section_open_optional: true,
        noise: 256,
        call_open: &["<|tool_call_begin|>"],
        call_close: &["<|tool_call_end|>"],
        // The JSON arguments say where the call ends: a stop sequence or the token limit
        // may take `<|tool_call_end|>` (and the section's end) after them.
        call_close_missing: Missing::AtEnd,
        // A call whose `<|tool_call_begin|>` was dropped starts at its id.
        inner: &["<|tool_call_argument_begin|>"],
        ..Format::new(Family::Kimi, Grammar::Custom(kimi_call))
    },
    Format {
        triggers: &["<steptml:invoke"],
        section_open: &["<｜tool_calls_begin｜>"],
        section_close: &["<｜tool_calls_end｜>"],
        section_close_missing: Missing::AtEnd,
        section_open_optional: true,
        call_open: &["<｜tool_call_begin｜>"],
        call_close: &["<｜tool_call_end｜>"],
        sep: &["<｜tool_sep｜>"],
        spell: Spell::Bars,
        ..Format::new(Family::Step3, Grammar::Custom(step3_call))
    },
    Format {
        triggers: &["<|plamo:begin_tool_request:plamo|>"],
        section_open: &["<|plamo:begin_tool_requests:plamo|>"],
        section_close: &["<|plamo:end_tool_requests:plamo|>"],
        section_close_missing: Missing::AtEnd,
        section_open_optional: true,
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
        spell: Spell::Bars,
        ..Format::new(Family::Gigachat35, Grammar::Invoke(&GCML))
    },
    Format {
        triggers: &["[TOOL_CALL]"],
        call_open: &["[TOOL_CALL]"],
        call_close: &["[/TOOL_CALL]"],
        ..Format::new(
            Family::Minimax,
            Grammar::Either(&[
                Grammar::Json(JsonCalls {
                    shape: Shape::Object,
                    keys: Keys::Tool,
                    lenient: false,
                }),
                // `{tool => "NAME", args => {--key "value"}}`, the Perl-ish spelling.
                Grammar::Custom(super::hash::hash_call),
            ]),
        )
    },
    // LM Studio's own markers around a JSON call (its prompt teaches them to models that
    // have no call format of their own).
    Format {
        triggers: &["[TOOL_REQUEST]"],
        call_open: &["[TOOL_REQUEST]"],
        call_close: &["[END_TOOL_REQUEST]"],
        call_close_missing: Missing::AtEnd,
        ..Format::new(Family::Lmstudio, strict(Shape::Object))
    },
    // Gemini CLI's prompt pseudo-syntax, `[tool_call: NAME for PARAM 'value']`.
    Format {
        triggers: &["[tool_call:"],
        bare_call: &["[tool_call:"],
        tools: Tools::Enabled,
        ..Format::new(Family::Gemini, Grammar::Custom(tool_call_for))
    },
];
