//! The decision of a pass, without its effects: for each leak of a detection, what the
//! recovery table (contract §3) does with each call and result object: run save_memory,
//! record why it cannot run, forward the call, strip only, or keep the message for review.
//! Pure: the pass (`pass.rs`) carries the plan out, the read-only diagnosis only reports it,
//! and `scan --stats` counts it, so all three decide alike.
//!
//! May depend on: the parent `recover` (report types), `toolcall_detect`, `chrono`. No I/O.

use super::{CallReport, Outcome, SAVE_MEMORY};
use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, Utc};
use serde_json::Value;
use toolcall_detect::{Call, Config, Detection, Family, Leak, ResultKind};

/// One ledger item of a pass: what happened to one call or result object.
#[derive(Debug, Clone)]
pub(super) struct Item {
    pub(super) report: CallReport,
    pub(super) leak_index: usize,
    pub(super) item_index: usize,
    pub(super) result_object: Option<Value>,
    pub(super) tool_call_id: Option<String>,
}

/// What carrying an item out writes, besides the ledger.
#[derive(Debug, Clone)]
pub(super) enum Effect {
    /// Nothing (forwarded, stripped, kept for review).
    None,
    /// Insert the memory and the `role='tool'` message of its result.
    SaveMemory {
        /// The validated arguments.
        memory: MemoryArgs,
        /// The call's place among the pass's tool calls (its `tool_call_id`).
        ordinal: usize,
    },
    /// Insert the `role='tool'` message recording why save_memory could not run.
    RecordError {
        /// Why.
        reason: String,
        /// The call's place among the pass's tool calls (its `tool_call_id`).
        ordinal: usize,
    },
}

/// An item and its effect.
#[derive(Debug, Clone)]
pub(super) struct Planned {
    pub(super) item: Item,
    pub(super) effect: Effect,
}

/// What `message` calls a leak would do, in ledger order. `strip_only` (the tool ran, or
/// an applied pass already ran these calls) plans no effect at all.
pub(super) fn plan(
    detection: &Detection,
    enabled_tools: &[String],
    config: &Config,
) -> Vec<Planned> {
    let mut out = Vec::new();
    let mut ordinal = 0usize;
    for (li, leak) in detection.leaks.iter().enumerate() {
        let mut leak_items: Vec<Planned> = Vec::new();
        if leak.family == Family::ResultOnly && !config.result_only_recover {
            leak_items.push(bare(leak, Outcome::NeedsReview, None));
        } else if detection.strip_only {
            for call in &leak.calls {
                leak_items.push(stripped_call(leak, call, enabled_tools));
            }
            if leak.calls.is_empty() {
                leak_items.push(bare(leak, Outcome::StrippedOnly, None));
            }
        } else {
            for call in &leak.calls {
                ordinal += 1;
                leak_items.push(plan_call(leak, call, ordinal, enabled_tools, config));
            }
            for result in &leak.results {
                match &result.kind {
                    ResultKind::SaveMemory => {}
                    ResultKind::InvalidSaveMemory { reason } => {
                        ordinal += 1;
                        let mut p = refused(leak, None, Outcome::InvalidArgs, reason, ordinal);
                        p.item.result_object = Some(result.value.clone());
                        leak_items.push(p);
                    }
                    ResultKind::Other { tool } => {
                        let mut p = bare(leak, Outcome::StrippedOnly, *tool);
                        p.item.result_object = Some(result.value.clone());
                        leak_items.push(p);
                    }
                }
            }
            if leak_items.is_empty() {
                leak_items.push(bare(leak, Outcome::StrippedOnly, None));
            }
        }
        for (ii, mut p) in leak_items.into_iter().enumerate() {
            p.item.leak_index = li;
            p.item.item_index = ii;
            out.push(p);
        }
    }
    out
}

/// What the recovery table would decide for a detection, as `(message outcome, per item
/// (family, outcome))`, for a message that has an agent: `scan --stats` counts with it what
/// the worker would do, without a database. A clean detection is `clean` with no items.
pub fn planned_outcomes(
    detection: &Detection,
    enabled_tools: &[String],
    config: &Config,
) -> (Outcome, Vec<(Family, Outcome)>) {
    if detection.is_clean() {
        return (Outcome::Clean, Vec::new());
    }
    let reports: Vec<CallReport> = plan(detection, enabled_tools, config)
        .into_iter()
        .map(|p| p.item.report)
        .collect();
    let items = reports.iter().map(|r| (r.family, r.outcome)).collect();
    (outcome_of(&reports), items)
}

/// The message-level outcome of planned (or done) items: the weightiest of them.
pub(super) fn outcome_of<'a>(items: impl IntoIterator<Item = &'a CallReport>) -> Outcome {
    items
        .into_iter()
        .map(|c| c.outcome)
        .max_by_key(|o| o.rank())
        .unwrap_or(Outcome::StrippedOnly)
}

/// One call: save_memory is run (or refused), anything else is forwarded.
fn plan_call(
    leak: &Leak,
    call: &Call,
    ordinal: usize,
    enabled_tools: &[String],
    config: &Config,
) -> Planned {
    if call.name != SAVE_MEMORY {
        let mut p = bare(leak, Outcome::Forwarded, None);
        p.item.report.name = Some(call.name.clone());
        p.item.report.tool_label = tool_label(&call.name, enabled_tools);
        p.item.report.arguments = Some(call.arguments.clone());
        return p;
    }
    if !enabled_tools.iter().any(|t| t == SAVE_MEMORY) {
        return refused(
            leak,
            Some(call),
            Outcome::ToolNotEnabled,
            "save_memory is not enabled for this agent",
            ordinal,
        );
    }
    match MemoryArgs::parse(&call.arguments, config) {
        Err(reason) => refused(leak, Some(call), Outcome::InvalidArgs, reason, ordinal),
        Ok(memory) => {
            let mut p = bare(leak, Outcome::Recovered, None);
            p.item.report.name = Some(call.name.clone());
            p.item.report.tool_label = SAVE_MEMORY.into();
            p.item.report.arguments = Some(call.arguments.clone());
            p.effect = Effect::SaveMemory { memory, ordinal };
            p
        }
    }
}

/// A save_memory that cannot run: a tool message records the error.
fn refused(
    leak: &Leak,
    call: Option<&Call>,
    outcome: Outcome,
    reason: &str,
    ordinal: usize,
) -> Planned {
    let mut p = bare(leak, outcome, Some(SAVE_MEMORY));
    p.item.report.name = Some(SAVE_MEMORY.into());
    p.item.report.arguments = call.map(|c| c.arguments.clone());
    p.item.report.detail = Some(reason.to_string());
    p.effect = Effect::RecordError {
        reason: reason.to_string(),
        ordinal,
    };
    p
}

fn bare(leak: &Leak, outcome: Outcome, tool: Option<&str>) -> Planned {
    Planned {
        item: Item {
            report: CallReport {
                leak_index: 0,
                family: leak.family,
                name: None,
                tool_label: tool.unwrap_or("none").to_string(),
                arguments: None,
                outcome,
                detail: None,
                memory_id: None,
                tool_message_id: None,
            },
            leak_index: 0,
            item_index: 0,
            result_object: leak.results.first().map(|r| r.value.clone()),
            tool_call_id: None,
        },
        effect: Effect::None,
    }
}

fn stripped_call(leak: &Leak, call: &Call, enabled_tools: &[String]) -> Planned {
    let mut p = bare(leak, Outcome::StrippedOnly, None);
    p.item.report.name = Some(call.name.clone());
    p.item.report.tool_label = tool_label(&call.name, enabled_tools);
    p.item.report.arguments = Some(call.arguments.clone());
    p
}

/// The `tool` metric label of a call: its name when the worker runs it or the agent has it
/// enabled, `other` otherwise (so a model cannot mint label values).
fn tool_label(name: &str, enabled_tools: &[String]) -> String {
    if name == SAVE_MEMORY || enabled_tools.iter().any(|t| t == name) {
        name.to_string()
    } else {
        "other".to_string()
    }
}

/// save_memory arguments that can be saved.
#[derive(Debug, Clone)]
pub(super) struct MemoryArgs {
    pub(super) content: String,
    pub(super) memory_type: String,
    pub(super) expires_at: Option<DateTime<Utc>>,
}

impl MemoryArgs {
    fn parse(args: &Value, config: &Config) -> Result<MemoryArgs, &'static str> {
        let obj = args.as_object().ok_or("arguments are not an object")?;
        let content = memory_content(args).ok_or("content is missing or blank")?;
        let memory_type = obj
            .get("memory_type")
            .and_then(Value::as_str)
            .map(str::trim)
            .ok_or("memory_type is missing")?;
        if !config.memory_type_allowed(memory_type) {
            return Err("memory_type is not allowed");
        }
        let expires_at = obj
            .get("expires_around")
            .and_then(Value::as_str)
            .and_then(parse_date);
        Ok(MemoryArgs {
            content,
            memory_type: memory_type.to_string(),
            expires_at,
        })
    }
}

/// The memory content save_memory writes for these arguments (trimmed, without NUL), if
/// any. A revert compares the memory with it to tell whether the app edited it since.
pub(super) fn memory_content(args: &Value) -> Option<String> {
    args.get("content")
        .and_then(Value::as_str)
        .map(|s| s.replace('\0', "").trim().to_string())
        .filter(|s| !s.is_empty())
}

/// `expires_around` as a timestamp: RFC 3339, a naive date-time (UTC), or a date
/// (midnight UTC). Anything else is no expiry, and so is a date PostgreSQL cannot hold
/// (`timestamptz` spans 4713 BC to 294276 AD): a leak must not be able to make the insert
/// fail and the message skip recovery.
fn parse_date(s: &str) -> Option<DateTime<Utc>> {
    parse_any_date(s.trim()).filter(|t| (PG_MIN_YEAR..=PG_MAX_YEAR).contains(&t.year()))
}

/// The years `timestamptz` holds whole (chrono counts 1 BC as year 0).
const PG_MIN_YEAR: i32 = -4712;
const PG_MAX_YEAR: i32 = 294_275;

fn parse_any_date(s: &str) -> Option<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc));
    }
    for fmt in ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M"] {
        if let Ok(t) = NaiveDateTime::parse_from_str(s, fmt) {
            return Some(t.and_utc());
        }
    }
    NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_dates() {
        assert!(parse_date("2026-03-01").is_some());
        assert!(parse_date("2026-03-01T10:00:00Z").is_some());
        assert!(parse_date("next week").is_none());
    }

    #[test]
    fn dates_postgres_cannot_hold_are_no_expiry() {
        for out_of_range in ["-5000-01-01", "+300000-01-01", "-4713-06-01T00:00:00"] {
            assert!(parse_date(out_of_range).is_none(), "{out_of_range}");
        }
        assert!(parse_date("-4712-06-01").is_some());
        assert!(parse_date("9999-12-31").is_some());
    }

    #[test]
    fn validates_memory_args() {
        let c = Config::default();
        assert!(MemoryArgs::parse(&json!({"content": "x", "memory_type": "fact"}), &c).is_ok());
        assert!(MemoryArgs::parse(&json!({"content": " ", "memory_type": "fact"}), &c).is_err());
        assert!(MemoryArgs::parse(&json!({"content": "x", "memory_type": "nope"}), &c).is_err());
    }

    fn detect(content: &str, tools: &[&str]) -> Detection {
        let tools: Vec<String> = tools.iter().map(|t| t.to_string()).collect();
        toolcall_detect::detect(
            &toolcall_detect::Input {
                content,
                tools_used: &[],
                enabled_tools: &tools,
            },
            &Config::default(),
        )
    }

    fn outcomes(content: &str, tools: &[&str]) -> Vec<Outcome> {
        let tools_owned: Vec<String> = tools.iter().map(|t| t.to_string()).collect();
        plan(&detect(content, tools), &tools_owned, &Config::default())
            .iter()
            .map(|p| p.item.report.outcome)
            .collect()
    }

    #[test]
    fn plans_the_recovery_table() {
        let save = r#"<tool_call>{"name": "save_memory", "arguments": {"content": "tea", "memory_type": "fact"}}</tool_call>"#;
        assert_eq!(outcomes(save, &["save_memory"]), [Outcome::Recovered]);
        let bad_type = r#"<tool_call>{"name": "save_memory", "arguments": {"content": "tea", "memory_type": "x"}}</tool_call>"#;
        assert_eq!(outcomes(bad_type, &["save_memory"]), [Outcome::InvalidArgs]);
        let other = r#"<tool_call>{"name": "web_search", "arguments": {"q": "tea"}}</tool_call>"#;
        assert_eq!(outcomes(other, &["web_search"]), [Outcome::Forwarded]);
        let result = "{success: true, memory_type: 'fact', content: 'tea'}Noted.";
        assert_eq!(outcomes(result, &[]), [Outcome::ToolNotEnabled]);
        assert_eq!(outcomes("{success: true}", &[]), [Outcome::NeedsReview]);
    }
}
