//! Unit tests of the model label (`model.rs`), apart so that the module reads in one sitting.
//!
//! May depend on: the parent `model`.

use super::*;

#[test]
fn normalises_provider_paths_tags_and_snapshots() {
    for (id, name) in [
        ("gemini-2.5-flash", "gemini-2.5-flash"),
        ("models/gemini-2.5-flash", "gemini-2.5-flash"),
        ("google/gemini-2.5-flash", "gemini-2.5-flash"),
        ("vertex_ai/gemini-2.5-pro", "gemini-2.5-pro"),
        ("gemini-2.5-flash-preview-05-20", "gemini-2.5-flash"),
        ("models/gemini-2.5-pro-preview-03-25", "gemini-2.5-pro"),
        ("gemini-2.0-flash-001", "gemini-2.0-flash"),
        ("gemini-2.0-flash-exp", "gemini-2.0-flash"),
        ("gemini-exp-1206", "gemini"),
        ("gemini-2.0-flash-thinking-exp-01-21", "gemini-2.0-flash-thinking"),
        ("openai/gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("azure/gpt-4o-mini", "gpt-4o-mini"),
        ("gpt-4-0613", "gpt-4"),
        ("gpt-3.5-turbo-0125", "gpt-3.5-turbo"),
        ("gpt-4.1-2025-04-14", "gpt-4.1"),
        ("gpt-4o-realtime-preview-2024-12-17", "gpt-4o-realtime"),
        ("o1-preview", "o1"),
        ("chatgpt-4o-latest", "chatgpt-4o"),
        ("ft:gpt-4o-mini-2024-07-18:acme::9abcDEF", "gpt-4o-mini"),
        ("openai/gpt-oss-120b", "gpt-oss-120b"),
        ("anthropic/claude-3-5-sonnet-20241022", "claude-3-5-sonnet"),
        ("claude-sonnet-4-20250514", "claude-sonnet-4"),
        ("claude-opus-4-1-20250805", "claude-opus-4-1"),
        ("claude-3-5-sonnet@20240620", "claude-3-5-sonnet"),
        ("claude-3-5-sonnet-v2@20241022", "claude-3-5-sonnet-v2"),
        (
            "bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0",
            "claude-3-5-sonnet",
        ),
        (
            "us.anthropic.claude-3-7-sonnet-20250219-v1:0",
            "claude-3-7-sonnet",
        ),
        (
            "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.meta.llama3-1-70b-instruct-v1:0",
            "llama3-1-70b-instruct-v1",
        ),
        ("mistral.mistral-large-2402-v1:0", "mistral-large"),
        ("openrouter/anthropic/claude-3.5-sonnet:beta", "claude-3.5-sonnet"),
        ("openrouter/meta-llama/llama-3.3-70b-instruct:free", "llama-3.3-70b-instruct"),
        ("meta-llama/Llama-3.3-70B-Instruct", "Llama-3.3-70B-Instruct"),
        ("accounts/fireworks/models/llama-v3p1-70b-instruct", "llama-v3p1-70b-instruct"),
        ("llama3.1:8b", "llama3.1"),
        ("Qwen/Qwen3-235B-A22B-Instruct-2507", "Qwen3-235B-A22B-Instruct"),
        ("qwen/qwen2.5-72b-instruct", "qwen2.5-72b-instruct"),
        ("mistralai/Mistral-Small-3.1-24B-Instruct-2503", "Mistral-Small-3.1-24B-Instruct"),
        ("mistral-large-latest", "mistral-large"),
        ("mistral-large-2411", "mistral-large"),
        ("deepseek/deepseek-chat-v3-0324", "deepseek-chat-v3"),
        ("deepseek-r1-0528", "deepseek-r1"),
        ("x-ai/grok-4", "grok-4"),
        ("grok-2-1212", "grok-2"),
        ("command-r-08-2024", "command-r"),
        ("command-r-plus-08-2024", "command-r-plus"),
        ("moonshotai/kimi-k2-instruct-0905", "kimi-k2-instruct"),
        ("zai-org/GLM-4.5", "GLM-4.5"),
        ("  gemini-2.5-flash  ", "gemini-2.5-flash"),
        ("gemini-2.5-flash/", "gemini-2.5-flash"),
        // Versions and sizes are not snapshots.
        ("claude-3", "claude-3"),
        ("gpt-4", "gpt-4"),
        ("llama-3.1-405b", "llama-3.1-405b"),
        ("2024", "2024"),
        ("-0613", "-0613"),
        ("v1", "v1"),
    ] {
        assert_eq!(normalise(id), name, "{id}");
    }
}

#[test]
fn labels_by_exact_name_then_longest_prefix() {
    let m = Models::parse("gpt-4o, gpt-4*, gpt-4o-mini*, Gemini-2.5*, gemini*").unwrap();
    let label = |id: Option<&str>| m.name(m.label(id)).to_string();
    for (id, want) in [
        (Some("openai/gpt-4o-2024-08-06"), "gpt-4o"),
        (Some("GPT-4O"), "gpt-4o"),
        (Some("gpt-4o-mini"), "gpt-4o-mini"),
        (Some("gpt-4o-audio-preview"), "gpt-4"),
        (Some("gpt-4-turbo"), "gpt-4"),
        (Some("models/gemini-2.5-flash-preview-05-20"), "gemini-2.5"),
        (Some("gemini-1.5-pro-002"), "gemini"),
        (Some("claude-sonnet-4"), OTHER),
        (Some("gpt-3.5-turbo"), OTHER),
        (Some("/"), OTHER),
        (Some("ft:"), OTHER),
        (None, UNKNOWN),
        (Some(""), UNKNOWN),
        (Some("  \t"), UNKNOWN),
    ] {
        assert_eq!(label(id), want, "{id:?}");
    }
    let names: Vec<&str> = m.names().collect();
    assert_eq!(
        names,
        [
            "gpt-4o",
            "gpt-4",
            "gpt-4o-mini",
            "gemini-2.5",
            "gemini",
            OTHER,
            UNKNOWN
        ]
    );
    assert_eq!(m.list(), "gpt-4o,gpt-4*,gpt-4o-mini*,gemini-2.5*,gemini*");
}

#[test]
fn the_default_list_keeps_the_main_lines_apart() {
    let m = Models::default();
    let label = |id: &str| m.name(m.label(Some(id))).to_string();
    for (id, want) in [
        ("models/gemini-2.5-flash-preview-05-20", "gemini-2.5-flash"),
        ("gemini-2.5-flash-lite", "gemini-2.5-flash-lite"),
        ("google/gemini-2.5-pro", "gemini-2.5-pro"),
        ("gemini-3-pro-preview", "gemini-3"),
        ("gemini-1.5-flash-8b", "gemini"),
        ("gemma-3-27b-it", "gemma"),
        ("openai/gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4o-mini", "gpt-4o-mini"),
        ("gpt-5-mini-2025-08-07", "gpt-5-mini"),
        ("gpt-5", "gpt-5"),
        ("openai/gpt-oss-120b", "gpt-oss"),
        ("gpt-3.5-turbo", "gpt"),
        ("o3-mini", "o3"),
        ("claude-3-5-sonnet-20241022", "claude"),
        ("anthropic/claude-sonnet-4.5", "claude-sonnet"),
        ("us.anthropic.claude-opus-4-1-20250805-v1:0", "claude-opus"),
        ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", "llama-4"),
        ("llama-3.3-70b-versatile", "llama"),
        ("Qwen/Qwen3-Coder-480B-A35B-Instruct", "qwen3-coder"),
        ("qwen3-235b-a22b-2507", "qwen3"),
        ("qwen2.5-72b-instruct", "qwen"),
        ("mistral-large-latest", "mistral-large"),
        ("mistral-medium-2505", "mistral"),
        ("deepseek-ai/DeepSeek-R1-0528", "deepseek-r1"),
        ("deepseek-chat", "deepseek"),
        ("x-ai/grok-4-fast", "grok-4"),
        ("grok-3-mini", "grok"),
        ("moonshotai/Kimi-K2-Instruct", "kimi"),
        ("zai-org/GLM-4.6", "glm"),
        ("MiniMaxAI/MiniMax-M2", "minimax"),
        ("command-a-03-2025", "command"),
        ("acme-internal-9000", OTHER),
    ] {
        assert_eq!(label(id), want, "{id}");
    }
}

#[test]
fn refuses_entries_that_could_never_match_or_would_collide() {
    for (list, says) in [
        ("gemini-*2.5", "may only end"),
        ("*", "a name is needed"),
        ("google/gemini-2.5-flash", "normalises"),
        ("gpt 4o", "normalises"),
        ("-gpt", "normalises"),
        ("gpt-4o-2024-08-06", "\"gpt-4o\""),
        ("gemini-2.5-flash-preview*", "\"gemini-2.5-flash\""),
        ("other", "`other` and `unknown`"),
        ("Unknown*", "`other` and `unknown`"),
        ("gpt-4o,GPT-4o*", "given twice"),
    ] {
        let err = Models::parse(list).expect_err(list);
        assert!(err.contains(says), "{list}: {err}");
    }
    let many: Vec<String> = (0..=MAX_ENTRIES).map(|i| format!("m{i}")).collect();
    assert!(Models::parse(&many.join(",")).is_err());
    let none = Models::parse(" , ").unwrap();
    assert_eq!(none.names().collect::<Vec<_>>(), [OTHER, UNKNOWN]);
    assert_eq!(none.name(none.label(Some("gpt-4o"))), OTHER);
}

#[test]
fn very_long_ids_are_labelled_from_their_start() {
    let m = Models::default();
    let long = format!("gemini-2.5-flash{}", "é".repeat(500));
    assert_eq!(m.name(m.label(Some(&long))), "gemini-2.5-flash");
    let long_exact = format!("{}gpt-4o", "x".repeat(MAX_ID_BYTES));
    assert_eq!(m.name(m.label(Some(&long_exact))), OTHER);
}

mod properties {
    use super::super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever the id, the label is one of the configured entries, `other` or
        /// `unknown`; normalisation never panics and returns a part of the id.
        #[test]
        fn the_label_is_always_a_configured_value(id in ".{0,300}", list in prop::sample::select(vec![
            DEFAULT_LIST, "gpt-4o,gemini-2.5*", "",
        ])) {
            let m = Models::parse(list).unwrap();
            let allowed: Vec<&str> = m.names().collect();
            prop_assert!(allowed.contains(&m.name(m.label(Some(&id)))));
            prop_assert!(id.contains(normalise(&id)));
        }

        #[test]
        fn provider_like_ids_label_like_their_model(
            provider in "[a-z]{2,10}(/[a-z_-]{2,10}){0,2}/",
            model in prop::sample::select(vec!["gemini-2.5-flash", "gpt-4o-mini", "claude-sonnet-4", "qwen3-32b"]),
            snapshot in prop::sample::select(vec!["", "-2024-08-06", "-20241022", "-0613", "-latest", "-preview-05-20", ":free", "@001"]),
        ) {
            let m = Models::default();
            let plain = m.label(Some(model));
            let decorated = format!("{provider}{}{snapshot}", model.to_uppercase());
            prop_assert_eq!(m.name(m.label(Some(&decorated))), m.name(plain));
        }
    }
}
