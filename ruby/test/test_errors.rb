# frozen_string_literal: true

require_relative "test_helper"

class TestErrors < Minitest::Test
  include Samples

  INVALID = "Sure.\xff<tool_call>".dup.force_encoding(Encoding::UTF_8)

  def test_text_must_be_a_string
    [nil, 42, :sym, ["a"], Object.new].each do |bad|
      error = assert_raises(TypeError) { ToolcallRecovery.detect(bad, enabled_tools: []) }
      assert_match(/text must be a String, got #{bad.class}/, error.message)
    end
  end

  def test_invalid_utf8_raises_argument_error
    error = assert_raises(ArgumentError) { ToolcallRecovery.detect(INVALID, enabled_tools: []) }
    assert_match(/not valid UTF-8.*byte 5/, error.message)
    assert_raises(ArgumentError) { ToolcallRecovery.detect("\xff".dup.force_encoding("UTF-8"), enabled_tools: []) }
    assert_raises(ArgumentError) { ToolcallRecovery.might_leak?(INVALID) }
  end

  def test_binary_strings_are_accepted_when_their_bytes_are_utf8
    binary = HERMES.b
    r = ToolcallRecovery.detect(binary, enabled_tools: TOOLS)
    assert_equal "Sure.", r.cleaned
    clean = "caf\xC3\xA9".b
    c = ToolcallRecovery.detect(clean, enabled_tools: TOOLS)
    assert_equal "café", c.cleaned
    assert_equal Encoding::UTF_8, c.cleaned.encoding
    assert_raises(ArgumentError) { ToolcallRecovery.detect("\xff\xfe".b, enabled_tools: []) }
  end

  def test_other_encodings_raise_argument_error
    latin1 = "café".encode(Encoding::ISO_8859_1)
    error = assert_raises(ArgumentError) { ToolcallRecovery.detect(latin1, enabled_tools: []) }
    assert_match(/ISO-8859-1.*encode/, error.message)
    utf16 = "hi".encode(Encoding::UTF_16LE)
    assert_raises(ArgumentError) { ToolcallRecovery.detect(utf16, enabled_tools: []) }
  end

  def test_us_ascii_is_accepted
    ascii = "plain".encode(Encoding::US_ASCII)
    assert_same ascii, ToolcallRecovery.detect(ascii, enabled_tools: []).cleaned
  end

  def test_enabled_tools_must_be_an_array_of_strings
    [nil, "save_memory", { save_memory: true }, [:save_memory], ["ok", 1]].each do |bad|
      # Checked for clean text too, not only when a leak is suspected.
      [CLEAN, HERMES].each do |text|
        error = assert_raises(TypeError, bad.inspect) { ToolcallRecovery.detect(text, enabled_tools: bad) }
        assert_match(/enabled_tools must be an Array of Strings/, error.message)
      end
    end
  end

  def test_enabled_tools_is_required
    assert_raises(ArgumentError) { ToolcallRecovery.detect(CLEAN) }
    assert_raises(ArgumentError) { ToolcallRecovery::Stream.new }
  end

  def test_an_invalid_tool_name_raises_argument_error
    bad = ["\xff".dup.force_encoding(Encoding::UTF_8)]
    assert_raises(ArgumentError) { ToolcallRecovery.detect(HERMES, enabled_tools: bad) }
    assert_raises(ArgumentError) { ToolcallRecovery::Stream.new(enabled_tools: bad) }
  end

  def test_stream_input_checks
    assert_raises(TypeError) { ToolcallRecovery::Stream.new(enabled_tools: nil) }
    stream = ToolcallRecovery::Stream.new(enabled_tools: TOOLS)
    assert_raises(TypeError) { stream.push(nil) }
    assert_raises(TypeError) { stream.push(1) }
    assert_raises(ArgumentError) { stream.push(INVALID) }
    # A rejected delta leaves the stream usable and takes nothing in.
    stream.push("fine")
    assert_equal "fine", stream.finish.result.text
  end

  def test_no_half_made_objects
    assert_raises(TypeError) { ToolcallRecovery::Stream.allocate }
    assert_raises(NoMethodError) { ToolcallRecovery::Result.new }
  end
end
