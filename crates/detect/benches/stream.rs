//! Streaming detection against one-shot detection of the same texts, in the same run
//! (issue #31: a stream may cost at most 1.5x the one-shot call). The 25,300 real replies of
//! `tests/data/real/`, with the tools a chat agent commonly has, cut into deltas of 1 to 16
//! bytes beforehand (as a model's tokens arrive); `one_push` is the whole reply in one
//! delta.
//!
//! Run: `cargo bench -p toolcall-detect --bench stream`

#[path = "../tests/support/real.rs"]
mod real;
#[path = "../tests/support/streamed.rs"]
mod streamed;

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use toolcall_detect::{detect, Config, Input, Stream, StreamPolicy};

fn benches(c: &mut Criterion) {
    let msgs = real::contents("real_assistant_messages.jsonl");
    let cut: Vec<Vec<&str>> = msgs
        .iter()
        .enumerate()
        .map(|(i, m)| streamed::deltas(m, 16, i as u64))
        .collect();
    let tools = real::agent_tools();
    let config = Config::default();
    let bytes: u64 = msgs.iter().map(|m| m.len() as u64).sum();

    let mut g = c.benchmark_group("stream_real");
    g.throughput(Throughput::Bytes(bytes));
    g.sample_size(20);
    g.bench_function("one_shot", |b| {
        b.iter(|| {
            msgs.iter()
                .map(|m| {
                    let input = Input {
                        content: black_box(m),
                        tools_used: &[],
                        enabled_tools: &tools,
                    };
                    detect(&input, &config).leaks.len()
                })
                .sum::<usize>()
        })
    });
    // A stream per reply is made outside the timing, under one policy as a caller streaming
    // an agent's replies keeps it: the one-shot call borrows tools and policy too.
    let policy = StreamPolicy::new(config.clone(), tools.clone());
    let streams = || -> Vec<Stream> {
        (0..msgs.len())
            .map(|_| Stream::with_policy(&policy))
            .collect()
    };
    g.bench_function("deltas_1_16", |b| {
        b.iter_batched(
            streams,
            |ss| {
                ss.into_iter()
                    .zip(&cut)
                    .map(|(mut s, parts)| {
                        let mut shown = 0;
                        for p in parts {
                            shown += s.push(black_box(p)).len();
                        }
                        shown + s.finish().rest.len()
                    })
                    .sum::<usize>()
            },
            BatchSize::LargeInput,
        )
    });
    g.bench_function("one_push", |b| {
        b.iter_batched(
            streams,
            |ss| {
                ss.into_iter()
                    .zip(&msgs)
                    .map(|(mut s, m)| {
                        let shown = s.push(black_box(m)).len();
                        shown + s.finish().rest.len()
                    })
                    .sum::<usize>()
            },
            BatchSize::LargeInput,
        )
    });
    // The floor of any stream: the deltas appended to a buffer, their line ends found.
    g.bench_function("ceiling_buffer_only", |b| {
        b.iter(|| {
            cut.iter()
                .map(|parts| {
                    let mut buf = String::with_capacity(1024);
                    let mut lines = 0;
                    for p in parts {
                        buf.push_str(black_box(p));
                        lines += usize::from(p.as_bytes().contains(&b'\n'));
                    }
                    lines + buf.len()
                })
                .sum::<usize>()
        })
    });
    g.finish();
}

criterion_group!(streaming, benches);
criterion_main!(streaming);
