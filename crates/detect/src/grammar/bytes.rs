//! Byte classes as one table lookup, for the loops the prefilter runs on every message
//! (the first word of a message, the name before a `{`, a tag's name after a `<`): a class
//! test is a load and a bit test, where `is_ascii_alphanumeric() || b == b'_' || b >= 0x80`
//! is a chain of range compares and branches in every iteration.
//!
//! May depend on: nothing.

/// An identifier's byte: an ASCII letter or digit, `_`, or any byte of a multi-byte UTF-8
/// sequence (`>= 0x80`: names may be in any script).
pub const WORD: u8 = 1;
/// A key's byte in command-line arguments: an ASCII letter or digit, or `_`.
pub const KEY: u8 = 1 << 1;
/// ASCII whitespace, as [`u8::is_ascii_whitespace`] has it.
pub const SPACE: u8 = 1 << 2;
/// An ASCII letter.
pub const ALPHA: u8 = 1 << 3;
/// A byte of a tag's name as the markup probe reads it: an ASCII letter or digit, `_`,
/// `-`, `:`.
pub const TAG: u8 = 1 << 4;

/// The classes of every byte value.
static CLASSES: [u8; 256] = classes();

const fn classes() -> [u8; 256] {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        let alnum = b.is_ascii_alphanumeric();
        let mut c = 0;
        if alnum || b == b'_' || b >= 0x80 {
            c |= WORD;
        }
        if alnum || b == b'_' {
            c |= KEY;
        }
        if b.is_ascii_whitespace() {
            c |= SPACE;
        }
        if b.is_ascii_alphabetic() {
            c |= ALPHA;
        }
        if alnum || matches!(b, b'_' | b'-' | b':') {
            c |= TAG;
        }
        t[i] = c;
        i += 1;
    }
    t
}

/// Whether `b` is of any of the classes in `class` (a mask of the constants above).
#[inline(always)]
pub fn is(b: u8, class: u8) -> bool {
    CLASSES[usize::from(b)] & class != 0
}

/// The length of the run of bytes of `class` at the start of `b`, at most `max`.
#[inline(always)]
pub fn run(b: &[u8], class: u8, max: usize) -> usize {
    let b = &b[..b.len().min(max)];
    b.iter().position(|&c| !is(c, class)).unwrap_or(b.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_says_what_the_predicates_say() {
        for b in 0..=255u8 {
            let alnum = b.is_ascii_alphanumeric();
            assert_eq!(is(b, WORD), alnum || b == b'_' || b >= 0x80, "{b}");
            assert_eq!(is(b, KEY), alnum || b == b'_', "{b}");
            assert_eq!(is(b, SPACE), b.is_ascii_whitespace(), "{b}");
            assert_eq!(is(b, ALPHA), b.is_ascii_alphabetic(), "{b}");
            assert_eq!(is(b, TAG), alnum || matches!(b, b'_' | b'-' | b':'), "{b}");
        }
    }

    #[test]
    fn a_run_stops_at_the_first_other_byte_or_at_its_bound() {
        assert_eq!(run(b"abc d", WORD, 64), 3);
        assert_eq!(run(b"abcdef", WORD, 4), 4);
        assert_eq!(run(b"", WORD, 4), 0);
        assert_eq!(run("名前(".as_bytes(), WORD, 64), 6);
    }
}
