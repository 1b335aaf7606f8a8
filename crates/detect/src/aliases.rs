//! Enabled tool names that the formats' name grammars do not spell: `Weather/get_weather`,
//! `get-weather` written as a Python call, `fs.read_file` in a bracket label. The agent
//! enabled the name, so it is a name wherever a name stands, whatever its characters.
//! Rather than teach every grammar every character, detection reads such a reply with each
//! of these names replaced by an alias of the same length made of word characters only
//! (`Weather_get_weather`), one that the reply does not hold anywhere. Spans are therefore
//! the same in both texts; the names and arguments read are mapped back.
//!
//! May depend on: `types`, `grammar::bytes`, `memchr`. No I/O.

use crate::grammar::bytes as class;
use crate::types::{Call, Leak};
use serde_json::Value;

/// The reply with its odd tool names aliased, and the tool list to read it with.
pub(crate) struct Aliased {
    pub(crate) text: String,
    pub(crate) tools: Vec<String>,
    /// (alias, name as enabled)
    map: Vec<(String, String)>,
}

/// A word character: what every name grammar reads as part of a name.
fn word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// What joins a name to more of one, so that an occurrence next to it is part of a longer
/// name, not this one (`get-weather-v2`, `sub-get-weather`). A `/` joins nothing: it is
/// also a closing tag's (`</Weather/get_weather>`).
fn joins(c: char) -> bool {
    word(c) || c == '-'
}

/// Whether an enabled name is one no grammar spells: made of more than word characters,
/// without whitespace.
fn odd(n: &str) -> bool {
    // Most names are ASCII words: their bytes say so without decoding a character.
    let ascii_word = n.bytes().all(|b| class::is(b, class::KEY));
    !n.is_empty() && !ascii_word && !n.chars().all(word) && !n.contains(char::is_whitespace)
}

/// Whether any of the enabled names is read under an alias.
pub(crate) fn any_odd(enabled: &[String]) -> bool {
    enabled.iter().any(|n| odd(n))
}

/// The reply read under aliases, when an enabled name needs one and the reply holds it.
/// A name with whitespace is left alone (a display name; aliasing it would turn prose
/// into an identifier), and so is a name whose every alias the reply already holds.
pub(crate) fn aliased(text: &str, enabled: &[String]) -> Option<Aliased> {
    if !any_odd(enabled) {
        return None;
    }
    let mut map = Vec::new();
    for name in enabled
        .iter()
        .filter(|n| odd(n) && text.contains(n.as_str()))
    {
        let alias = ['_', 'x', 'Q'].into_iter().find_map(|fill| {
            let alias: String = name
                .chars()
                .flat_map(|c| match word(c) {
                    true => vec![c],
                    false => vec![fill; c.len_utf8()],
                })
                .collect();
            let taken = text.contains(&alias) || enabled.contains(&alias);
            (!taken).then_some(alias)
        });
        if let Some(alias) = alias {
            map.push((alias, name.clone()));
        }
    }
    // A longer name first, so that `a-b-c` is not read as `a-b` and the rest.
    map.sort_by_key(|(_, name)| std::cmp::Reverse(name.len()));
    let mut out = text.to_string();
    let mut any = false;
    for (alias, name) in &map {
        let mut from = 0;
        while let Some(i) = out[from..].find(name.as_str()).map(|i| from + i) {
            let end = i + name.len();
            let bounded = !out[..i].chars().next_back().is_some_and(joins)
                && !out[end..].chars().next().is_some_and(joins);
            if bounded {
                out.replace_range(i..end, alias);
                any = true;
            }
            from = end;
        }
    }
    if !any {
        return None;
    }
    let tools = enabled
        .iter()
        .map(|n| match map.iter().find(|(_, name)| name == n) {
            Some((alias, _)) => alias.clone(),
            None => n.clone(),
        })
        .collect();
    Some(Aliased {
        text: out,
        tools,
        map,
    })
}

/// Whether the reply holds a compound of word characters joined by `-`, `/` or `:` where a
/// name stands in markup: glued before `(` or `{` (a call), as an element's name (`<NAME>`),
/// as a JSON member's string, or opening its line before `key=` arguments; outside code
/// (but for the one code read, a ```` ```tool_code ```` fence). An enabled name
/// of that shape would be read there under an alias. Asked only when the tools are not
/// known, for a reply with some markup that nothing was read from: `detect` without the
/// tools then says they matter, and the caller asks again with them.
pub(crate) fn compound_name_position(text: &str, in_code: impl Fn(usize) -> bool) -> bool {
    let bytes = text.as_bytes();
    let joins = |c: char| word(c) || matches!(c, '-' | '/' | ':');
    let mut past = 0;
    for i in memchr::memchr3_iter(b'-', b'/', b':', bytes) {
        if i < past
            || i == 0
            || !text[..i].chars().next_back().is_some_and(word)
            || !text[i + 1..].chars().next().is_some_and(word)
        {
            continue;
        }
        let start = text[..i].trim_end_matches(joins).len();
        let tail = &text[i + 1..];
        let end = i + 1 + (tail.len() - tail.trim_start_matches(joins).len());
        past = end;
        // A name has a word on each side of its joint (`get-weather`, not `i-1` or `y-f`),
        // and markup in code is an example.
        let short = |s: &str| s.chars().filter(|&c| word(c)).take(2).count() < 2;
        let first = text[start..i]
            .rsplit(['-', '/', ':'])
            .next()
            .unwrap_or_default();
        let second = tail.split(['-', '/', ':']).next().unwrap_or_default();
        if short(first) || short(second) || in_code(start) {
            continue;
        }
        let glued = &text[end..];
        let after = glued.trim_start_matches([' ', '\t']);
        let head = text[..start].trim_end_matches([' ', '\t']);
        let args_line = || {
            let key = after.trim_start_matches(word);
            key.len() < after.len() && key.starts_with('=')
        };
        let line_start = head.is_empty() || head.ends_with('\n');
        // A JSON member's whole string value (`"name": "Weather/get_weather"`).
        let member = || {
            text[..start]
                .strip_suffix('"')
                .is_some_and(|h| h.trim_end().ends_with(':'))
                && glued.starts_with('"')
        };
        if glued.starts_with(['(', '{'])
            || text[..start].ends_with('<') && glued.starts_with('>')
            || line_start && args_line()
            || member()
        {
            return true;
        }
    }
    false
}

impl Aliased {
    /// The leaks read in the aliased text, with the names as enabled. An alias occurs
    /// nowhere in the reply, so wherever one is in what was read, the aliasing put it there.
    pub(crate) fn restore(&self, leaks: &mut [Leak]) {
        for call in leaks.iter_mut().flat_map(|l| l.calls.iter_mut()) {
            self.restore_call(call);
        }
        for result in leaks.iter_mut().flat_map(|l| l.results.iter_mut()) {
            self.restore_value(&mut result.value);
        }
    }

    fn restore_call(&self, call: &mut Call) {
        call.name = self.restore_str(&call.name);
        self.restore_value(&mut call.arguments);
    }

    fn restore_str(&self, s: &str) -> String {
        let mut s = s.to_string();
        for (alias, name) in &self.map {
            if s.contains(alias.as_str()) {
                s = s.replace(alias.as_str(), name);
            }
        }
        s
    }

    fn restore_value(&self, v: &mut Value) {
        match v {
            Value::String(s) => *s = self.restore_str(s),
            Value::Array(items) => items.iter_mut().for_each(|i| self.restore_value(i)),
            Value::Object(members) => {
                let old = std::mem::take(members);
                for (k, mut v) in old {
                    self.restore_value(&mut v);
                    members.insert(self.restore_str(&k), v);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn an_odd_name_is_aliased_by_word_characters_of_its_length() {
        let a = aliased(
            "<tool_call>Weather/get_weather>{}",
            &tools(&["Weather/get_weather"]),
        );
        let a = a.expect("aliased");
        assert_eq!(a.text, "<tool_call>Weather_get_weather>{}");
        assert_eq!(a.tools, tools(&["Weather_get_weather"]));
    }

    #[test]
    fn word_names_and_absent_names_need_no_alias() {
        assert!(aliased("get_weather(x=1)", &tools(&["get_weather"])).is_none());
        assert!(aliased("nothing here", &tools(&["get-weather"])).is_none());
        assert!(aliased("Apply tags now", &tools(&["Apply tags"])).is_none());
    }

    #[test]
    fn an_alias_the_reply_holds_is_not_used() {
        let a = aliased("get_weather or get-weather(x=1)", &tools(&["get-weather"]));
        assert_eq!(a.expect("aliased").text, "get_weather or getxweather(x=1)");
    }

    #[test]
    fn a_longer_names_prefix_is_not_aliased() {
        let a = aliased("get-weather-v2(x=1)", &tools(&["get-weather"]));
        assert!(a.is_none());
        let a = aliased("use sub-get-weather", &tools(&["get-weather"]));
        assert!(a.is_none());
    }

    #[test]
    fn names_and_arguments_are_restored() {
        let a = aliased("get-weather(x='get-weather')", &tools(&["get-weather"]));
        let a = a.expect("aliased");
        let mut leaks = vec![Leak {
            family: crate::types::Family::Pythonic,
            span: 0..a.text.len(),
            calls: vec![Call {
                name: "get_weather".into(),
                arguments: serde_json::json!({"x": "get_weather", "get_weather": ["get_weather"]}),
            }],
            results: vec![],
        }];
        a.restore(&mut leaks);
        assert_eq!(leaks[0].calls[0].name, "get-weather");
        assert_eq!(
            leaks[0].calls[0].arguments,
            serde_json::json!({"x": "get-weather", "get-weather": ["get-weather"]})
        );
    }
}
