//! What a tag's folded name says, whatever format wrote it: call markup, a parameter, the
//! arguments, a name, an end; and whether what is left of a text only ends the turn.
//! The lexer (`super::markup`) reads tags; these predicates read their keys.
//!
//! May depend on: `super::markup`, `super::text`, `memchr`. No I/O.

use super::markup::{tag_at, Kind};

/// Whether a folded tag key names call markup of some format: a call, a section of calls,
/// a tool use, an invocation (`tool_call`, `toolcall`, `calls`, `function_calls`,
/// `tool▁call▁begin`, `invoke`, `functioncall`, `tool_use`).
pub fn is_call_key(key: &str) -> bool {
    let key = strip_edge(key);
    key.contains("call")
        || key.contains("invoke")
        || key.contains("tooluse")
        || key == "action"
        // `tool`, `tools`, `tool_code`, `tool_request`, `functions`: a word of call markup
        // heading the name, unless the rest says the element is the tool's answer or its
        // definition.
        || (["tool", "function"].iter().any(|w| key.starts_with(w))
            && !["result", "response", "output", "answer", "return", "def", "schema", "spec", "desc", "list", "name", "choice"]
                .iter()
                .any(|w| key.contains(w)))
}

/// Whether a fence's info string names call markup (```` ```tool_call ````,
/// ```` ```function_call ````, ```` ```tool_code ````): a word of a call, a tool or a
/// function in it, in any case. Detection and the stream ask the same question, so that the
/// stream holds every fence detection may read as a call.
#[inline]
pub fn names_call_markup(info: &[u8]) -> bool {
    // One pass, a word compared only where its first letter stands: most info strings
    // (`python`, `json`, `bash`) hold none of them.
    let word = |i: usize, w: &[u8]| {
        info.get(i..i + w.len())
            .is_some_and(|x| x.eq_ignore_ascii_case(w))
    };
    (0..info.len()).any(|i| match info[i] | 0x20 {
        b'c' => word(i, b"call"),
        b't' => word(i, b"tool"),
        b'f' => word(i, b"func"),
        _ => false,
    })
}

/// Whether a fence's info string labels the fence a call's wrapper (```` ```tool_call ````,
/// ```` ```function_call ````), as `json` labels data: call markup named, and not code
/// (```` ```tool_code ```` is Gemini's code, read by its own family).
#[inline]
pub fn labels_a_call_fence(info: &str) -> bool {
    let info = info.as_bytes();
    names_call_markup(info) && !info.windows(4).any(|x| x.eq_ignore_ascii_case(b"code"))
}

/// Whether a folded key names a parameter element (`parameter`, `param`, `arg`, ...).
pub fn is_param_key(key: &str) -> bool {
    matches!(
        key,
        "parameter" | "param" | "arg" | "argument" | "property" | "field" | "kwarg"
    )
}

/// Whether a folded key names an element holding a call's arguments as a whole.
pub fn is_args_key(key: &str) -> bool {
    matches!(
        key,
        "arguments" | "parameters" | "args" | "params" | "input" | "toolinput" | "kwargs"
    )
}

/// Whether a folded key names the element or attribute that holds a call's name.
pub fn is_name_key(key: &str) -> bool {
    matches!(
        key,
        "name" | "toolname" | "functionname" | "tool" | "function" | "recipient" | "to"
    )
}

/// A folded key without the begin/end words special tokens pair by
/// (`toolcallbegin` and `toolcallend` both give `toolcall`).
pub fn strip_edge(key: &str) -> &str {
    for edge in ["begin", "start", "end", "stop", "open", "close"] {
        if let Some(k) = key.strip_suffix(edge) {
            return k;
        }
        if let Some(k) = key.strip_prefix(edge) {
            return k;
        }
    }
    key
}

/// Whether a special token's folded key ends a section or call (`..end`, `..stop`).
pub fn is_end_key(key: &str) -> bool {
    key.ends_with("end")
        || key.ends_with("stop")
        || key.ends_with("close")
        || key.starts_with("end")
}

/// Whether a folded key is a numbered placeholder a decoder printed for a special token it
/// had no text for (`<|reserved_token_163597|>`, `<|reserved_special_token_3|>`,
/// `<|extra_0|>`): opaque, so a reader takes it for whatever control token stands there
/// (an opener, a separator, a closer), never for text.
pub fn is_placeholder_key(key: &str) -> bool {
    key.bytes().any(|b| b.is_ascii_digit())
        && (key.contains("reserved") || key.starts_with("extra") || key.starts_with("unused"))
}

/// Whether nothing but whitespace and end-of-turn special tokens (`<|im_end|>`,
/// `<|eot_id|>`, `<｜end▁of▁sentence｜>`, `</s>`) follows `pos`, maybe ending in a closer
/// the end cut short (`</｜DS`): the text ends there as a turn, and a call whose closer a
/// stop sequence dropped ends with it.
pub fn rest_ends_turn(text: &str, mut pos: usize) -> bool {
    for _ in 0..8 {
        pos = super::text::skip_ws(text, pos);
        if pos >= text.len() {
            return true;
        }
        match tag_at(text, pos) {
            Some(t) if ends_turn(&t) => pos = t.span.end,
            // A closer the end cut short (`</｜DS`): nothing was written after it.
            _ => {
                return text.as_bytes()[pos] == b'<'
                    && super::text::cut_tag_start(text) == Some(pos)
            }
        }
    }
    false
}

/// Whether closing tokens of call markup stand at `pos` (after whitespace) and end their
/// line or the turn: `</function_calls>`, `<|tool_call_end|>`, `<tool_call|>`, any
/// format's. A call body right before them is over, whatever format's closer the model
/// wrote after it (a mixture of dialects).
pub fn closers_end_line(text: &str, mut pos: usize) -> bool {
    let mut seen = 0;
    for _ in 0..8 {
        let q = super::text::skip_ws(text, pos);
        match tag_at(text, q).filter(closes_a_call) {
            Some(t) => {
                seen += 1;
                pos = t.span.end;
            }
            None => break,
        }
    }
    let rest = text
        .get(pos..)
        .unwrap_or_default()
        .trim_start_matches([' ', '\t', '\r']);
    seen > 0 && (rest.is_empty() || rest.starts_with('\n'))
}

/// Whether a tag closes call markup of some format (`</function_calls>`, `<|tool_call_end|>`,
/// `<tool_call|>`) or ends the turn.
pub fn closes_a_call(t: &super::markup::Tag<'_>) -> bool {
    let key = t.key();
    match t.kind {
        Kind::Close => is_call_key(&key),
        Kind::Special => {
            is_call_key(&key) && (is_end_key(&key) || t.name.ends_with(['|', '｜'])) || ends_turn(t)
        }
        _ => false,
    }
}

/// The first place from `pos` (before `end`) where closing tokens of call markup stand and
/// end their line or the turn ([`closers_end_line`]): where a body a foreign closer ends
/// stops. At most a few dozen tags are looked at.
pub fn first_closers(text: &str, pos: usize, end: usize) -> Option<usize> {
    let bytes = text.as_bytes().get(..end)?;
    let mut from = pos;
    for _ in 0..64 {
        let lt = from + memchr::memchr(b'<', bytes.get(from..)?)?;
        if tag_at(text, lt).is_some_and(|t| closes_a_call(&t)) && closers_end_line(text, lt) {
            return Some(lt);
        }
        from = lt + 1;
    }
    None
}

/// Where the text ends as a turn: before the end-of-turn tokens and whitespace that close
/// it, and a closer the end cut short (the text's length when none do). A call body that
/// fills the text to its end when its closer was dropped fills it to here.
pub fn turn_end(text: &str) -> usize {
    // A closer the end cut short is no text of the body (`..}\n</tool_c`).
    let end = match super::text::cut_tag_start(text) {
        Some(c) => text[..c].trim_end().len(),
        None => text.trim_end().len(),
    };
    before_end_tokens(text, end)
}

/// Where the text before the whole end-of-turn tokens ending `text[..end]` ends (trimmed).
pub fn before_end_tokens(text: &str, mut end: usize) -> usize {
    for _ in 0..8 {
        let head = &text[..end];
        let Some(lt) = head.ends_with('>').then(|| head.rfind('<')).flatten() else {
            break;
        };
        match tag_at(text, lt) {
            Some(t) if t.span.end == end && ends_turn(&t) => end = text[..lt].trim_end().len(),
            _ => break,
        }
    }
    end
}

/// Whether a tag is an end-of-turn token.
fn ends_turn(t: &super::markup::Tag<'_>) -> bool {
    let key = t.key();
    match t.kind {
        Kind::Special => {
            (is_end_key(&key) && !is_call_key(&key))
                || matches!(
                    key.as_str(),
                    "eotid" | "eot" | "endofsentence" | "endoftext"
                )
        }
        Kind::Close => key == "s" || key == "endofturn",
        _ => matches!(key.as_str(), "endofturn" | "eos"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        assert!(is_call_key("toolcalls"));
        assert!(is_call_key("functioncall"));
        assert!(is_call_key("toolcallsectionbegin"));
        assert!(is_call_key("invoke"));
        assert!(!is_call_key("div"));
        assert_eq!(strip_edge("toolcallend"), "toolcall");
    }

    #[test]
    fn placeholders() {
        assert!(is_placeholder_key("reservedtoken163597"));
        assert!(is_placeholder_key("reservedspecialtoken3"));
        assert!(is_placeholder_key("extra0"));
        assert!(!is_placeholder_key("reserved"));
        assert!(!is_placeholder_key("toolcall"));
    }

    #[test]
    fn what_ends_a_turn() {
        assert!(rest_ends_turn("x", 1));
        assert!(rest_ends_turn("x <|im_end|>\n", 1));
        assert!(rest_ends_turn("x<｜end▁of▁sentence｜>", 1));
        assert!(rest_ends_turn("x</s>", 1));
        assert!(!rest_ends_turn("x <|im_end|> more", 1));
        assert!(!rest_ends_turn("x </tool_call>", 1));
        assert!(!rest_ends_turn("x <|tool_call_end|>", 1));
        assert!(!rest_ends_turn("x and prose", 1));
        assert_eq!(turn_end("call{} <|im_end|>\n"), 6);
        assert_eq!(turn_end("call{}<|eot_id|></s>"), 6);
        assert_eq!(turn_end("call{} </tool_call>"), 19);
        assert_eq!(turn_end("plain "), 5);
    }
}
