//! The table's rows as the engine reads them: every token of a row in every spelling the row
//! allows, derived once from the row's metadata ([`Spell`]), so that a format written with
//! ASCII bars where its tokenizer has `｜`, or with `_` where it has `▁`, is the same format
//! without one more row or detector per spelling.
//!
//! Built once (`families::rows()`); the strings of the derived spellings live for the
//! process, like the table itself.
//!
//! May depend on: `super::format` (the row types), `super::bodies`, `crate::grammar`.

use super::bodies::Grammar;
// `spellings` keeps its public path here, beside the rows it spells.
pub use super::format::spellings;
use super::format::{Format, Spell, BARS};
use crate::grammar::xml::InvokeSyntax;

/// One row of the table with its tokens in all their spellings.
#[derive(Clone)]
pub struct Row {
    /// The row as written in the table.
    pub format: &'static Format,
    /// Literal markers one of which any leak contains (the prefilter reads them).
    pub triggers: Vec<&'static str>,
    pub section_open: Vec<&'static str>,
    pub section_close: Vec<&'static str>,
    pub call_open: Vec<&'static str>,
    pub call_close: Vec<&'static str>,
    pub bare_call: Vec<&'static str>,
    pub sep: Vec<&'static str>,
    pub trailing: Vec<&'static str>,
    pub inner: Vec<&'static str>,
    pub foreign: Vec<&'static str>,
    /// The row's grammar, its invoke tags respelled too.
    pub grammar: &'static Grammar,
}

impl Row {
    /// Every literal token the row reads, in each spelling it reads.
    pub fn tokens(&self) -> impl Iterator<Item = &'static str> + '_ {
        [
            &self.triggers,
            &self.section_open,
            &self.section_close,
            &self.call_open,
            &self.call_close,
            &self.bare_call,
            &self.sep,
            &self.trailing,
            &self.inner,
        ]
        .into_iter()
        .flatten()
        .copied()
    }

    /// Derives the row's spellings.
    pub fn compile(f: &'static Format) -> Row {
        let all = |list: &[&'static str]| -> Vec<&'static str> {
            let mut out = Vec::new();
            for t in list {
                for s in spellings(t, f.spell) {
                    if !out.contains(&s) {
                        out.push(s);
                    }
                }
            }
            out
        };
        let mut triggers = all(f.triggers);
        for t in all(f.inner) {
            if !triggers.contains(&t) {
                triggers.push(t);
            }
        }
        Row {
            format: f,
            triggers,
            section_open: all(f.section_open),
            section_close: all(f.section_close),
            call_open: all(f.call_open),
            call_close: all(f.call_close),
            bare_call: all(f.bare_call),
            sep: all(f.sep),
            trailing: all(f.trailing),
            inner: all(f.inner),
            foreign: all(f.foreign),
            grammar: respell_grammar(&f.grammar, f.spell),
        }
    }
}

impl Row {
    /// The row narrowed to the spellings that occur in `text`: a message uses one spelling,
    /// and searching for the eight others of every token would cost a pass each. One pass
    /// over the `<` followed by a bar finds them. A row without spellings is itself.
    pub fn present(&self, text: &str) -> std::borrow::Cow<'_, Row> {
        if self.format.spell == Spell::Exact {
            return std::borrow::Cow::Borrowed(self);
        }
        let bytes = text.as_bytes();
        let mut seen: Vec<&'static str> = Vec::new();
        for p in memchr::memchr_iter(b'<', bytes) {
            let next = bytes.get(p + 1..p + 3).unwrap_or_default();
            if !(next.first() == Some(&b'|')
                || next.starts_with(&[0xEF, 0xBD])
                || next.first() == Some(&b'/'))
            {
                continue;
            }
            let rest = bytes.get(p..).unwrap_or_default();
            for t in self.all_tokens() {
                let tb = t.as_bytes();
                if tb.get(1) == rest.get(1) && rest.starts_with(tb) && !seen.contains(&t) {
                    seen.push(t);
                }
            }
        }
        // A list the text holds none of keeps its canonical token: it matches nothing, and
        // the row keeps its meaning (no call opener at all is another format).
        let keep = |list: &[&'static str]| -> Vec<&'static str> {
            let kept: Vec<&'static str> = list
                .iter()
                .copied()
                .filter(|t| !t.starts_with('<') || seen.contains(t))
                .collect();
            match (kept.is_empty(), list.first()) {
                (true, Some(first)) => vec![*first],
                _ => kept,
            }
        };
        std::borrow::Cow::Owned(Row {
            format: self.format,
            // The engine never reads them.
            triggers: Vec::new(),
            section_open: keep(&self.section_open),
            section_close: keep(&self.section_close),
            call_open: keep(&self.call_open),
            call_close: keep(&self.call_close),
            bare_call: keep(&self.bare_call),
            sep: keep(&self.sep),
            trailing: keep(&self.trailing),
            inner: keep(&self.inner),
            foreign: keep(&self.foreign),
            grammar: self.grammar,
        })
    }

    fn all_tokens(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.section_open
            .iter()
            .chain(&self.section_close)
            .chain(&self.call_open)
            .chain(&self.call_close)
            .chain(&self.bare_call)
            .chain(&self.sep)
            .chain(&self.trailing)
            .chain(&self.inner)
            .chain(&self.foreign)
            .copied()
    }
}

/// The row's grammar with its invoke tags in every spelling: an invoke grammar becomes the
/// first of its spellings that reads the body.
fn respell_grammar(g: &'static Grammar, spell: Spell) -> &'static Grammar {
    let Grammar::Invoke(syn) = g else {
        return g;
    };
    if spell == Spell::Exact || !syn.invoke_open.contains('｜') {
        return g;
    }
    let mut alts = vec![Grammar::Invoke(syn)];
    for bar in &BARS[1..] {
        let r =
            |s: &'static str| -> &'static str { Box::leak(s.replace('｜', bar).into_boxed_str()) };
        let respelled: &'static InvokeSyntax = Box::leak(Box::new(InvokeSyntax {
            invoke_open: r(syn.invoke_open),
            invoke_close: r(syn.invoke_close),
            param_open: r(syn.param_open),
            param_close: r(syn.param_close),
            prefix: syn.prefix,
            element_params: syn.element_params,
            values: syn.values,
            string_attr: syn.string_attr,
            cut_at_end: syn.cut_at_end,
        }));
        alts.push(Grammar::Invoke(respelled));
    }
    Box::leak(Box::new(Grammar::Either(Box::leak(
        alts.into_boxed_slice(),
    ))))
}
