//! Fuzzes `detect` with arbitrary bytes as content (invalid UTF-8 is rejected at the edge,
//! as the worker does) and checks the invariants the worker relies on.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolcall_detect::{detect, Config, Input};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let tools: Vec<String> = ["save_memory", "get_weather", "search"].map(String::from).to_vec();
    let d = detect(&Input { content: text, tools_used: &[], enabled_tools: &tools }, &Config::default());
    let mut last_end = 0;
    for leak in &d.leaks {
        assert!(leak.span.start >= last_end, "overlapping or unordered leaks");
        assert!(leak.span.end <= text.len());
        assert!(text.is_char_boundary(leak.span.start) && text.is_char_boundary(leak.span.end));
        last_end = leak.span.end;
    }
    if let Some(cleaned) = &d.cleaned {
        assert!(cleaned.len() <= text.len(), "cleaning never adds text");
    } else {
        assert!(d.leaks.iter().all(|l| l.family == toolcall_detect::Family::ResultOnly) || d.leaks.is_empty());
    }
});
