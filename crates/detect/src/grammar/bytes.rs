//! Byte classes as one table lookup, for the loops the prefilter runs on every message
//! (the first word of a message, the name before a `{`, a tag's name after a `<`): a class
//! test is a load and a bit test, where `is_ascii_alphanumeric() || b == b'_' || b >= 0x80`
//! is a chain of range compares and branches in every iteration.
//!
//! May depend on: nothing.

/// An ASCII letter.
pub const ALPHA: u8 = 1;
/// An ASCII digit.
pub const DIGIT: u8 = 1 << 1;
/// `_`.
pub const UNDERSCORE: u8 = 1 << 2;
/// A byte of a multi-byte UTF-8 sequence (`>= 0x80`): names may be in any script.
pub const HIGH: u8 = 1 << 3;
/// ASCII whitespace, as [`u8::is_ascii_whitespace`] has it.
pub const SPACE: u8 = 1 << 4;
/// `-`.
pub const DASH: u8 = 1 << 5;
/// `.`.
pub const DOT: u8 = 1 << 6;
/// `:`.
pub const COLON: u8 = 1 << 7;

/// A key's byte in command-line arguments: an ASCII letter or digit, or `_`.
pub const KEY: u8 = ALPHA | DIGIT | UNDERSCORE;
/// An identifier's byte in any script: a [`KEY`] byte or a [`HIGH`] one.
pub const WORD: u8 = KEY | HIGH;

/// The classes of every byte value: each byte is of one class at most, so a test for a
/// union of classes is one mask.
static CLASSES: [u8; 256] = classes();

const fn classes() -> [u8; 256] {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = if b.is_ascii_alphabetic() {
            ALPHA
        } else if b.is_ascii_digit() {
            DIGIT
        } else if b >= 0x80 {
            HIGH
        } else if b.is_ascii_whitespace() {
            SPACE
        } else {
            match b {
                b'_' => UNDERSCORE,
                b'-' => DASH,
                b'.' => DOT,
                b':' => COLON,
                _ => 0,
            }
        };
        i += 1;
    }
    t
}

/// Whether `b` is of any of the classes in `class` (a union of the constants above).
#[inline(always)]
pub fn is(b: u8, class: u8) -> bool {
    CLASSES[usize::from(b)] & class != 0
}

/// The length of the run of bytes of `class` at the start of `b`, at most `max`.
#[inline(always)]
pub fn run(b: &[u8], class: u8, max: usize) -> usize {
    let b = &b[..b.len().min(max)];
    // The first byte apart: most runs the probes ask for (spaces after a `{`, before a
    // name) are empty, and the loop's set-up costs more than that one compare.
    match b.first() {
        Some(&c) if is(c, class) => b.iter().position(|&c| !is(c, class)).unwrap_or(b.len()),
        _ => 0,
    }
}

/// The length of the run of bytes of `class` at the end of `b`, at most `max`.
#[inline(always)]
pub fn run_back(b: &[u8], class: u8, max: usize) -> usize {
    let b = &b[b.len().saturating_sub(max)..];
    match b.last() {
        Some(&c) if is(c, class) => b
            .iter()
            .rev()
            .position(|&c| !is(c, class))
            .unwrap_or(b.len()),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_says_what_the_predicates_say() {
        for b in 0..=255u8 {
            assert_eq!(is(b, ALPHA), b.is_ascii_alphabetic(), "{b}");
            assert_eq!(is(b, DIGIT), b.is_ascii_digit(), "{b}");
            assert_eq!(is(b, HIGH), b >= 0x80, "{b}");
            assert_eq!(is(b, SPACE), b.is_ascii_whitespace(), "{b}");
            assert_eq!(is(b, UNDERSCORE), b == b'_', "{b}");
            assert_eq!(is(b, DASH), b == b'-', "{b}");
            assert_eq!(is(b, DOT), b == b'.', "{b}");
            assert_eq!(is(b, COLON), b == b':', "{b}");
            let ident = b.is_ascii_alphanumeric() || b == b'_';
            assert_eq!(is(b, KEY), ident, "{b}");
            assert_eq!(is(b, WORD), ident || b >= 0x80, "{b}");
        }
    }

    #[test]
    fn a_run_stops_at_the_first_other_byte_or_at_its_bound_both_ways() {
        assert_eq!(run(b"abc d", WORD, 64), 3);
        assert_eq!(run(b"abcdef", WORD, 4), 4);
        assert_eq!(run(b"", WORD, 4), 0);
        assert_eq!(run("名前(".as_bytes(), WORD, 64), 6);
        assert_eq!(run_back(b"a bc", WORD, 64), 2);
        assert_eq!(run_back(b"abcdef", WORD, 4), 4);
        assert_eq!(run_back(b"ab ", WORD, 4), 0);
    }
}
