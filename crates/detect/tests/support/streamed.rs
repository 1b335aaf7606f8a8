//! The streaming property: a text pushed into a `Stream` delta by delta, cut at any points,
//! shows exactly the one-shot cleaned text (or the text itself when nothing leaked), and
//! finishes with the one-shot detection. Shared by the streaming test and the metamorphic
//! suite, so every corpus is checked the same way.

#![allow(dead_code)]

use toolcall_detect::{detect, Config, Input, Stream};

/// Cut points of `text`: one delta per character for short texts, deltas of 1 to `max`
/// bytes (rounded up to a character) drawn from `seed` otherwise.
pub fn deltas(text: &str, max: usize, seed: u64) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut at = 0;
    while at < text.len() {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let mut end = (at + 1 + (rng as usize) % max.max(1)).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        out.push(&text[at..end]);
        at = end;
    }
    out
}

/// Every character a delta of its own.
pub fn chars(text: &str) -> Vec<&str> {
    text.char_indices()
        .map(|(i, c)| &text[i..i + c.len_utf8()])
        .collect()
}

/// Streams `parts` and compares with the one-shot detection of their concatenation.
pub fn same_answer(parts: &[&str], enabled: &[String]) -> Result<(), String> {
    let text: String = parts.concat();
    let config = Config::default();
    let one = detect(
        &Input {
            content: &text,
            tools_used: &[],
            enabled_tools: enabled,
        },
        &config,
    );
    let mut s = Stream::new(config, enabled.to_vec());
    let mut shown = String::new();
    for p in parts {
        shown.push_str(s.push(p));
    }
    let want = one.cleaned.as_deref().unwrap_or(&text);
    if !want.starts_with(&shown) {
        return Err(format!(
            "shown {shown:?} is not a prefix of the one-shot text {want:?} (input {text:?})"
        ));
    }
    let end = s.finish();
    shown.push_str(&end.rest);
    if shown != want {
        return Err(format!(
            "streamed {shown:?}, one-shot {want:?} (input {text:?})"
        ));
    }
    if end.detection != one {
        return Err(format!(
            "streamed detection {:?} differs from one-shot {:?} (input {text:?})",
            end.detection, one
        ));
    }
    Ok(())
}

/// [`same_answer`] under the cuts the property asks for: every character for a short
/// text, and random deltas of 1-16 bytes.
pub fn under_cuts(text: &str, enabled: &[String], seed: u64) -> Result<(), String> {
    if text.len() <= 2_000 {
        same_answer(&chars(text), enabled)?;
    }
    same_answer(&deltas(text, 16, seed), enabled)
}
