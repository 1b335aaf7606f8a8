//! `gemini`: what Gemini models leak of their own markup besides calls (those, written in
//! Gemini's `call:default_api:NAME{key:<ctrl46>v<ctrl46>}` syntax, are read by `named`).
//!
//! A Gemini reply that follows a tool's answer sometimes starts with the tail of that answer,
//! between the control tokens Gemini frames a function response with:
//! `<ctrl46>,success:true}<ctrl45>Now that I've read..`. That tail is a fake result: it goes,
//! and the reply after it stays. It counts only at the very start of the message, closed by
//! a `}` right before the second token, within one line.
//!
//! May depend on: `super::util`, `crate::types`, `crate::Ctx`.

use super::util::{find_bounded, skip_ws};
use crate::types::{Family, Leak};
use crate::Ctx;

/// Literal markers one of which any leak of this family contains.
pub(crate) const TRIGGERS: &[&str] = &["<ctrl"];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

/// Longest result tail read.
const MAX_TAIL: usize = 4096;

/// Appends the leaks found in `text`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let start = skip_ws(text, 0);
    let Some(first) = ctrl_token(text, start) else {
        return;
    };
    if ctx.quoted(start) {
        return;
    }
    let Some(next) = find_bounded(text, "<ctrl", first, first + MAX_TAIL) else {
        return;
    };
    let Some(end) = ctrl_token(text, next) else {
        return;
    };
    let tail = text.get(first..next).unwrap_or_default();
    if !tail.trim_end().ends_with('}') || !tail.contains(':') || tail.contains('\n') {
        return;
    }
    out.push(Leak {
        family: Family::Gemini,
        span: start..end,
        calls: Vec::new(),
        results: Vec::new(),
    });
}

/// The offset past a `<ctrlNN>` token at `pos`.
pub(crate) fn ctrl_token(text: &str, pos: usize) -> Option<usize> {
    let rest = text.get(pos..)?.strip_prefix("<ctrl")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    (digits > 0 && rest.as_bytes().get(digits) == Some(&b'>')).then(|| pos + 5 + digits + 1)
}

#[cfg(test)]
mod tests {
    fn run(text: &str) -> crate::Detection {
        super::super::testing::detect_with(text, &[])
    }

    #[test]
    fn a_result_tail_at_the_start_goes() {
        let d = run("<ctrl46>,success:true}<ctrl45>Now that I've read the paper, here it is.");
        assert_eq!(
            d.cleaned.as_deref(),
            Some("Now that I've read the paper, here it is.")
        );
        assert!(d.leaks[0].calls.is_empty());
    }

    #[test]
    fn other_control_tokens_stay() {
        assert!(run("Here &<ctrl46> the answer.").is_clean());
        assert!(run("Answer first. <ctrl46>,success:true}<ctrl45>").is_clean());
        assert!(run("<ctrl46>no brace here<ctrl45>Text").is_clean());
    }
}
