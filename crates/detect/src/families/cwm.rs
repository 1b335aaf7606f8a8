//! `cwm`: Code World Model's tool block.
//!
//! `<tool: function>\nterminal find . -name "*.py"\n</tool>`
//!
//! The first word of the block is the tool, the rest (trimmed, possibly several lines) is
//! its command line: `{"command": "find . -name \"*.py\""}`. `<tool: ...>` could be ordinary
//! text, so the block counts only when the tool is enabled for the agent and the command is
//! not empty.
//!
//! May depend on: `crate::families::util`, `crate::json5`, `crate::types`, `crate::Ctx`.

use super::util::MAX_CANDIDATES;
use super::util::{find_from, is_tool_name};
use crate::types::{Call, Family};
use crate::{Ctx, Leak};
use serde_json::json;

const OPEN: &str = "<tool: function>";
const CLOSE: &str = "</tool>";

/// Literal markers one of which any leak of this family contains.
pub(crate) const TRIGGERS: &[&str] = &[OPEN];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

/// Appends the leaks of this family found in `text` to `out`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let mut from = 0;
    for _ in 0..MAX_CANDIDATES {
        let Some(start) = find_from(text, OPEN, from) else {
            return;
        };
        from = start + OPEN.len();
        if ctx.quoted(start) {
            continue;
        }
        let Some(close) = find_from(text, CLOSE, from) else {
            return;
        };
        let Some(body) = text.get(from..close) else {
            continue;
        };
        // The tool line starts on the line after the opening tag.
        if !body.starts_with('\n') && !body.starts_with("\r\n") {
            continue;
        }
        let body = body.trim();
        let (name, command) = body
            .split_once(char::is_whitespace)
            .map_or((body, ""), |(n, c)| (n, c.trim()));
        if !is_tool_name(name) || !ctx.tool_enabled(name) || command.is_empty() {
            continue;
        }
        let end = close + CLOSE.len();
        out.push(Leak {
            family: Family::Cwm,
            span: start..end,
            calls: vec![Call {
                name: name.to_string(),
                arguments: json!({ "command": command }),
            }],
            results: Vec::new(),
        });
        from = end;
    }
}

#[cfg(test)]
mod tests {

    use super::super::testing::{run_family, Out};

    fn run_with(text: &str, tools: &[&str]) -> Out {
        run_family(super::find, text, tools)
    }
    use serde_json::json;

    fn run(text: &str, tools: &[&str]) -> Out {
        run_with(text, tools)
    }

    #[test]
    fn enabled_tool_with_command() {
        let t = "Let me look.\n<tool: function>\nterminal ls -la\n</tool>\nThen we see.";
        let d = run(t, &["terminal"]);
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"command": "ls -la"}));
        assert_eq!(d.cleaned.as_deref(), Some("Let me look.\n\nThen we see."));
    }

    #[test]
    fn unknown_tool_or_prose_is_not_a_leak() {
        let t = "<tool: function>\nterminal ls\n</tool>";
        assert!(run(t, &[]).is_clean());
        let t = "A tag like <tool: function> ... </tool> marks a call.";
        assert!(run(t, &["terminal"]).is_clean());
    }

    #[test]
    fn unclosed_block_is_not_a_leak() {
        assert!(run("<tool: function>\nterminal ls\n", &["terminal"]).is_clean());
    }
}
