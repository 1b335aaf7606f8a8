# frozen_string_literal: true

require_relative "test_helper"

class TestStream < Minitest::Test
  include Samples

  TEXTS = [CLEAN, HERMES, SEED, MULTIBYTE, "", "{", "<tool_call>",
           "#{HERMES} and then #{SEED}"].freeze

  # Pushes +deltas+ through a new stream; returns [shown pieces, Finished].
  def run_stream(deltas, tools = TOOLS)
    stream = ToolcallRecovery::Stream.new(enabled_tools: tools)
    shown = deltas.map do |d|
      out = stream.push(d)
      assert_instance_of String, out
      assert_equal Encoding::UTF_8, out.encoding
      out
    end
    [shown, stream.finish]
  end

  def assert_same_as_detect(text, deltas, why)
    shown, finished = run_stream(deltas)
    expected = ToolcallRecovery.detect(text, enabled_tools: TOOLS)
    assert_equal expected.cleaned, shown.join + finished.rest, why
    assert_equal expected, finished.result, why
    assert_equal expected.calls, finished.result.calls, why
  end

  def test_every_character_a_delta
    TEXTS.each { |t| assert_same_as_detect(t, t.each_char.to_a, "char by char: #{t.inspect}") }
  end

  def test_random_splits
    seed = Integer(ENV.fetch("STREAM_SEED", Random.new_seed % 100_000))
    rng = Random.new(seed)
    TEXTS.each do |t|
      20.times do
        chars = t.chars
        deltas = []
        deltas << chars.shift(rng.rand(1..8)).join until chars.empty?
        assert_same_as_detect(t, deltas, "STREAM_SEED=#{seed}: #{deltas.inspect}")
      end
    end
  end

  def test_whole_reply_in_one_delta_gives_the_cleaned_text_and_calls
    shown, finished = run_stream([HERMES])
    assert_equal "Sure.", shown.join + finished.rest
    assert_equal ["save_memory"], finished.result.calls.map { |c| c[:name] }
    assert_equal ["hermes"], finished.result.families
    assert_equal HERMES, finished.result.text
    assert_equal [HERMES_MARKUP], finished.result.removed.map { |x| x[:text] }
  end

  def test_a_clean_reply_comes_out_whole
    shown, finished = run_stream(["Tea ", "is ", "nice."])
    assert_equal "Tea is nice.", shown.join + finished.rest
    refute finished.result.leaked?
  end

  def test_held_counts_bytes_not_shown
    stream = ToolcallRecovery::Stream.new(enabled_tools: TOOLS)
    shown = stream.push("café")
    assert_equal "café".bytesize - shown.bytesize, stream.held
  end

  def test_push_after_finish_raises
    stream = ToolcallRecovery::Stream.new(enabled_tools: TOOLS)
    stream.push("hello")
    refute stream.finished?
    stream.finish
    assert stream.finished?
    error = assert_raises(ToolcallRecovery::Error) { stream.push("more") }
    assert_match(/push after finish/, error.message)
    assert_raises(ToolcallRecovery::Error) { stream.finish }
    assert_operator ToolcallRecovery::Error, :<, StandardError
  end
end
