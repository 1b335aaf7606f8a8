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
use crate::types::{Detection, Leak};
use crate::{aliases, clean, code, detect_viewed, metaspace, might_leak, respell, Input};

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
