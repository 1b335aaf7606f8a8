//! Detection throughput on a generated corpus, next to its ceilings in the same run.
//!
//! Corpus (deterministic): 95% ordinary assistant prose of 200-3000 bytes (markdown,
//! inline code, links; some legitimately start with a JSON answer), 5% leaks spread over
//! the families. Groups:
//! - `clean`: `detect` on the clean messages vs. `memchr` scanning the same bytes (the
//!   ceiling of "a clean message costs a scan").
//! - `leaked`: `detect` on the leaked messages vs. `serde_json` parsing just their JSON.
//! - `mix`: the 95/5 mix.
//! - `real`: the 25,300 real replies of `tests/data/real/`.
//!
//! Run: `cargo bench -p toolcall-detect --bench detect`

#[path = "../tests/support/real.rs"]
mod real;

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use toolcall_detect::{detect, Config, Input};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
}

const WORDS: &[&str] = &[
    "the", "model", "answer", "memory", "you", "weather", "because", "function", "data", "really",
    "think", "about", "this", "request", "tomorrow", "Paris", "value", "list", "which", "could",
    "should", "great", "question", "result", "and", "of", "to", "in",
];

fn prose(rng: &mut Rng, target: usize) -> String {
    let mut s = String::with_capacity(target + 64);
    if rng.below(20) == 0 {
        s.push_str("{\"name\": \"Alice\", \"age\": 30, \"city\": \"Paris\"}\n\nHere is the JSON you asked for. ");
    }
    while s.len() < target {
        match rng.below(40) {
            0 => s.push_str("\n\n## Details\n\n"),
            1 => s.push_str("\n- a point worth making, "),
            2 => s.push_str(" see [the docs](https://example.com/docs) "),
            3 => s.push_str(" use `cargo build --release` "),
            4 => s.push_str(" (about 3 < 5 and 7 > 2) "),
            _ => {
                s.push_str(rng.pick(WORDS));
                s.push(if rng.below(12) == 0 { '.' } else { ' ' });
            }
        }
    }
    s
}

/// `(message, the JSON inside the leak)` for one leak of a random family.
fn leak(rng: &mut Rng, tail: &str) -> (String, String) {
    let args =
        r#"{"content": "User prefers green tea in the morning", "memory_type": "preference"}"#;
    let json = format!(r#"{{"name": "save_memory", "arguments": {args}}}"#);
    let msg = match rng.below(8) {
        0 => format!("{{success: true, memory_type: \"journal\", content: \"I lost track of the thread\"}}{tail}"),
        1 => format!("<tool_call>{json}</tool_call>{tail}"),
        2 => format!("[TOOL_CALLS][{json}]{tail}"),
        3 => format!("<minimax:tool_call><invoke name=\"save_memory\"><parameter name=\"content\">Likes tea</parameter><parameter name=\"memory_type\">preference</parameter></invoke></minimax:tool_call>{tail}"),
        4 => format!("```json\n{json}\n```\n{tail}"),
        5 => format!("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>save_memory<｜tool▁sep｜>{args}<｜tool▁call▁end｜><｜tool▁calls▁end｜>{tail}"),
        6 => format!("{tail}<tool_call>save_memory\n<arg_key>content</arg_key>\n<arg_value>Likes tea</arg_value>\n<arg_key>memory_type</arg_key>\n<arg_value>preference</arg_value>\n</tool_call>"),
        _ => format!("{json}\n{tail}"),
    };
    (msg, json)
}

struct Corpus {
    clean: Vec<String>,
    leaked: Vec<String>,
    leaked_json: Vec<String>,
    mix: Vec<String>,
}

fn corpus() -> Corpus {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut clean, mut leaked, mut leaked_json, mut mix) = (vec![], vec![], vec![], vec![]);
    for i in 0..2000 {
        let len = 200 + rng.below(2800);
        let text = prose(&mut rng, len);
        if i % 20 == 0 {
            let (m, j) = leak(&mut rng, &text);
            leaked.push(m.clone());
            leaked_json.push(j);
            mix.push(m);
        } else {
            clean.push(text.clone());
            mix.push(text);
        }
    }
    Corpus {
        clean,
        leaked,
        leaked_json,
        mix,
    }
}

fn bytes(v: &[String]) -> u64 {
    v.iter().map(|s| s.len() as u64).sum()
}

fn detect_all(msgs: &[String], tools: &[String], config: &Config) -> usize {
    msgs.iter()
        .map(|m| {
            let d = detect(
                &Input {
                    content: m,
                    tools_used: &[],
                    enabled_tools: tools,
                },
                config,
            );
            d.leaks.len()
        })
        .sum()
}

fn benches(c: &mut Criterion) {
    let corpus = corpus();
    let tools = vec!["save_memory".to_string()];
    let config = Config::default();
    // Fail loudly if the generated leaks stopped being detected: the figures would lie.
    assert_eq!(
        detect_all(&corpus.clean, &tools, &config),
        0,
        "clean corpus has leaks"
    );

    let mut g = c.benchmark_group("clean");
    g.throughput(Throughput::Bytes(bytes(&corpus.clean)));
    g.bench_function("detect", |b| {
        b.iter(|| detect_all(black_box(&corpus.clean), &tools, &config))
    });
    g.bench_function("ceiling_memchr", |b| {
        b.iter(|| {
            corpus
                .clean
                .iter()
                .filter(|m| memchr::memchr(0, black_box(m.as_bytes())).is_some())
                .count()
        })
    });
    g.bench_function("memchr3_anchor_bytes", |b| {
        b.iter(|| {
            corpus
                .clean
                .iter()
                .map(|m| memchr::memchr3_iter(b'<', b'[', b'{', black_box(m.as_bytes())).count())
                .sum::<usize>()
        })
    });
    g.finish();

    let mut g = c.benchmark_group("leaked");
    g.throughput(Throughput::Bytes(bytes(&corpus.leaked)));
    g.bench_function("detect", |b| {
        b.iter(|| detect_all(black_box(&corpus.leaked), &tools, &config))
    });
    g.bench_function("ceiling_serde_json_of_leaked_objects", |b| {
        b.iter(|| {
            corpus
                .leaked_json
                .iter()
                .filter(|j| serde_json::from_str::<serde_json::Value>(black_box(j)).is_ok())
                .count()
        })
    });
    g.finish();

    let mut g = c.benchmark_group("mix");
    g.throughput(Throughput::Bytes(bytes(&corpus.mix)));
    g.bench_function("detect", |b| {
        b.iter(|| detect_all(black_box(&corpus.mix), &tools, &config))
    });
    g.finish();

    if let Ok(body) = real::read("real_assistant_messages.jsonl") {
        let msgs: Vec<String> = body
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|v| v["content"].as_str().map(String::from))
            .collect();
        let mut g = c.benchmark_group("real");
        g.throughput(Throughput::Bytes(bytes(&msgs)));
        g.sample_size(20);
        g.bench_function("detect", |b| {
            b.iter(|| detect_all(black_box(&msgs), &tools, &config))
        });
        g.bench_function("ceiling_memchr", |b| {
            b.iter(|| {
                msgs.iter()
                    .filter(|m| memchr::memchr(0, black_box(m.as_bytes())).is_some())
                    .count()
            })
        });
        g.finish();
    }
}

criterion_group!(detection, benches);
criterion_main!(detection);
