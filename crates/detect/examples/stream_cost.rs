//! Instructions of streaming against one-shot detection (run under callgrind):
//! `valgrind --tool=callgrind --toggle-collect='stream_cost::measured' target/release/examples/stream_cost one_shot|one_bare|one_push|deltas|floor`
//! (`one_bare`: the one-shot call without the tools, as the worker's pre-check makes it).
//! (`floor`: the deltas appended to a buffer and their line breaks looked for, nothing else,
//! as the bench's `ceiling_buffer_only`: what any stream of these deltas costs).

#[path = "../tests/support/real.rs"]
mod real;
#[path = "../tests/support/streamed.rs"]
mod streamed;

use toolcall_detect::{detect, Config, Input, Stream, StreamPolicy};

#[inline(never)]
fn measured(
    mode: &str,
    msgs: &[String],
    cut: &[Vec<&str>],
    tools: &[String],
    streams: Vec<Stream>,
) -> usize {
    let config = Config::default();
    match mode {
        "one_shot" | "one_bare" => msgs
            .iter()
            .map(|m| {
                let input = Input {
                    content: m,
                    tools_used: &[],
                    enabled_tools: if mode == "one_bare" { &[] } else { tools },
                };
                detect(&input, &config).leaks.len()
            })
            .sum(),
        "one_push" => streams
            .into_iter()
            .zip(msgs)
            .map(|(mut s, m)| {
                let n = s.push(m).len();
                n + s.finish().rest.len()
            })
            .sum(),
        "floor" => cut
            .iter()
            .map(|parts| {
                let mut buf = String::with_capacity(1024);
                let mut lines = 0;
                for p in parts {
                    buf.push_str(std::hint::black_box(p));
                    lines += usize::from(p.as_bytes().contains(&b'\n'));
                }
                lines + buf.len()
            })
            .sum(),
        _ => streams
            .into_iter()
            .zip(cut)
            .map(|(mut s, parts)| {
                let n: usize = parts.iter().map(|p| s.push(p).len()).sum();
                n + s.finish().rest.len()
            })
            .sum(),
    }
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let msgs = real::contents("real_assistant_messages.jsonl");
    let cut: Vec<Vec<&str>> = msgs
        .iter()
        .enumerate()
        .map(|(i, m)| streamed::deltas(m, 16, i as u64))
        .collect();
    let tools = real::agent_tools();
    // Streams are made outside the measured part, under one policy as a caller streaming
    // an agent's replies keeps it: the one-shot call borrows tools and policy too.
    let n = match mode.as_str() {
        "one_shot" | "one_bare" | "floor" => 0,
        _ => msgs.len(),
    };
    let policy = StreamPolicy::new(Config::default(), tools.clone());
    let streams: Vec<Stream> = (0..n).map(|_| Stream::with_policy(&policy)).collect();
    println!("{}", measured(&mode, &msgs, &cut, &tools, streams));
}
