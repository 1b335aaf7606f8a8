# frozen_string_literal: true

require_relative "test_helper"
require "json"
require "set"

# The detection vectors of crates/detect/tests/data (the Rust tests' own), through the
# binding: for the tier-1 formats the Rust tests hold to, the calls and the text come out
# of Ruby as the vectors say (so the JSON arguments convert to the Ruby values JSON.parse
# gives); for every vector, a stream in random pieces gives what detect gives, and each
# removed span is the text's bytes verbatim.
class TestVectors < Minitest::Test
  DATA = File.expand_path("../../crates/detect/tests/data", __dir__)
  # As crates/detect/tests/vectors.rs.
  TIER1 = %w[result_prefix result_only hermes minimax xml_invoke mistral json_fence pythonic
             llama3_json deepseek kimi glm harmony llama3_python_tag llama3_function_tag
             negative].freeze

  def self.load(prefix)
    files = Dir[File.join(DATA, "#{prefix}*.jsonl")].sort
    raise "no vectors in #{DATA}: a broken checkout" if files.empty?

    files.flat_map { |f| File.readlines(f, chomp: true).reject(&:empty?).map { |l| [File.basename(f), JSON.parse(l)] } }
  end

  GAPS = load("known_gaps").map { |_, v| v.fetch("id") }.to_set.freeze
  # What the binding can be asked: it has no tools_used (a message whose tool ran).
  VECTORS = load("").reject { |f, v| f.start_with?("known_gaps", "scored_") || !v["tools_used"].empty? }
                    .map(&:last).freeze

  def detect(v)
    ToolcallRecovery.detect(v["text"], enabled_tools: v["enabled_tools"])
  end

  def test_there_are_vectors
    assert_operator VECTORS.size, :>, 500
  end

  def test_tier1_calls_and_text_through_ruby
    checked = 0
    VECTORS.each do |v|
      next unless TIER1.include?(v["family"]) && !GAPS.include?(v["id"])

      r = detect(v)
      want = v["expected_calls"].map { |c| { name: c["name"], arguments: c["arguments"] } }
      assert_equal want, r.calls, v["id"]
      assert_equal v["expected_text"].strip, r.cleaned.strip, v["id"]
      checked += 1
    end
    assert_operator checked, :>, 300
  end

  def test_every_vector_streams_to_what_detect_gives
    seed = Integer(ENV.fetch("STREAM_SEED", Random.new_seed % 100_000))
    rng = Random.new(seed)
    VECTORS.each do |v|
      r = detect(v)
      stream = ToolcallRecovery::Stream.new(enabled_tools: v["enabled_tools"])
      chars = v["text"].chars
      shown = +""
      shown << stream.push(chars.shift(rng.rand(1..16)).join) until chars.empty?
      finished = stream.finish
      why = "#{v["id"]} (STREAM_SEED=#{seed})"
      assert_equal r.cleaned, shown + finished.rest, why
      assert_equal r, finished.result, why
    end
  end

  def test_removed_spans_are_the_texts_bytes
    VECTORS.each do |v|
      r = detect(v)
      last = 0
      r.removed.each do |x|
        assert_equal v["text"].byteslice(x[:range]), x[:text], v["id"]
        assert_operator x[:range].begin, :>=, last, v["id"]
        last = x[:range].end
      end
      assert_equal r.leaked?, !r.families.empty?, v["id"]
    end
  end
end
