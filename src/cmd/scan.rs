//! `scan`: detection alone, offline. Reads messages from files or stdin, runs
//! [`toolcall_detect::detect`] on each and writes one JSON line per message. Needs no
//! database and no broker; operators use it to try the detector on exported messages and
//! to see exactly what the worker would cut.
//!
//! May depend on: `toolcall_detect`, std I/O. Nothing else.

use clap::Args;
use serde::Deserialize;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use toolcall_detect::{detect, Config, Input};

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
}

/// Counts of one scan.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    /// Messages examined.
    pub messages: usize,
    /// Messages with at least one leak.
    pub with_leaks: usize,
    /// Inputs (files or lines) that could not be read or decoded; each was reported on
    /// stderr.
    pub unreadable: usize,
}

#[derive(Deserialize)]
struct Line {
    content: Option<String>,
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
                self.emit(name, None, &content, &[], &enabled)
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
                    self.emit(&source, l.id, &content, &l.tools_used, &enabled)?;
                }
                Err(e) => self.unreadable(&source, &format!("not a message object: {e}")),
            }
        }
    }

    fn emit(
        &mut self,
        source: &str,
        id: Option<Value>,
        content: &str,
        tools_used: &[String],
        enabled_tools: &[String],
    ) -> std::io::Result<()> {
        let d = detect(
            &Input {
                content,
                tools_used,
                enabled_tools,
            },
            &self.config,
        );
        self.summary.messages += 1;
        if !d.is_clean() {
            self.summary.with_leaks += 1;
        } else if self.args.leaks_only {
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
        if let (Some(id), Some(obj)) = (id, record.as_object_mut()) {
            obj.insert("id".to_string(), id);
        }
        serde_json::to_writer(&mut *self.out, &record)?;
        self.out.write_all(b"\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(files: Vec<PathBuf>, jsonl: bool) -> ScanArgs {
        ScanArgs {
            files,
            jsonl,
            enabled_tools: vec!["save_memory".into()],
            detect: crate::settings::DetectSettings {
                memory_types: vec!["journal".into(), "fact".into()],
                families_disabled: crate::settings::FamilyList::default(),
            },
            leaks_only: false,
        }
    }

    fn temp_file(name: &str, body: &[u8]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tcr-scan-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::File::create(&path)
            .unwrap()
            .write_all(body)
            .unwrap();
        path
    }

    fn lines(out: &[u8]) -> Vec<Value> {
        String::from_utf8(out.to_vec())
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn plain_file_is_one_message() {
        let f = temp_file(
            "leak.txt",
            b"{success: true, memory_type: 'fact', content: 'tea'}Noted.",
        );
        let mut out = Vec::new();
        let s = run(&args(vec![f], false), &mut out).unwrap();
        assert_eq!((s.messages, s.with_leaks, s.unreadable), (1, 1, 0));
        let v = &lines(&out)[0];
        assert_eq!(v["cleaned"], "Noted.");
        assert_eq!(v["leaks"][0]["calls"][0]["name"], "save_memory");
        assert_eq!(
            v["leaks"][0]["removed"],
            "{success: true, memory_type: 'fact', content: 'tea'}"
        );
    }

    #[test]
    fn jsonl_lines_carry_their_own_tools_and_ids() {
        let body = concat!(
            r#"{"id": 7, "content": "```json\n{\"tool\": \"write_file\", \"parameters\": {\"path\": \"a\"}}\n```\nDone.", "enabled_tools": ["write_file"]}"#,
            "\n",
            r#"{"id": 8, "content": "Just prose."}"#,
            "\n"
        );
        let f = temp_file("m.jsonl", body.as_bytes());
        let mut out = Vec::new();
        let s = run(&args(vec![f], true), &mut out).unwrap();
        assert_eq!((s.messages, s.with_leaks), (2, 1));
        let v = lines(&out);
        assert_eq!(v[0]["id"], 7);
        assert_eq!(v[0]["families"][0], "json_fence");
        assert_eq!(v[1]["clean"], true);
    }

    #[test]
    fn unreadable_inputs_are_counted_not_fatal() {
        let bad_utf8 = temp_file("bad.txt", b"\xff\xfe oops");
        let bad_line = temp_file(
            "bad.jsonl",
            b"{\"content\": 5}\nnot json\n{\"content\": \"ok\"}\n",
        );
        let missing = PathBuf::from("/nonexistent/tcr-scan-input");
        let mut out = Vec::new();
        let s = run(&args(vec![bad_utf8, missing], false), &mut out).unwrap();
        assert_eq!((s.messages, s.unreadable), (0, 2));
        let mut out = Vec::new();
        let s = run(&args(vec![bad_line], true), &mut out).unwrap();
        assert_eq!((s.messages, s.unreadable), (1, 2));
    }
}
