//! `hy_v3`: not implemented yet (stub registered so the registry is complete).
//!
//! May depend on: `crate::families::util`, `crate::json5`, `crate::types`, `crate::Ctx`.

use crate::{Ctx, Leak};

/// Literal markers one of which any leak of this family contains.
pub(crate) const TRIGGERS: &[&str] = &[];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

/// Appends the leaks of this family found in `text` to `out`.
pub(crate) fn find(_text: &str, _ctx: &Ctx<'_>, _out: &mut Vec<Leak>) {}
