//! Detection of a reply read through a view of it: written in metaspace (read decoded),
//! holding enabled names that no grammar spells (read with them aliased), or opening with a
//! front end's glyph (read with it as whitespace). The view's spans are mapped back onto
//! the reply as written, which is what gets cleaned.
//!
//! May depend on: the crate root (`detect_traced`, `might_leak`, `Input`), `aliases`,
//! `metaspace`, `clean`, `config`, `trace`, `types`. No I/O.

use crate::config::Config;
use crate::trace::Trace;
use crate::types::{Detection, Leak};
use crate::{aliases, clean, detect_traced, metaspace, might_leak, Input};

/// [`crate::might_leak`] for an agent with these tools: a name of theirs that no grammar spells is
/// read under its alias, as [`crate::detect`] reads it.
pub(crate) fn might_leak_for(text: &str, enabled_tools: &[String]) -> bool {
    might_leak(text) || aliases::aliased(text, enabled_tools).is_some_and(|a| might_leak(&a.text))
}

/// [`detect_traced`] of `view`, the reply read another way (its tools `enabled`); `to_reply`
/// puts the leaks found back on the reply as written, which is then cleaned.
fn through_view<T: Trace>(
    input: &Input<'_>,
    config: &Config,
    trace: &mut T,
    (view, enabled): (&str, &[String]),
    to_reply: impl FnOnce(&mut Vec<Leak>),
) -> Detection {
    let mut d = detect_traced(
        &Input {
            content: view,
            tools_used: input.tools_used,
            enabled_tools: enabled,
        },
        config,
        trace,
    );
    to_reply(&mut d.leaks);
    if !d.leaks.is_empty() {
        d.cleaned = clean::clean(input.content, &d.leaks, config);
    }
    d
}

/// [`detect_traced`] of a reply written in metaspace: read decoded, its spans mapped back and
/// the reply as written cleaned.
pub(crate) fn in_metaspace<T: Trace>(
    input: &Input<'_>,
    config: &Config,
    trace: &mut T,
    decoded: &metaspace::Decoded,
) -> Detection {
    let view = (decoded.text.as_str(), input.enabled_tools);
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

/// [`detect_traced`] of a reply that holds enabled names no grammar spells: read with them
/// aliased, the names and arguments mapped back and the reply as written cleaned (the
/// spans are the same in both texts).
pub(crate) fn under_aliases<T: Trace>(
    input: &Input<'_>,
    config: &Config,
    trace: &mut T,
    aliased: &aliases::Aliased,
) -> Detection {
    let view = (aliased.text.as_str(), aliased.tools.as_slice());
    through_view(input, config, trace, view, |leaks| aliased.restore(leaks))
}

/// [`detect_traced`] of a reply opening with a front end's glyph, which ends at `past`
/// ([`crate::grammar::text::front_glyph`]): read with it as whitespace (the same length, so
/// the spans are the same), and a leak right after it takes it, the glyph having marked
/// only the leak.
pub(crate) fn past_glyph<T: Trace>(
    input: &Input<'_>,
    config: &Config,
    trace: &mut T,
    past: usize,
) -> Detection {
    // Spaces then a line break: the reply then starts a line of its own with no indent (a
    // fence after the glyph is a fence), and the view has the reply's length.
    let text = format!("{}\n{}", " ".repeat(past - 1), &input.content[past..]);
    let view = (text.as_str(), input.enabled_tools);
    through_view(input, config, trace, view, |leaks| {
        if let Some(first) = leaks.first_mut() {
            if text[..first.span.start].trim().is_empty() {
                first.span.start = 0;
            }
        }
    })
}
