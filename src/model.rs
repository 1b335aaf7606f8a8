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
mod tests;
