//! `frames`: the chat template's own turn tokens around an assistant's text, shown because a
//! server kept special tokens (`<|im_start|>assistant\n..<|im_end|>`, Llama 3's
//! `<|start_header_id|>assistant<|end_header_id|>..<|eot_id|>`, Kimi's
//! `<|im_assistant|>assistant<|im_middle|>`, Gemma's `<start_of_turn>model`, DeepSeek's
//! `<｜Assistant｜>`). A frame holds no
//! call (calls in it are their formats' leaks); its header and its terminator go, each as a
//! leak with no call reported as the family whose template it is, and the text stays.
//!
//! A header counts only as the template writes it: the opener, the assistant's role word,
//! the header's end. Its terminator is the first of the frame's closers after it (the
//! generation may stop before one).
//!
//! May depend on: `super::util`, `crate::types`, `crate::Ctx`.

use super::util::{find_from, merge, Block, MAX_CANDIDATES};
use crate::types::Family;
use crate::{Ctx, Leak};

/// Literal markers one of which any leak of this family contains.
pub(crate) const TRIGGERS: &[&str] = &[
    "<|im_start|>assistant",
    "<|start_header_id|>assistant",
    "<|header_start|>assistant",
    "<|im_assistant|>assistant",
    "<｜Assistant｜>",
    "<|Assistant|>",
    "<start_of_turn>model",
];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

/// One template's assistant turn.
struct Frame {
    /// The header: opener and role, then what ends it.
    header: &'static str,
    header_end: &'static str,
    /// The tokens that end the turn.
    closers: &'static [&'static str],
    /// The family whose template it is.
    family: Family,
}

/// The templates' assistant turns (Qwen/Hermes ChatML, Llama 3.x and 4, Kimi-K2, Gemma's
/// `model` turn, DeepSeek-V3 with its bars as written or ASCII).
const FRAMES: &[Frame] = &[
    Frame {
        header: "<|im_start|>assistant",
        header_end: "\n",
        closers: &["<|im_end|>"],
        family: Family::Hermes,
    },
    Frame {
        header: "<|start_header_id|>assistant",
        header_end: "<|end_header_id|>",
        closers: &["<|eot_id|>", "<|eom_id|>"],
        family: Family::Llama3Json,
    },
    Frame {
        header: "<|header_start|>assistant",
        header_end: "<|header_end|>",
        closers: &["<|eot|>"],
        family: Family::Llama3Json,
    },
    Frame {
        header: "<|im_assistant|>assistant",
        header_end: "<|im_middle|>",
        closers: &["<|im_end|>"],
        family: Family::Kimi,
    },
    Frame {
        header: "<｜Assistant｜>",
        header_end: "",
        closers: &["<｜end▁of▁sentence｜>"],
        family: Family::Deepseek,
    },
    Frame {
        header: "<start_of_turn>model",
        header_end: "\n",
        closers: &["<end_of_turn>"],
        family: Family::Gemma4,
    },
    Frame {
        header: "<|Assistant|>",
        header_end: "",
        closers: &["<|end▁of▁sentence|>", "<|end_of_sentence|>"],
        family: Family::Deepseek,
    },
];

/// Tokens that begin a sequence, which a server that keeps special tokens may show before
/// the reply.
const BEGIN: &[&str] = &["<s>", "<|begin_of_text|>", "<bos>", "<|startoftext|>"];

/// Where the reply's own text starts when `text` opens with a template's assistant header
/// (maybe after a sequence's begin token), `None` when it does not.
pub(crate) fn header_end(text: &str) -> Option<usize> {
    let mut at = text.len() - text.trim_start().len();
    let mut found = false;
    // `<s>` is HTML's strikethrough too: a begin token only where no `</s>` closes it
    // before the text's end (at the end it is the sequence's own end).
    let struck = || {
        text.find("</s>")
            .is_some_and(|i| !text[i + "</s>".len()..].trim().is_empty())
    };
    if let Some(b) = BEGIN
        .iter()
        .find(|b| text[at..].starts_with(*b) && !(**b == "<s>" && struck()))
    {
        at += b.len();
        at = text.len() - text[at..].trim_start().len();
        found = true;
    }
    for f in FRAMES {
        if let Some(after) = text[at..]
            .strip_prefix(f.header)
            .and_then(|r| r.strip_prefix(f.header_end))
        {
            at = text.len() - after.trim_start().len();
            return Some(at);
        }
    }
    found.then_some(at)
}

/// Appends the frame tokens of `text` as leaks with no call.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    for f in FRAMES {
        let mut pieces: Vec<Block> = Vec::new();
        let mut from = 0;
        for _ in 0..MAX_CANDIDATES {
            let Some(p) = find_from(text, f.header, from) else {
                break;
            };
            from = p + f.header.len();
            if ctx.quoted(p) {
                continue;
            }
            // The role word is whole (`assistant\n`, not `assistants`), then the header's end.
            let rest = text.get(from..).unwrap_or_default();
            let Some(after) = rest.strip_prefix(f.header_end) else {
                continue;
            };
            let mut body = text.len() - after.len();
            // The blank line Llama's header puts before the text is the header's.
            body += after.len() - after.trim_start_matches(['\n', '\r']).len();
            pieces.push((p..body, Vec::new()));
            // The terminator: the first closer before the next header.
            let next = find_from(text, f.header, body).unwrap_or(text.len());
            let close = f
                .closers
                .iter()
                .filter_map(|c| find_from(text, c, body).map(|i| (i, c.len())))
                .filter(|&(i, _)| i < next)
                .min();
            if let Some((c, len)) = close {
                pieces.push((c..c + len, Vec::new()));
                from = c + len;
            } else {
                from = body;
            }
        }
        merge(text, f.family, pieces, out);
    }
}

#[cfg(test)]
mod tests {
    fn run(text: &str) -> crate::Detection {
        super::super::testing::detect_with(text, &[])
    }

    #[test]
    fn a_frame_loses_its_tokens_and_keeps_its_text() {
        let d = run("<|im_start|>assistant\nHello there.<|im_end|>");
        assert_eq!(d.cleaned.as_deref(), Some("Hello there."));
        assert!(d.leaks.iter().all(|l| l.calls.is_empty()));
        let d = run("<|start_header_id|>assistant<|end_header_id|>\n\nHi!<|eot_id|>");
        assert_eq!(d.cleaned.as_deref(), Some("Hi!"));
        let d = run("<｜Assistant｜>More text<｜end▁of▁sentence｜>");
        assert_eq!(d.cleaned.as_deref(), Some("More text"));
    }

    #[test]
    fn a_frame_around_a_call_goes_with_it() {
        let d = super::super::testing::detect_with(
            "<|im_start|>assistant\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call><|im_end|>",
            &["f"],
        );
        assert_eq!(d.cleaned.as_deref(), Some(""));
        assert_eq!(d.leaks.iter().map(|l| l.calls.len()).sum::<usize>(), 1);
    }

    #[test]
    fn quoted_or_partial_headers_stay() {
        for t in [
            "The template writes `<|im_start|>assistant` before each reply.",
            "<|im_start|>assistants are listed below<|im_end|>",
            "```\n<|im_start|>assistant\nHi<|im_end|>\n```",
        ] {
            assert!(run(t).is_clean(), "{t}");
        }
    }
}
