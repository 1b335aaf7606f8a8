//! What labelling a message by its model costs on the clean path (every event pays it):
//! `Models::label` over ids as events carry them, with the `prometheus` counter increment
//! the label is for, next to what the clean path pays anyway for the same event: decoding
//! it and a detection scan of its (clean, 1 KB) reply.
//!
//! Run: `cargo bench -p toolcall-recovery --bench models`

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use toolcall_recovery::metrics::Metrics;
use toolcall_recovery::model::Models;

/// Ids in the shapes providers send, each matched by the default list or `other`.
const IDS: &[&str] = &[
    "gemini-2.5-flash",
    "models/gemini-2.5-flash-preview-05-20",
    "openai/gpt-4o-2024-08-06",
    "gpt-4o-mini",
    "anthropic/claude-sonnet-4-20250514",
    "us.anthropic.claude-3-7-sonnet-20250219-v1:0",
    "openrouter/meta-llama/llama-3.3-70b-instruct:free",
    "Qwen/Qwen3-235B-A22B-Instruct-2507",
    "accounts/fireworks/models/deepseek-r1-0528",
    "acme-internal-model-9000",
];

fn labels(c: &mut Criterion) {
    let models = Models::default();
    let metrics = Metrics::new();
    let mut g = c.benchmark_group("model");
    g.throughput(Throughput::Elements(IDS.len() as u64));
    g.bench_function("label", |b| {
        b.iter(|| {
            for id in IDS {
                black_box(models.label(Some(black_box(id))));
            }
        })
    });
    g.bench_function("label+count", |b| {
        b.iter(|| {
            for id in IDS {
                metrics.message_seen(models.name(models.label(Some(black_box(id)))));
            }
        })
    });
    let reply = "Sure! Here is what I found about the weather in Paris tomorrow: mostly sunny, \
                 around 18 degrees, with a light breeze in the afternoon. "
        .repeat(8);
    let event = serde_json::json!({
        "event_id": "7d8f7a4e-6a5b-4bb0-9a43-1d5bc1f4b1a1", "type": "message.finalized",
        "occurred_at": "2026-11-22T10:00:00Z",
        "message": {"id": 1, "chat_id": 2, "agent_id": 3, "role": "assistant",
                    "content": reply, "tools_used": [], "model_id": IDS[1]},
    })
    .to_string();
    g.bench_function("decode the event (for scale)", |b| {
        // The decoder takes over the delivery's buffer; copying one for it is not timed.
        b.iter_batched(
            || vec![event.as_bytes().to_vec(); IDS.len()],
            |bodies| {
                for body in bodies {
                    let _ = black_box(toolcall_recovery::event::decode(black_box(body), 1 << 20));
                }
            },
            criterion::BatchSize::SmallInput,
        )
    });
    let config = toolcall_recovery::detect::Config::default();
    g.bench_function("detect its clean reply (for scale)", |b| {
        b.iter(|| {
            for _ in IDS {
                black_box(toolcall_recovery::detect::detect(
                    &toolcall_recovery::detect::Input {
                        content: black_box(&reply),
                        tools_used: &[],
                        enabled_tools: &[],
                    },
                    &config,
                ));
            }
        })
    });
    g.finish();
}

criterion_group!(benches, labels);
criterion_main!(benches);
