//! Detection policy: which memory types are allowed, which families run, and whether a
//! message that is nothing but a result object may be rewritten. Built once at start-up.

use crate::types::Family;

/// The memory types allowed when no configuration says otherwise (contract §4).
pub const DEFAULT_MEMORY_TYPES: &[&str] = &[
    "journal",
    "core",
    "fact",
    "preference",
    "goal",
    "relationship",
];

/// Detection policy. Cheap to share by reference across tasks.
#[derive(Debug, Clone)]
pub struct Config {
    memory_types: Vec<String>,
    disabled: Vec<Family>,
    /// Rewrite messages that are nothing but a result object (`result_only`). Off by
    /// default: such a message is recorded as `needs_review` and left untouched.
    pub result_only_recover: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            memory_types: DEFAULT_MEMORY_TYPES.iter().map(|s| s.to_string()).collect(),
            disabled: Vec::new(),
            result_only_recover: false,
        }
    }
}

impl Config {
    /// A config with the given allowed memory types (blank entries are ignored).
    pub fn with_memory_types<I, S>(mut self, types: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.memory_types = types
            .into_iter()
            .map(|s| s.as_ref().trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        self
    }

    /// Turns a family off: its leaks are not reported, and its markup is left alone (no
    /// other family claims what it would have). The result with a family disabled is
    /// exactly the result without that family's leaks.
    pub fn disable(mut self, family: Family) -> Self {
        if !self.disabled.contains(&family) {
            self.disabled.push(family);
        }
        self
    }

    /// Whether `memory_type` is one of the allowed memory types.
    pub fn memory_type_allowed(&self, memory_type: &str) -> bool {
        self.memory_types.iter().any(|t| t == memory_type)
    }

    /// The allowed memory types.
    pub fn memory_types(&self) -> &[String] {
        &self.memory_types
    }

    /// Whether the family runs.
    pub fn family_enabled(&self, family: Family) -> bool {
        !self.disabled.contains(&family)
    }
}
