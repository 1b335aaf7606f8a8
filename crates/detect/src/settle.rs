//! What of the detectors' leaks stands, before they are extended and cut: the markup
//! net's readings settled against the exact ones, leaks in reasoning or code dropped, markup
//! shown rather than made (a template's placeholder, an introduced example) dropped, and of
//! overlapping leaks the first kept. Each drop has a reason, for `scan --explain`.
//!
//! May depend on: the crate root (`Ctx`), `code`, `families` (which families are code),
//! `grammar`, `trace`, `types`. No I/O.

use crate::trace::{Note, Verdict};
use crate::types::{Call, Family, Leak};
use crate::{code, families, grammar, Ctx};

/// Settles what the markup net (`families::markup`) read against the exact readings of the
/// table and the own finders: the formats' own grammars decide the calls. Where an exact
/// reading found the same calls inside a net leak (a call object inside a tag the format
/// does not know), the net's span says how far the markup goes and the exact calls stay;
/// where the exact readings found only some of the net's calls, each equal to the net's,
/// the net's calls stand; any other overlap drops the net's leak.
pub(crate) fn shadow_the_net(leaks: &mut Vec<Leak>) {
    if leaks.iter().all(|l| l.family != Family::Markup) {
        return;
    }
    let (net, mut exact): (Vec<Leak>, Vec<Leak>) =
        leaks.drain(..).partition(|l| l.family == Family::Markup);
    for mut n in net {
        let overlaps = |e: &Leak| e.span.start < n.span.end && n.span.start < e.span.end;
        if !exact.iter().any(overlaps) {
            leaks.push(n);
            continue;
        }
        // Two rows of one format may read the same call: it is one call.
        let mut inside: Vec<&Leak> = exact.iter().filter(|e| overlaps(e)).collect();
        inside.sort_by_key(|e| (e.span.start, e.span.end));
        inside.dedup_by(|a, b| a.span == b.span && a.calls == b.calls);
        let contained = inside
            .iter()
            .all(|e| n.span.start <= e.span.start && e.span.end <= n.span.end);
        let names = |calls: &mut dyn Iterator<Item = &Call>| -> Vec<String> {
            calls.map(|c| c.name.clone()).collect()
        };
        let same =
            names(&mut inside.iter().flat_map(|e| e.calls.iter())) == names(&mut n.calls.iter());
        // The exact readings took only some of the net's calls, each as the net read it
        // (a bare call read after its broken section's first calls were declined): the net
        // read the whole wrapper, and its calls stand.
        let part = (!same).then(|| net_with_exact(&n.calls, &inside)).flatten();
        if contained && (same || part.is_some()) && inside.iter().all(|e| e.results.is_empty()) {
            n.calls = match part {
                Some(calls) => calls,
                None => inside
                    .iter()
                    .flat_map(|e| e.calls.iter().cloned())
                    .collect(),
            };
            n.family = inside.first().map_or(n.family, |e| e.family);
            exact.retain(|e| !(n.span.start <= e.span.start && e.span.end <= n.span.end));
            leaks.push(n);
        }
    }
    leaks.append(&mut exact);
}

/// The net's calls, when the exact readings' calls are some of them, in order, each equal
/// to the net's.
fn net_with_exact(net: &[Call], inside: &[&Leak]) -> Option<Vec<Call>> {
    let mut rest = net.iter();
    let mut exact = inside.iter().flat_map(|e| e.calls.iter());
    exact.all(|c| rest.any(|m| m == c)).then(|| net.to_vec())
}

/// Why the driver drops a leak a detector read, if it does: it lies in reasoning or (for
/// a family whose markup is not itself code) in code, or its span is not on characters.
pub(crate) fn dropped(
    text: &str,
    l: &Leak,
    code: &code::CodeRegions,
    reasoning: &code::Reasoning,
) -> Option<&'static str> {
    if l.span.start >= l.span.end
        || !text.is_char_boundary(l.span.start)
        || !text.is_char_boundary(l.span.end)
    {
        Some("its span is empty or cuts a character")
    } else if reasoning.contains(l.span.start) {
        Some("it starts inside closed reasoning (<think>)")
    } else if !families::allowed_in_code(l.family) && code.contains(l.span.start) {
        Some("it starts inside code")
    } else {
        None
    }
}

/// Why a leak is markup shown rather than a call made, if it is: every call names a
/// template's placeholder for a tool (`tool_name`, `name`, `your_function`) that the agent
/// has not enabled, or it opens its line under one that introduces an example (`e.g.:`)
/// and the text goes on after it (a leak ends the reply's turn; an example sits inside an
/// explanation).
#[cold]
#[inline(never)]
pub(crate) fn shown(text: &str, l: &Leak, ctx: &Ctx<'_>) -> Option<&'static str> {
    if l.calls.is_empty() {
        return None;
    }
    let placeholder = |name: &str| {
        let folded = grammar::markup::fold(name);
        let bare = ["your", "my", "example", "some", "the"]
            .iter()
            .find_map(|p| folded.strip_prefix(p))
            .unwrap_or(&folded);
        grammar::keys::is_name_key(bare) && !ctx.tool_enabled(name)
    };
    if l.calls.iter().all(|c| placeholder(&c.name)) {
        return Some("it calls a template's placeholder for a tool's name, a tool not enabled");
    }
    // The markup opens its own line under a line that ends in a colon and names an example
    // (`e.g.:`, `For example:`), and more text follows it.
    let head = text[..l.span.start].trim_end_matches([' ', '\t']);
    let above = head.trim_end();
    let introduced = (head.is_empty() || head.ends_with('\n')) && above.ends_with(':');
    let goes_on = !text[l.span.end..].trim().is_empty();
    (introduced && goes_on && grammar::text::after_example(text, l.span.start))
        .then_some("a line above calls it an example, and the text goes on after it")
}

pub(crate) fn dropped_note(l: &Leak, why: &str) -> Note {
    Note {
        detector: "detect",
        family: l.family,
        span: l.span.clone(),
        verdict: Verdict::Dropped(why.to_string()),
    }
}

/// Orders leaks by position and keeps, of overlapping ones, the one that starts first
/// (the longer one when they start together): a family parser may claim markup that a
/// more general one also matches. Returns the kept leaks and the dropped ones.
pub(crate) fn drop_overlaps(mut leaks: Vec<Leak>) -> (Vec<Leak>, Vec<Leak>) {
    leaks.sort_by(|a, b| {
        a.span
            .start
            .cmp(&b.span.start)
            .then(b.span.end.cmp(&a.span.end))
    });
    let mut out: Vec<Leak> = Vec::with_capacity(leaks.len());
    let mut overlapped = Vec::new();
    for leak in leaks {
        match out.last() {
            Some(prev) if leak.span.start < prev.span.end => overlapped.push(leak),
            _ => out.push(leak),
        }
    }
    (out, overlapped)
}
