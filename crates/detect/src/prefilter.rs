//! The hot path: one pass over the bytes that tells which families could possibly have a
//! leak in this text. Most messages contain none of the markers and end here.
//!
//! Each family names literal markers (`TRIGGERS`) and the bytes a leak may start the
//! message with (`AT_START`); a family is examined only when one of its markers occurs.
//! The literals are searched together with one Aho-Corasick automaton (SIMD-accelerated
//! where the pattern set allows), built once per process.

use crate::families::REGISTRY;
use crate::types::Family;
use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use std::sync::OnceLock;

/// A set of families, as a bit mask over [`Family::ALL`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FamilySet(u64);

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

fn bit(f: Family) -> u64 {
    // `Family::ALL` has fewer than 64 entries (checked by a test), so the shift is in range.
    1u64 << (f as u32)
}

struct Automaton {
    ac: AhoCorasick,
    /// Per pattern: the families that named it.
    owners: Vec<FamilySet>,
}

fn automaton() -> Option<&'static Automaton> {
    static AC: OnceLock<Option<Automaton>> = OnceLock::new();
    AC.get_or_init(|| {
        let mut patterns: Vec<&'static str> = Vec::new();
        let mut owners: Vec<FamilySet> = Vec::new();
        for def in REGISTRY {
            for &t in def.triggers {
                match patterns.iter().position(|p| *p == t) {
                    Some(i) => owners[i].insert(def.family),
                    None => {
                        patterns.push(t);
                        let mut s = FamilySet::default();
                        s.insert(def.family);
                        owners.push(s);
                    }
                }
            }
        }
        AhoCorasickBuilder::new()
            .match_kind(MatchKind::Standard)
            .build(&patterns)
            .ok()
            .map(|ac| Automaton { ac, owners })
    })
    .as_ref()
}

/// The families whose markers occur in `text`.
pub fn scan(text: &str) -> FamilySet {
    let mut seen = FamilySet::default();
    if let Some(&first) = text.trim_start().as_bytes().first() {
        for def in REGISTRY {
            if def.at_start.contains(&first) {
                seen.insert(def.family);
            }
        }
    }
    match automaton() {
        Some(a) => {
            for m in a.ac.find_overlapping_iter(text) {
                seen.0 |= a.owners[m.pattern().as_usize()].0;
            }
        }
        // The patterns are fixed literals, so building cannot fail in practice; if it
        // ever did, examining every family is slower but still correct.
        None => {
            for def in REGISTRY {
                seen.insert(def.family);
            }
        }
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_fits_in_the_mask() {
        assert!(Family::ALL.len() < 64);
    }

    #[test]
    fn plain_prose_triggers_nothing() {
        assert!(scan("Just a normal message, nothing to see.").is_empty());
    }

    #[test]
    fn a_leading_brace_triggers_the_result_families() {
        let s = scan("  {success: true}Hi");
        assert!(s.contains(Family::ResultPrefix));
    }
}
