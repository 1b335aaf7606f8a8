//! The ledger as text (one line per recovery, the removed text verbatim on request) and as
//! JSON Lines.
//!
//! May depend on: the ledger's entries (`super`), `recover` (the mode labels), std I/O.

use super::{Entry, ItemEntry};
use crate::recover::Mode;
use chrono::SecondsFormat;
use std::io::Write;

/// Prints `entries` as text: one line per recovery (time, ids, outcome, families, calls,
/// bytes removed, `[observed]` / `[reverted ...]`); with `show_text`, under it one line
/// per item and, once per leak, its removed text, each of its lines verbatim after
/// `    | `; then `N recoveries`, saying so when the limit cut the listing (`cut`: more
/// match).
pub fn render(
    entries: &[Entry],
    show_text: bool,
    cut: bool,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    for e in entries {
        writeln!(out, "{}", summary_line(e))?;
        if show_text {
            render_items(&e.items, out)?;
        }
    }
    let n = entries.len();
    let noun = if n == 1 { "recovery" } else { "recoveries" };
    if cut {
        writeln!(
            out,
            "{n} {noun} (the limit; older ones match too: raise --limit or narrow the filters)"
        )
    } else {
        writeln!(out, "{n} {noun}")
    }
}

/// Prints `entries` as JSON Lines: one [`Entry`] object per line.
pub fn render_json(entries: &[Entry], out: &mut dyn Write) -> std::io::Result<()> {
    for e in entries {
        serde_json::to_writer(&mut *out, e)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// One line per item; after the last item of each leak, the leak's removed text (shared
/// by its items), every line verbatim after `    | `.
fn render_items(items: &[ItemEntry], out: &mut dyn Write) -> std::io::Result<()> {
    for (n, item) in items.iter().enumerate() {
        writeln!(
            out,
            "  - item {}: {} {}  {}  bytes {}..{}{}",
            n + 1,
            item.family,
            item.name.as_deref().unwrap_or("(no call)"),
            item.outcome,
            item.span_start,
            item.span_end,
            item.detail
                .as_deref()
                .map(|d| format!("  ({d})"))
                .unwrap_or_default(),
        )?;
        let last_of_leak = items
            .get(n + 1)
            .is_none_or(|next| next.leak_index != item.leak_index);
        if let (true, Some(text)) = (last_of_leak, item.removed_text.as_deref()) {
            for line in text.split('\n') {
                writeln!(out, "    | {line}")?;
            }
        }
    }
    Ok(())
}

fn summary_line(e: &Entry) -> String {
    let mut names: Vec<&str> = Vec::new();
    for item in &e.items {
        if let Some(name) = item.name.as_deref() {
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    let families = if e.families.is_empty() {
        "-".to_string()
    } else {
        e.families.join(",")
    };
    let calls = if names.is_empty() {
        "(no call)".to_string()
    } else {
        names.join(",")
    };
    // The model id is the event's text: control characters are escaped, never sent to the
    // terminal as they are.
    let model = e
        .model
        .as_deref()
        .map(|m| format!("  model {}", m.escape_debug()))
        .unwrap_or_default();
    let mut line = format!(
        "{}  recovery {}  message {}  chat {}{model}  {}  {} {}  removed {} B",
        e.created_at.to_rfc3339_opts(SecondsFormat::Secs, true),
        e.recovery_id,
        e.message_id,
        e.chat_id,
        e.outcome,
        families,
        calls,
        e.bytes_removed,
    );
    if e.mode == Mode::Observe.as_str() {
        line.push_str("  [observed]");
    }
    if e.reverted {
        line.push_str("  [reverted");
        if let Some(at) = e.reverted_at {
            line.push(' ');
            line.push_str(&at.to_rfc3339_opts(SecondsFormat::Secs, true));
        }
        if let Some(by) = &e.reverted_by {
            line.push_str(" by ");
            line.push_str(by);
        }
        line.push(']');
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{DateTime, TimeZone, Utc};
    use serde_json::{json, Value};

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 22, 10, 0, 0)
            .single()
            .unwrap()
    }

    fn entry(show_text: bool) -> Entry {
        Entry {
            recovery_id: 17,
            created_at: now(),
            message_id: 4567,
            chat_id: 89,
            agent_id: Some(5),
            source: "event".into(),
            event_id: None,
            mode: "observe".into(),
            model: None,
            outcome: "recovered".into(),
            families: vec!["hermes".into()],
            bytes_removed: 120,
            reverted: true,
            reverted_at: Some(now()),
            reverted_by: Some("admin".into()),
            revert_summary: Some(json!({"deleted": []})),
            content_before: show_text.then(|| "before".to_string()),
            content_after: show_text.then(|| "after".to_string()),
            items: vec![ItemEntry {
                leak_index: 0,
                item_index: 0,
                family: "hermes".into(),
                outcome: "recovered".into(),
                name: Some("save_memory".into()),
                arguments: Some(json!({"content": "x"})),
                result_object: None,
                detail: None,
                memory_id: Some(1),
                tool_message_id: Some(2),
                span_start: 0,
                span_end: 120,
                removed_bytes: 120,
                removed_text: show_text.then(|| "<tool_call>\nx ☕\n</tool_call>".to_string()),
            }],
        }
    }

    #[test]
    fn text_lines_carry_markers_and_verbatim_text_only_when_asked() {
        let mut out = Vec::new();
        render(&[entry(false)], false, false, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "2026-11-22T10:00:00Z  recovery 17  message 4567  chat 89  recovered  hermes \
             save_memory  removed 120 B  [observed]  [reverted 2026-11-22T10:00:00Z by admin]\n\
             1 recovery\n"
        );
        let mut out = Vec::new();
        render(&[entry(true)], true, true, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(
                "  - item 1: hermes save_memory  recovered  bytes 0..120\n    | <tool_call>\n    \
                 | x ☕\n    | </tool_call>\n"
            ),
            "{text}"
        );
        assert!(text.ends_with(
            "1 recovery (the limit; older ones match too: raise --limit or narrow the filters)\n"
        ));
    }

    #[test]
    fn the_model_is_shown_after_the_chat_with_control_characters_escaped() {
        let mut e = entry(false);
        e.model = Some("models/gemini-2.5-flash\u{1b}[31m".into());
        let mut out = Vec::new();
        render(&[e], false, false, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("  chat 89  model models/gemini-2.5-flash\\u{1b}[31m  recovered  "),
            "{text}"
        );
        assert!(!text.contains('\u{1b}'));
    }

    #[test]
    fn the_text_of_a_leak_with_several_calls_is_printed_once() {
        let mut e = entry(true);
        let mut second = e.items[0].clone();
        second.item_index = 1;
        second.name = Some("web_search".into());
        second.outcome = "forwarded".into();
        e.items.push(second);
        let mut out = Vec::new();
        render(&[e], true, false, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.matches("    | x ☕\n").count(), 1, "{text}");
        let item2 = text
            .find("  - item 2: hermes web_search  forwarded")
            .unwrap();
        assert!(text.find("    | <tool_call>").unwrap() > item2, "{text}");
    }

    #[test]
    fn json_skips_text_fields_without_show_text() {
        let mut out = Vec::new();
        render_json(&[entry(false), entry(true)], &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].get("content_before").is_none());
        assert!(lines[0]["items"][0].get("removed_text").is_none());
        assert_eq!(lines[0]["created_at"], json!("2026-11-22T10:00:00Z"));
        assert_eq!(
            lines[0]["model"],
            Value::Null,
            "the model is always a field"
        );
        assert_eq!(lines[1]["content_before"], json!("before"));
        assert_eq!(
            lines[1]["items"][0]["removed_text"],
            json!("<tool_call>\nx ☕\n</tool_call>")
        );
    }
}
