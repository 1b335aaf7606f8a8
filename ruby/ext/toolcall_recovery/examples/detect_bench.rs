//! The Rust side of the binding's cost measurement (ruby/bench/detect_bench.rb is the Ruby
//! side): `toolcall_detect::detect` over every real reply, the same enabled tools and the
//! same number of passes as the Ruby bench, timed per pass.
//!
//! Usage: `cargo run --release --example detect_bench -- [PASSES] [JSONL.zst]`; reads the
//! file through the `zstd` command, as the Ruby side does. Prints one line per pass and
//! the median, in milliseconds.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Instant;
use toolcall_detect::{detect, Config, Input};

/// The tools the bench enables, the same list as the Ruby bench.
const TOOLS: &[&str] = &[
    "save_memory",
    "search",
    "web_search",
    "get_weather",
    "calculator",
    "python",
    "read_file",
    "write_file",
    "wikipedia",
    "weather",
    "calendar",
    "translate",
];

const DEFAULT_FILE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../crates/detect/tests/data/real/real_assistant_messages.jsonl.zst"
);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let passes: usize = args.next().map_or(Ok(5), |a| a.parse())?;
    let file = args.next().unwrap_or_else(|| DEFAULT_FILE.to_string());
    let texts = read_contents(&file)?;
    let tools: Vec<String> = TOOLS.iter().map(|t| t.to_string()).collect();
    let config = Config::default();
    let bytes: usize = texts.iter().map(String::len).sum();
    println!(
        "rust: {} replies, {bytes} bytes, {passes} passes",
        texts.len()
    );

    let mut times = Vec::with_capacity(passes);
    let mut leaked = 0;
    for pass in 1..=passes {
        let start = Instant::now();
        leaked = 0;
        for content in &texts {
            let input = Input {
                content,
                tools_used: &[],
                enabled_tools: &tools,
            };
            let d = std::hint::black_box(detect(std::hint::black_box(&input), &config));
            leaked += usize::from(!d.is_clean());
        }
        let ms = start.elapsed().as_secs_f64() * 1e3;
        println!("rust pass {pass}: {ms:.1} ms");
        times.push(ms);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "rust median: {:.1} ms per pass ({leaked} leaked)",
        times[times.len() / 2]
    );
    Ok(())
}

/// The `content` of every line of a zstd-compressed JSON Lines file.
fn read_contents(file: &str) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let mut child = Command::new("zstd")
        .args(["-dc", file])
        .stdout(Stdio::piped())
        .spawn()?;
    let stdout = child.stdout.take().ok_or("zstd gave no output")?;
    let mut texts = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let row: serde_json::Value = serde_json::from_str(&line?)?;
        texts.push(
            row["content"]
                .as_str()
                .ok_or("a line without content")?
                .to_string(),
        );
    }
    if !child.wait()?.success() {
        return Err(format!("zstd -dc {file} failed").into());
    }
    Ok(texts)
}
