//! ChatGLM3's call (THUDM's `tool_registry` and chat template): the tool's name alone on a
//! line, then a ```` ```python ```` fence (or a bare one) holding one call of the generic
//! word `tool_call(k=v, ..)` with the arguments. The name above says which tool; the code
//! below is that call's arguments, and nothing of the kind is code to show. A fence is
//! code, so this reads a code region, as `tool_code` fences are read; only for an enabled
//! tool, and only a fence whose whole content is that one call.
//!
//! May depend on: `crate::envelope` (what a generic call word is), `crate::grammar`,
//! `crate::families::util`, `crate::types`, `crate::Ctx`.

use crate::families::util::{with_trailing, Block, MAX_CANDIDATES};
use crate::grammar::python::{parse_call, PyOpts};
use crate::types::Call;
use crate::Ctx;

/// The fences under a name line whose one call is a generic call word's.
pub(super) fn fences(text: &str, ctx: &Ctx<'_>) -> Vec<Block> {
    let mut out = Vec::new();
    for r in ctx.code().regions().iter().take(MAX_CANDIDATES) {
        let Some(fence) = text.get(r.clone()) else {
            continue;
        };
        let opener = fence.trim_start_matches(' ');
        let Some(rest) = opener.strip_prefix("```") else {
            continue;
        };
        let Some(nl) = rest.find('\n') else { continue };
        let info = rest[..nl].trim();
        if !(info.is_empty() || info.eq_ignore_ascii_case("python")) || ctx.in_reasoning(r.start) {
            continue;
        }
        let body_at = r.start + (fence.len() - rest.len()) + nl + 1;
        let Some(call) = one_call(text, body_at, r.end) else {
            continue;
        };
        let Some((line_start, name)) = name_line(text, r.start) else {
            continue;
        };
        if !ctx.tool_enabled(name) {
            continue;
        }
        let call = Call {
            name: name.to_string(),
            arguments: call.arguments,
        };
        out.push((line_start..with_trailing(text, r.end, &[]), vec![call]));
    }
    out
}

/// The one generic call word's call the fence body from `at` to the fence's end holds.
fn one_call(text: &str, at: usize, end: usize) -> Option<Call> {
    let q = at + (text.get(at..end)?.len() - text.get(at..end)?.trim_start().len());
    let (call, after) = parse_call(text, q, PyOpts::LENIENT)?;
    let rest = text.get(after..end)?.trim();
    let closed = rest.is_empty() || rest.trim_start_matches('`').is_empty();
    (closed && crate::envelope::is_call_word(&call.name) && call.arguments.is_object())
        .then_some(call)
}

/// The line right above the fence opening at `fence`, when it holds only a name: its start
/// and the name.
fn name_line(text: &str, fence: usize) -> Option<(usize, &str)> {
    let head = text.get(..fence)?.trim_end_matches([' ', '\t']);
    let head = head.strip_suffix('\n')?;
    let head = head.strip_suffix('\r').unwrap_or(head);
    let start = head.rfind('\n').map_or(0, |i| i + 1);
    let name = head.get(start..)?.trim();
    crate::grammar::is_tool_name(name)
        .then(|| (start + head[start..].find(name).unwrap_or(0), name))
}
