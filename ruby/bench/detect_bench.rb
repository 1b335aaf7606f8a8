# frozen_string_literal: true

# The Ruby side of the binding's cost measurement: ToolcallRecovery.detect over every real
# reply, PASSES times, each pass timed in wall-clock time and in the thread's CPU time
# (result objects and GC included). The Rust side is
# ruby/ext/toolcall_recovery/examples/detect_bench.rs: same texts, tools, passes, clocks.
#
#   ruby ruby/bench/detect_bench.rb [PASSES] [JSONL.zst]
#
# Each reply is used as the app uses it: detect(text, enabled_tools: TOOLS), then the
# result's cleaned (the text to show), calls (the calls to run) and leaked? (counted, as
# the Rust side counts detections that are not clean).
#
# BENCH_CALL=leaked reads leaked? alone (what this bench timed before 2026-12-02);
# BENCH_CALL=might_leak times ToolcallRecovery.might_leak? instead (the same scan and type
# checks, no result object): what calling from Ruby costs at all, apart from the result.
#
# Loads the installed gem (or put a built lib/ first with -I). Reads the file through
# `zstd -dc`.

require "json"
require "toolcall_recovery"

TOOLS = %w[save_memory search web_search get_weather calculator python read_file
           write_file wikipedia weather calendar translate].freeze

def clocks
  [Process.clock_gettime(Process::CLOCK_MONOTONIC), Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)]
end

def median(values)
  values.sort[values.size / 2]
end

passes = Integer(ARGV[0] || 7)
file = ARGV[1] ||
       File.expand_path("../../crates/detect/tests/data/real/real_assistant_messages.jsonl.zst", __dir__)
texts = IO.popen(["zstd", "-dc", file]) { |io| io.each_line.map { |l| JSON.parse(l).fetch("content") } }
abort "zstd -dc #{file} failed" unless $?.success?
# JSON.parse leaves each text among the garbage of its line, and reading them from there
# costs any code about a third more in cache misses (the Rust side's texts are allocated one
# after another). Copied once, the texts lie as the Rust side's do, and what is measured is
# the binding. AS_PARSED=1 keeps them where JSON.parse put them.
texts = texts.map { |t| String.new(t, capacity: t.bytesize) } unless ENV["AS_PARSED"] == "1"
# The loading left millions of dead objects (and the parsed texts, when copied): collected
# now, not by the first collections inside the timed passes (Rust frees them as it goes).
GC.start
puts "ruby: #{texts.size} replies, #{texts.sum(&:bytesize)} bytes, #{passes} passes"

# One pass first, not counted: it fills the caches and the object heap, as the Rust
# side's first pass does for its own.
texts.each { |t| ToolcallRecovery.detect(t, enabled_tools: TOOLS) }

wall = []
cpu = []
leaked = 0
(1..passes).each do |pass|
  leaked = 0
  start_wall, start_cpu = clocks
  case ENV["BENCH_CALL"]
  when "might_leak"
    texts.each { |t| leaked += 1 if ToolcallRecovery.might_leak?(t) }
  when "leaked"
    texts.each { |t| leaked += 1 if ToolcallRecovery.detect(t, enabled_tools: TOOLS).leaked? }
  else
    # (CRuby optimises nothing away: each reader below is called.)
    texts.each do |t|
      r = ToolcallRecovery.detect(t, enabled_tools: TOOLS)
      r.cleaned
      r.calls
      leaked += 1 if r.leaked?
    end
  end
  end_wall, end_cpu = clocks
  wall << (end_wall - start_wall) * 1e3
  cpu << (end_cpu - start_cpu) * 1e3
  puts format("ruby pass %d: %.1f ms wall, %.1f ms cpu", pass, wall.last, cpu.last)
end
puts format("ruby median: %.1f ms wall, %.1f ms cpu per pass (%d %s)", median(wall), median(cpu), leaked,
            ENV["BENCH_CALL"] == "might_leak" ? "might leak" : "leaked")
