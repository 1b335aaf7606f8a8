//! The family parsers and the registry the driver walks.
//!
//! One file per family. Each exposes `TRIGGERS` (literal markers), `AT_START` (bytes a
//! leak may start the message with) and `find(text, ctx, out)`, which appends complete,
//! parsed leaks. Parsers never guess: markup that does not parse completely is prose.
//!
//! May depend on: `crate::json5`, `crate::types`, `crate::Ctx`, `util`. No I/O.

mod apertus;
mod cohere;
mod cwm;
mod deepseek;
mod dots;
mod functiongemma;
mod gemma4;
mod gigachat3;
mod glm;
mod granite;
mod granite_20b_fc;
mod hermes;
mod hunyuan;
mod hy_v3;
mod internlm;
mod jamba;
mod json_fence;
mod kimi;
mod kimi_k3;
mod lfm2;
mod llama3_json;
mod longcat;
mod minicpm5;
mod minimax;
mod mistral;
mod nemotron_json;
mod olmo3;
mod pangu;
mod phi4mini;
mod plamo3;
mod pythonic;
mod qwen25_coder;
mod result;
mod step3;
pub mod util;
mod xlam;
mod xml_invoke;
mod xml_kit;

use crate::types::Family;
use crate::{Ctx, Leak};

pub use util::MAX_CANDIDATES;

/// One family's entry points.
pub struct FamilyDef {
    /// The family (for `result`, both `result_prefix` and `result_only` come from it).
    pub family: Family,
    /// Literal markers one of which any leak contains.
    pub triggers: &'static [&'static str],
    /// Bytes a leak may start the message with, after leading whitespace.
    pub at_start: &'static [u8],
    /// Appends the leaks found in the text.
    pub find: fn(&str, &Ctx<'_>, &mut Vec<Leak>),
}

/// Every family, in the order they are run. Order does not decide overlaps (position
/// does, see `crate::detect`), only the order leaks are produced in.
pub static REGISTRY: &[FamilyDef] = &[
    FamilyDef {
        family: Family::ResultPrefix,
        triggers: result::TRIGGERS,
        at_start: result::AT_START,
        find: result::find,
    },
    FamilyDef {
        family: Family::Hermes,
        triggers: hermes::TRIGGERS,
        at_start: hermes::AT_START,
        find: hermes::find,
    },
    FamilyDef {
        family: Family::Minimax,
        triggers: minimax::TRIGGERS,
        at_start: minimax::AT_START,
        find: minimax::find,
    },
    FamilyDef {
        family: Family::XmlInvoke,
        triggers: xml_invoke::TRIGGERS,
        at_start: xml_invoke::AT_START,
        find: xml_invoke::find,
    },
    FamilyDef {
        family: Family::Mistral,
        triggers: mistral::TRIGGERS,
        at_start: mistral::AT_START,
        find: mistral::find,
    },
    FamilyDef {
        family: Family::JsonFence,
        triggers: json_fence::TRIGGERS,
        at_start: json_fence::AT_START,
        find: json_fence::find,
    },
    FamilyDef {
        family: Family::Pythonic,
        triggers: pythonic::TRIGGERS,
        at_start: pythonic::AT_START,
        find: pythonic::find,
    },
    FamilyDef {
        family: Family::Llama3Json,
        triggers: llama3_json::TRIGGERS,
        at_start: llama3_json::AT_START,
        find: llama3_json::find,
    },
    FamilyDef {
        family: Family::Deepseek,
        triggers: deepseek::TRIGGERS,
        at_start: deepseek::AT_START,
        find: deepseek::find,
    },
    FamilyDef {
        family: Family::Kimi,
        triggers: kimi::TRIGGERS,
        at_start: kimi::AT_START,
        find: kimi::find,
    },
    FamilyDef {
        family: Family::Glm,
        triggers: glm::TRIGGERS,
        at_start: glm::AT_START,
        find: glm::find,
    },
    FamilyDef {
        family: Family::Granite,
        triggers: granite::TRIGGERS,
        at_start: granite::AT_START,
        find: granite::find,
    },
    FamilyDef {
        family: Family::Granite20bFc,
        triggers: granite_20b_fc::TRIGGERS,
        at_start: granite_20b_fc::AT_START,
        find: granite_20b_fc::find,
    },
    FamilyDef {
        family: Family::Jamba,
        triggers: jamba::TRIGGERS,
        at_start: jamba::AT_START,
        find: jamba::find,
    },
    FamilyDef {
        family: Family::Internlm,
        triggers: internlm::TRIGGERS,
        at_start: internlm::AT_START,
        find: internlm::find,
    },
    FamilyDef {
        family: Family::Phi4mini,
        triggers: phi4mini::TRIGGERS,
        at_start: phi4mini::AT_START,
        find: phi4mini::find,
    },
    FamilyDef {
        family: Family::Hunyuan,
        triggers: hunyuan::TRIGGERS,
        at_start: hunyuan::AT_START,
        find: hunyuan::find,
    },
    FamilyDef {
        family: Family::Xlam,
        triggers: xlam::TRIGGERS,
        at_start: xlam::AT_START,
        find: xlam::find,
    },
    FamilyDef {
        family: Family::Step3,
        triggers: step3::TRIGGERS,
        at_start: step3::AT_START,
        find: step3::find,
    },
    FamilyDef {
        family: Family::Olmo3,
        triggers: olmo3::TRIGGERS,
        at_start: olmo3::AT_START,
        find: olmo3::find,
    },
    FamilyDef {
        family: Family::Longcat,
        triggers: longcat::TRIGGERS,
        at_start: longcat::AT_START,
        find: longcat::find,
    },
    FamilyDef {
        family: Family::Gigachat3,
        triggers: gigachat3::TRIGGERS,
        at_start: gigachat3::AT_START,
        find: gigachat3::find,
    },
    FamilyDef {
        family: Family::Apertus,
        triggers: apertus::TRIGGERS,
        at_start: apertus::AT_START,
        find: apertus::find,
    },
    FamilyDef {
        family: Family::Functiongemma,
        triggers: functiongemma::TRIGGERS,
        at_start: functiongemma::AT_START,
        find: functiongemma::find,
    },
    FamilyDef {
        family: Family::Lfm2,
        triggers: lfm2::TRIGGERS,
        at_start: lfm2::AT_START,
        find: lfm2::find,
    },
    FamilyDef {
        family: Family::Gemma4,
        triggers: gemma4::TRIGGERS,
        at_start: gemma4::AT_START,
        find: gemma4::find,
    },
    FamilyDef {
        family: Family::Cohere,
        triggers: cohere::TRIGGERS,
        at_start: cohere::AT_START,
        find: cohere::find,
    },
    FamilyDef {
        family: Family::NemotronJson,
        triggers: nemotron_json::TRIGGERS,
        at_start: nemotron_json::AT_START,
        find: nemotron_json::find,
    },
    FamilyDef {
        family: Family::Qwen25Coder,
        triggers: qwen25_coder::TRIGGERS,
        at_start: qwen25_coder::AT_START,
        find: qwen25_coder::find,
    },
    FamilyDef {
        family: Family::KimiK3,
        triggers: kimi_k3::TRIGGERS,
        at_start: kimi_k3::AT_START,
        find: kimi_k3::find,
    },
    FamilyDef {
        family: Family::Minicpm5,
        triggers: minicpm5::TRIGGERS,
        at_start: minicpm5::AT_START,
        find: minicpm5::find,
    },
    FamilyDef {
        family: Family::Pangu,
        triggers: pangu::TRIGGERS,
        at_start: pangu::AT_START,
        find: pangu::find,
    },
    FamilyDef {
        family: Family::Dots,
        triggers: dots::TRIGGERS,
        at_start: dots::AT_START,
        find: dots::find,
    },
    FamilyDef {
        family: Family::Plamo3,
        triggers: plamo3::TRIGGERS,
        at_start: plamo3::AT_START,
        find: plamo3::find,
    },
    FamilyDef {
        family: Family::HyV3,
        triggers: hy_v3::TRIGGERS,
        at_start: hy_v3::AT_START,
        find: hy_v3::find,
    },
    FamilyDef {
        family: Family::Cwm,
        triggers: cwm::TRIGGERS,
        at_start: cwm::AT_START,
        find: cwm::find,
    },
];

/// Families whose markup is itself a code fence, so a code region does not exclude it.
pub fn allowed_in_code(family: Family) -> bool {
    matches!(family, Family::JsonFence)
}

/// Test support: one family's `find` run alone on a text, as the driver would run it
/// (code and reasoning mapped), without the other families or overlap resolution.
#[cfg(test)]
pub(crate) mod testing {
    use crate::code::{CodeRegions, Reasoning};
    use crate::{Config, Ctx, Leak};

    /// One family's leaks alone and the text they leave.
    pub(crate) struct Out {
        pub leaks: Vec<Leak>,
        pub cleaned: Option<String>,
    }

    impl Out {
        pub fn is_clean(&self) -> bool {
            self.leaks.is_empty()
        }
    }

    /// The whole of `detect` on `text`, default policy, nothing in `tools_used`, these
    /// enabled tools.
    pub(crate) fn detect_with(text: &str, enabled: &[&str]) -> crate::Detection {
        let enabled: Vec<String> = enabled.iter().map(|s| s.to_string()).collect();
        crate::detect(
            &crate::Input {
                content: text,
                tools_used: &[],
                enabled_tools: &enabled,
            },
            &Config::default(),
        )
    }

    /// Runs `find` on `text` with these enabled tools; panics on overlapping leaks.
    pub(crate) fn run_family(
        find: fn(&str, &Ctx<'_>, &mut Vec<Leak>),
        text: &str,
        tools: &[&str],
    ) -> Out {
        let tools: Vec<String> = tools.iter().map(|s| s.to_string()).collect();
        let config = Config::default();
        let code = CodeRegions::find(text);
        let reasoning = Reasoning::find(text);
        let ctx = Ctx::new(&config, &tools, &code, &reasoning);
        let mut leaks = Vec::new();
        find(text, &ctx, &mut leaks);
        leaks.sort_by_key(|l| l.span.start);
        let cleaned = (!leaks.is_empty()).then(|| {
            let mut s = String::new();
            let mut at = 0;
            for l in &leaks {
                assert!(l.span.start >= at, "overlapping leaks");
                s.push_str(&text[at..l.span.start]);
                at = l.span.end;
            }
            s.push_str(&text[at..]);
            s.trim().to_string()
        });
        Out { leaks, cleaned }
    }
}
