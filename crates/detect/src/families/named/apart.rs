//! Where markup stands apart from the text around it: the rule that tells a call from a
//! name mentioned in a sentence, shared by the bare shapes here and by the families that
//! read wrapped markup (`xml_tool`, `json_fence`, `markup`).
//!
//! May depend on: `crate::remnant` (what a bracketed call token is); otherwise it reads
//! the text only.

/// Whether markup starting at `start` stands apart from the text before it: at the start of
/// the text or a line, or after the end of a sentence, a colon or a tag (glued to it or
/// not), in any script: full-width punctuation ends a clause too (`执行：NAME{..}`), and in
/// a script written without spaces a change to a Latin name is a word's edge
/// (`我来执行search{..}`); or after a bracketed token of call markup (`[TOOL_CALLS] NAME{..}`).
/// A name inside a sentence (`use search {..}`) is prose about the
/// tool, and one after code (`map[string]string{..}`) is code.
pub(crate) fn stands_before(text: &str, start: usize) -> bool {
    let head = text.get(..start).unwrap_or_default();
    let next = text.get(start..).and_then(|r| r.chars().next());
    let head = head.trim_end_matches([' ', '\t']);
    match head.chars().next_back() {
        None => true,
        // A bracketed opener of call markup (`[TOOL_CALLS]`), as the remnant rule reads it.
        Some(']') => crate::remnant::bracket_token_ending(head).is_some_and(|(_, closes)| !closes),
        Some(c) => {
            matches!(
                c,
                '\n' | '\r' | '.' | '!' | '?' | ':' | '>' | '：' | '。' | '！' | '？' | '；' | '，'
            ) || (unspaced_script(c) && next.is_some_and(|n| n.is_ascii_alphabetic()))
        }
    }
}

/// Whether `c` belongs to a script written without spaces between words (Chinese,
/// Japanese, Korean, their full-width forms).
fn unspaced_script(c: char) -> bool {
    matches!(c, '\u{3000}'..='\u{9FFF}' | '\u{AC00}'..='\u{D7AF}' | '\u{FF00}'..='\u{FFEF}')
}

/// Whether markup ending at `end` stands apart from the text after it: the end of the text
/// or a line, a control token or more markup, or a new sentence.
pub(crate) fn stands_after(text: &str, end: usize) -> bool {
    let rest = text.get(end..).unwrap_or_default();
    let t = rest.trim_start_matches([' ', '\t']);
    match t.chars().next() {
        None => true,
        Some(c) if matches!(c, '\n' | '\r' | '<' | '[' | '{') || c.is_uppercase() => true,
        Some('.' | '!') => t[1..].chars().next().is_none_or(char::is_whitespace),
        Some(_) => false,
    }
}
