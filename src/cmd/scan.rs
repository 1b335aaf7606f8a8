//! `scan`: detection alone, offline. Reads messages from files or stdin, runs
//! [`toolcall_detect::detect`] on each and writes one JSON line per message (with
//! `--explain`, how detection got there: which detectors looked at which spans and why each
//! declined), or, with `--stats`, one summary of the whole input (messages, leaks by family,
//! what recovery would decide, by outcome). Needs no database and no broker; operators use it to try the
//! detector on exported messages, to see exactly what the worker would cut, and to measure
//! the leak rate of their history before deploying. Like the worker, it never takes a
//! message whose `role` is not `assistant` for a leak.
//!
//! May depend on: `toolcall_detect`, `recover` (the pure plan), `settings`, std I/O.

use clap::Args;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use toolcall_detect::{detect, detect_traced, Config, Detection, Input, Note, Trace, Verdict};

/// Flags of `scan`.
#[derive(Debug, Args)]
pub struct ScanArgs {
    /// Files to scan; none, or `-`, reads stdin. Without `--jsonl` each file is one message.
    pub files: Vec<PathBuf>,
    /// Read JSON Lines: one `{"content": .., "tools_used": [..], "enabled_tools": [..]}`
    /// per line (an `id` field is echoed back).
    #[arg(long)]
    pub jsonl: bool,
    /// Enabled tools for plain-text input (and JSONL lines without `enabled_tools`).
    #[arg(long, value_delimiter = ',', default_value = "save_memory")]
    pub enabled_tools: Vec<String>,
    /// Allowed memory types and families switched off (as for `run`).
    #[command(flatten)]
    pub detect: crate::settings::DetectSettings,
    /// Print only messages with a leak.
    #[arg(long)]
    pub leaks_only: bool,

    /// Print one JSON summary of the whole input instead of a line per message: messages,
    /// messages with a leak, leaks by family, and what recovery would decide (by message
    /// outcome and by call outcome, for an agent with the given tools).
    #[arg(long)]
    pub stats: bool,

    /// Add to each message's line how detection got there: the detectors the prefilter ran
    /// (and their markers), and every span they looked at with what became of it (taken,
    /// declined and why, dropped and why). For finding out why a leak was missed.
    #[arg(long, conflicts_with = "stats")]
    pub explain: bool,
}

/// Counts of one scan.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Messages examined.
    pub messages: usize,
    /// Messages with at least one leak.
    pub with_leaks: usize,
    /// Inputs (files or lines) that could not be read or decoded; each was reported on
    /// stderr.
    pub unreadable: usize,
    /// Messages of another role than `assistant` (never a leak).
    pub not_assistant: usize,
    /// Leaks by family.
    pub leaks_by_family: BTreeMap<&'static str, usize>,
    /// Messages by the outcome recovery would give them.
    pub messages_by_outcome: BTreeMap<&'static str, usize>,
    /// Calls and result objects by the outcome recovery would give them.
    pub calls_by_outcome: BTreeMap<&'static str, usize>,
}

#[derive(Deserialize)]
struct Line {
    /// The message text; `text` as in the detection vectors.
    #[serde(alias = "text")]
    content: Option<String>,
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    tools_used: Vec<String>,
    enabled_tools: Option<Vec<String>>,
    #[serde(default)]
    id: Option<Value>,
}

/// Runs the scan, writing JSON lines to `out` and problems with the input to stderr.
/// Errors only when `out` cannot be written; unreadable inputs are counted in the summary.
pub fn run(args: &ScanArgs, out: &mut dyn Write) -> std::io::Result<Summary> {
    let config = args.detect.config();
    let mut scanner = Scanner {
        args,
        config,
        out,
        summary: Summary::default(),
    };
    let stdin_only = args.files.is_empty();
    let sources: Vec<Option<&PathBuf>> = if stdin_only {
        vec![None]
    } else {
        args.files
            .iter()
            .map(|p| (p.as_os_str() != "-").then_some(p))
            .collect()
    };
    for source in sources {
        let name = source.map_or_else(|| "<stdin>".to_string(), |p| p.display().to_string());
        let reader: Box<dyn Read> = match source {
            None => Box::new(std::io::stdin().lock()),
            Some(path) => match std::fs::File::open(path) {
                Ok(f) => Box::new(f),
                Err(e) => {
                    scanner.unreadable(&name, &e.to_string());
                    continue;
                }
            },
        };
        if args.jsonl {
            scanner.jsonl(&name, reader)?;
        } else {
            scanner.plain(&name, reader)?;
        }
    }
    if args.stats {
        serde_json::to_writer(&mut *scanner.out, &scanner.summary)?;
        scanner.out.write_all(b"\n")?;
    }
    Ok(scanner.summary)
}

struct Scanner<'a> {
    args: &'a ScanArgs,
    config: Config,
    out: &'a mut dyn Write,
    summary: Summary,
}

impl Scanner<'_> {
    fn unreadable(&mut self, source: &str, why: &str) {
        self.summary.unreadable += 1;
        eprintln!("toolcall-recovery scan: {source}: {why}");
    }

    fn plain(&mut self, name: &str, mut reader: Box<dyn Read>) -> std::io::Result<()> {
        let mut bytes = Vec::new();
        if let Err(e) = reader.read_to_end(&mut bytes) {
            self.unreadable(name, &e.to_string());
            return Ok(());
        }
        match String::from_utf8(bytes) {
            Ok(content) => {
                let enabled = self.args.enabled_tools.clone();
                self.emit(name, None, None, &content, &[], &enabled)
            }
            Err(e) => {
                let at = e.utf8_error().valid_up_to();
                self.unreadable(
                    name,
                    &format!("not valid UTF-8 (first bad byte at offset {at})"),
                );
                Ok(())
            }
        }
    }

    fn jsonl(&mut self, name: &str, reader: Box<dyn Read>) -> std::io::Result<()> {
        let mut reader = BufReader::new(reader);
        let mut buf = Vec::new();
        let mut n = 0usize;
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) => return Ok(()),
                Ok(_) => {}
                Err(e) => {
                    self.unreadable(name, &e.to_string());
                    return Ok(());
                }
            }
            n += 1;
            let source = format!("{name}:{n}");
            let Ok(line) = std::str::from_utf8(&buf) else {
                self.unreadable(&source, "not valid UTF-8");
                continue;
            };
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Line>(line) {
                Ok(Line { content: None, .. }) => self.unreadable(&source, "no \"content\" string"),
                Ok(l) => {
                    let enabled = l
                        .enabled_tools
                        .unwrap_or_else(|| self.args.enabled_tools.clone());
                    let content = l.content.unwrap_or_default();
                    let role = l.role.as_deref();
                    self.emit(&source, l.id, role, &content, &l.tools_used, &enabled)?;
                }
                Err(e) => self.unreadable(&source, &format!("not a message object: {e}")),
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn emit(
        &mut self,
        source: &str,
        id: Option<Value>,
        role: Option<&str>,
        content: &str,
        tools_used: &[String],
        enabled_tools: &[String],
    ) -> std::io::Result<()> {
        self.summary.messages += 1;
        // Only an assistant's message can hold a leak (as in the worker); no role given
        // means an assistant's (plain-text input, exports of replies).
        let mut explain = Explain::default();
        let assistant = role.is_none_or(|r| r == "assistant");
        let input = Input {
            content,
            tools_used,
            enabled_tools,
        };
        let d = match (assistant, self.args.explain) {
            (true, false) => detect(&input, &self.config),
            (true, true) => detect_traced(&input, &self.config, &mut explain),
            (false, _) => {
                self.summary.not_assistant += 1;
                Detection::default()
            }
        };
        self.count(&d, enabled_tools);
        if self.args.stats || (d.is_clean() && self.args.leaks_only) {
            return Ok(());
        }
        let mut record = json!({
            "source": source,
            "clean": d.is_clean(),
            "families": d.families(),
            "bytes_removed": d.bytes_removed(content),
            "strip_only": d.strip_only,
            "leaks": d.leaks.iter().map(|l| json!({
                "family": l.family,
                "span": {"start": l.span.start, "end": l.span.end},
                "removed": content.get(l.span.clone()),
                "calls": l.calls,
                "results": l.results,
            })).collect::<Vec<_>>(),
            "cleaned": d.cleaned,
        });
        if let Some(obj) = record.as_object_mut() {
            if let Some(id) = id {
                obj.insert("id".to_string(), id);
            }
            if self.args.explain {
                obj.insert("explain".to_string(), explain.to_json(content, assistant));
            }
        }
        serde_json::to_writer(&mut *self.out, &record)?;
        self.out.write_all(b"\n")
    }
}

/// What detection did with one message, collected for `--explain`.
#[derive(Default)]
struct Explain {
    detectors: Vec<(&'static str, Vec<String>)>,
    notes: Vec<Note>,
}

impl Trace for Explain {
    fn prefilter(&mut self, detectors: &[(&'static str, Vec<String>)]) {
        self.detectors = detectors.to_vec();
    }

    fn note(&mut self, note: Note) {
        self.notes.push(note);
    }
}

/// Longest excerpt of a span printed.
const EXCERPT: usize = 160;

impl Explain {
    fn to_json(&self, content: &str, assistant: bool) -> Value {
        if !assistant {
            return json!({"why": "only an assistant's message can hold a leak"});
        }
        if self.detectors.is_empty() {
            return json!({
                "detectors": [],
                "why": "no marker of any format in the text: clean after one scan",
            });
        }
        let detectors: Vec<Value> = self
            .detectors
            .iter()
            .map(|(name, markers)| json!({"detector": name, "markers": markers}))
            .collect();
        let steps: Vec<Value> = self
            .notes
            .iter()
            .map(|n| {
                let mut step = json!({"detector": n.detector, "family": n.family});
                if let Some(obj) = step.as_object_mut() {
                    if n.span.end > 0 {
                        let text: String = content
                            .get(n.span.start..)
                            .unwrap_or_default()
                            .chars()
                            .take(EXCERPT.max(n.span.len().min(EXCERPT)))
                            .collect();
                        obj.insert(
                            "span".into(),
                            json!({"start": n.span.start, "end": n.span.end}),
                        );
                        obj.insert("at".into(), Value::String(text));
                    }
                    let (verdict, detail) = match &n.verdict {
                        Verdict::Taken(calls) => ("taken", json!(calls)),
                        Verdict::Declined(why) => ("declined", json!(why)),
                        Verdict::Dropped(why) => ("dropped", json!(why)),
                    };
                    obj.insert("verdict".into(), json!(verdict));
                    let key = if verdict == "taken" { "calls" } else { "why" };
                    obj.insert(key.into(), detail);
                }
                step
            })
            .collect();
        json!({"detectors": detectors, "steps": steps})
    }
}

impl Scanner<'_> {
    /// Adds one message's detection, and what recovery would decide for it, to the summary.
    fn count(&mut self, d: &Detection, enabled_tools: &[String]) {
        let s = &mut self.summary;
        if !d.is_clean() {
            s.with_leaks += 1;
        }
        for leak in &d.leaks {
            *s.leaks_by_family.entry(leak.family.as_str()).or_default() += 1;
        }
        let (outcome, calls) = crate::recover::planned_outcomes(d, enabled_tools, &self.config);
        *s.messages_by_outcome.entry(outcome.as_str()).or_default() += 1;
        for (_, call) in calls {
            *s.calls_by_outcome.entry(call.as_str()).or_default() += 1;
        }
    }
}

#[cfg(test)]
mod tests;
