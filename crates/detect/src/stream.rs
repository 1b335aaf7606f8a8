//! Streaming detection: a reply read delta by delta, shown as soon as what is shown can no
//! longer turn out to be part of a leak, and the same [`Detection`] at the end as the
//! one-shot [`crate::detect`].
//!
//! May depend on: the crate root (`detect`, `Input`), `config`, `types`.

use crate::{detect, Config, Detection, Input};

/// One reply read as it arrives. See the crate docs for an example.
#[derive(Debug, Clone)]
pub struct Stream {
    config: Config,
    enabled_tools: Vec<String>,
    text: String,
    shown: usize,
}

/// What [`Stream::finish`] returns.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    /// The text not shown by any push: joined after everything the pushes returned, it
    /// gives the cleaned text (or the text as received when nothing was leaked).
    pub rest: String,
    /// The detection of the whole reply, equal to what [`crate::detect`] returns for it.
    pub detection: Detection,
}

impl Stream {
    /// A stream for one reply of an agent with these tools enabled.
    pub fn new(config: Config, enabled_tools: Vec<String>) -> Stream {
        Stream {
            config,
            enabled_tools,
            text: String::new(),
            shown: 0,
        }
    }

    /// Takes the next delta; returns the text that is safe to show now.
    pub fn push(&mut self, delta: &str) -> &str {
        self.text.push_str(delta);
        ""
    }

    /// Bytes received and not shown yet.
    pub fn held(&self) -> usize {
        self.text.len() - self.shown
    }

    /// Ends the reply: the rest to show and the detection of the whole reply.
    pub fn finish(self) -> Finished {
        let detection = detect(
            &Input {
                content: &self.text,
                tools_used: &[],
                enabled_tools: &self.enabled_tools,
            },
            &self.config,
        );
        let whole = detection.cleaned.as_deref().unwrap_or(&self.text);
        let rest = whole.get(self.shown..).unwrap_or_default().to_string();
        Finished { rest, detection }
    }
}
