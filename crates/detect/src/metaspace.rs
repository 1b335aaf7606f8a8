//! Replies whose spaces are SentencePiece's metaspace (`▁`, U+2581): a server that did not
//! decode the tokenizer's pieces shows `[TOOL_CALLS]▁[{"name":▁"get_weather",▁..}]`. Such a
//! reply has no ASCII space at all; detection reads it with each `▁` as the space it
//! stands for, and the spans it finds are mapped back onto the reply as written, so the
//! cut and the ledger keep the bytes the user saw.
//!
//! May depend on: nothing of the crate. No I/O.

use std::ops::Range;

const METASPACE: char = '\u{2581}';

/// The reply with each `▁` as a space, and where each replaced one stands in that text, when
/// the reply is written in metaspace (it holds `▁` and no ASCII space).
pub(crate) fn decoded(text: &str) -> Option<Decoded> {
    if memchr::memchr(b' ', text.as_bytes()).is_some() || !text.contains(METASPACE) {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut at = Vec::new();
    for c in text.chars() {
        if c == METASPACE {
            at.push(out.len());
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    Some(Decoded { text: out, at })
}

/// A reply read with its metaspace decoded.
pub(crate) struct Decoded {
    pub(crate) text: String,
    /// Offsets in `text` of the spaces that were `▁`, ascending.
    at: Vec<usize>,
}

impl Decoded {
    /// The span of the reply as written that `span` of the decoded text covers.
    pub(crate) fn original(&self, span: &Range<usize>) -> Range<usize> {
        let extra = METASPACE.len_utf8() - 1;
        let shift = |p: usize| p + extra * self.at.partition_point(|&a| a < p);
        shift(span.start)..shift(span.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_map_back_onto_the_reply_as_written() {
        let t = "a▁[b▁c]▁d";
        let d = decoded(t).expect("metaspace");
        assert_eq!(d.text, "a [b c] d");
        let inner = d.text.find('[').unwrap()..d.text.find(']').unwrap() + 1;
        assert_eq!(&t[d.original(&inner)], "[b▁c]");
        assert!(decoded("a b▁c").is_none());
        assert!(decoded("plain").is_none());
    }
}
