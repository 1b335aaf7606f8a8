//! THE recovery transaction (contract §3): one function, [`recover_message`], that the
//! worker, the backfill and the admin API all call. Given a message id it locks the row,
//! re-detects on the content as stored (the database is the truth; an event may be
//! stale), applies the recovery table, writes the ledger, repairs the chat's transcript and
//! commits, returning a [`Report`] of what it did. It knows nothing about AMQP: publishing
//! the report is the caller's job, after the commit.
//!
//! Idempotency rests on the row lock plus re-detection: a second pass on the same message
//! waits for the first to commit, then sees cleaned content and does nothing
//! (`already_recovered`); a message left untouched for review is recognised by its ledger
//! row and not recorded twice.
//!
//! May depend on: `event` (ids), `error`, `toolcall_detect`, `sqlx`. No broker, no HTTP.

use crate::error::{Error, Poison};
use crate::event::{AgentId, ChatId, EventId, MessageId, ID_NAMESPACE};
use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use serde_json::{json, Value};
use sqlx::types::Json;
use sqlx::{PgConnection, PgPool, Row};
use toolcall_detect::{Call, Config, Detection, Family, Input, Leak, ResultKind};
use uuid::Uuid;

/// The tool the worker can run itself.
pub const SAVE_MEMORY: &str = "save_memory";
/// What a recovered call appends to `tools_used`.
pub const RECOVERED_TOOL_MARK: &str = "save_memory (recovered)";

/// What asked for the recovery; recorded in the ledger.
#[derive(Debug, Clone, Copy)]
pub enum Source {
    /// A `message.finalized` event.
    Event(EventId),
    /// The historical backfill.
    Backfill,
    /// The admin API (the app's "fix" button).
    Admin,
}

impl Source {
    fn label(self) -> &'static str {
        match self {
            Source::Event(_) => "event",
            Source::Backfill => "backfill",
            Source::Admin => "admin",
        }
    }
    fn event_id(self) -> Option<Uuid> {
        match self {
            Source::Event(id) => Some(id.get()),
            _ => None,
        }
    }
}

/// The outcome of a message (event level) or of one leaked call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// No leak.
    Clean,
    /// The tool did run; only the echoed markup was removed (also: a foreign tool's fake
    /// result object, stripped with nothing to run).
    StrippedOnly,
    /// A leak on a message without an agent: nothing written.
    NoAgent,
    /// save_memory ran: memory created.
    Recovered,
    /// save_memory is not enabled for the agent.
    ToolNotEnabled,
    /// save_memory with arguments that cannot be saved.
    InvalidArgs,
    /// A call the worker cannot run, published for the app.
    Forwarded,
    /// Content that is nothing but a result object: left untouched, recorded for review.
    NeedsReview,
    /// A pass already did the work.
    AlreadyRecovered,
}

impl Outcome {
    /// The label used in metrics, the ledger and published messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Clean => "clean",
            Outcome::StrippedOnly => "stripped_only",
            Outcome::NoAgent => "no_agent",
            Outcome::Recovered => "recovered",
            Outcome::ToolNotEnabled => "tool_not_enabled",
            Outcome::InvalidArgs => "invalid_args",
            Outcome::Forwarded => "forwarded",
            Outcome::NeedsReview => "needs_review",
            Outcome::AlreadyRecovered => "already_recovered",
        }
    }

    /// Which call outcome names the message: the one with the most consequence.
    fn rank(self) -> u8 {
        match self {
            Outcome::Recovered => 9,
            Outcome::Forwarded => 8,
            Outcome::ToolNotEnabled => 7,
            Outcome::InvalidArgs => 6,
            Outcome::NeedsReview => 5,
            Outcome::StrippedOnly => 4,
            Outcome::NoAgent => 3,
            Outcome::AlreadyRecovered => 2,
            Outcome::Clean => 1,
        }
    }
}

/// One leaked call or result object and what was done with it.
#[derive(Debug, Clone)]
pub struct CallReport {
    /// Index of the leak in the message.
    pub leak_index: usize,
    /// The leak's family.
    pub family: Family,
    /// The call's name (None for a result object without a call).
    pub name: Option<String>,
    /// The tool as a metrics label: the name when it is save_memory or enabled for the
    /// agent, the known tool of a result object, `other` otherwise (bounded cardinality).
    pub tool_label: String,
    /// The call's arguments.
    pub arguments: Option<Value>,
    /// What happened.
    pub outcome: Outcome,
    /// Why, for the error outcomes.
    pub detail: Option<String>,
    /// The memory created.
    pub memory_id: Option<i64>,
    /// The `role='tool'` message created.
    pub tool_message_id: Option<i64>,
}

/// A call to publish on the tool-calls exchange.
#[derive(Debug, Clone)]
pub struct ForwardedCall {
    /// Deterministic per ledger item, so a republish carries the same id.
    pub event_id: Uuid,
    /// The tool.
    pub name: String,
    /// Its arguments.
    pub arguments: Value,
    /// The family it leaked in.
    pub family: String,
}

/// What one recovery pass did.
#[derive(Debug, Clone)]
pub struct Report {
    /// The message.
    pub message_id: MessageId,
    /// Its chat.
    pub chat_id: ChatId,
    /// Its agent.
    pub agent_id: Option<AgentId>,
    /// The message-level outcome.
    pub outcome: Outcome,
    /// Per call (empty for `clean`, `no_agent`, `already_recovered`).
    pub calls: Vec<CallReport>,
    /// The content as it is in the database after the pass.
    pub content: Option<String>,
    /// `tools_used` after the pass (string entries).
    pub tools_used: Vec<String>,
    /// The ledger row written, if any.
    pub recovery_id: Option<i64>,
    /// The `recovery` object of the moderation message (stored in the ledger, so a
    /// redelivery republishes the same one).
    pub summary: Value,
    /// Calls to publish for the app to run.
    pub forward: Vec<ForwardedCall>,
    /// `role='tool'` messages whose empty tool_name was repaired.
    pub repaired_tool_messages: Vec<i64>,
    /// Memories created.
    pub memories_created: usize,
}

struct Row_ {
    chat_id: i64,
    agent_id: Option<i64>,
    role: String,
    content: Option<String>,
    tools_used: Value,
    created_at: DateTime<Utc>,
}

const LOCK_MESSAGE: &str = "SELECT chat_id, agent_id, role, content, tools_used, created_at \
     FROM messages WHERE id = $1 FOR UPDATE";
const ENABLED_TOOLS: &str = "SELECT enabled_tools FROM agents WHERE id = $1";
const LATEST_RECOVERY: &str = "SELECT id, event_id, summary, content_after FROM recoveries \
     WHERE message_id = $1 AND reverted_at IS NULL ORDER BY id DESC LIMIT 1";
const FORWARDED_ITEMS: &str = "SELECT id, call_name, call_arguments, family FROM recovery_items \
     WHERE recovery_id = $1 AND outcome = 'forwarded' ORDER BY leak_index, item_index";
const INSERT_MEMORY: &str = "INSERT INTO agent_memories (agent_id, content, memory_type, expires_at) \
     VALUES ($1, $2, $3, $4) RETURNING id";
const INSERT_TOOL_MESSAGE: &str = "INSERT INTO messages \
     (chat_id, agent_id, role, content, tool_call_id, tool_name, created_at, updated_at) \
     VALUES ($1, $2, 'tool', $3, $4, $5, $6, now()) RETURNING id";
const UPDATE_MESSAGE: &str =
    "UPDATE messages SET content = $2, tools_used = $3, updated_at = now() WHERE id = $1";
/// Transcript repair: a tool message without a name gets the name of the assistant call
/// with its tool_call_id, `unknown` for an orphan.
const REPAIR_TRANSCRIPT: &str = "UPDATE messages t SET tool_name = COALESCE(( \
       SELECT tc->>'name' FROM messages a, \
         jsonb_array_elements(CASE WHEN jsonb_typeof(a.tool_calls) = 'array' \
                                   THEN a.tool_calls ELSE '[]'::jsonb END) tc \
       WHERE a.chat_id = t.chat_id AND a.role = 'assistant' \
         AND jsonb_typeof(tc) = 'object' AND tc->>'id' = t.tool_call_id \
         AND coalesce(tc->>'name', '') <> '' \
       ORDER BY a.id LIMIT 1), 'unknown'), updated_at = now() \
     WHERE t.chat_id = $1 AND t.role = 'tool' AND coalesce(t.tool_name, '') = '' \
     RETURNING t.id";
const INSERT_RECOVERY: &str = "INSERT INTO recoveries (message_id, chat_id, agent_id, source, \
     event_id, outcome, content_before, content_after, tools_used_before, tools_used_after, \
     repaired_tool_message_ids, summary) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING id";
const INSERT_ITEM: &str = "INSERT INTO recovery_items (recovery_id, leak_index, item_index, \
     family, span_start, span_end, removed_text, call_name, call_arguments, result_object, \
     outcome, detail, memory_id, tool_message_id, tool_call_id) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) RETURNING id";

/// Runs the recovery of one message in one transaction and commits it.
///
/// Errors: [`Poison::MissingMessage`] when the row does not exist; database errors
/// otherwise (see [`Error::kind`] for which are worth a retry). Nothing is written unless
/// the whole pass commits.
pub async fn recover_message(
    pool: &PgPool,
    message_id: MessageId,
    config: &Config,
    source: Source,
) -> Result<Report, Error> {
    let mut tx = pool.begin().await?;
    let report = recover_in(&mut tx, message_id, config, source).await?;
    tx.commit().await?;
    Ok(report)
}

/// The body of [`recover_message`] on a connection already inside a transaction (for
/// callers that compose it with their own writes).
pub async fn recover_in(
    conn: &mut PgConnection,
    message_id: MessageId,
    config: &Config,
    source: Source,
) -> Result<Report, Error> {
    let row = lock_message(conn, message_id).await?;
    let tools_used = string_entries(&row.tools_used);
    let mut report = Report {
        message_id,
        chat_id: ChatId::new(row.chat_id),
        agent_id: row.agent_id.map(AgentId::new),
        outcome: Outcome::Clean,
        calls: Vec::new(),
        content: row.content.clone(),
        tools_used: tools_used.clone(),
        recovery_id: None,
        summary: summary_of(Outcome::Clean, &[], 0),
        forward: Vec::new(),
        repaired_tool_messages: Vec::new(),
        memories_created: 0,
    };
    let content = match (&row.role[..], &row.content) {
        ("assistant", Some(c)) => c.clone(),
        _ => return Ok(report),
    };
    let enabled_tools = match row.agent_id {
        Some(agent) => sqlx::query_scalar::<_, Vec<String>>(ENABLED_TOOLS)
            .bind(agent)
            .fetch_optional(&mut *conn)
            .await?
            .unwrap_or_default(),
        None => Vec::new(),
    };
    let detection = toolcall_detect::detect(
        &Input {
            content: &content,
            tools_used: &tools_used,
            enabled_tools: &enabled_tools,
        },
        config,
    );
    if detection.is_clean() || detection.cleaned.is_none() {
        if let Some(prev) = latest_recovery(conn, message_id).await? {
            let already = detection.is_clean() || prev.content_after.as_deref() == Some(&content);
            if already {
                return already_recovered(conn, report, prev, source).await;
            }
        }
        if detection.is_clean() {
            return Ok(report);
        }
    }
    if !detection.strip_only && row.agent_id.is_none() {
        report.outcome = Outcome::NoAgent;
        report.summary = summary_of(Outcome::NoAgent, &[], 0);
        return Ok(report);
    }
    apply(conn, &row, message_id, &content, &detection, &enabled_tools, config, source, report)
        .await
}

async fn lock_message(conn: &mut PgConnection, id: MessageId) -> Result<Row_, Error> {
    let row = sqlx::query(LOCK_MESSAGE)
        .bind(id.get())
        .fetch_optional(&mut *conn)
        .await?
        .ok_or(Poison::MissingMessage(id))?;
    Ok(Row_ {
        chat_id: row.try_get("chat_id")?,
        agent_id: row.try_get("agent_id")?,
        role: row.try_get("role")?,
        content: row.try_get("content")?,
        tools_used: row.try_get::<Json<Value>, _>("tools_used")?.0,
        created_at: row.try_get("created_at")?,
    })
}

struct PrevRecovery {
    id: i64,
    event_id: Option<Uuid>,
    summary: Value,
    content_after: Option<String>,
}

async fn latest_recovery(
    conn: &mut PgConnection,
    id: MessageId,
) -> Result<Option<PrevRecovery>, Error> {
    let Some(row) = sqlx::query(LATEST_RECOVERY)
        .bind(id.get())
        .fetch_optional(&mut *conn)
        .await?
    else {
        return Ok(None);
    };
    Ok(Some(PrevRecovery {
        id: row.try_get("id")?,
        event_id: row.try_get("event_id")?,
        summary: row.try_get::<Json<Value>, _>("summary")?.0,
        content_after: row.try_get("content_after")?,
    }))
}

/// A pass already did the work: report it, republishing the same summary for the same
/// source event and the same forwarded calls (their ids are stable, consumers dedupe).
async fn already_recovered(
    conn: &mut PgConnection,
    mut report: Report,
    prev: PrevRecovery,
    source: Source,
) -> Result<Report, Error> {
    report.outcome = Outcome::AlreadyRecovered;
    report.recovery_id = Some(prev.id);
    report.summary = match (prev.event_id, source.event_id()) {
        (Some(a), Some(b)) if a == b => prev.summary,
        _ => summary_of(Outcome::AlreadyRecovered, &[], 0),
    };
    let rows = sqlx::query(FORWARDED_ITEMS)
        .bind(prev.id)
        .fetch_all(&mut *conn)
        .await?;
    for row in rows {
        let item_id: i64 = row.try_get("id")?;
        report.forward.push(ForwardedCall {
            event_id: tool_call_event_id(item_id),
            name: row.try_get::<Option<String>, _>("call_name")?.unwrap_or_default(),
            arguments: row
                .try_get::<Option<Json<Value>>, _>("call_arguments")?
                .map_or(Value::Null, |j| j.0),
            family: row.try_get("family")?,
        });
    }
    Ok(report)
}

/// The id of the tool-calls message for one ledger item.
pub fn tool_call_event_id(item_id: i64) -> Uuid {
    Uuid::new_v5(&ID_NAMESPACE, format!("tool_call:{item_id}").as_bytes())
}

/// One ledger item before it is written.
struct Item {
    report: CallReport,
    leak_index: usize,
    item_index: usize,
    result_object: Option<Value>,
    tool_call_id: Option<String>,
}

#[allow(clippy::too_many_arguments)]
async fn apply(
    conn: &mut PgConnection,
    row: &Row_,
    message_id: MessageId,
    content: &str,
    detection: &Detection,
    enabled_tools: &[String],
    config: &Config,
    source: Source,
    mut report: Report,
) -> Result<Report, Error> {
    let mut tools_used_after = row.tools_used.clone();
    let mut items = Vec::new();
    let mut ordinal = 0usize;
    let ctx = CallCtx {
        row,
        message_id,
        enabled_tools,
        config,
    };
    for (li, leak) in detection.leaks.iter().enumerate() {
        let mut leak_items = Vec::new();
        if leak.family == Family::ResultOnly && !config.result_only_recover {
            leak_items.push(bare_item(leak, Outcome::NeedsReview, None));
        } else if detection.strip_only {
            for call in &leak.calls {
                leak_items.push(stripped_call(leak, call, enabled_tools));
            }
            if leak.calls.is_empty() {
                leak_items.push(bare_item(leak, Outcome::StrippedOnly, None));
            }
        } else {
            for call in &leak.calls {
                ordinal += 1;
                let item = ctx.run_call(conn, leak, call, ordinal).await?;
                if item.report.outcome == Outcome::Recovered {
                    push_recovered_mark(&mut tools_used_after);
                }
                leak_items.push(item);
            }
            for result in &leak.results {
                match &result.kind {
                    ResultKind::SaveMemory => {}
                    ResultKind::InvalidSaveMemory { reason } => {
                        ordinal += 1;
                        let mut item = ctx
                            .refuse(conn, leak, None, Outcome::InvalidArgs, reason, ordinal)
                            .await?;
                        item.result_object = Some(result.value.clone());
                        leak_items.push(item);
                    }
                    ResultKind::Other { tool } => {
                        let mut item = bare_item(leak, Outcome::StrippedOnly, *tool);
                        item.result_object = Some(result.value.clone());
                        leak_items.push(item);
                    }
                }
            }
            if leak_items.is_empty() {
                leak_items.push(bare_item(leak, Outcome::StrippedOnly, None));
            }
        }
        for (ii, mut item) in leak_items.into_iter().enumerate() {
            item.leak_index = li;
            item.item_index = ii;
            items.push(item);
        }
    }

    let content_after = detection.cleaned.clone().unwrap_or_else(|| content.to_string());
    let changed = content_after != content || tools_used_after != row.tools_used;
    if changed {
        sqlx::query(UPDATE_MESSAGE)
            .bind(message_id.get())
            .bind(&content_after)
            .bind(Json(&tools_used_after))
            .execute(&mut *conn)
            .await?;
    }
    let repaired: Vec<i64> = sqlx::query_scalar(REPAIR_TRANSCRIPT)
        .bind(row.chat_id)
        .fetch_all(&mut *conn)
        .await?;

    let calls: Vec<CallReport> = items.iter().map(|i| i.report.clone()).collect();
    let outcome = calls
        .iter()
        .map(|c| c.outcome)
        .max_by_key(|o| o.rank())
        .unwrap_or(Outcome::StrippedOnly);
    let bytes_removed = detection.bytes_removed(content);
    let summary = summary_of(outcome, &calls, bytes_removed);
    let recovery_id: i64 = sqlx::query_scalar(INSERT_RECOVERY)
        .bind(message_id.get())
        .bind(row.chat_id)
        .bind(row.agent_id)
        .bind(source.label())
        .bind(source.event_id())
        .bind(outcome.as_str())
        .bind(content)
        .bind(&content_after)
        .bind(Json(&row.tools_used))
        .bind(Json(&tools_used_after))
        .bind(&repaired)
        .bind(Json(&summary))
        .fetch_one(&mut *conn)
        .await?;
    for item in &items {
        let leak = &detection.leaks[item.leak_index];
        let item_id: i64 = sqlx::query_scalar(INSERT_ITEM)
            .bind(recovery_id)
            .bind(item.leak_index as i32)
            .bind(item.item_index as i32)
            .bind(leak.family.as_str())
            .bind(leak.span.start as i32)
            .bind(leak.span.end as i32)
            .bind(content.get(leak.span.clone()).unwrap_or_default())
            .bind(item.report.name.as_deref())
            .bind(item.report.arguments.as_ref().map(|v| Json(without_nul(v))))
            .bind(item.result_object.as_ref().map(|v| Json(without_nul(v))))
            .bind(item.report.outcome.as_str())
            .bind(item.report.detail.as_deref())
            .bind(item.report.memory_id)
            .bind(item.report.tool_message_id)
            .bind(item.tool_call_id.as_deref())
            .fetch_one(&mut *conn)
            .await?;
        if item.report.outcome == Outcome::Forwarded {
            report.forward.push(ForwardedCall {
                event_id: tool_call_event_id(item_id),
                name: item.report.name.clone().unwrap_or_default(),
                arguments: item.report.arguments.clone().unwrap_or(Value::Null),
                family: leak.family.as_str().to_string(),
            });
        }
    }

    report.memories_created = calls
        .iter()
        .filter(|c| c.outcome == Outcome::Recovered)
        .count();
    report.outcome = outcome;
    report.calls = calls;
    report.content = Some(content_after);
    report.tools_used = string_entries(&tools_used_after);
    report.recovery_id = Some(recovery_id);
    report.summary = summary;
    report.repaired_tool_messages = repaired;
    Ok(report)
}

/// What running a call needs to know about the message.
struct CallCtx<'a> {
    row: &'a Row_,
    message_id: MessageId,
    enabled_tools: &'a [String],
    config: &'a Config,
}

impl CallCtx<'_> {
    fn tool_call_id(&self, ordinal: usize) -> String {
        format!("tcr-{}-{ordinal}", self.message_id)
    }

    async fn run_call(
        &self,
        conn: &mut PgConnection,
        leak: &Leak,
        call: &Call,
        ordinal: usize,
    ) -> Result<Item, Error> {
        if call.name != SAVE_MEMORY {
            let mut item = bare_item(leak, Outcome::Forwarded, None);
            item.report.name = Some(call.name.clone());
            item.report.tool_label = tool_label(&call.name, self.enabled_tools);
            item.report.arguments = Some(call.arguments.clone());
            return Ok(item);
        }
        if !self.enabled_tools.iter().any(|t| t == SAVE_MEMORY) {
            return self
                .refuse(
                    conn,
                    leak,
                    Some(call),
                    Outcome::ToolNotEnabled,
                    "save_memory is not enabled for this agent",
                    ordinal,
                )
                .await;
        }
        let memory = match MemoryArgs::parse(&call.arguments, self.config) {
            Ok(m) => m,
            Err(reason) => {
                return self
                    .refuse(conn, leak, Some(call), Outcome::InvalidArgs, reason, ordinal)
                    .await
            }
        };
        let Some(agent_id) = self.row.agent_id else {
            return Err(Error::Bug("save_memory run on a message without agent".into()));
        };
        let memory_id: i64 = sqlx::query_scalar(INSERT_MEMORY)
            .bind(agent_id)
            .bind(&memory.content)
            .bind(&memory.memory_type)
            .bind(memory.expires_at)
            .fetch_one(&mut *conn)
            .await?;
        let result = json!({
            "success": true,
            "memory_id": memory_id,
            "memory_type": memory.memory_type,
            "content": memory.content,
            "recovered": true,
        });
        let tool_call_id = self.tool_call_id(ordinal);
        let tool_message_id = self.tool_message(conn, &result, &tool_call_id).await?;
        let mut item = bare_item(leak, Outcome::Recovered, None);
        item.report.name = Some(call.name.clone());
        item.report.tool_label = SAVE_MEMORY.into();
        item.report.arguments = Some(call.arguments.clone());
        item.report.memory_id = Some(memory_id);
        item.report.tool_message_id = Some(tool_message_id);
        item.tool_call_id = Some(tool_call_id);
        Ok(item)
    }

    /// A save_memory that cannot run: a tool message records the error.
    async fn refuse(
        &self,
        conn: &mut PgConnection,
        leak: &Leak,
        call: Option<&Call>,
        outcome: Outcome,
        reason: &str,
        ordinal: usize,
    ) -> Result<Item, Error> {
        let tool_call_id = self.tool_call_id(ordinal);
        let result = json!({"success": false, "error": reason});
        let tool_message_id = self.tool_message(conn, &result, &tool_call_id).await?;
        let mut item = bare_item(leak, outcome, Some(SAVE_MEMORY));
        item.report.name = Some(SAVE_MEMORY.into());
        item.report.arguments = call.map(|c| c.arguments.clone());
        item.report.detail = Some(reason.to_string());
        item.report.tool_message_id = Some(tool_message_id);
        item.tool_call_id = Some(tool_call_id);
        Ok(item)
    }

    async fn tool_message(
        &self,
        conn: &mut PgConnection,
        result: &Value,
        tool_call_id: &str,
    ) -> Result<i64, Error> {
        let created_at = self.row.created_at - chrono::Duration::seconds(1);
        Ok(sqlx::query_scalar(INSERT_TOOL_MESSAGE)
            .bind(self.row.chat_id)
            .bind(self.row.agent_id)
            .bind(without_nul(result).to_string())
            .bind(tool_call_id)
            .bind(SAVE_MEMORY)
            .bind(created_at)
            .fetch_one(&mut *conn)
            .await?)
    }
}

fn bare_item(leak: &Leak, outcome: Outcome, tool: Option<&str>) -> Item {
    Item {
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
    }
}

fn stripped_call(leak: &Leak, call: &Call, enabled_tools: &[String]) -> Item {
    let mut item = bare_item(leak, Outcome::StrippedOnly, None);
    item.report.name = Some(call.name.clone());
    item.report.tool_label = tool_label(&call.name, enabled_tools);
    item.report.arguments = Some(call.arguments.clone());
    item
}

fn tool_label(name: &str, enabled_tools: &[String]) -> String {
    if name == SAVE_MEMORY || enabled_tools.iter().any(|t| t == name) {
        name.to_string()
    } else {
        "other".to_string()
    }
}

fn push_recovered_mark(tools_used: &mut Value) {
    match tools_used {
        Value::Array(a) => a.push(Value::String(RECOVERED_TOOL_MARK.into())),
        other => *other = json!([RECOVERED_TOOL_MARK]),
    }
}

fn string_entries(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The `recovery` object of a moderation message.
fn summary_of(outcome: Outcome, calls: &[CallReport], bytes_removed: usize) -> Value {
    let mut families: Vec<&str> = Vec::new();
    let mut outcomes: Vec<&str> = Vec::new();
    for c in calls {
        if !families.contains(&c.family.as_str()) {
            families.push(c.family.as_str());
        }
        if !outcomes.contains(&c.outcome.as_str()) {
            outcomes.push(c.outcome.as_str());
        }
    }
    let calls: Vec<Value> = calls
        .iter()
        .map(|c| {
            json!({
                "family": c.family.as_str(),
                "name": c.name,
                "arguments": c.arguments.as_ref().map(without_nul),
                "outcome": c.outcome.as_str(),
                "detail": c.detail,
            })
        })
        .collect();
    json!({
        "outcome": outcome.as_str(),
        "families": families,
        "calls": calls,
        "outcomes": outcomes,
        "bytes_removed": bytes_removed,
    })
}

/// PostgreSQL text and jsonb cannot hold NUL; a leaked argument may contain `\u0000`.
fn without_nul(v: &Value) -> Value {
    match v {
        Value::String(s) if s.contains('\0') => Value::String(s.replace('\0', "")),
        Value::Array(a) => Value::Array(a.iter().map(without_nul).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| (k.replace('\0', ""), without_nul(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// save_memory arguments that can be saved.
struct MemoryArgs {
    content: String,
    memory_type: String,
    expires_at: Option<DateTime<Utc>>,
}

impl MemoryArgs {
    fn parse(args: &Value, config: &Config) -> Result<MemoryArgs, &'static str> {
        let obj = args.as_object().ok_or("arguments are not an object")?;
        let content = obj
            .get("content")
            .and_then(Value::as_str)
            .map(|s| s.replace('\0', "").trim().to_string())
            .filter(|s| !s.is_empty())
            .ok_or("content is missing or blank")?;
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

/// `expires_around` as a timestamp: RFC 3339, a naive date-time (UTC), or a date
/// (midnight UTC). Anything else is no expiry.
fn parse_date(s: &str) -> Option<DateTime<Utc>> {
    let s = s.trim();
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

    #[test]
    fn parses_dates() {
        assert!(parse_date("2026-03-01").is_some());
        assert!(parse_date("2026-03-01T10:00:00Z").is_some());
        assert!(parse_date("next week").is_none());
    }

    #[test]
    fn validates_memory_args() {
        let c = Config::default();
        assert!(MemoryArgs::parse(&json!({"content": "x", "memory_type": "fact"}), &c).is_ok());
        assert!(MemoryArgs::parse(&json!({"content": " ", "memory_type": "fact"}), &c).is_err());
        assert!(MemoryArgs::parse(&json!({"content": "x", "memory_type": "nope"}), &c).is_err());
    }

    #[test]
    fn strips_nul() {
        assert_eq!(without_nul(&json!({"a": "x\u{0}y"})), json!({"a": "xy"}));
    }
}
