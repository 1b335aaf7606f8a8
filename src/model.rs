//! Which model wrote a message, as a label with bounded cardinality: the `model` label of
//! the per-model metrics, the backfill's breakdown by model and `ledger --model`.
//!
//! Events carry whatever `message.model_id` the app (and its providers) put there:
//! `models/gemini-2.5-flash-preview-05-20`, `openrouter/anthropic/claude-3.5-sonnet:beta`,
//! `us.anthropic.claude-3-5-sonnet-20240620-v1:0`, a fine-tune id, a typo. A metric label
//! taken from that verbatim would grow a series per spelling and per snapshot, without
//! bound. So a configured list ([`Models`]) decides: an id is first reduced to a model name
//! ([`normalise`]), and that name is labelled with the configured entry it matches, `other`
//! when it matches none, `unknown` when the event named no model. The label's values are
//! the entries + `other` + `unknown`, whatever the events carry.
//!
//! Normalisation is a handful of slices of the id, compared without regard to ASCII case;
//! labelling is a scan of the (few dozen) entries. Neither allocates nor keeps anything
//! per id, so the clean path (every message) can afford it and a flood of made-up ids
//! costs nothing but `other`.
//!
//! May depend on: `ids` (the length an id is kept to). No I/O.

use std::sync::Arc;

/// The label of a model that matches no configured entry.
pub const OTHER: &str = "other";
/// The label of a message whose event named no model (missing, `null` or blank).
pub const UNKNOWN: &str = "unknown";
/// Ids longer than this (in bytes) are labelled from their first this-many bytes, the part
/// the ledger keeps ([`crate::ids::ModelId`]).
pub const MAX_ID_BYTES: usize = crate::ids::ModelId::MAX_BYTES;
/// Entries accepted at most: each one is a possible value of the `model` label, and the
/// per-model series multiply by it (see README, "Leaks by model").
pub const MAX_ENTRIES: usize = 100;

/// The default list of `TCR_MODELS` / `--models`: the widely deployed model lines, each
/// family with a catch-all prefix last (`gemini*` takes the Gemini models not listed
/// before it). The longest matching prefix wins, so `gpt-4o-mini*` keeps GPT-4o mini
/// apart from `gpt-4o*`.
pub const DEFAULT_LIST: &str = "gemini-3*,gemini-2.5-pro*,gemini-2.5-flash-lite*,\
gemini-2.5-flash*,gemini*,gemma*,\
gpt-5-mini*,gpt-5*,gpt-4.1*,gpt-4o-mini*,gpt-4o*,gpt-oss*,gpt*,o3*,o4-mini*,\
claude-opus*,claude-sonnet*,claude-haiku*,claude*,\
llama-4*,llama*,qwen3-coder*,qwen3*,qwen*,\
mistral-large*,mistral-small*,mistral*,mixtral*,devstral*,magistral*,\
deepseek-r1*,deepseek*,grok-4*,grok*,kimi*,glm*,minimax*,command*";

/// A model's label: an index into its [`Models`]' label names. Cheap to copy and compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Label(u16);

impl Label {
    /// Its place among [`Models::names`].
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

/// One configured entry: a model name (matched exactly after normalisation) or, written
/// with a trailing `*`, a prefix of model names.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    /// Lower case, without the `*`; also the label.
    name: Arc<str>,
    prefix: bool,
}

/// The configured model list: names and prefixes, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Models {
    entries: Vec<Entry>,
    /// Indices of the exact entries.
    exact: Vec<u16>,
    /// The first byte and index of each prefix entry, longest prefix first: the first
    /// match is the most specific. The byte rejects most entries without a comparison.
    prefixes: Vec<(u8, u16)>,
    /// Every label name: the entries', then `other`, then `unknown`.
    names: Vec<Arc<str>>,
}

impl Default for Models {
    /// The [`DEFAULT_LIST`].
    fn default() -> Self {
        Models::parse(DEFAULT_LIST)
            .unwrap_or_else(|e| unreachable!("the default model list is valid: {e}"))
    }
}

impl Models {
    /// Reads a comma-separated list. Entries are trimmed and lower-cased; empty ones are
    /// skipped (so an empty list means no entries: every model is `other`). Refused, with
    /// a message saying why: a `*` anywhere but at the end, characters other than
    /// `a-z 0-9 . _ -`, a name that normalisation would change (`gpt-4o-2024-08-06`, which
    /// events count as `gpt-4o`), the reserved `other` and `unknown`, two entries with the
    /// same label, more than [`MAX_ENTRIES`].
    pub fn parse(list: &str) -> Result<Models, String> {
        let mut entries: Vec<Entry> = Vec::new();
        for raw in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let entry = parse_entry(raw)?;
            if entries.iter().any(|e| e.name == entry.name) {
                return Err(format!(
                    "model entry {raw:?}: the label {:?} is given twice",
                    entry.name
                ));
            }
            if entries.len() == MAX_ENTRIES {
                return Err(format!(
                    "more than {MAX_ENTRIES} model entries (each is a value of the `model` \
                     label, and the per-model series multiply by them)"
                ));
            }
            entries.push(entry);
        }
        let index = |i: usize| u16::try_from(i).unwrap_or(u16::MAX);
        let exact = (0..entries.len())
            .filter(|&i| !entries[i].prefix)
            .map(index)
            .collect();
        let mut prefixes: Vec<(u8, u16)> = (0..entries.len())
            .filter(|&i| entries[i].prefix)
            .map(|i| (entries[i].name.as_bytes()[0], index(i)))
            .collect();
        // Longest first; equal lengths keep the configured order (the sort is stable).
        prefixes.sort_by_key(|&(_, i)| std::cmp::Reverse(entries[usize::from(i)].name.len()));
        let mut names: Vec<Arc<str>> = entries.iter().map(|e| e.name.clone()).collect();
        names.push(Arc::from(OTHER));
        names.push(Arc::from(UNKNOWN));
        Ok(Models {
            entries,
            exact,
            prefixes,
            names,
        })
    }

    /// The label of a model id as an event or a row carries it (`None`: no model named).
    pub fn label(&self, id: Option<&str>) -> Label {
        let Some(id) = id.map(str::trim).filter(|id| !id.is_empty()) else {
            return self.unknown();
        };
        let name = normalise(cut(id, MAX_ID_BYTES));
        if name.is_empty() {
            return self.other();
        }
        for &i in &self.exact {
            if self.entries[usize::from(i)].name.eq_ignore_ascii_case(name) {
                return Label(i);
            }
        }
        let first = name.as_bytes()[0].to_ascii_lowercase();
        for &(byte, i) in &self.prefixes {
            if byte != first {
                continue;
            }
            let prefix = self.entries[usize::from(i)].name.as_bytes();
            if name
                .as_bytes()
                .get(..prefix.len())
                .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
            {
                return Label(i);
            }
        }
        self.other()
    }

    /// The label's name: an entry (without its `*`), `other` or `unknown`.
    pub fn name(&self, label: Label) -> &str {
        self.names.get(usize::from(label.0)).map_or(OTHER, |n| &**n)
    }

    /// The label's name, shared (no copy of the text).
    pub fn shared_name(&self, label: Label) -> Arc<str> {
        self.names
            .get(usize::from(label.0))
            .cloned()
            .unwrap_or_else(|| Arc::from(OTHER))
    }

    /// Every label name, entries first, then `other` and `unknown`: all the values the
    /// `model` label can take.
    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        self.names.iter().map(|n| &**n)
    }

    /// The entries as they would be written (`gpt-4o-mini*`), comma-separated.
    pub fn list(&self) -> String {
        self.entries
            .iter()
            .map(|e| format!("{}{}", e.name, if e.prefix { "*" } else { "" }))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn other(&self) -> Label {
        Label(u16::try_from(self.entries.len()).unwrap_or(u16::MAX))
    }

    fn unknown(&self) -> Label {
        Label(u16::try_from(self.entries.len() + 1).unwrap_or(u16::MAX))
    }
}

fn parse_entry(raw: &str) -> Result<Entry, String> {
    let lower = raw.to_ascii_lowercase();
    let (name, prefix) = match lower.strip_suffix('*') {
        Some(name) => (name, true),
        None => (lower.as_str(), false),
    };
    let bad = |why: &str| Err(format!("model entry {raw:?}: {why}"));
    if name.is_empty() {
        return bad("a name is needed before the `*`");
    }
    if name.contains('*') {
        return bad("`*` may only end an entry (a prefix: `gemini-2.5*`)");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
        || !name.as_bytes()[0].is_ascii_alphanumeric()
    {
        return bad(
            "write the model name as the worker normalises it: letters, digits, `.`, `_`, \
             `-`, no provider prefix (`gemini-2.5-flash`, not `google/gemini-2.5-flash`)",
        );
    }
    if name == OTHER || name == UNKNOWN {
        return bad("`other` and `unknown` are the labels of what matches no entry");
    }
    let normalised = normalise(name);
    if normalised != name {
        return bad(&format!(
            "events naming it are counted as {normalised:?} (snapshot and version suffixes \
             are dropped); write {normalised:?}"
        ));
    }
    Ok(Entry {
        name: Arc::from(name),
        prefix,
    })
}

/// At most `max` bytes of `s`, cut on a character boundary.
fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The model name in a model id: a slice of it, in its original case (compare it with
/// `eq_ignore_ascii_case`). The rules, in order:
///
/// 1. surrounding whitespace goes; an OpenAI fine-tune `ft:<base>:<org>:...` is its base;
/// 2. the last `/`-separated segment: provider and router paths go (`models/`,
///    `google/`, `openrouter/anthropic/`, `accounts/fireworks/models/`, a Bedrock ARN's
///    `.../inference-profile/`, Hugging Face organisations);
/// 3. a `:tag` and an `@version` go (`llama3.1:8b`, `-v1:0`, `:free`, Vertex's
///    `claude-3-5-sonnet@20240620`);
/// 4. leading letters-only `word.` segments go: Bedrock's vendor and region
///    (`us.anthropic.claude-...`, `meta.llama3-...`); `gpt-4.1`, `qwen2.5` or `llama3.1`
///    are untouched, their first part has a digit or a dash;
/// 5. snapshot suffixes go, repeatedly: a date (`-2024-08-06`, `-20241022`, `-08-2024`),
///    a group of 3 to 8 digits (`-0613`, `-2407`, `-001`), Bedrock's `-v2` after such a
///    group, `-latest`, and `-preview` / `-exp` / `-experimental` with or without a date
///    (`-preview-05-20`): a preview is the model it previews, so the series goes on when
///    it becomes generally available. A single or double digit is a version, not a
///    snapshot, and stays (`claude-3`, `gpt-4`, `grok-2`); so does every size and variant
///    word (`-mini`, `-70b`, `-instruct`), so `gpt-4o` and `gpt-4o-mini` stay two names.
pub fn normalise(id: &str) -> &str {
    let mut s = id.trim();
    if s.len() > 3 && s.as_bytes()[..3].eq_ignore_ascii_case(b"ft:") {
        s = &s[3..];
    }
    s = s.trim_end_matches('/');
    if let Some(slash) = s.rfind('/') {
        s = &s[slash + 1..];
    }
    if let Some(at) = s.find([':', '@']) {
        s = &s[..at];
    }
    while let Some(dot) = s.find('.') {
        let word = &s[..dot];
        if word.is_empty() || !word.bytes().all(|b| b.is_ascii_alphabetic()) {
            break;
        }
        s = &s[dot + 1..];
    }
    strip_snapshot_suffixes(s)
}

fn strip_snapshot_suffixes(mut s: &str) -> &str {
    loop {
        let Some((rest, last)) = s.rsplit_once('-') else {
            return s;
        };
        if rest.is_empty() {
            return s;
        }
        let before = rest.rsplit_once('-');
        let stripped = if ["latest", "preview", "exp", "experimental"]
            .iter()
            .any(|w| last.eq_ignore_ascii_case(w))
        {
            Some(rest)
        } else if let (true, Some((front, month))) = (is_year(last), before) {
            // `-08-2024` (Cohere): month and year together.
            Some(if digits(month, 2, 2) && !front.is_empty() {
                front
            } else {
                rest
            })
        } else if digits(last, 3, 8) {
            Some(rest)
        } else if digits(last, 2, 2) {
            // `-MM-DD` after a year or a preview: `-2024-08-06`, `-preview-05-20`.
            before.and_then(|(front, seg)| {
                let (front2, seg2) = front.rsplit_once('-')?;
                (digits(seg, 2, 2)
                    && !front2.is_empty()
                    && (is_year(seg2)
                        || ["preview", "exp"]
                            .iter()
                            .any(|w| seg2.eq_ignore_ascii_case(w))))
                .then_some(front)
            })
        } else if is_bedrock_version(last) {
            // `-20240620-v1` (Bedrock): the version of a dated snapshot.
            before
                .filter(|(front, seg)| digits(seg, 3, 8) && !front.is_empty())
                .map(|(front, _)| front)
        } else {
            None
        };
        match stripped {
            Some(shorter) if !shorter.is_empty() => s = shorter,
            _ => return s,
        }
    }
}

fn digits(s: &str, min: usize, max: usize) -> bool {
    (min..=max).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit())
}

fn is_year(s: &str) -> bool {
    digits(s, 4, 4) && s.starts_with("20")
}

fn is_bedrock_version(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 2 && b.len() <= 3 && b[0].eq_ignore_ascii_case(&b'v') && digits(&s[1..], 1, 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_provider_paths_tags_and_snapshots() {
        for (id, name) in [
            ("gemini-2.5-flash", "gemini-2.5-flash"),
            ("models/gemini-2.5-flash", "gemini-2.5-flash"),
            ("google/gemini-2.5-flash", "gemini-2.5-flash"),
            ("vertex_ai/gemini-2.5-pro", "gemini-2.5-pro"),
            ("gemini-2.5-flash-preview-05-20", "gemini-2.5-flash"),
            ("models/gemini-2.5-pro-preview-03-25", "gemini-2.5-pro"),
            ("gemini-2.0-flash-001", "gemini-2.0-flash"),
            ("gemini-2.0-flash-exp", "gemini-2.0-flash"),
            ("gemini-exp-1206", "gemini"),
            ("gemini-2.0-flash-thinking-exp-01-21", "gemini-2.0-flash-thinking"),
            ("openai/gpt-4o-2024-08-06", "gpt-4o"),
            ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
            ("azure/gpt-4o-mini", "gpt-4o-mini"),
            ("gpt-4-0613", "gpt-4"),
            ("gpt-3.5-turbo-0125", "gpt-3.5-turbo"),
            ("gpt-4.1-2025-04-14", "gpt-4.1"),
            ("gpt-4o-realtime-preview-2024-12-17", "gpt-4o-realtime"),
            ("o1-preview", "o1"),
            ("chatgpt-4o-latest", "chatgpt-4o"),
            ("ft:gpt-4o-mini-2024-07-18:acme::9abcDEF", "gpt-4o-mini"),
            ("openai/gpt-oss-120b", "gpt-oss-120b"),
            ("anthropic/claude-3-5-sonnet-20241022", "claude-3-5-sonnet"),
            ("claude-sonnet-4-20250514", "claude-sonnet-4"),
            ("claude-opus-4-1-20250805", "claude-opus-4-1"),
            ("claude-3-5-sonnet@20240620", "claude-3-5-sonnet"),
            ("claude-3-5-sonnet-v2@20241022", "claude-3-5-sonnet-v2"),
            (
                "bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0",
                "claude-3-5-sonnet",
            ),
            (
                "us.anthropic.claude-3-7-sonnet-20250219-v1:0",
                "claude-3-7-sonnet",
            ),
            (
                "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.meta.llama3-1-70b-instruct-v1:0",
                "llama3-1-70b-instruct-v1",
            ),
            ("mistral.mistral-large-2402-v1:0", "mistral-large"),
            ("openrouter/anthropic/claude-3.5-sonnet:beta", "claude-3.5-sonnet"),
            ("openrouter/meta-llama/llama-3.3-70b-instruct:free", "llama-3.3-70b-instruct"),
            ("meta-llama/Llama-3.3-70B-Instruct", "Llama-3.3-70B-Instruct"),
            ("accounts/fireworks/models/llama-v3p1-70b-instruct", "llama-v3p1-70b-instruct"),
            ("llama3.1:8b", "llama3.1"),
            ("Qwen/Qwen3-235B-A22B-Instruct-2507", "Qwen3-235B-A22B-Instruct"),
            ("qwen/qwen2.5-72b-instruct", "qwen2.5-72b-instruct"),
            ("mistralai/Mistral-Small-3.1-24B-Instruct-2503", "Mistral-Small-3.1-24B-Instruct"),
            ("mistral-large-latest", "mistral-large"),
            ("mistral-large-2411", "mistral-large"),
            ("deepseek/deepseek-chat-v3-0324", "deepseek-chat-v3"),
            ("deepseek-r1-0528", "deepseek-r1"),
            ("x-ai/grok-4", "grok-4"),
            ("grok-2-1212", "grok-2"),
            ("command-r-08-2024", "command-r"),
            ("command-r-plus-08-2024", "command-r-plus"),
            ("moonshotai/kimi-k2-instruct-0905", "kimi-k2-instruct"),
            ("zai-org/GLM-4.5", "GLM-4.5"),
            ("  gemini-2.5-flash  ", "gemini-2.5-flash"),
            ("gemini-2.5-flash/", "gemini-2.5-flash"),
            // Versions and sizes are not snapshots.
            ("claude-3", "claude-3"),
            ("gpt-4", "gpt-4"),
            ("llama-3.1-405b", "llama-3.1-405b"),
            ("2024", "2024"),
            ("-0613", "-0613"),
            ("v1", "v1"),
        ] {
            assert_eq!(normalise(id), name, "{id}");
        }
    }

    #[test]
    fn labels_by_exact_name_then_longest_prefix() {
        let m = Models::parse("gpt-4o, gpt-4*, gpt-4o-mini*, Gemini-2.5*, gemini*").unwrap();
        let label = |id: Option<&str>| m.name(m.label(id)).to_string();
        for (id, want) in [
            (Some("openai/gpt-4o-2024-08-06"), "gpt-4o"),
            (Some("GPT-4O"), "gpt-4o"),
            (Some("gpt-4o-mini"), "gpt-4o-mini"),
            (Some("gpt-4o-audio-preview"), "gpt-4"),
            (Some("gpt-4-turbo"), "gpt-4"),
            (Some("models/gemini-2.5-flash-preview-05-20"), "gemini-2.5"),
            (Some("gemini-1.5-pro-002"), "gemini"),
            (Some("claude-sonnet-4"), OTHER),
            (Some("gpt-3.5-turbo"), OTHER),
            (Some("/"), OTHER),
            (Some("ft:"), OTHER),
            (None, UNKNOWN),
            (Some(""), UNKNOWN),
            (Some("  \t"), UNKNOWN),
        ] {
            assert_eq!(label(id), want, "{id:?}");
        }
        let names: Vec<&str> = m.names().collect();
        assert_eq!(
            names,
            [
                "gpt-4o",
                "gpt-4",
                "gpt-4o-mini",
                "gemini-2.5",
                "gemini",
                OTHER,
                UNKNOWN
            ]
        );
        assert_eq!(m.list(), "gpt-4o,gpt-4*,gpt-4o-mini*,gemini-2.5*,gemini*");
    }

    #[test]
    fn the_default_list_keeps_the_main_lines_apart() {
        let m = Models::default();
        let label = |id: &str| m.name(m.label(Some(id))).to_string();
        for (id, want) in [
            ("models/gemini-2.5-flash-preview-05-20", "gemini-2.5-flash"),
            ("gemini-2.5-flash-lite", "gemini-2.5-flash-lite"),
            ("google/gemini-2.5-pro", "gemini-2.5-pro"),
            ("gemini-3-pro-preview", "gemini-3"),
            ("gemini-1.5-flash-8b", "gemini"),
            ("gemma-3-27b-it", "gemma"),
            ("openai/gpt-4o-2024-08-06", "gpt-4o"),
            ("gpt-4o-mini", "gpt-4o-mini"),
            ("gpt-5-mini-2025-08-07", "gpt-5-mini"),
            ("gpt-5", "gpt-5"),
            ("openai/gpt-oss-120b", "gpt-oss"),
            ("gpt-3.5-turbo", "gpt"),
            ("o3-mini", "o3"),
            ("claude-3-5-sonnet-20241022", "claude"),
            ("anthropic/claude-sonnet-4.5", "claude-sonnet"),
            ("us.anthropic.claude-opus-4-1-20250805-v1:0", "claude-opus"),
            ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", "llama-4"),
            ("llama-3.3-70b-versatile", "llama"),
            ("Qwen/Qwen3-Coder-480B-A35B-Instruct", "qwen3-coder"),
            ("qwen3-235b-a22b-2507", "qwen3"),
            ("qwen2.5-72b-instruct", "qwen"),
            ("mistral-large-latest", "mistral-large"),
            ("mistral-medium-2505", "mistral"),
            ("deepseek-ai/DeepSeek-R1-0528", "deepseek-r1"),
            ("deepseek-chat", "deepseek"),
            ("x-ai/grok-4-fast", "grok-4"),
            ("grok-3-mini", "grok"),
            ("moonshotai/Kimi-K2-Instruct", "kimi"),
            ("zai-org/GLM-4.6", "glm"),
            ("MiniMaxAI/MiniMax-M2", "minimax"),
            ("command-a-03-2025", "command"),
            ("acme-internal-9000", OTHER),
        ] {
            assert_eq!(label(id), want, "{id}");
        }
    }

    #[test]
    fn refuses_entries_that_could_never_match_or_would_collide() {
        for (list, says) in [
            ("gemini-*2.5", "may only end"),
            ("*", "a name is needed"),
            ("google/gemini-2.5-flash", "normalises"),
            ("gpt 4o", "normalises"),
            ("-gpt", "normalises"),
            ("gpt-4o-2024-08-06", "\"gpt-4o\""),
            ("gemini-2.5-flash-preview*", "\"gemini-2.5-flash\""),
            ("other", "`other` and `unknown`"),
            ("Unknown*", "`other` and `unknown`"),
            ("gpt-4o,GPT-4o*", "given twice"),
        ] {
            let err = Models::parse(list).expect_err(list);
            assert!(err.contains(says), "{list}: {err}");
        }
        let many: Vec<String> = (0..=MAX_ENTRIES).map(|i| format!("m{i}")).collect();
        assert!(Models::parse(&many.join(",")).is_err());
        let none = Models::parse(" , ").unwrap();
        assert_eq!(none.names().collect::<Vec<_>>(), [OTHER, UNKNOWN]);
        assert_eq!(none.name(none.label(Some("gpt-4o"))), OTHER);
    }

    #[test]
    fn very_long_ids_are_labelled_from_their_start() {
        let m = Models::default();
        let long = format!("gemini-2.5-flash{}", "é".repeat(500));
        assert_eq!(m.name(m.label(Some(&long))), "gemini-2.5-flash");
        let long_exact = format!("{}gpt-4o", "x".repeat(MAX_ID_BYTES));
        assert_eq!(m.name(m.label(Some(&long_exact))), OTHER);
    }

    mod properties {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            /// Whatever the id, the label is one of the configured entries, `other` or
            /// `unknown`; normalisation never panics and returns a part of the id.
            #[test]
            fn the_label_is_always_a_configured_value(id in ".{0,300}", list in prop::sample::select(vec![
                DEFAULT_LIST, "gpt-4o,gemini-2.5*", "",
            ])) {
                let m = Models::parse(list).unwrap();
                let allowed: Vec<&str> = m.names().collect();
                prop_assert!(allowed.contains(&m.name(m.label(Some(&id)))));
                prop_assert!(id.contains(normalise(&id)));
            }

            #[test]
            fn provider_like_ids_label_like_their_model(
                provider in "[a-z]{2,10}(/[a-z_-]{2,10}){0,2}/",
                model in prop::sample::select(vec!["gemini-2.5-flash", "gpt-4o-mini", "claude-sonnet-4", "qwen3-32b"]),
                snapshot in prop::sample::select(vec!["", "-2024-08-06", "-20241022", "-0613", "-latest", "-preview-05-20", ":free", "@001"]),
            ) {
                let m = Models::default();
                let plain = m.label(Some(model));
                let decorated = format!("{provider}{}{snapshot}", model.to_uppercase());
                prop_assert_eq!(m.name(m.label(Some(&decorated))), m.name(plain));
            }
        }
    }
}
