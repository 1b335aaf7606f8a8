//! The values detection takes and returns. Plain data: no behaviour beyond small accessors,
//! so the worker, the `scan` command and the tests can all build and read them.

use serde::Serialize;
use serde_json::Value;
use std::ops::Range;

macro_rules! families {
    ($($variant:ident => $name:literal),+ $(,)?) => {
        /// A leak format. The string form (`as_str`) is what configuration, metrics labels,
        /// the ledger and the `scan` output use.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[serde(rename_all = "snake_case")]
        pub enum Family { $($variant),+ }

        impl Family {
            /// Every family, in registry order.
            pub const ALL: &'static [Family] = &[$(Family::$variant),+];

            /// The stable name used in configuration, labels and output.
            pub fn as_str(self) -> &'static str {
                match self { $(Family::$variant => $name),+ }
            }

            /// Parses a family name as written in configuration.
            pub fn from_name(name: &str) -> Option<Family> {
                match name { $($name => Some(Family::$variant),)+ _ => None }
            }
        }
    };
}

families! {
    ResultPrefix => "result_prefix",
    ResultOnly => "result_only",
    Hermes => "hermes",
    Minimax => "minimax",
    XmlInvoke => "xml_invoke",
    Mistral => "mistral",
    JsonFence => "json_fence",
    Pythonic => "pythonic",
    Llama3Json => "llama3_json",
    Deepseek => "deepseek",
    Kimi => "kimi",
    Glm => "glm",
    // The long tail: formats of single model families, see `families/`.
    Granite => "granite",
    Granite20bFc => "granite_20b_fc",
    Jamba => "jamba",
    Internlm => "internlm",
    Phi4mini => "phi4mini",
    Hunyuan => "hunyuan",
    Xlam => "xlam",
    Step3 => "step3",
    Olmo3 => "olmo3",
    Longcat => "longcat",
    Gigachat3 => "gigachat3",
    Apertus => "apertus",
    Functiongemma => "functiongemma",
    Lfm2 => "lfm2",
    Gemma4 => "gemma4",
    Cohere => "cohere",
    NemotronJson => "nemotron_json",
    Qwen25Coder => "qwen25_coder",
    KimiK3 => "kimi_k3",
    Minicpm5 => "minicpm5",
    Pangu => "pangu",
    Dots => "dots",
    Plamo3 => "plamo3",
    HyV3 => "hy_v3",
    Cwm => "cwm",
    // Formats added with issue #13.
    Harmony => "harmony",
    Llama3PythonTag => "llama3_python_tag",
    Llama3FunctionTag => "llama3_function_tag",
    SolarOpen2 => "solar_open2",
    K2Horizon => "k2_horizon",
    Gigachat35 => "gigachat35",
    // Formats added with issue #20.
    Lmstudio => "lmstudio",
    Gemini => "gemini",
    ClineXml => "cline_xml",
    React => "react",
    // Issue #30: the tolerant markup reader, the net under the table.
    Markup => "markup",
    Cli => "cli",
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One tool call read off leaked markup.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Call {
    /// The tool's name as the model wrote it.
    pub name: String,
    /// The arguments as the model wrote them: normally an object; kept as written otherwise
    /// (a string that is not serialized JSON stays a string).
    pub arguments: Value,
}

/// What a leaked fake *result* object (`result_prefix` / `result_only`) was recognised as.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ResultKind {
    /// A save_memory result with everything recovery needs; the matching call is in
    /// [`Leak::calls`].
    SaveMemory,
    /// Looks like a save_memory result but cannot be run (blank content, memory type not
    /// allowed, `success` not true); recorded as `invalid_args`.
    InvalidSaveMemory {
        /// Why the arguments were rejected.
        reason: &'static str,
    },
    /// Another tool's result (whiteboard, web, a bare `success`/`error` object): stripped and
    /// recorded, nothing to run.
    Other {
        /// The tool the shape belongs to, when known.
        tool: Option<&'static str>,
    },
}

/// One leaked fake tool result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResultObject {
    /// The object as parsed (JSON5-ish input normalised to JSON).
    pub value: Value,
    /// What it was recognised as.
    #[serde(flatten)]
    pub kind: ResultKind,
}

/// One contiguous piece of leaked markup.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Leak {
    /// The format it was written in.
    pub family: Family,
    /// Byte range of the markup in the content; exactly these bytes are removed.
    pub span: Range<usize>,
    /// Calls read off the markup, in order.
    pub calls: Vec<Call>,
    /// For `result_prefix` / `result_only`: the fake result objects, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub results: Vec<ResultObject>,
}

impl Leak {
    /// A leak of markup alone, with no call: tokens and tags no format's call holds, which
    /// go with the reply's leaks (the ledger keeps them).
    pub(crate) fn markup_only(span: std::ops::Range<usize>) -> Leak {
        Leak {
            family: Family::Markup,
            span,
            calls: Vec::new(),
            results: Vec::new(),
        }
    }
}

/// The outcome of [`crate::detect`] for one message.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Detection {
    /// The leaks found, in order of position, never overlapping.
    pub leaks: Vec<Leak>,
    /// The content with every removable leak taken out (and the surrounding whitespace
    /// left by the removal trimmed); `None` when the content must stay as it is.
    pub cleaned: Option<String>,
    /// `tools_used` was non-empty: the tool did run and the markup is its echoed result, so
    /// recovery strips and runs nothing.
    pub strip_only: bool,
    /// Some family consulted the agent's enabled tools: with another tool list the answer
    /// could differ. A caller that detected without knowing the tools (the worker on the
    /// event, before any database work) may call the message clean only when this is false.
    pub depends_on_tools: bool,
}

impl Detection {
    /// No leak at all.
    pub fn is_clean(&self) -> bool {
        self.leaks.is_empty()
    }

    /// The families found, in order of first appearance, without repeats.
    pub fn families(&self) -> Vec<Family> {
        let mut out: Vec<Family> = Vec::new();
        for leak in &self.leaks {
            if !out.contains(&leak.family) {
                out.push(leak.family);
            }
        }
        out
    }

    /// The calls recovery should act on: every call of every leak, or none when the tool
    /// already ran (`strip_only`).
    pub fn calls_to_run(&self) -> impl Iterator<Item = (&Leak, &Call)> {
        let run = !self.strip_only;
        self.leaks
            .iter()
            .filter(move |_| run)
            .flat_map(|leak| leak.calls.iter().map(move |c| (leak, c)))
    }

    /// Bytes the cleaning removes from the content (0 when nothing changes).
    pub fn bytes_removed(&self, content: &str) -> usize {
        self.cleaned
            .as_ref()
            .map_or(0, |c| content.len().saturating_sub(c.len()))
    }
}
