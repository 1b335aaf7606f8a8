//! The hot path: one pass over the bytes that tells which detectors (and so which
//! families) could possibly have a leak in this text. Most messages contain none of the
//! markers and end here; the others run only the detectors whose markers they hold.
//!
//! Each detector (a table row or a family's own finder) names literal markers and the bytes
//! a leak may start the message with. Every marker contains one of the anchor bytes `<`, `[`, `{`
//! (checked by a test: `json_fence`'s ```` ```json ```` and `react`'s `Action Input` are
//! confirmed by their probes at the brace of the object their leaks always hold), so the
//! scan is a SIMD `memchr3` over those three bytes, and only at a hit are the markers
//! anchored at that byte compared. A message of plain prose costs that one scan.
//!
//! May depend on: `crate::families` (the registry), `crate::grammar::text` (a front end's
//! glyph), `crate::types`. Nothing else.

use crate::families::{detectors, LinesCheck, Probe};
#[cfg(test)]
use crate::types::Family;
use std::sync::OnceLock;

/// The bytes every marker is anchored on.
const ANCHORS: [u8; 3] = [b'<', b'[', b'{'];

/// A set of families, as a bit mask over [`Family::ALL`] (what the tests read).
#[cfg(test)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FamilySet(u64);

#[cfg(test)]
impl FamilySet {
    /// Adds a family.
    pub fn insert(&mut self, f: Family) {
        self.0 |= bit(f);
    }
    /// Whether the family is in the set.
    pub fn contains(self, f: Family) -> bool {
        self.0 & bit(f) != 0
    }
    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

/// A set of detectors, as a bit mask over their indices in [`detectors()`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DetectorSet(u64);

impl DetectorSet {
    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether a detector that reads markup tokens is in the set: a row of the format table
    /// or the markup net. Only then may a token be spelled another way (`crate::respell`):
    /// a respelled token still wakes the net (a call word in its name, or a bar) or stands
    /// beside a row's own.
    pub fn reads_tokens(self) -> bool {
        static MASK: OnceLock<u64> = OnceLock::new();
        let mask = MASK.get_or_init(|| {
            detectors()
                .iter()
                .enumerate()
                .filter(|(_, d)| {
                    matches!(d, crate::families::Detector::Row(_))
                        || d.family() == crate::types::Family::Markup
                })
                .fold(0, |m, (i, _)| m | 1u64 << i)
        });
        self.0 & mask != 0
    }

    /// The detectors' indices, in ascending order.
    pub fn iter(self) -> impl Iterator<Item = usize> {
        let mut bits = self.0;
        std::iter::from_fn(move || {
            (bits != 0).then(|| {
                let i = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                i
            })
        })
    }
}

#[cfg(test)]
fn bit(f: Family) -> u64 {
    // `Family::ALL` has fewer than 64 entries (checked by a test), so the shift is in range.
    1u64 << (f as u32)
}

/// A marker split at its anchor byte: `before` must precede the hit, `from` starts at it.
struct Anchored {
    before: &'static [u8],
    from: &'static [u8],
    /// The first (up to eight) bytes of `from` as a little-endian word, and the mask of
    /// those bytes: one compare rejects a hit that shares only the first bytes (`{\n  `
    /// opens most indented code as well as `{\n  "name"`), where a slice compare is a call.
    head: u64,
    head_mask: u64,
    detectors: DetectorSet,
    /// Confirms a hit on a bare anchor byte (see `families::OwnFinder::probe`).
    probe: Option<Probe>,
}

impl Anchored {
    fn new(before: &'static [u8], from: &'static [u8], detectors: DetectorSet) -> Anchored {
        let n = from.len().min(8);
        Anchored {
            before,
            from,
            head: word(from),
            head_mask: if n == 8 {
                u64::MAX
            } else {
                (1u64 << (8 * n)) - 1
            },
            detectors,
            probe: None,
        }
    }

    /// Whether the marker stands at the hit: `rest` starts at the anchor byte, whose first
    /// eight bytes are `w` ([`word`]), and `head` is the text before it.
    #[inline]
    fn at(&self, w: u64, rest: &[u8], head: &[u8]) -> bool {
        w & self.head_mask == self.head
            && (self.from.len() <= 8 || rest.starts_with(self.from))
            && (self.before.is_empty() || head.ends_with(self.before))
    }
}

/// The first eight bytes of `b` as a little-endian word, zeros past its end (no marker holds
/// a zero byte, so a marker longer than what is left never matches the padding).
#[inline]
fn word(b: &[u8]) -> u64 {
    // Eight bytes are one load; only a hit near the end pays a copy (a call to memcpy).
    match b.first_chunk::<8>() {
        Some(w) => u64::from_le_bytes(*w),
        None => {
            let mut w = [0u8; 8];
            let n = b.len().min(8);
            w[..n].copy_from_slice(&b[..n]);
            u64::from_le_bytes(w)
        }
    }
}

/// A hit's next byte may go on a bare anchor's markup: its probes are asked.
const NEXT_PROBES: u8 = 1;
/// Some marker has the hit's next byte after its anchor: the markers are compared.
const NEXT_MARKERS: u8 = 2;

struct Tables {
    /// Per anchor byte (in `ANCHORS` order) and per byte after it, the markers that start
    /// with those two bytes: a hit compares only the few markers its next byte allows, and
    /// most hits in prose (`3 < 5`, `[1]`, `{x}`, `<table>`) compare none.
    by_next: [Vec<Vec<Anchored>>; 3],
    /// Per anchor byte, the detectors whose marker is that byte alone, each with the probe
    /// that confirms it.
    bare: [Vec<(Probe, DetectorSet)>; 3],
    /// Per anchor byte, markers that end with it (`functools[`): compared at every hit,
    /// before the second-byte reject.
    ending: [Vec<Anchored>; 3],
    /// Per anchor byte and byte after it, what a hit asks ([`NEXT_PROBES`],
    /// [`NEXT_MARKERS`]; none: the one-load reject of most hits). A bare anchor's probe
    /// wants a name or an object's start after it, so for it only letters (of any script: a
    /// UTF-8 lead byte), `_`, quotes, `}` and whitespace pass (see [`bare_next`]); markers
    /// are compared only for a byte that some marker has after the anchor.
    next: [[u8; 256]; 3],
    /// Detectors per first non-whitespace byte.
    at_start: [DetectorSet; 256],
    /// Detectors whose first byte a probe confirms, by that byte.
    at_start_probed: [Option<(Probe, DetectorSet)>; 256],
    /// The checks for markup with no anchor byte, each run once per message (few
    /// detectors have one; checked by a test).
    lines: Vec<(LinesCheck, DetectorSet)>,
}

/// Whether byte `next` may follow a bare `anchor` in the markup its probe confirms: a name
/// (a letter of any script, `_`), a bar or a closer's `/` after `<` (an orphan `</invoke>`
/// is the one mark of a call whose opener was stripped), or the one space a tokenizer put
/// there (`< | DSML | invoke`); a name or a space after `[`; an object's start (a double
/// quote, a Gemini key, `}`, a space) after `{`.
fn bare_next(anchor: u8, next: u8) -> bool {
    let name = next.is_ascii_alphabetic() || next == b'_' || next >= 0xC2;
    match anchor {
        b'<' => name || matches!(next, b'|' | b'/' | b' '),
        b'[' => name || next.is_ascii_whitespace(),
        _ => name || next.is_ascii_whitespace() || matches!(next, b'"' | b'}' | b'\''),
    }
}

/// Adds a marker, or its families to the same marker of another family.
fn add(list: &mut Vec<Anchored>, m: Anchored) {
    match list.iter_mut().find(|o| {
        o.before == m.before && o.from == m.from && o.probe.is_none() && m.probe.is_none()
    }) {
        Some(o) => o.detectors.0 |= m.detectors.0,
        None => list.push(m),
    }
}

fn tables() -> &'static Tables {
    static T: OnceLock<Tables> = OnceLock::new();
    T.get_or_init(|| {
        let mut t = Tables {
            by_next: std::array::from_fn(|_| (0..256).map(|_| Vec::new()).collect()),
            bare: Default::default(),
            ending: Default::default(),
            next: [[0; 256]; 3],
            at_start: [DetectorSet::default(); 256],
            at_start_probed: [None; 256],
            lines: Vec::new(),
        };
        for (index, det) in detectors().iter().enumerate() {
            let fam = DetectorSet(1u64 << index);
            for &trigger in det.triggers() {
                let bytes = trigger.as_bytes();
                // Every marker holds an anchor byte (a test checks it): one without would
                // need a search of the whole text of its own.
                let Some(i) = bytes.iter().position(|b| ANCHORS.contains(b)) else {
                    continue;
                };
                let slot = ANCHORS.iter().position(|&a| a == bytes[i]).unwrap_or(0);
                let m = Anchored {
                    probe: (bytes.len() == 1).then(|| det.probe()).flatten(),
                    ..Anchored::new(&bytes[..i], &bytes[i..], fam)
                };
                match bytes.get(i + 1) {
                    Some(&next) => {
                        t.next[slot][usize::from(next)] |= NEXT_MARKERS;
                        add(&mut t.by_next[slot][usize::from(next)], m);
                    }
                    None if i > 0 => add(&mut t.ending[slot], m),
                    None => {
                        for b in 0..=255u8 {
                            if bare_next(bytes[i], b) {
                                t.next[slot][usize::from(b)] |= NEXT_PROBES;
                            }
                        }
                        if let Some(p) = m.probe {
                            t.bare[slot].push((p, m.detectors));
                        }
                    }
                }
            }
            for &b in det.at_start() {
                match det.start() {
                    // One probe a byte (a test checks it).
                    Some(p) => t.at_start_probed[usize::from(b)] = Some((p, fam)),
                    None => t.at_start[usize::from(b)].0 |= fam.0,
                }
            }
            if let Some(check) = det.lines() {
                t.lines.push((check, fam));
            }
        }
        t
    })
}

/// The families whose markers occur in `text`.
#[cfg(test)]
pub fn scan(text: &str) -> FamilySet {
    let mut families = FamilySet::default();
    for i in scan_detectors(text).iter() {
        if let Some(det) = detectors().get(i) {
            families.insert(det.family());
        }
    }
    families
}

/// The detectors whose markers occur in `text`.
pub fn scan_detectors(text: &str) -> DetectorSet {
    let t = tables();
    let bytes = text.as_bytes();
    let mut seen = DetectorSet::default();
    // The first byte after leading whitespace (ASCII whitespace skipped as bytes; anything
    // else is the first byte, as `trim_start` would leave it for the markers below).
    let lead = bytes.iter().position(|b| !b.is_ascii_whitespace());
    // A front end's glyph opening the reply (`⏺ `) is read past, as detection reads it: the
    // look at the start and at the first line see what follows it.
    let (first, body) = match lead.map(|i| bytes[i]) {
        Some(b) if b >= 0x80 => {
            let body = crate::grammar::text::front_glyph(text).map_or(text, |p| &text[p..]);
            (body.trim_start().as_bytes().first().copied(), body)
        }
        b => (b, text),
    };
    if let Some(first) = first {
        seen.0 |= t.at_start[usize::from(first)].0;
        if let Some((probe, fams)) = t.at_start_probed[usize::from(first)] {
            let lead = body.len() - body.trim_start().len();
            if probe(body.as_bytes(), lead) {
                seen.0 |= fams.0;
            }
        }
    }
    for pos in memchr::memchr3_iter(ANCHORS[0], ANCHORS[1], ANCHORS[2], bytes) {
        let slot = match bytes[pos] {
            b'<' => 0,
            b'[' => 1,
            _ => 2,
        };
        for m in &t.ending[slot] {
            // The byte before the anchor first: a slice compare is a call.
            if pos > 0
                && m.before.last() == Some(&bytes[pos - 1])
                && bytes[..pos].ends_with(m.before)
            {
                seen.0 |= m.detectors.0;
            }
        }
        let Some(&n) = bytes.get(pos + 1) else {
            continue;
        };
        let next = t.next[slot][usize::from(n)];
        if next == 0 {
            continue;
        }
        if next & NEXT_PROBES != 0 {
            for &(probe, fams) in &t.bare[slot] {
                if seen.0 & fams.0 == 0 && probe(bytes, pos) {
                    seen.0 |= fams.0;
                }
            }
        }
        if next & NEXT_MARKERS == 0 {
            continue;
        }
        let by_next = t.by_next[slot]
            .get(usize::from(n))
            .map_or(&[][..], Vec::as_slice);
        let (head, rest) = bytes.split_at(pos);
        let w = word(rest);
        for m in by_next {
            if m.at(w, rest, head) {
                seen.0 |= m.detectors.0;
            }
        }
    }
    // Markup with no anchor byte is looked for at the ends of the text, after the scan:
    // it has just brought them into the cache.
    for &(check, fams) in &t.lines {
        if seen.0 & fams.0 == 0 && check(body) {
            seen.0 |= fams.0;
        }
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_and_detector_fits_in_the_masks() {
        assert!(Family::ALL.len() < 64);
        assert!(detectors().len() < 64);
    }

    #[test]
    fn every_marker_holds_an_anchor_byte() {
        // The scan looks only where an anchor byte is: a marker without one would never be
        // found (and searching the text for it cost a tenth of the clean path).
        for det in detectors() {
            for t in det.triggers() {
                let anchored = t.bytes().any(|b| ANCHORS.contains(&b));
                assert!(anchored, "{:?}: {t}", det.family());
            }
        }
    }

    #[test]
    fn no_marker_holds_a_zero_byte() {
        // The word compare pads a hit near the end of the text with zeros.
        for det in detectors() {
            assert!(det.triggers().iter().all(|t| !t.contains('\0')));
        }
    }

    #[test]
    fn at_most_one_probe_confirms_a_first_byte() {
        let mut seen = [false; 256];
        for det in detectors().iter().filter(|d| d.start().is_some()) {
            for &b in det.at_start() {
                assert!(!seen[usize::from(b)], "{:?}: {}", det.family(), b as char);
                seen[usize::from(b)] = true;
            }
        }
    }

    #[test]
    fn at_most_one_detector_checks_lines() {
        // Each costs every message a look at its first and last line.
        assert!(detectors().iter().filter(|d| d.lines().is_some()).count() <= 1);
    }

    #[test]
    fn bare_anchor_triggers_have_a_probe() {
        for det in detectors() {
            for t in det.triggers() {
                assert!(
                    t.len() > 1 || det.probe().is_some(),
                    "{:?}: {t}",
                    det.family()
                );
            }
        }
    }

    #[test]
    fn a_bracket_needs_a_call_after_it() {
        assert!(!scan("see [the docs](https://x) and [1]").contains(Family::Pythonic));
        assert!(scan("ok [get_weather(city='x')]").contains(Family::Pythonic));
        assert!(scan("[ping()]").contains(Family::Pythonic));
        assert!(scan("[f(\n        a=1)]").contains(Family::Pythonic));
        assert!(!scan("x = arr[len(a)]").contains(Family::Pythonic));
        assert!(!scan("[f(x) for x in y]").contains(Family::Pythonic));
        assert!(!scan("[f(a == 1)]").contains(Family::Pythonic));
    }

    #[test]
    fn plain_prose_triggers_nothing() {
        assert!(scan("Just a normal message, nothing to see. 3 < 4 [sic] {x}").is_empty());
    }

    #[test]
    fn a_leading_brace_triggers_the_result_families() {
        let s = scan("  {success: true}Hi");
        assert!(s.contains(Family::ResultPrefix));
    }

    #[test]
    fn markers_are_found_anywhere_including_their_prefix_part() {
        assert!(scan("see ]<]minimax[>[<invoke").contains(Family::Minimax));
        assert!(scan("x functools[{\"name\"").contains(Family::Phi4mini));
        assert!(!scan("x tools[{\"name\"").contains(Family::Phi4mini));
        assert!(scan("a\n```json\n{\"tool\": 1}\n```").contains(Family::JsonFence));
        // A marker that shares its first bytes with others is found at any place of them,
        // overlapping ones too.
        assert!(scan("a\n````Json\n{\"tool\": 1}\n````").contains(Family::JsonFence));
        assert!(scan("``` and ```JSON\n{}").contains(Family::JsonFence));
        assert!(!scan("``json {} ```jso").contains(Family::JsonFence));
        assert!(scan("<tool_call>").contains(Family::Hermes));
    }
}
