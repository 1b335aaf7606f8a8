//! How much of a streamed reply is shown when it arrives (issue #31). Streams the 25,300
//! real replies of `tests/data/real/` in deltas of 1 to 16 bytes and reports, over their
//! bytes: the share shown by the push that delivered them, the share shown by the push that
//! delivered the end of their line (or earlier), both also without whitespace (a line break
//! is held until what follows it shows: a leak removed after it may end the reply there),
//! and the most bytes a reply ever held back.
//!
//! Run: `cargo run --release -p toolcall-detect --example stream_share`

#[path = "../tests/support/real.rs"]
mod real;
#[path = "../tests/support/streamed.rs"]
mod streamed;

use toolcall_detect::{Config, Stream};

#[derive(Default)]
struct Tally {
    bytes: u64,
    arrival: u64,
    line_end: u64,
    visible: u64,
    visible_arrival: u64,
    visible_line_end: u64,
    most_held: usize,
    replies: u64,
    fully_held: u64,
}

fn main() {
    let tools = real::agent_tools();
    let mut t = Tally::default();
    for (i, text) in real::contents("real_assistant_messages.jsonl")
        .iter()
        .enumerate()
    {
        if text.is_empty() {
            continue;
        }
        let parts = streamed::deltas(text, 16, i as u64);
        let mut s = Stream::new(Config::default(), tools.clone());
        // shown_after[k]: bytes shown once push k returned; delivered_by[b]: the push of byte b.
        let mut shown_after = Vec::with_capacity(parts.len());
        let mut delivered_by = Vec::with_capacity(text.len());
        let mut shown = 0;
        for (k, p) in parts.iter().enumerate() {
            delivered_by.extend(std::iter::repeat_n(k, p.len()));
            shown += s.push(p).len();
            shown_after.push(shown);
            t.most_held = t.most_held.max(s.held());
        }
        t.replies += 1;
        if shown == 0 {
            t.fully_held += 1;
        }
        let bytes = text.as_bytes();
        let mut line_end_push = vec![parts.len(); bytes.len()];
        let mut next_nl: Option<usize> = None;
        for b in (0..bytes.len()).rev() {
            if bytes[b] == b'\n' {
                next_nl = Some(b);
            }
            if let Some(nl) = next_nl {
                line_end_push[b] = delivered_by[nl];
            }
        }
        for b in 0..bytes.len() {
            let ws = bytes[b].is_ascii_whitespace();
            let arrival = shown_after[delivered_by[b]] > b;
            // The last line ends with the reply: `finish` shows what is left of it.
            let at_line_end = line_end_push[b] == parts.len() || shown_after[line_end_push[b]] > b;
            t.bytes += 1;
            t.arrival += u64::from(arrival);
            t.line_end += u64::from(arrival || at_line_end);
            if !ws {
                t.visible += 1;
                t.visible_arrival += u64::from(arrival);
                t.visible_line_end += u64::from(arrival || at_line_end);
            }
        }
        let _ = s.finish();
    }
    let pct = |a: u64, b: u64| 100.0 * a as f64 / b.max(1) as f64;
    println!(
        "replies: {} ({} bytes); none shown before the end: {}",
        t.replies, t.bytes, t.fully_held
    );
    println!(
        "all bytes: shown on arrival {:.2}%, by the end of their line {:.2}%",
        pct(t.arrival, t.bytes),
        pct(t.line_end, t.bytes)
    );
    println!(
        "non-whitespace bytes: on arrival {:.2}%, by the end of their line {:.2}%",
        pct(t.visible_arrival, t.visible),
        pct(t.visible_line_end, t.visible)
    );
    println!("most bytes held back at once: {}", t.most_held);
}
