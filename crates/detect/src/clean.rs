//! Cleaning: the message with its leaked spans cut out, and the seams those cuts leave
//! where both sides had spaces keeping one side's. Everything else around a cut stays as it
//! was: line breaks included, as a parser that only cuts would leave them.
//! The one-shot `detect` and, through it, the stream's final text both come from here.
//!
//! May depend on: `config`, `types`. No I/O.

use crate::config::Config;
use crate::types::{Family, Leak};

/// Cuts the leaked spans out. A message that is nothing but a result object stays as it
/// is unless the policy says otherwise (it is recorded for review instead).
pub(crate) fn clean(text: &str, leaks: &[Leak], config: &Config) -> Option<String> {
    let removable = |l: &Leak| l.family != Family::ResultOnly || config.result_only_recover;
    if !leaks.iter().any(removable) {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for leak in leaks.iter().filter(|l| removable(l)) {
        // Spans were checked to be on char boundaries in `detect`, so `get` always succeeds.
        push_at_seam(&mut out, text.get(at..leak.span.start).unwrap_or_default());
        at = leak.span.end;
    }
    push_at_seam(&mut out, text.get(at..).unwrap_or_default());
    // The text's own indent stays unless the first removal reaches it (a streamed reply's
    // first line, shown with its indent before the leak came, is then the cleaned text's
    // first line too); what a removal leaves at the end goes.
    let first = leaks
        .iter()
        .find(|l| removable(l))
        .map_or(0, |l| l.span.start);
    let cleaned = match text.get(..first).is_some_and(|h| h.trim().is_empty()) {
        true => out.trim(),
        false => out.trim_end(),
    };
    Some(cleaned.to_string())
}

/// Appends the text after a removed span: where both sides of the seam had spaces
/// (`that. <call> Anything`), one side's spaces are enough, not both (`that.  Anything`).
fn push_at_seam(out: &mut String, next: &str) {
    let next = match out.ends_with([' ', '\t']) {
        true => next.trim_start_matches([' ', '\t']),
        false => next,
    };
    out.push_str(next);
}

#[cfg(test)]
mod seam_tests {
    use crate::families::testing::detect_with;

    #[test]
    fn the_texts_own_indent_stays_unless_the_first_removal_reaches_it() {
        let call = "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>";
        let clean = |t: String| detect_with(&t, &["f"]).cleaned;
        assert_eq!(
            clean(format!("  Hi. {call} Bye.\n")).as_deref(),
            Some("  Hi. Bye.")
        );
        assert_eq!(clean(format!("\n{call}\nBye.\n")).as_deref(), Some("Bye."));
        assert_eq!(clean(format!(" Hi.\n{call}\n\n")).as_deref(), Some(" Hi."));
    }

    #[test]
    fn a_removal_seam_keeps_one_sides_spaces_not_both() {
        let t =
            "Got that. <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call> Anything else?";
        assert_eq!(
            detect_with(t, &["f"]).cleaned.as_deref(),
            Some("Got that. Anything else?")
        );
        // A line break on one side is what that side had.
        let t = "Got that.\n<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call> Next.";
        assert_eq!(
            detect_with(t, &["f"]).cleaned.as_deref(),
            Some("Got that.\n Next.")
        );
    }
}
