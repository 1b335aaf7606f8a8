//! `toolcall-recovery dead-letters`: the dead-letter queue as a command, what Sidekiq's dead
//! set is to its operators. `list` shows each dead letter's id, age, reason, event and
//! message id and replays, and takes nothing off the queue; `show ID` prints one with its
//! headers and body; `replay` sends dead letters (all, by reason, or by id) back to the input
//! exchange under their original routing key, each confirmed by the broker before its dead
//! letter is acked and counted in `x-tcr-replays`; `purge` deletes them after a
//! confirmation (`--yes` in scripts).
//!
//! How the queue is read and changed without losing a message is `queue`; what a dead
//! letter says is `letter`; the flags are `flags`; this file runs the actions and prints.
//!
//! May depend on: `publish` (the connection, the one confirmed publish), `settings`,
//! `error`, `event` (the lenient scan of a body), `lapin`, `chrono`, `tokio`.

mod flags;
mod letter;
mod queue;

pub use flags::{
    Action, Broker, DeadLettersArgs, ListArgs, PurgeArgs, ReplayArgs, Selection, ShowArgs,
};
pub use letter::{reasons, DeadLetter, REPLAYS_HEADER};

use crate::error::Error;
use chrono::{DateTime, Utc};
use queue::{Queue, Step};
use std::collections::BTreeMap;
use std::io::Write;

/// How an action ended, beyond an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// It did all it was asked.
    Done,
    /// Something asked for was not there (an id), or a purge was not confirmed: exit 3.
    Refused,
}

/// Runs the action, printing to `out`; a purge asks on stderr and reads stdin.
pub async fn run(args: &DeadLettersArgs, out: &mut (dyn Write + Send)) -> Result<Ended, Error> {
    let queue = Queue::open(args.broker()).await?;
    let result = match &args.action {
        Action::List(a) => list(&queue, a, out).await,
        Action::Show(a) => show(&queue, a, out).await,
        Action::Replay(a) => replay(&queue, a, out).await,
        Action::Purge(a) => purge(&queue, a, out).await,
    };
    queue.close().await;
    result
}

/// The columns `list` prints of one dead letter (no body: a long list holds no content).
struct Row {
    id: String,
    at: Option<DateTime<Utc>>,
    reason: String,
    message_id: Option<i64>,
    replays: u64,
    returns: u64,
    event_id: Option<String>,
    json: serde_json::Value,
}

async fn list(
    queue: &Queue,
    args: &ListArgs,
    out: &mut (dyn Write + Send),
) -> Result<Ended, Error> {
    let now = Utc::now();
    let total = queue.ready_count().await?;
    let mut rows = Vec::new();
    let mut keep = |d: &DeadLetter| {
        if args.reason.as_ref().is_none_or(|r| *r == d.reason) {
            rows.push(Row {
                id: d.id.clone(),
                at: d.dead_lettered_at,
                reason: d.reason.clone(),
                message_id: d.message_id,
                replays: d.replays,
                returns: d.returns,
                event_id: d.event_id.clone(),
                json: d.summary_json(now),
            });
        }
        Step::Keep
    };
    let looked = queue
        .walk(args.limit as usize, &mut keep, &mut |_| {})
        .await?
        .taken;
    rows.sort_by_key(|r| (r.at.is_none(), r.at));
    if args.json {
        for r in &rows {
            say(out, &r.json.to_string())?;
        }
        return Ok(Ended::Done);
    }
    if !rows.is_empty() {
        say(
            out,
            &format!(
                "{:<12}  {:>5}  {:<20}  {:>10}  {:>7}  EVENT",
                "ID", "AGE", "REASON", "MESSAGE", "REPLAYS"
            ),
        )?;
    }
    for r in &rows {
        let age = r.at.map_or("-".to_string(), |at| short_age(now - at));
        let message = r.message_id.map_or("-".to_string(), |m| m.to_string());
        let event = r.event_id.as_deref().unwrap_or("-");
        say(
            out,
            &format!(
                "{:<12}  {age:>5}  {:<20}  {message:>10}  {:>7}  {event}",
                r.id, r.reason, r.replays
            ),
        )?;
    }
    say(
        out,
        &list_summary(&rows, looked, total, queue.name(), args.reason.as_deref()),
    )?;
    if let Some(most) = rows.iter().map(|r| r.returns).max().filter(|n| *n >= 10) {
        // Only where it applies: the broker's version is read only now, when it matters.
        let version = queue.server_version().await;
        if let Some(note) = delivery_limit_note(version.as_deref(), most, queue.name()) {
            eprintln!("{note}");
        }
    }
    Ok(Ended::Done)
}

/// The broker's version as `list` reads it for its note (`connection.start`'s `version`),
/// or `None` when it cannot be read.
pub async fn broker_version(broker: &Broker) -> Result<Option<String>, Error> {
    let queue = Queue::open(broker).await?;
    let version = queue.server_version().await;
    queue.close().await;
    Ok(version)
}

/// The RabbitMQ versions whose quorum queues drop a message returned 20 times by default,
/// returns by `basic.nack` included: from 4.0 up to, not including, 4.3. `None` for a
/// version this does not read.
pub fn drops_returned_messages(version: &str) -> Option<bool> {
    let mut parts = version.trim().split(['.', '-', '+']);
    let major: u32 = parts.next()?.parse().ok()?;
    let minor: u32 = parts.next()?.parse().ok()?;
    Some(major == 4 && minor < 3)
}

/// The note `list` writes on stderr when a dead letter was handed out and given back
/// `most` times: on a broker that drops such messages (RabbitMQ 4.0 to 4.2), or one whose
/// version could not be read; none on another version.
fn delivery_limit_note(version: Option<&str>, most: u64, queue: &str) -> Option<String> {
    let on = match version.map(|v| (v, drops_returned_messages(v))) {
        Some((_, Some(false))) => return None,
        Some((v, Some(true))) => format!("this broker is RabbitMQ {v}"),
        Some((v, None)) => format!("the broker's version {v:?} is not one this reads"),
        None => "the broker's version could not be read".to_string(),
    };
    Some(format!(
        "note: a dead letter was handed out and given back {most} times (x-delivery-count): \
         looking at the queue counts too. RabbitMQ 4.0 to 4.2 drop a quorum queue's message \
         after 20 by default, and {on}; lift the limit with a policy on {queue} \
         (docs/operations.md, Dead letters)"
    ))
}

/// `12 dead letters in toolcall-recovery.dead: 10 missing_message, 2 malformed_json`.
fn list_summary(
    rows: &[Row],
    looked: usize,
    total: u32,
    queue: &str,
    reason: Option<&str>,
) -> String {
    if total == 0 {
        return format!("no dead letters in {queue}");
    }
    let mut by_reason: BTreeMap<&str, usize> = BTreeMap::new();
    for r in rows {
        *by_reason.entry(r.reason.as_str()).or_default() += 1;
    }
    let mut by_reason: Vec<(&str, usize)> = by_reason.into_iter().collect();
    by_reason.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let reasons: Vec<String> = by_reason.iter().map(|(r, n)| format!("{n} {r}")).collect();
    let mut s = format!("{total} dead letter(s) in {queue}");
    if looked < total as usize {
        s.push_str(&format!("; looked at the first {looked} (--limit)"));
    }
    match reason {
        Some(r) => s.push_str(&format!("; {} with reason {r}", rows.len())),
        None if !reasons.is_empty() => s.push_str(&format!(": {}", reasons.join(", "))),
        None => {}
    }
    s
}

async fn show(
    queue: &Queue,
    args: &ShowArgs,
    out: &mut (dyn Write + Send),
) -> Result<Ended, Error> {
    let mut found: Option<DeadLetter> = None;
    let mut find = |d: &DeadLetter| {
        if d.is(&args.id) {
            found = Some(d.clone());
            Step::KeepAndStop
        } else {
            Step::Keep
        }
    };
    queue.walk(usize::MAX, &mut find, &mut |_| {}).await?;
    let Some(d) = found else {
        say(
            out,
            &format!("no dead letter {} in {}", args.id, queue.name()),
        )?;
        return Ok(Ended::Refused);
    };
    let now = Utc::now();
    if args.json {
        let full = d.full_json(now).map_err(|e| Error::Bug(e.to_string()))?;
        say(out, &full)?;
        return Ok(Ended::Done);
    }
    let or_dash = |s: Option<String>| s.unwrap_or_else(|| "-".to_string());
    let at = d
        .dead_lettered_at
        .map(|at| format!("{} ({} ago)", at.to_rfc3339(), short_age(now - at)));
    let lines = [
        format!("dead letter {} in {}", d.id, queue.name()),
        format!("reason:         {}", d.reason),
        format!("error:          {}", or_dash(d.error.clone())),
        format!("event id:       {}", or_dash(d.event_id.clone())),
        format!(
            "message id:     {}",
            or_dash(d.message_id.map(|m| m.to_string()))
        ),
        format!("dead-lettered:  {}", or_dash(at)),
        format!("routing key:    {}", or_dash(d.routing_key.clone())),
        format!("replays:        {}", d.replays),
        "headers:".to_string(),
    ];
    for l in lines {
        say(out, &l)?;
    }
    if let serde_json::Value::Object(headers) = letter::table_json(&d.headers) {
        for (name, value) in headers {
            say(out, &format!("  {name}: {value}"))?;
        }
    }
    // The body as received, byte for byte: never parsed and written again.
    let (body, utf8) = d.body_text();
    if utf8 {
        say(out, &format!("body ({} bytes, as received):", d.body.len()))?;
    } else {
        say(
            out,
            &format!(
                "body ({} bytes, not UTF-8: shown with each invalid byte sequence as U+FFFD):",
                d.body.len()
            ),
        )?;
    }
    say(out, &body)?;
    Ok(Ended::Done)
}

async fn replay(
    queue: &Queue,
    args: &ReplayArgs,
    out: &mut (dyn Write + Send),
) -> Result<Ended, Error> {
    let names = &args.broker.names;
    let mut replayed = 0usize;
    let mut seen = Vec::new();
    let mut printed: Result<(), Error> = Ok(());
    let mut select = |d: &DeadLetter| {
        if args.selection.takes(d) {
            seen.push(d.id.clone());
            seen.extend(d.event_id.clone());
            Step::Replay
        } else {
            Step::Keep
        }
    };
    let mut done = |d: &DeadLetter| {
        replayed += 1;
        let line = format!(
            "replayed {} ({}, message {}, event {}) to {} / {}: replay {}",
            d.id,
            d.reason,
            d.message_id.map_or("-".to_string(), |m| m.to_string()),
            d.event_id.as_deref().unwrap_or("-"),
            names.input_exchange,
            d.routing_key.as_deref().unwrap_or(&names.input_routing_key),
            d.replays + 1
        );
        if printed.is_ok() {
            printed = say(out, &line);
        }
    };
    let walked = queue.walk(usize::MAX, &mut select, &mut done).await;
    let mut summary = format!(
        "replayed {replayed} dead letter(s) ({}) to {}",
        args.selection.describe(),
        names.input_exchange
    );
    match &walked {
        Ok(w) => summary.push_str(&format!("; left {} other(s) in {}", w.kept, queue.name())),
        Err(_) => summary.push_str("; stopped by the error below, the rest stay dead letters"),
    }
    say(out, &summary)?;
    walked?;
    printed?;
    not_found(out, &args.selection, &seen)
}

async fn purge(
    queue: &Queue,
    args: &PurgeArgs,
    out: &mut (dyn Write + Send),
) -> Result<Ended, Error> {
    // The selected dead letters stay taken while the operator reads the question, so what is
    // deleted is exactly what was counted, and nothing that arrives meanwhile.
    let mut by_reason: BTreeMap<String, usize> = BTreeMap::new();
    let mut seen = Vec::new();
    let mut select = |d: &DeadLetter| {
        if args.selection.takes(d) {
            *by_reason.entry(d.reason.clone()).or_default() += 1;
            seen.push(d.id.clone());
            seen.extend(d.event_id.clone());
            Step::Hold
        } else {
            Step::Keep
        }
    };
    let held = queue.walk(usize::MAX, &mut select, &mut |_| {}).await?.held;
    if held.is_empty() {
        say(
            out,
            &format!(
                "no dead letters in {} match ({}): nothing purged",
                queue.name(),
                args.selection.describe()
            ),
        )?;
        return not_found(out, &args.selection, &seen);
    }
    let reasons: Vec<String> = by_reason.iter().map(|(r, n)| format!("{n} {r}")).collect();
    let question = format!(
        "Delete {} dead letter(s) ({}) from {} for good? They cannot be replayed afterwards. \
         Type yes to confirm: ",
        held.len(),
        reasons.join(", "),
        queue.name()
    );
    let yes = args.yes || confirmed(question).await;
    queue.settle(&held, yes).await?;
    if !yes {
        say(
            out,
            "not confirmed: nothing purged (--yes to purge without asking)",
        )?;
        return Ok(Ended::Refused);
    }
    say(
        out,
        &format!("purged {} dead letter(s) from {}", held.len(), queue.name()),
    )?;
    not_found(out, &args.selection, &seen)
}

/// Says which ids given were not found: exit 3 then.
fn not_found(
    out: &mut (dyn Write + Send),
    selection: &Selection,
    seen: &[String],
) -> Result<Ended, Error> {
    let missing = selection.missing(seen);
    if missing.is_empty() {
        return Ok(Ended::Done);
    }
    say(out, &format!("not found: {}", missing.join(", ")))?;
    Ok(Ended::Refused)
}

/// Asks on stderr and reads one line from stdin (off the runtime's threads): `yes` or `y`
/// confirms; anything else, or no terminal answering, does not.
async fn confirmed(question: String) -> bool {
    tokio::task::spawn_blocking(move || {
        eprint!("{question}");
        let _ = std::io::stderr().flush();
        let mut answer = String::new();
        match std::io::stdin().read_line(&mut answer) {
            Ok(_) => matches!(answer.trim().to_ascii_lowercase().as_str(), "yes" | "y"),
            Err(_) => false,
        }
    })
    .await
    .unwrap_or(false)
}

/// `45s`, `12m`, `3h`, `2d`.
fn short_age(age: chrono::TimeDelta) -> String {
    let s = age.num_seconds().max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

fn say(out: &mut (dyn Write + Send), line: &str) -> Result<(), Error> {
    writeln!(out, "{line}").map_err(Error::Output)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 32, item 4: the 4.0-4.2 note only where it applies.
    #[test]
    fn the_delivery_limit_note_only_on_the_versions_it_is_about() {
        for (version, drops) in [
            ("3.10.8", Some(false)),
            ("3.13.7", Some(false)),
            ("4.0.0", Some(true)),
            ("4.1.4", Some(true)),
            ("4.2.0-rc.1", Some(true)),
            ("4.3.0", Some(false)),
            ("5.0.1", Some(false)),
            ("4", None),
            ("", None),
            ("x.y", None),
        ] {
            assert_eq!(drops_returned_messages(version), drops, "{version}");
        }
        assert_eq!(delivery_limit_note(Some("3.10.8"), 12, "q"), None);
        assert_eq!(delivery_limit_note(Some("4.3.1"), 12, "q"), None);
        let note = delivery_limit_note(Some("4.1.4"), 12, "q").expect("4.1 drops them");
        assert!(
            note.contains("given back 12 times") && note.contains("this broker is RabbitMQ 4.1.4"),
            "{note}"
        );
        let note = delivery_limit_note(None, 10, "q").expect("unknown: said");
        assert!(note.contains("could not be read"), "{note}");
    }

    #[test]
    fn ages_read_at_a_glance() {
        let age = |s| short_age(chrono::TimeDelta::seconds(s));
        assert_eq!(
            [age(-3), age(45), age(125), age(7300), age(200_000)],
            ["0s", "45s", "2m", "2h", "2d"]
        );
    }

    #[test]
    fn the_summary_counts_by_reason_and_says_when_it_looked_at_fewer() {
        let row = |reason: &str| Row {
            id: String::new(),
            at: None,
            reason: reason.to_string(),
            message_id: None,
            replays: 0,
            returns: 0,
            event_id: None,
            json: serde_json::Value::Null,
        };
        let rows = [
            row("malformed_json"),
            row("missing_message"),
            row("missing_message"),
        ];
        assert_eq!(
            list_summary(&rows, 3, 3, "q", None),
            "3 dead letter(s) in q: 2 missing_message, 1 malformed_json"
        );
        assert_eq!(
            list_summary(&rows[1..], 3, 5, "q", Some("missing_message")),
            "5 dead letter(s) in q; looked at the first 3 (--limit); 2 with reason missing_message"
        );
        assert_eq!(list_summary(&[], 0, 0, "q", None), "no dead letters in q");
    }
}
