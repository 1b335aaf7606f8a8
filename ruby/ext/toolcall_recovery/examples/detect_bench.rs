//! The Rust side of the binding's cost measurement (ruby/bench/detect_bench.rb is the Ruby
//! side): `toolcall_detect::detect` over every real reply, the same enabled tools and the
//! same number of passes as the Ruby bench, each pass timed in wall-clock time and in the
//! thread's CPU time (which other processes on the machine disturb less).
//!
//! Usage: `cargo run --release --example detect_bench -- [PASSES] [JSONL.zst]`; reads the
//! file through the `zstd` command, as the Ruby side does. Prints one line per pass and
//! the medians, in milliseconds.

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
    let passes: usize = args.next().map_or(Ok(7), |a| a.parse())?;
    let file = args.next().unwrap_or_else(|| DEFAULT_FILE.to_string());
    let texts = read_contents(&file)?;
    let tools: Vec<String> = TOOLS.iter().map(|t| t.to_string()).collect();
    let config = Config::default();
    let bytes: usize = texts.iter().map(String::len).sum();
    println!(
        "rust: {} replies, {bytes} bytes, {passes} passes",
        texts.len()
    );

    // One pass first, not counted, as on the Ruby side.
    for content in &texts {
        let input = Input {
            content,
            tools_used: &[],
            enabled_tools: &tools,
        };
        std::hint::black_box(detect(std::hint::black_box(&input), &config));
    }

    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    let mut leaked = 0;
    for pass in 1..=passes {
        let (start, start_cpu) = (Instant::now(), thread_cpu_ms());
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
        let (w, c) = (
            start.elapsed().as_secs_f64() * 1e3,
            thread_cpu_ms() - start_cpu,
        );
        println!("rust pass {pass}: {w:.1} ms wall, {c:.1} ms cpu");
        wall.push(w);
        cpu.push(c);
    }
    println!(
        "rust median: {:.1} ms wall, {:.1} ms cpu per pass ({leaked} leaked)",
        median(&mut wall),
        median(&mut cpu)
    );
    Ok(())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// CPU time of this thread, in milliseconds (CLOCK_THREAD_CPUTIME_ID, as Ruby's
/// `Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)`).
fn thread_cpu_ms() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 / 1e6
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
