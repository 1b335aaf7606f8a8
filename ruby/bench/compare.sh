#!/usr/bin/env bash
# The binding's cost, measured: the Rust bench (ruby/ext/toolcall_recovery/examples/
# detect_bench.rs) and the Ruby bench (ruby/bench/detect_bench.rb) alternated ROUNDS times
# in the same minutes, PASSES timed passes each over the 25,300 real replies. Prints the
# medians of all their passes, wall-clock and CPU time of the thread, and the ratios.
#
#   bash ruby/bench/compare.sh [ROUNDS] [PASSES]        (default 10 rounds of 15 passes)
#
# Ruby loads toolcall_recovery as `require` finds it: install the gem first
# (scripts/ruby-gem.sh, gem install --local), with GEM_HOME set to where it went if that is
# not the default, or set RUBYOPT=-I$PWD/target/gem/stage/lib for the last build. Needs zstd.
# BENCH_CALL=might_leak times the scan alone on the Ruby side, BENCH_CALL=leaked detect(...)
# .leaked? alone (see detect_bench.rb); RUBYOPT=--yjit runs the Ruby side under YJIT.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-10}
passes=${2:-15}
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target/ruby-ext}"
cargo build --quiet --release --locked --manifest-path ruby/ext/toolcall_recovery/Cargo.toml \
  --example detect_bench
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for _ in $(seq "$rounds"); do
  "$CARGO_TARGET_DIR/release/examples/detect_bench" "$passes" | grep ' pass ' >>"$out"
  ruby ruby/bench/detect_bench.rb "$passes" | grep ' pass ' >>"$out"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
ruby -e '
  rows = File.readlines(ARGV[0]).map { |l| l =~ /^(\w+) pass \d+: ([\d.]+) ms wall, ([\d.]+) ms cpu/ && [$1, $2.to_f, $3.to_f] }.compact
  med = ->(v) { s = v.sort; s.size.odd? ? s[s.size / 2] : (s[s.size / 2 - 1] + s[s.size / 2]) / 2 }
  m = rows.group_by(&:first).transform_values { |r| [med.(r.map { |x| x[1] }), med.(r.map { |x| x[2] }), r.size] }
  m.each { |side, (w, c, n)| puts format("%-4s median of %d passes: %.1f ms wall, %.1f ms cpu", side, n, w, c) }
  puts format("ruby / rust: %.2fx wall, %.2fx cpu", m["ruby"][0] / m["rust"][0], m["ruby"][1] / m["rust"][1])
' "$out"
