//! How the engine reads one call body: the [`Grammar`] a row of the table names, handed
//! to the kit (`crate::grammar`) with the bounds the engine found (the call's closer), and
//! the closer search that keeps repeated candidates linear.
//!
//! May depend on: `crate::grammar`, `crate::types`, `crate::Ctx`.

use crate::grammar::brace::{self, BraceSyntax};
use crate::grammar::json::{self, JsonCalls, NamedJson};
use crate::grammar::keys::turn_end;
use crate::grammar::kv::{self, KvSyntax};
use crate::grammar::python::{self, PyOpts};
use crate::grammar::text::{skip_ws, Finder};
use crate::grammar::xml::{self, InvokeSyntax};
use crate::types::Call;
use crate::Ctx;

/// A custom grammar: reads the calls of one call body at `pos`, within `limit` when the
/// call's closer was found; returns the calls and the offset past them.
pub type CustomGrammar = fn(&str, usize, Option<usize>, &Ctx<'_>) -> Option<(Vec<Call>, usize)>;

/// What the calls of a format are written in.
pub enum Grammar {
    /// JSON call objects.
    Json(JsonCalls),
    /// `NAME<sep>{json}`.
    Named(NamedJson),
    /// A run of `<invoke>`-like elements.
    Invoke(&'static InvokeSyntax),
    /// A name and key/value tag pairs, up to the call's closer.
    Kv(&'static KvSyntax),
    /// `call:NAME{k:v}`, up to the call's closer.
    Brace(&'static BraceSyntax),
    /// Python keyword calls one after another (a list accepted too).
    PyCalls,
    /// The first grammar that reads the body.
    Either(&'static [Grammar]),
    /// A grammar of the format's own.
    Custom(CustomGrammar),
}

/// Closers searched from increasing positions, each remembered (see [`Finder`]).
pub struct Closers<'t> {
    text: &'t str,
    finders: Vec<(&'static str, Finder<'t>)>,
}

impl<'t> Closers<'t> {
    /// A closer search over `text`.
    pub fn new(text: &'t str) -> Closers<'t> {
        Closers {
            text,
            finders: Vec::new(),
        }
    }

    /// The earliest of `needles` at or after `from`: its offset and length.
    pub fn find(&mut self, needles: &[&'static str], from: usize) -> Option<(usize, usize)> {
        let mut best: Option<(usize, usize)> = None;
        for &n in needles {
            let i = match self.finders.iter().position(|(k, _)| *k == n) {
                Some(i) => i,
                None => {
                    self.finders.push((n, Finder::new(self.text, n)));
                    self.finders.len() - 1
                }
            };
            if let Some(p) = self.finders[i].1.find(from) {
                if best.is_none_or(|(b, l)| p < b || (p == b && n.len() > l)) {
                    best = Some((p, n.len()));
                }
            }
        }
        best
    }
}

/// `{"NAME": {..}}` in a format's markup ([`keyed_call`]), for an enabled tool: the key
/// alone says nothing else of a call.
fn keyed_in_markup(text: &str, pos: usize, ctx: &Ctx<'_>) -> Option<(Vec<Call>, usize)> {
    let (v, end) = json::value_at(text, skip_ws(text, pos))?;
    let call = keyed_call(&v).filter(|c| ctx.tool_enabled(&c.name))?;
    Some((vec![call], end))
}

/// A call keyed by its tool's name, the whole object: `{"NAME": {args}}`, or
/// `{"NAME": {"parameters": {args}}}` with one arguments key inside. Whether `NAME` is an
/// enabled tool is the caller's check; read where the object is the whole message
/// (`llama3_json`) or inside a format's markup ([`parse`]).
pub(super) fn keyed_call(v: &serde_json::Value) -> Option<Call> {
    let obj = v.as_object()?;
    let (name, inner) = obj.iter().next().filter(|_| obj.len() == 1)?;
    let args = inner.as_object()?;
    if !crate::grammar::is_tool_name(name) {
        return None;
    }
    let arguments = match args.iter().next() {
        Some((k, a))
            if args.len() == 1 && a.is_object() && crate::grammar::keys::is_args_key(k) =>
        {
            a.clone()
        }
        _ => inner.clone(),
    };
    Some(Call {
        name: name.clone(),
        arguments,
    })
}

/// Parses one call body with `g`.
pub fn parse(
    g: &Grammar,
    text: &str,
    pos: usize,
    limit: Option<usize>,
    ctx: &Ctx<'_>,
) -> Option<(Vec<Call>, usize)> {
    let scope = match limit {
        Some(l) => text.get(..l)?,
        None => text,
    };
    match g {
        Grammar::Json(j) => json::parse(scope, pos, j).or_else(|| keyed_in_markup(scope, pos, ctx)),
        Grammar::Named(n) => json::parse_named(scope, pos, n).map(|(c, e)| (vec![c], e)),
        Grammar::Invoke(syn) => {
            let mut close = Finder::new(text, syn.invoke_close);
            let at = skip_ws(scope, pos);
            if limit.is_some() || !syn.cut_at_end {
                return xml::parse_invoke_run(scope, at, syn, &mut close);
            }
            // The run's last invoke may have lost its closers at the end of the text (as
            // `xml_invoke` reads Anthropic's): then only for an enabled tool (a cut between
            // two parameters looks the same).
            let (calls, end, cut) = xml::parse_invoke_run_to_end(scope, at, syn, &mut close)?;
            let named = |c: &Call| ctx.tool_enabled(&c.name);
            (!cut || calls.last().is_some_and(named)).then_some((calls, end))
        }
        // Key/value pairs fill the body to the limit, or the text to its end (as a brace
        // body does, below).
        Grammar::Kv(syn) => {
            // With no closer of its own, a body ends at the turn's end, or where another
            // format's closer ends its line (a mixture of dialects).
            let l = limit.unwrap_or_else(|| {
                let end = turn_end(text);
                crate::grammar::keys::first_closers(text, pos, end).unwrap_or(end)
            });
            kv::parse(text, pos, l, syn, None)
                .or_else(|| {
                    let n = glued_name(text.get(skip_ws(text, pos)..l)?, syn, ctx)?;
                    kv::parse(text, pos, l, syn, Some(n))
                })
                .map(|c| (vec![c], l))
        }
        // A brace call fills its body to the limit; with no closer found it fills the text
        // to its end, which the engine takes only where the closer may be missing there
        // (`format::Missing`).
        Grammar::Brace(syn) => {
            let l = limit.unwrap_or_else(|| turn_end(text));
            brace::parse(text.get(..l)?, pos, syn).map(|c| (vec![c], l))
        }
        Grammar::PyCalls => py_calls(scope, pos),
        Grammar::Either(gs) => gs.iter().find_map(|g| parse(g, text, pos, limit, ctx)),
        Grammar::Custom(f) => f(text, pos, limit, ctx),
    }
}

/// Where the name ends in a key/value body whose first key lost its opener and runs into
/// the name (`read_filepath</arg_key>`): after the longest enabled tool's name the glued
/// word starts with.
fn glued_name(body: &str, syn: &KvSyntax, ctx: &Ctx<'_>) -> Option<usize> {
    let word = body.get(..body.find('<')?)?;
    if !body.get(word.len()..)?.starts_with(syn.key.1) {
        return None;
    }
    ctx.enabled_tools()
        .iter()
        .filter(|t| word.len() > t.len() && word.starts_with(t.as_str()))
        .map(String::len)
        .max()
}

/// Python keyword calls one after another (whitespace between), or one list of them.
fn py_calls(text: &str, pos: usize) -> Option<(Vec<Call>, usize)> {
    let mut at = skip_ws(text, pos);
    if text.as_bytes().get(at) == Some(&b'[') {
        return python::parse_call_list(text, at, PyOpts::STRICT);
    }
    let mut calls = Vec::new();
    let mut end = at;
    while let Some((c, e)) = python::parse_call(text, at, PyOpts::STRICT) {
        calls.push(c);
        end = e;
        at = skip_ws(text, e);
    }
    (!calls.is_empty()).then_some((calls, end))
}
