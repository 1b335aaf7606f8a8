//! The recovery policy: the detection config (memory types, disabled families) and the
//! rollout switches, the global mode and the families held in observe mode. Built once
//! from the settings; every recovery pass asks it in which mode to run.
//!
//! May depend on: `toolcall_detect`, `clap` (the mode is a command-line value). No I/O.

use toolcall_detect::{Config, Detection, Family};

/// Whether a pass changes the message or only records what it would do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Mode {
    /// Recover: run save_memory, clean the message, forward calls.
    #[default]
    Recover,
    /// Observe: detect and decide as usual, record the would-be outcome in the ledger and
    /// the metrics, change nothing else; moderation gets the original content.
    Observe,
}

impl Mode {
    /// Both modes, for metrics labels.
    pub const ALL: [Mode; 2] = [Mode::Recover, Mode::Observe];

    /// The label in the ledger, metrics and published summaries.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Recover => "recover",
            Mode::Observe => "observe",
        }
    }

    /// The mode of a ledger label.
    pub fn from_label(s: &str) -> Option<Mode> {
        match s {
            "recover" => Some(Mode::Recover),
            "observe" => Some(Mode::Observe),
            _ => None,
        }
    }
}

/// What the policy does with one family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FamilyMode {
    /// Detected and handled in the global mode.
    Recover,
    /// Detected; a message with one of its leaks is only observed.
    Observe,
    /// Not detected at all.
    Disabled,
}

impl FamilyMode {
    /// The label in metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            FamilyMode::Recover => "recover",
            FamilyMode::Observe => "observe",
            FamilyMode::Disabled => "disabled",
        }
    }
}

/// The recovery policy.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Detection (memory types, disabled families).
    pub detect: Config,
    /// The global mode.
    pub mode: Mode,
    observed: Vec<Family>,
}

impl Policy {
    /// Recover mode with this detection config.
    pub fn new(detect: Config) -> Self {
        Policy {
            detect,
            mode: Mode::Recover,
            observed: Vec::new(),
        }
    }

    /// The same policy in `mode`.
    pub fn with_mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// Holds `family` in observe mode whatever the global mode.
    pub fn observe(mut self, family: Family) -> Self {
        if !self.observed.contains(&family) {
            self.observed.push(family);
        }
        self
    }

    /// Turns `family` off (see [`Config::disable`]).
    pub fn disable(mut self, family: Family) -> Self {
        self.detect = self.detect.disable(family);
        self
    }

    /// The mode of a pass over this detection: observe when the policy is in observe
    /// mode or when any leak of the message is of an observed family. A message is never
    /// half recovered: one observed family holds back the whole message, because its
    /// other leaks' cleaning would publish a text nobody has reviewed either.
    pub fn pass_mode(&self, detection: &Detection) -> Mode {
        if self.mode == Mode::Observe
            || detection
                .leaks
                .iter()
                .any(|l| self.observed.contains(&l.family))
        {
            Mode::Observe
        } else {
            Mode::Recover
        }
    }

    /// What the policy does with `family`.
    pub fn family_mode(&self, family: Family) -> FamilyMode {
        if !self.detect.family_enabled(family) {
            FamilyMode::Disabled
        } else if self.mode == Mode::Observe || self.observed.contains(&family) {
            FamilyMode::Observe
        } else {
            FamilyMode::Recover
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolcall_detect::{detect, Input};

    fn detection(text: &str) -> Detection {
        let tools = ["save_memory".to_string()];
        detect(
            &Input {
                content: text,
                tools_used: &[],
                enabled_tools: &tools,
            },
            &Config::default(),
        )
    }

    #[test]
    fn one_observed_family_holds_back_the_whole_message() {
        let d = detection(
            "Hi <tool_call>{\"name\": \"save_memory\", \"arguments\": {}}</tool_call> and \
             [TOOL_CALLS][{\"name\": \"search\", \"arguments\": {}}]",
        );
        assert_eq!(d.leaks.len(), 2, "{d:?}");
        let p = Policy::default();
        assert_eq!(p.pass_mode(&d), Mode::Recover);
        assert_eq!(
            p.clone().observe(Family::Mistral).pass_mode(&d),
            Mode::Observe
        );
        assert_eq!(
            p.clone().observe(Family::Pythonic).pass_mode(&d),
            Mode::Recover
        );
        assert_eq!(p.with_mode(Mode::Observe).pass_mode(&d), Mode::Observe);
    }

    #[test]
    fn family_modes() {
        let p = Policy::default()
            .observe(Family::JsonFence)
            .disable(Family::Pythonic);
        assert_eq!(p.family_mode(Family::Hermes), FamilyMode::Recover);
        assert_eq!(p.family_mode(Family::JsonFence), FamilyMode::Observe);
        assert_eq!(p.family_mode(Family::Pythonic), FamilyMode::Disabled);
        let p = p.with_mode(Mode::Observe);
        assert_eq!(p.family_mode(Family::Hermes), FamilyMode::Observe);
        assert_eq!(p.family_mode(Family::Pythonic), FamilyMode::Disabled);
    }
}
