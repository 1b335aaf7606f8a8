//! Reading a token at a `<` or `[` by its shape and word: the bracket, the bars inside its
//! ends, a closing slash, whether the tag goes on past its name, and its word lowercased
//! with separators set aside. Bytes only, nothing allocated: it runs at the tags of every
//! text the respelling looks at.
//!
//! May depend on: nothing of the crate. No I/O.

/// The longest token looked at, in bytes (the longest listed, spaced and respelled).
pub(super) const MAX_TOKEN: usize = 64;

/// A bar's kind: the ASCII `|` or the full-width `｜`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(super) enum Bar {
    None,
    Ascii,
    Full,
}

/// What a token is read as: its bracket, whether a bar stands inside each end, whether it
/// closes (`</`), whether the tag goes on past its name (attributes, `=NAME`), and its word
/// lowercased with separators (`_`, `-`, `▁`, spaces) dropped.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub(super) struct Key {
    pub(super) square: bool,
    left_bar: bool,
    right_bar: bool,
    closer: bool,
    pub(super) open_ended: bool,
    pub(super) word: Word,
}

/// A token's word, held inline: a tag in every `<` of an HTML answer is read, so no
/// allocation a read.
#[derive(Clone, Copy, Debug)]
pub(super) struct Word {
    bytes: [u8; MAX_TOKEN],
    len: usize,
}

impl Word {
    const EMPTY: Word = Word {
        bytes: [0; MAX_TOKEN],
        len: 0,
    };

    pub(super) fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    fn push(&mut self, b: u8) {
        // `read` stops at `MAX_TOKEN` bytes of token, so the word fits.
        if let Some(slot) = self.bytes.get_mut(self.len) {
            *slot = b;
            self.len += 1;
        }
    }

    /// The word with `s` put in at `at` (`at` at most the length), or taken out there.
    pub(super) fn with_s(&self, at: usize) -> Word {
        let mut w = Word::EMPTY;
        let (head, tail) = self.as_slice().split_at(at);
        head.iter().for_each(|&b| w.push(b));
        match tail.strip_prefix(b"s") {
            Some(rest) => rest.iter().for_each(|&b| w.push(b)),
            None => std::iter::once(&b's').chain(tail).for_each(|&b| w.push(b)),
        }
        w
    }
}

impl PartialEq for Word {
    fn eq(&self, other: &Word) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for Word {}

impl std::hash::Hash for Word {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        h.write(self.as_slice());
    }
}

/// FNV-1a for the tables: their keys are a few short words, and a look-up runs at every tag
/// of an HTML answer, where SipHash's cost shows and its strength is not needed.
pub(super) struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

pub(super) type FnvBuild = std::hash::BuildHasherDefault<Fnv>;

/// A token read at a `<` or `[`: its key, the bars it was written with, and its length.
pub(super) struct Read {
    pub(super) key: Key,
    pub(super) bar: Bar,
    pub(super) len: usize,
}

fn bar_at(b: &[u8]) -> Option<(Bar, usize)> {
    match b {
        [b'|', ..] => Some((Bar::Ascii, 1)),
        [0xEF, 0xBD, 0x9C, ..] => Some((Bar::Full, 3)),
        _ => None,
    }
}

/// Reads the token starting at `b[0]` (a `<` or `[`), if it is token-shaped.
pub(super) fn read(b: &[u8]) -> Option<Read> {
    let square = match b.first() {
        Some(b'<') => false,
        Some(b'[') => true,
        _ => return None,
    };
    let close = if square { b']' } else { b'>' };
    let mut i = 1;
    let skip_spaces = |i: &mut usize| {
        while b.get(*i) == Some(&b' ') {
            *i += 1;
        }
    };
    skip_spaces(&mut i);
    let mut bar = Bar::None;
    let left_bar = match bar_at(&b[i..]) {
        Some((kind, n)) => {
            bar = kind;
            i += n;
            skip_spaces(&mut i);
            true
        }
        None => false,
    };
    let closer = b.get(i) == Some(&b'/');
    if closer {
        i += 1;
        skip_spaces(&mut i);
    }
    let mut word = Word::EMPTY;
    let mut right_bar = false;
    let mut open_ended = false;
    loop {
        if i >= MAX_TOKEN {
            return None;
        }
        let &c = b.get(i)?;
        match c {
            b'a'..=b'z' | b'0'..=b'9' | b':' => word.push(c),
            b'A'..=b'Z' => word.push(c.to_ascii_lowercase()),
            b'_' | b'-' => {}
            // A space between words is a separator; before the end it is padding.
            b' ' => {}
            0xE2 if b[i..].starts_with("▁".as_bytes()) => {
                i += 3;
                continue;
            }
            _ if c == close => {
                i += 1;
                break;
            }
            b'=' if !square && !left_bar && word.len > 0 => {
                open_ended = true;
                break;
            }
            _ => {
                if let Some((kind, n)) = bar_at(&b[i..]) {
                    i += n;
                    skip_spaces(&mut i);
                    if b.get(i) != Some(&close) || (left_bar && kind != bar) {
                        return None;
                    }
                    if !left_bar {
                        bar = kind;
                    }
                    right_bar = true;
                    i += 1;
                    break;
                }
                return None;
            }
        }
        i += 1;
    }
    if !word.as_slice().first().is_some_and(u8::is_ascii_alphabetic) {
        return None;
    }
    Some(Read {
        key: Key {
            square,
            left_bar,
            right_bar,
            closer,
            open_ended,
            word,
        },
        bar,
        len: i,
    })
}

/// Reads an open-ended tag's name (`<INVOKE name=..`, `<Function=NAME>`): up to the space
/// or `=` after it.
pub(super) fn read_name(b: &[u8]) -> Option<Read> {
    if b.first() != Some(&b'<') {
        return None;
    }
    let mut i = 1;
    while b.get(i) == Some(&b' ') {
        i += 1;
    }
    let start = i;
    while i < MAX_TOKEN
        && b.get(i)
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
    {
        i += 1;
    }
    if i == start || !matches!(b.get(i), Some(b' ' | b'=')) {
        return None;
    }
    let mut word = Word::EMPTY;
    b[start..i]
        .iter()
        .filter(|&&c| c != b'_')
        .for_each(|c| word.push(c.to_ascii_lowercase()));
    Some(Read {
        key: Key {
            square: false,
            left_bar: false,
            right_bar: false,
            closer: false,
            open_ended: true,
            word,
        },
        bar: Bar::None,
        len: i,
    })
}
