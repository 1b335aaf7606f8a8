//! Unit tests of the settings (`settings.rs`), apart so that the module reads in one sitting.
//!
//! May depend on: the parent `settings`, `clap`.

use super::*;
use clap::Parser;
use toolcall_detect::Family;

#[derive(Parser)]
struct P {
    #[command(flatten)]
    p: PolicySettings,
}

#[test]
fn family_lists_skip_blanks_and_reject_unknown_names() {
    let p = P::try_parse_from(["t", "--families-disabled", " pythonic, ,llama3_json,"])
        .map(|p| p.p)
        .map_err(|e| e.to_string());
    let p = p.as_ref().map(|p| &p.detect.families_disabled.0);
    assert_eq!(p, Ok(&vec![Family::Pythonic, Family::Llama3Json]));
    let empty = P::try_parse_from(["t", "--families-observe", ""]).map(|p| p.p.families_observe);
    assert_eq!(empty.ok(), Some(FamilyList::default()));
    let bad = P::try_parse_from(["t", "--families-observe", "hermez"])
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(bad.contains("hermez") && bad.contains("hermes"), "{bad}");
}

#[test]
fn the_model_list_defaults_replaces_and_refuses_bad_entries() {
    #[derive(Parser)]
    struct M {
        #[command(flatten)]
        m: ModelSettings,
    }
    let parse = |args: &[&str]| {
        M::try_parse_from(std::iter::once("t").chain(args.iter().copied()))
            .map(|m| m.m.models)
            .map_err(|e| e.to_string())
    };
    assert_eq!(parse(&[]), Ok(Models::default()));
    let custom = parse(&["--models", "gpt-4o, Gemini-2.5*"]).unwrap();
    assert_eq!(custom.list(), "gpt-4o,gemini-2.5*");
    assert_eq!(
        parse(&["--models", ""]).map(|m| m.names().count()),
        Ok(2),
        "empty: only other and unknown"
    );
    let err = parse(&["--models", "openai/gpt-4o"]).unwrap_err();
    assert!(
        err.contains("openai/gpt-4o") && err.contains("normalises"),
        "{err}"
    );
}
