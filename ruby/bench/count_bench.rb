# frozen_string_literal: true

# For instruction counts (valgrind --tool=callgrind), not for clocks: loads the replies as
# detect_bench.rb does, runs one pass not counted, then PASSES passes of one way of calling
# the gem. The cost of a call is the difference between the totals of a run with PASSES
# passes and one with 0, divided by PASSES and the number of replies (see ruby/README.md,
# Cost). The Rust side's count comes the same way from examples/detect_bench.rs.
#
#   valgrind --tool=callgrind ruby ruby/bench/count_bench.rb PASSES MODE JSONL.zst
#
# MODE: might_leak (Native.might_leak?), native (Native.detect(t, TOOLS)), detect
# (ToolcallRecovery.detect(t, enabled_tools: TOOLS)), app (the same, then cleaned and
# calls), none.

require "json"
require "toolcall_recovery"

TOOLS = %w[save_memory search web_search get_weather calculator python read_file
           write_file wikipedia weather calendar translate].freeze

passes = Integer(ARGV.fetch(0))
mode = ARGV.fetch(1)
texts = IO.popen(["zstd", "-dc", ARGV.fetch(2)]) { |io| io.each_line.map { |l| JSON.parse(l).fetch("content") } }
texts = texts.map { |t| String.new(t, capacity: t.bytesize) }
GC.start
texts.each { |t| ToolcallRecovery.detect(t, enabled_tools: TOOLS) }
passes.times do
  case mode
  when "might_leak" then texts.each { |t| ToolcallRecovery::Native.might_leak?(t) }
  when "native" then texts.each { |t| ToolcallRecovery::Native.detect(t, TOOLS) }
  when "detect" then texts.each { |t| ToolcallRecovery.detect(t, enabled_tools: TOOLS) }
  when "app"
    texts.each do |t|
      r = ToolcallRecovery.detect(t, enabled_tools: TOOLS)
      r.cleaned
      r.calls
    end
  when "none" then nil
  else abort "unknown mode #{mode}"
  end
end
