//! `toolcall-recovery`: finds tool calls that language models leaked into the text of
//! finalized assistant messages, runs the real recovery, and keeps an audit ledger.
//!
//! Detection is the separate, pure crate [`toolcall_detect`]; this crate holds everything
//! that touches the outside world, and the `scan` command that runs detection offline.

pub mod scan;

pub use toolcall_detect as detect;
