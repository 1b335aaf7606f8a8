//! Detection of a reply read through a view of it: written in metaspace (read decoded),
//! holding enabled names that no grammar spells (read with them aliased), opening with a
//! front end's glyph (read with it as whitespace), holding tokens spelled another way
//! than their formats write them (read respelled), or inside a chat template's turn tokens
//! (read without them). The view's spans are mapped back onto
//! the reply as written, which is what gets cleaned.
//!
//! May depend on: the crate root (`detect_viewed`, `might_leak`, `Input`), `extend` (the
//! turn's tokens), `aliases`, `metaspace`, `respell`, `clean`, `code`, `config`, `trace`,
//! `types`. No I/O.

use crate::config::Config;
use crate::trace::Trace;
use crate::types::{Detection, Family, Leak};
use crate::{aliases, clean, code, detect_viewed, grammar, metaspace, might_leak, respell, Input};

/// [`crate::might_leak`] for an agent with these tools: a name of theirs that no grammar spells is
/// read under its alias, as [`crate::detect`] reads it.
pub(crate) fn might_leak_for(text: &str, enabled_tools: &[String]) -> bool {
    might_leak(text) || aliases::aliased(text, enabled_tools).is_some_and(|a| might_leak(&a.text))
}

/// [`detect_viewed`] of `view`, the reply read another way (its tools `enabled`; `respelled`
/// when it is a respelled view or a view of one); `to_reply` puts the leaks found back on
/// the reply as written, which is then cleaned.
fn through_view<T: Trace>(
    input: &Input<'_>,
    config: &Config,
    trace: &mut T,
    (view, enabled, respelled): (&str, &[String], bool),
    to_reply: impl FnOnce(&mut Vec<Leak>),
) -> Detection {
    let mut d = detect_viewed(
        &Input {
            content: view,
            tools_used: input.tools_used,
            enabled_tools: enabled,
        },
        config,
        trace,
        respelled,
    );
    to_reply(&mut d.leaks);
    if !d.leaks.is_empty() {
        d.cleaned = clean::clean(input.content, &d.leaks, config);
    }
    d
}

/// [`detect_viewed`] of a reply written in metaspace: read decoded, its spans mapped back and
/// the reply as written cleaned.
pub(crate) fn in_metaspace<T: Trace>(
    input: &Input<'_>,
    config: &Config,
    trace: &mut T,
    decoded: &metaspace::Decoded,
    respelled: bool,
) -> Detection {
    let view = (decoded.text.as_str(), input.enabled_tools, respelled);
    let mut d = through_view(input, config, trace, view, |leaks| {
        for leak in leaks {
            leak.span = decoded.original(&leak.span);
        }
    });
    if !d.leaks.is_empty() {
        // The metaspace at the cut's ends is whitespace, which cleaning trims.
        d.cleaned = d
            .cleaned
            .map(|c| c.trim_end_matches('\u{2581}').trim_end().to_string());
    }
    d
}

/// [`detect_viewed`] of a reply that holds enabled names no grammar spells: read with them
/// aliased, the names and arguments mapped back and the reply as written cleaned (the
/// spans are the same in both texts).
pub(crate) fn under_aliases<T: Trace>(
    input: &Input<'_>,
    config: &Config,
    trace: &mut T,
    aliased: &aliases::Aliased,
    respelled: bool,
) -> Detection {
    let view = (aliased.text.as_str(), aliased.tools.as_slice(), respelled);
    through_view(input, config, trace, view, |leaks| aliased.restore(leaks))
}

/// [`detect_viewed`] of a reply opening with a front end's glyph, which ends at `past`
/// ([`crate::grammar::text::front_glyph`]): read with it as whitespace (the same length, so
/// the spans are the same), and a leak right after it takes it, the glyph having marked
/// only the leak.
pub(crate) fn past_glyph<T: Trace>(
    input: &Input<'_>,
    config: &Config,
    trace: &mut T,
    past: usize,
    respelled: bool,
) -> Detection {
    // Spaces then a line break: the reply then starts a line of its own with no indent (a
    // fence after the glyph is a fence), and the view has the reply's length.
    let text = format!("{}\n{}", " ".repeat(past - 1), &input.content[past..]);
    let view = (text.as_str(), input.enabled_tools, respelled);
    through_view(input, config, trace, view, |leaks| {
        if let Some(first) = leaks.first_mut() {
            if text[..first.span.start].trim().is_empty() {
                first.span.start = 0;
            }
        }
    })
}

/// [`detect_viewed`] of a reply holding tokens spelled another way than their formats write
/// them: read with the formats' spellings, the spans mapped back and the reply as written
/// cleaned. `None` when nothing is found so, or a call read so holds a replaced spelling in
/// its arguments (they would not be what the reply says): the reply is read as written.
pub(crate) fn respelled<T: Trace>(
    input: &Input<'_>,
    config: &Config,
    trace: &mut T,
    respelled: &respell::Respelled,
) -> Option<Detection> {
    let view = (respelled.text.as_str(), input.enabled_tools, true);
    let mut held = false;
    let d = through_view(input, config, trace, view, |leaks| {
        held = leaks.iter().flat_map(|l| &l.calls).any(|c| {
            respelled.holds_a_spelling(&c.name)
                || respelled.holds_a_spelling(&c.arguments.to_string())
        });
        for leak in leaks {
            leak.span = respelled.span(&leak.span);
        }
    });
    (!held && !d.leaks.is_empty()).then_some(d)
}

/// [`detect_viewed`] of a reply inside a chat template's turn, `inner` its own text (past an
/// assistant header, before the end-of-turn tokens): the spans shifted back, and when a
/// leak is found the header and the tokens go too, the template's markup around the reply.
pub(crate) fn in_turn<T: Trace>(
    input: &Input<'_>,
    config: &Config,
    trace: &mut T,
    inner: std::ops::Range<usize>,
    respelled: bool,
) -> Detection {
    let text = input.content;
    let view = (&text[inner.clone()], input.enabled_tools, respelled);
    through_view(input, config, trace, view, |leaks| {
        for leak in leaks.iter_mut() {
            leak.span = leak.span.start + inner.start..leak.span.end + inner.start;
        }
        if leaks.is_empty() {
            return;
        }
        let code = code::CodeRegions::find(text);
        crate::extend::take_turn_end(text, |at| code.contains(at), leaks);
    })
}

/// Whether `text` holds a fence labelled as a call's wrapper (```` ```tool_call ````): the
/// few bytes of each fence's info string, before any region is mapped.
pub(crate) fn holds_call_fence(text: &str) -> bool {
    static FENCE: std::sync::OnceLock<memchr::memmem::Finder<'static>> = std::sync::OnceLock::new();
    let bytes = text.as_bytes();
    let fence = FENCE.get_or_init(|| memchr::memmem::Finder::new("```"));
    fence.find_iter(bytes).any(|p| {
        let info = &bytes[p..];
        let info = &info[info.iter().take_while(|&&b| b == b'`').count()..];
        let end = memchr::memchr(b'\n', info).unwrap_or(info.len());
        std::str::from_utf8(&info[..end])
            .is_ok_and(|i| grammar::keys::labels_a_call_fence(i.trim()))
    })
}

/// The fences labelled as a call's wrapper (```` ```tool_call ````) whose opener no leak in
/// `leaks` covers, each read as a reply of its own: where all it holds is leaked markup, the
/// whole fence (its lines and the line break after it) is one `json_fence` leak with the
/// calls read there, whatever grammar read them, as a wrapper's tags would be. A fence holding
/// another fence's run is not read (so a fence read so opens no other). Also says whether
/// a verdict there depended on the tools.
pub(crate) fn in_call_fences(
    input: &Input<'_>,
    config: &Config,
    code: &code::CodeRegions,
    leaks: &[Leak],
) -> (Vec<Leak>, bool) {
    let text = input.content;
    let mut out = Vec::new();
    let mut asked = false;
    for r in code.regions() {
        // A fenced block opens its line; most regions are inline spans that do not.
        if r.start > 0 && text.as_bytes()[r.start - 1] != b'\n' {
            continue;
        }
        let block = &text[r.clone()];
        let Some((b'`', _, rest)) = code::fence_marker(block.as_bytes()) else {
            continue;
        };
        let open_end = memchr::memchr(b'\n', rest).map_or(rest.len(), |i| i);
        let info = std::str::from_utf8(&rest[..open_end]).unwrap_or_default();
        if info.is_empty() || !grammar::keys::labels_a_call_fence(info.trim()) {
            continue;
        }
        // A leak over the opener read the fence already (`json_fence`); one inside it is
        // in code, and goes.
        if leaks
            .iter()
            .any(|l| l.span.start <= r.start && r.start < l.span.end)
        {
            continue;
        }
        let Some(first) = block.find('\n').map(|i| i + 1) else {
            continue;
        };
        // The closing line, when the block ends in one.
        let last = block.rfind('\n').map_or(block.len(), |i| i + 1);
        let inner_end =
            match last > first && code::fence_marker(&block.as_bytes()[last..]).is_some() {
                true => last,
                false => block.len(),
            };
        let inner = &block[first..inner_end];
        // A JSON body is `json_fence`'s to read or leave, by its narrower rule.
        if inner.trim_start().starts_with(['{', '['])
            || inner.contains("```")
            || inner.contains("~~~")
        {
            continue;
        }
        let d = detect_viewed(
            &Input {
                content: inner,
                tools_used: input.tools_used,
                enabled_tools: input.enabled_tools,
            },
            config,
            &mut crate::trace::NoTrace,
            false,
        );
        asked |= d.depends_on_tools;
        let read_all = d.cleaned.as_deref().is_some_and(|c| c.trim().is_empty());
        if !read_all || d.leaks.iter().all(|l| l.calls.is_empty()) {
            continue;
        }
        let end = match text.as_bytes().get(r.end) {
            Some(b'\n') => r.end + 1,
            _ => r.end,
        };
        // Reported as a fenced call, whatever grammar its body is in: the fence is the
        // wrapper, as `json_fence` reports its own.
        out.push(Leak {
            family: Family::JsonFence,
            span: r.start..end,
            calls: d
                .leaks
                .iter()
                .flat_map(|l| l.calls.iter().cloned())
                .collect(),
            results: d.leaks.into_iter().flat_map(|l| l.results).collect(),
        });
    }
    (out, asked)
}
