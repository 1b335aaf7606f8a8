//! The ledger's filters as flags (all but `--message`), and the parsing of their values:
//! one definition for the commands that select ledger rows, `ledger` (which to list) and
//! `revert` (which messages to revert), so both read a filter the same way.
//!
//! May depend on: `settings` (the model list, family names), `recover` (the outcome and
//! mode labels), `clap`, `chrono`.

use super::{Filter, ModelFilter};
use crate::recover::{Mode, Outcome};
use crate::settings::{parse_family, ModelSettings};
use chrono::{DateTime, NaiveDate, TimeDelta, Utc};
use toolcall_detect::Family;

/// The ledger's filters as flags, but for `--message`.
#[derive(Debug, Clone, clap::Args)]
pub struct FilterArgs {
    /// Only the recoveries of messages in this chat.
    #[arg(long = "chat", value_name = "ID")]
    pub chat_id: Option<i64>,

    /// Only recoveries with a leak of this family (`hermes`, `result_prefix`, ...).
    #[arg(long, value_name = "NAME", value_parser = parse_family)]
    pub family: Option<Family>,

    /// Only recoveries whose outcome, or the outcome of one of whose calls, is this
    /// (`recovered`, `forwarded`, `needs_review`, ...).
    #[arg(long, value_name = "LABEL", value_parser = parse_outcome)]
    pub outcome: Option<Outcome>,

    /// Only passes of this mode (`observe`: recorded what it would do, changed nothing).
    #[arg(long, value_enum)]
    pub mode: Option<Mode>,

    /// Only messages written by this model: a model id as the events carried it
    /// (`models/gemini-2.5-flash`, any case), or a `model` label of the metrics under
    /// `--models` (`gemini-2.5-flash`, `other`; `unknown`: no model recorded).
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,

    /// The model list `--model` labels with (as the worker's).
    #[command(flatten)]
    pub models: ModelSettings,

    /// Only recoveries written at or after this time: RFC 3339 (`2026-11-22T10:00:00Z`),
    /// a UTC date (`2026-11-22`) or an age (`30m`, `12h`, `7d`; also `s`, `w`).
    #[arg(long, value_name = "WHEN", value_parser = parse_since_now)]
    pub since: Option<DateTime<Utc>>,

    /// Only recoveries written before this time (as `--since`: `2026-11-23` is before
    /// that day, `1h` before an hour ago).
    #[arg(long, value_name = "WHEN", value_parser = parse_since_now)]
    pub until: Option<DateTime<Utc>>,
}

impl FilterArgs {
    /// The filter these flags ask for, of one message or of all, at most `limit` rows.
    pub fn filter(&self, message_id: Option<i64>, limit: u32) -> Filter {
        Filter {
            message_id,
            chat_id: self.chat_id,
            family: self.family,
            outcome: self.outcome,
            mode: self.mode,
            model: self.model.as_ref().map(|name| ModelFilter {
                name: name.clone(),
                models: self.models.models.clone(),
            }),
            since: self.since,
            until: self.until,
            before_id: None,
            latest_only: false,
            limit,
        }
    }

    /// Whether any filter is given.
    pub fn any(&self) -> bool {
        self.chat_id.is_some()
            || self.family.is_some()
            || self.outcome.is_some()
            || self.mode.is_some()
            || self.model.is_some()
            || self.since.is_some()
            || self.until.is_some()
    }
}

/// `--outcome`: an outcome label of the ledger.
pub fn parse_outcome(s: &str) -> Result<Outcome, String> {
    let s = s.trim();
    Outcome::ALL
        .into_iter()
        .find(|o| o.as_str() == s)
        .ok_or_else(|| {
            let labels: Vec<&str> = Outcome::ALL.iter().map(|o| o.as_str()).collect();
            format!("unknown outcome {s:?}; valid: {}", labels.join(", "))
        })
}

fn parse_since_now(s: &str) -> Result<DateTime<Utc>, String> {
    parse_since(s, Utc::now())
}

/// `--since`: RFC 3339 (`2026-11-22T10:00:00Z`, any offset), a date (`2026-11-22`,
/// midnight UTC) or an age before `now`: a whole number and a unit, `s`, `m`, `h`, `d`
/// or `w` (`30m`, `12h`, `7d`).
pub fn parse_since(s: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
    let s = s.trim();
    let bad = || {
        format!(
            "{s:?} is not a time: use RFC 3339 (2026-11-22T10:00:00Z), a date (2026-11-22) \
             or an age (30m, 12h, 7d)"
        )
    };
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&Utc));
    }
    if let Ok(d) = NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        return Ok(d.and_time(chrono::NaiveTime::MIN).and_utc());
    }
    let Some(unit) = s.chars().last() else {
        return Err(bad());
    };
    let seconds_per: i64 = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3_600,
        'd' => 86_400,
        'w' => 604_800,
        _ => return Err(bad()),
    };
    let digits = &s[..s.len() - unit.len_utf8()];
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let too_far = || format!("{s:?} is too far back");
    let n: i64 = digits.parse().map_err(|_| too_far())?;
    let age = n
        .checked_mul(seconds_per)
        .and_then(TimeDelta::try_seconds)
        .ok_or_else(too_far)?;
    now.checked_sub_signed(age).ok_or_else(too_far)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 22, 10, 0, 0)
            .single()
            .unwrap()
    }

    #[test]
    fn since_accepts_rfc3339_dates_and_ages() {
        let at = |y, mo, d, h, mi, s| Utc.with_ymd_and_hms(y, mo, d, h, mi, s).single().unwrap();
        assert_eq!(
            parse_since("2026-11-20T08:30:00Z", now()),
            Ok(at(2026, 11, 20, 8, 30, 0))
        );
        assert_eq!(
            parse_since("2026-11-20T10:30:00+02:00", now()),
            Ok(at(2026, 11, 20, 8, 30, 0))
        );
        assert_eq!(
            parse_since("2026-11-20", now()),
            Ok(at(2026, 11, 20, 0, 0, 0))
        );
        assert_eq!(parse_since("30m", now()), Ok(at(2026, 11, 22, 9, 30, 0)));
        assert_eq!(parse_since("12h", now()), Ok(at(2026, 11, 21, 22, 0, 0)));
        assert_eq!(parse_since("7d", now()), Ok(at(2026, 11, 15, 10, 0, 0)));
        assert_eq!(parse_since("2w", now()), Ok(at(2026, 11, 8, 10, 0, 0)));
        assert_eq!(parse_since("45s", now()), Ok(at(2026, 11, 22, 9, 59, 15)));
        assert_eq!(parse_since(" 0d ", now()), Ok(now()));
    }

    #[test]
    fn since_refuses_other_values_clearly() {
        for bad in [
            "",
            "d",
            "7",
            "7x",
            "-7d",
            "+7d",
            "7 d",
            "1.5h",
            "yesterday",
            "2026-13-01",
            "2026-11-22 10:00",
            "7д",
            "1e3d",
        ] {
            let err = parse_since(bad, now()).expect_err(bad);
            assert!(
                err.contains("is not a time") && err.contains("RFC 3339"),
                "{bad}: {err}"
            );
        }
        let err = parse_since("99999999999999999d", now()).expect_err("overflow");
        assert!(err.contains("too far back"), "{err}");
        let err = parse_since("9999999999999999999999s", now()).expect_err("overflow");
        assert!(err.contains("too far back"), "{err}");
    }

    #[test]
    fn family_and_outcome_errors_list_the_valid_names() {
        assert_eq!(parse_family("hermes"), Ok(Family::Hermes));
        let err = parse_family("hermez").unwrap_err();
        assert!(err.contains("hermez") && err.contains("hermes") && err.contains("result_prefix"));
        assert_eq!(parse_outcome("forwarded"), Ok(Outcome::Forwarded));
        let err = parse_outcome("recoverd").unwrap_err();
        assert!(
            err.contains("needs_review") && err.contains("already_recovered"),
            "{err}"
        );
    }
}
