//! Fuzzes `Stream` with arbitrary text cut at arbitrary points (the first bytes choose the
//! cuts): what the pushes show, joined with `finish`'s rest, is the one-shot cleaned text,
//! and the detection is the one-shot detection.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolcall_detect::{detect, Config, Input, Stream};

fuzz_target!(|data: &[u8]| {
    let Some((&cuts, rest)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    let tools: Vec<String> = ["save_memory", "get_weather", "search"].map(String::from).to_vec();
    let one = detect(&Input { content: text, tools_used: &[], enabled_tools: &tools }, &Config::default());
    let mut s = Stream::new(Config::default(), tools.clone());
    let mut shown = String::new();
    let step = usize::from(cuts % 17) + 1;
    let mut at = 0;
    while at < text.len() {
        let mut end = (at + step).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        shown.push_str(s.push(&text[at..end]));
        at = end;
    }
    let end = s.finish();
    shown.push_str(&end.rest);
    assert_eq!(shown, one.cleaned.as_deref().unwrap_or(text));
    assert_eq!(end.detection, one);
});
