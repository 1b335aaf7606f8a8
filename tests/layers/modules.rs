//! The crate's modules as a graph of imports, read from the source text: each file of
//! `src/` is a module (`src/a/b.rs` is `a::b`, `mod.rs` its folder), and it imports the
//! module every `crate::..` and `super::..` path in its code names (the longest known
//! module the path starts with; `crate::recover::Report` is `recover`). Comments, string
//! literals and a trailing `#[cfg(test)] mod tests` are left out: a doc link is no import.
//!
//! On that graph: the import circles ([`circles`]) and what a module's "May depend on"
//! header allows ([`Header`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// One module: its path (`recover::revert`), its code and its "May depend on" header.
pub struct Module {
    pub path: String,
    pub file: String,
    pub code: String,
    pub header: Option<Header>,
}

impl Module {
    /// The top-level module (room) it belongs to.
    pub fn room(&self) -> &str {
        room_of(&self.path)
    }
}

/// The room of a module path.
pub fn room_of(path: &str) -> &str {
    path.split("::").next().unwrap_or(path)
}

/// Every module of `src` (the crate root, `lib.rs` and `main.rs`, left out).
pub fn read(src: &Path) -> Vec<Module> {
    let mut files = Vec::new();
    super::rust_files(src, &mut files);
    let mut out = Vec::new();
    for file in files {
        let rel = file
            .strip_prefix(src)
            .unwrap()
            .to_string_lossy()
            .to_string();
        let mut parts: Vec<&str> = rel.trim_end_matches(".rs").split('/').collect();
        if parts.last() == Some(&"mod") {
            parts.pop();
        }
        if parts == ["lib"] || parts == ["main"] {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        out.push(Module {
            path: parts.join("::"),
            file: format!("src/{rel}"),
            code: code_of(&text),
            header: Header::of(&text),
        });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// The text without comments, string literals and the unit tests at its end: what is left
/// is code (a path in a doc link or in a log directive string is no import).
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '"'
            || (c == 'r' && matches!(next, Some('"' | '#')) && !ident_before(&chars, i))
        {
            i = skip_string(&chars, i);
            out.push_str("\"\"");
        } else if c == '\'' && char_literal_end(&chars, i).is_some() {
            i = char_literal_end(&chars, i).unwrap_or(i) + 1;
            out.push_str("' '");
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_before(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

/// The index after the string literal (plain or raw) that starts at `i`.
fn skip_string(chars: &[char], mut i: usize) -> usize {
    let mut hashes = 0;
    if chars[i] == 'r' {
        i += 1;
        while chars.get(i) == Some(&'#') {
            hashes += 1;
            i += 1;
        }
        i += 1; // the opening quote
        while i < chars.len() {
            if chars[i] == '"' && (1..=hashes).all(|h| chars.get(i + h) == Some(&'#')) {
                return i + 1 + hashes;
            }
            i += 1;
        }
        return i;
    }
    i += 1;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '"' => return i + 1,
            _ => i += 1,
        }
    }
    i
}

/// Where the char literal that starts at `i` ends (its closing quote), if it is one and
/// not a lifetime.
fn char_literal_end(chars: &[char], i: usize) -> Option<usize> {
    match (chars.get(i + 1), chars.get(i + 2)) {
        (Some('\\'), _) => (i + 3..i + 12).find(|&j| chars.get(j) == Some(&'\'')),
        (Some(_), Some('\'')) => Some(i + 2),
        _ => None,
    }
}

/// The paths (`a::b::c`, without the `crate::`) named after `prefix` in `code`, groups
/// (`prefix{a, b::c}`, nested ones too) unfolded.
fn paths_after(code: &str, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in code.match_indices(prefix) {
        if code[..i]
            .chars()
            .last()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
        {
            continue;
        }
        unfold("", &code[i + prefix.len()..], &mut out);
    }
    out
}

/// The paths of a use tree at the start of `rest`, each prefixed with `base`.
fn unfold(base: &str, rest: &str, out: &mut Vec<String>) {
    let name: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
        .collect();
    let path = format!("{base}{name}");
    let after = &rest[name.len()..];
    if (path.is_empty() || path.ends_with("::")) && after.starts_with('{') {
        // A group: split its items at the commas of its own level.
        let mut depth = 0;
        let mut start = 1;
        for (j, c) in after.char_indices() {
            match c {
                '{' => depth += 1,
                '}' | ',' if depth == 1 => {
                    unfold(&path, after[start..j].trim_start(), out);
                    start = j + 1;
                    if c == '}' {
                        return;
                    }
                }
                '}' => depth -= 1,
                _ => {}
            }
        }
    } else {
        // `a::{self, B}` names `a` itself.
        let path = path.trim_end_matches("::");
        let path = path.strip_suffix("::self").unwrap_or(path);
        if !path.is_empty() && path != "self" {
            out.push(path.to_string());
        }
    }
}

/// The modules each module imports (never itself nor a module it is inside of).
pub fn imports(modules: &[Module]) -> BTreeMap<String, BTreeSet<String>> {
    let known: BTreeSet<&str> = modules.iter().map(|m| m.path.as_str()).collect();
    let resolve = |path: &str| -> Option<String> {
        let segs: Vec<&str> = path.split("::").collect();
        (1..=segs.len())
            .rev()
            .map(|n| segs[..n].join("::"))
            .find(|cand| known.contains(cand.as_str()))
    };
    let mut out = BTreeMap::new();
    for m in modules {
        let parent = m.path.rsplit_once("::").map(|(p, _)| p);
        let mut named: Vec<String> = paths_after(&m.code, "crate::");
        for p in paths_after(&m.code, "super::") {
            named.push(match parent {
                Some(parent) => format!("{parent}::{p}"),
                None => p,
            });
        }
        let targets: BTreeSet<String> = named
            .iter()
            .filter_map(|p| resolve(p))
            .filter(|t| *t != m.path && !m.path.starts_with(&format!("{t}::")))
            .collect();
        out.insert(m.path.clone(), targets);
    }
    out
}

/// The circles of a graph: every set of two or more nodes that reach each other.
pub fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let reach = |from: &str| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_string()];
        while let Some(n) = todo.pop() {
            for next in graph.get(&n).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|n| (n, reach(n))).collect();
    let mut out: Vec<Vec<String>> = Vec::new();
    for (n, from_n) in &reaches {
        let circle: Vec<String> = std::iter::once((*n).clone())
            .chain(
                from_n
                    .iter()
                    .filter(|m| *m != *n && reaches.get(m).is_some_and(|r| r.contains(*n)))
                    .cloned(),
            )
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if circle.len() > 1 && !out.contains(&circle) {
            out.push(circle);
        }
    }
    out
}

/// The same graph between rooms (top-level modules).
pub fn between_rooms(
    graph: &BTreeMap<String, BTreeSet<String>>,
) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, targets) in graph {
        let room = room_of(from).to_string();
        let entry = out.entry(room.clone()).or_default();
        for t in targets {
            if room_of(t) != room {
                entry.insert(room_of(t).to_string());
            }
        }
    }
    out
}

/// A module's "May depend on:" paragraph: the names in backticks it allows, and those a
/// sentence or clause of it refuses ("No ..", "never on ..", "nothing depends on it but ..").
#[derive(Debug)]
pub struct Header {
    pub allowed: Vec<String>,
    pub refused: Vec<String>,
    /// "every module": any module of the crate (what wires them together, `startup`).
    pub every_module: bool,
}

impl Header {
    fn of(text: &str) -> Option<Header> {
        let mut paragraph = String::new();
        let mut inside = false;
        for line in text.lines() {
            let Some(doc) = line.strip_prefix("//!") else {
                if inside {
                    break;
                }
                continue;
            };
            let doc = doc.trim();
            if let Some(rest) = doc.strip_prefix("May depend on:") {
                inside = true;
                paragraph.push_str(rest);
            } else if inside {
                if doc.is_empty() {
                    break;
                }
                paragraph.push(' ');
                paragraph.push_str(doc);
            }
        }
        if !inside {
            return None;
        }
        let mut header = Header {
            allowed: Vec::new(),
            refused: Vec::new(),
            every_module: false,
        };
        for sentence in paragraph.split([';', '.']) {
            let sentence = sentence.trim().to_lowercase();
            let refusing = ["no ", "never", "not ", "nothing", "knows nothing"]
                .iter()
                .any(|w| sentence.starts_with(w));
            let names = sentence
                .split('`')
                .skip(1)
                .step_by(2)
                .map(|n| n.replace('-', "_"));
            if refusing {
                header.refused.extend(names);
            } else {
                header.every_module |= sentence.contains("every module");
                header.allowed.extend(names);
            }
        }
        Some(header)
    }

    /// Whether the header allows importing `target` (a module path of the crate when
    /// `module`, else a crate): it names the module or one it is inside of, or says "every
    /// module".
    pub fn allows(&self, target: &str, module: bool) -> bool {
        !self.refuses(target)
            && ((module && self.every_module) || self.allowed.iter().any(|n| covers(n, target)))
    }

    /// Whether a refusing sentence names `target` or a module it is inside of.
    pub fn refuses(&self, target: &str) -> bool {
        self.refused.iter().any(|n| covers(n, target))
    }
}

/// Whether the named path `name` is `target` or a module `target` is inside of.
fn covers(name: &str, target: &str) -> bool {
    name == target || target.starts_with(&format!("{name}::"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_unfold_into_their_paths() {
        let code = "use crate::{a::{self, B}, c::d::E};\nlet x = crate::f::g();";
        assert_eq!(
            paths_after(code, "crate::"),
            vec!["a", "a::B", "c::d::E", "f::g"]
        );
    }

    #[test]
    fn comments_and_strings_are_not_code() {
        let text = "use crate::a; // crate::b\nlet s = \"crate::c // x\"; let q = '\"';\n\
                    let r = r#\"crate::d\"#; let t: &'static str = crate::e::F;";
        let code = code_of(text);
        assert_eq!(paths_after(&code, "crate::"), vec!["a", "e::F"], "{code}");
    }

    #[test]
    fn a_circle_is_found_and_a_line_is_not() {
        let graph = |edges: &[(&str, &str)]| {
            let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            for (a, b) in edges {
                g.entry(a.to_string()).or_default().insert(b.to_string());
                g.entry(b.to_string()).or_default();
            }
            g
        };
        assert!(circles(&graph(&[("a", "b"), ("b", "c")])).is_empty());
        assert_eq!(
            circles(&graph(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")])),
            vec![vec!["a".to_string(), "b".into(), "c".into()]]
        );
    }

    #[test]
    fn a_header_allows_what_it_names_and_not_what_it_refuses() {
        let text =
            "//! Doc.\n//!\n//! May depend on: `recover::revert`, `ids`,\n//! `futures-util`; \
                    never on `admin`.\n\nuse x;";
        let every = Header::of("//! May depend on: every module, `sqlx`.\n").unwrap();
        assert!(every.allows("worker", true) && every.allows("sqlx", false));
        assert!(
            !every.allows("lapin", false),
            "every module is not every crate"
        );
        let h = Header::of(text).unwrap();
        assert!(h.allows("recover::revert", true));
        assert!(h.allows("ids", true));
        assert!(h.allows("futures_util", false));
        assert!(
            !h.allows("recover", true),
            "a part named does not allow the whole"
        );
        assert!(!h.allows("admin", true));
        assert!(h.refuses("admin::auth"));
    }
}
