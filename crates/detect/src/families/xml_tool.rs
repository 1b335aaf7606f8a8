//! `cline_xml`: a call written as an XML element named after the tool, each child named after
//! a parameter, as the prompts of Cline, Roo Code, Kilo Code and Claude teach:
//!
//! ```text
//! <read_file>
//! <path>src/main.rs</path>
//! </read_file>
//! ```
//!
//! Any tag can be a tool's name, so the element counts only when it names a tool the agent
//! has enabled, stands apart from the text around it (its own lines, or a sentence of its
//! own), holds nothing but its parameter elements (each once, whitespace between) and is not
//! an HTML element or a prompt-structure tag (`<think>`, `<answer>`, ...). An element with no
//! parameter (`<list_memories></list_memories>`) counts only where a call ends the turn: at
//! the end of the message; so does one whose attributes are its arguments, left open
//! (`<list_files path="src" recursive="true">` and nothing after it). Values are the text between a parameter's tags (one leading and
//! trailing line break trimmed, code inside kept as written), typed like every untyped XML
//! value: JSON when the whole value is JSON.
//!
//! The tools are asked only once an element of that shape is complete, so HTML and XML
//! answers rarely make the worker fetch them.
//!
//! The element is read by the markup net's reader (`super::markup::tool_element`, the same
//! rules for values, standing apart and parameters written once); this module keeps the
//! prefilter's probe.
//!
//! May depend on: `super::markup` (the reader), `super::tag_names`, `super::util`,
//! `crate::grammar` (byte classes), `crate::types`, `crate::Ctx`.

use super::tag_names::not_a_tool;
use super::util::{merge, with_trailing, Block, MAX_CANDIDATES};
use crate::grammar::bytes as class;
use crate::types::Family;
use crate::{Ctx, Leak};

/// A bare `<`, confirmed by [`probe`].
pub(crate) const TRIGGERS: &[&str] = &["<"];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

/// Longest tag name read.
const MAX_NAME: usize = 64;

/// Appends the leaks found in `text`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let bytes = text.as_bytes();
    let mut blocks: Vec<Block> = Vec::new();
    let mut from = 0;
    let mut seen = 0;
    while let Some(p) =
        memchr::memchr(b'<', bytes.get(from..).unwrap_or_default()).map(|i| from + i)
    {
        from = p + 1;
        if !probe(bytes, p) || ctx.quoted(p) {
            continue;
        }
        seen += 1;
        if seen > MAX_CANDIDATES {
            break;
        }
        if let Some((end, call)) = super::markup::tool_element(text, p, ctx) {
            blocks.push((p..with_trailing(text, end, &[]), vec![call]));
            from = end;
        }
    }
    merge(text, Family::ClineXml, blocks, out);
}

/// The prefilter's look at a `<`: a start tag with a plain name that is not markup of its
/// own, followed (whitespace between) by another start tag, an end tag, or a JSON object
/// (`<run_commands> {"commands": [..]} </run_commands>`: its arguments as one object).
/// Bytes only: it runs at every `<` followed by a letter.
pub(crate) fn probe(bytes: &[u8], p: usize) -> bool {
    let Some(name) = tag_name(bytes, p) else {
        // Most texts end in neither `>` nor whitespace: one look, then no more.
        let ends = bytes
            .last()
            .is_some_and(|&b| b == b'>' || b.is_ascii_whitespace());
        return ends && attributes_end_text(bytes, p);
    };
    let mut i = p + 1 + name.len() + 1;
    while bytes.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    let next = match bytes.get(i..i + 2) {
        Some([b'<', b'/']) => true,
        Some([b'<', _]) => tag_name(bytes, i).is_some(),
        // A quoted key right after the brace: code's `impl<T> {` stops there.
        Some([b'{', b'"']) => true,
        _ => false,
    };
    // The name is ASCII here or not a listed tag at all.
    next && std::str::from_utf8(name).map_or(true, |n| !not_a_tool(n))
}

/// A start tag with attributes that ends the text (`<list_files path="src" recursive="true">`,
/// whitespace after it): an element named after a tool whose attributes are its arguments,
/// left open where the turn ended. Its `>` is the last byte but whitespace and the first
/// after `p`, so most tags (`<a href=..>` in an answer) stop at one look at the text's end.
#[cold]
#[inline(never)]
fn attributes_end_text(bytes: &[u8], p: usize) -> bool {
    let end = bytes.trim_ascii_end().len();
    if end == 0 || bytes[end - 1] != b'>' || end - p > 4096 {
        return false;
    }
    let rest = &bytes[p + 1..end];
    let name = class::run(rest, class::WORD | class::DASH, MAX_NAME + 1);
    name > 0
        && name <= MAX_NAME
        && rest.get(name) == Some(&b' ')
        && (rest[0].is_ascii_alphabetic() || rest[0] >= 0xC2)
        && memchr::memchr(b'>', rest) == Some(rest.len() - 1)
        && memchr::memchr(b'=', rest).is_some()
}

/// The name of a start tag `<name>` at `p`, as bytes: letters, digits, `_`, `-`, `.`, `:` and bytes
/// of other scripts, at most [`MAX_NAME`], closed by `>`.
fn tag_name(bytes: &[u8], p: usize) -> Option<&[u8]> {
    let rest = bytes.get(p + 1..)?;
    let first = *rest.first()?;
    if !(first.is_ascii_alphabetic() || first == b'_' || first >= 0xC2) {
        return None;
    }
    let len = class::run(
        rest,
        class::WORD | class::DASH | class::DOT | class::COLON,
        MAX_NAME + 1,
    );
    (len <= MAX_NAME && rest.get(len) == Some(&b'>')).then(|| &rest[..len])
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn run(text: &str, tools: &[&str]) -> crate::Detection {
        super::super::testing::detect_with(text, tools)
    }

    #[test]
    fn an_element_named_after_an_enabled_tool() {
        let t = "Let me read it.\n<read_file>\n<path>src/main.rs</path>\n</read_file>";
        let d = run(t, &["read_file"]);
        assert_eq!(
            d.leaks[0].calls[0].arguments,
            json!({"path": "src/main.rs"})
        );
        assert_eq!(d.cleaned.as_deref(), Some("Let me read it."));
        let t = "<write_to_file>\n<path>a.html</path>\n<content>\n<html><body>hi</body></html>\n</content>\n</write_to_file>\nDone.";
        let d = run(t, &["write_to_file"]);
        assert_eq!(
            d.leaks[0].calls[0].arguments,
            json!({"path": "a.html", "content": "<html><body>hi</body></html>"})
        );
        assert_eq!(d.cleaned.as_deref(), Some("Done."));
    }

    #[test]
    fn answers_in_xml_and_html_stay() {
        for (t, tools) in [
            (
                "<read_file>\n<path>a</path>\n</read_file>",
                &["write_file"][..],
            ),
            (
                "<person>\n<name>Bob</name>\n<name>Al</name>\n</person>",
                &["person"],
            ),
            ("<ul>\n<li>one</li>\n</ul>", &["ul"]),
            (
                "Use <read_file><path>a</path></read_file> to read a file.",
                &["read_file"],
            ),
            (
                "<list_memories></list_memories> lists them.",
                &["list_memories"],
            ),
            ("<read_file>\n<path>a</path>", &["read_file"]),
        ] {
            assert!(run(t, tools).is_clean(), "{t}");
        }
    }

    #[test]
    fn an_empty_element_only_ends_the_message() {
        assert!(!run("<list_memories></list_memories>", &["list_memories"]).is_clean());
        assert!(!run(
            "Checking.\n<list_memories>\n</list_memories>\n",
            &["list_memories"]
        )
        .is_clean());
    }

    #[test]
    fn html_never_asks_for_the_tools() {
        let d = run("<ul>\n<li>a</li>\n</ul>\n<div>\n<p>x</p>\n</div>", &[]);
        assert!(!d.depends_on_tools);
    }
}
