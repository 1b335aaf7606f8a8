# frozen_string_literal: true

require_relative "test_helper"

class TestDetect < Minitest::Test
  include Samples

  def test_clean_text_is_returned_as_the_same_object
    r = ToolcallRecovery.detect(CLEAN, enabled_tools: TOOLS)
    assert_same CLEAN, r.cleaned
    refute r.changed?
    refute r.leaked?
    assert_equal [], r.calls
    assert_equal [], r.families
    assert_equal [], r.removed
    refute r.respond_to?(:text=)
  end

  def test_hermes_leak_is_cut_out_and_its_call_read
    r = ToolcallRecovery.detect(HERMES, enabled_tools: TOOLS)
    assert_equal "Sure.", r.cleaned
    assert_equal Encoding::UTF_8, r.cleaned.encoding
    assert r.changed?
    assert r.leaked?
    assert_equal [{ name: "save_memory", arguments: { "content" => "likes tea", "memory_type" => "fact" } }],
                 r.calls
    assert_equal ["hermes"], r.families
    assert_equal [{ family: "hermes", range: 5...HERMES.bytesize, text: HERMES_MARKUP }], r.removed
    assert_same HERMES, r.text
    # What the result holds stays as detect made it.
    assert r.send(:_found).frozen?
  end

  def test_seed_leak_result_prefix
    r = ToolcallRecovery.detect(SEED, enabled_tools: TOOLS)
    assert_equal "You saw right through me.", r.cleaned
    assert_equal ["result_prefix"], r.families
    assert_equal [{ name: "save_memory",
                    arguments: { "content" => "I lost track of...", "memory_type" => "journal" } }], r.calls
    assert_equal ['{success: true, memory_type: "journal", content: "I lost track of..."}'],
                 r.removed.map { |x| x[:text] }
  end

  def test_removed_ranges_are_byte_ranges_with_the_text_verbatim
    r = ToolcallRecovery.detect(MULTIBYTE, enabled_tools: TOOLS)
    assert_equal "café ☕ après", r.cleaned
    removed = r.removed.fetch(0)
    # "café ☕ " is 7 characters but 10 bytes.
    assert_equal 10, removed[:range].begin
    assert_equal MULTIBYTE.byteslice(removed[:range]), removed[:text]
    assert removed[:text].start_with?("<tool_call>")
    assert removed[:text].end_with?("</tool_call>")
    assert_equal({ "content" => "thé vert", "memory_type" => "preference" }, r.calls[0][:arguments])
  end

  def test_arguments_become_ruby_values_with_nested_structure
    text = 'Ok.<tool_call>{"name": "search", "arguments": {"n": 3, "x": 1.5, "neg": -7, ' \
           '"big": 18446744073709551615, "tags": ["a", {"b": null}], "ok": true, "no": false, ' \
           '"s": "caf\u00e9"}}</tool_call>'
    args = ToolcallRecovery.detect(text, enabled_tools: ["search"]).calls.fetch(0)[:arguments]
    assert_instance_of Hash, args
    assert_equal %w[big n neg no ok s tags x], args.keys.sort
    assert_instance_of Integer, args["n"]
    assert_equal 3, args["n"]
    assert_equal(-7, args["neg"])
    assert_equal 18_446_744_073_709_551_615, args["big"]
    assert_instance_of Float, args["x"]
    assert_in_delta 1.5, args["x"]
    assert_equal ["a", { "b" => nil }], args["tags"]
    assert_same true, args["ok"]
    assert_same false, args["no"]
    assert_equal "café", args["s"]
    assert_equal Encoding::UTF_8, args["s"].encoding
  end

  def test_a_message_that_is_only_a_fake_result_is_reported_but_kept
    text = '{success: true, memory_type: "journal", content: "I lost track of..."}'
    r = ToolcallRecovery.detect(text, enabled_tools: TOOLS)
    assert r.leaked?
    refute r.changed?
    assert_same text, r.cleaned
    assert_equal ["result_only"], r.families
    assert_equal [], r.removed
  end

  def test_enabled_tools_decide_weak_formats
    text = <<~TEXT
      Let me check.
      ```json
      {"name": "get_weather", "arguments": {"city": "Paris"}}
      ```
    TEXT
    with = ToolcallRecovery.detect(text, enabled_tools: ["get_weather"])
    without = ToolcallRecovery.detect(text, enabled_tools: [])
    assert_equal ["get_weather"], with.calls.map { |c| c[:name] }
    refute without.leaked?
  end

  def test_several_leaks_in_order
    text = 'A<tool_call>{"name": "save_memory", "arguments": {"content": "one", "memory_type": "fact"}}' \
           '</tool_call> B <tool_call>{"name": "save_memory", "arguments": {"content": "two", ' \
           '"memory_type": "goal"}}</tool_call>'
    r = ToolcallRecovery.detect(text, enabled_tools: TOOLS)
    assert_equal %w[one two], r.calls.map { |c| c[:arguments]["content"] }
    assert_equal ["hermes"], r.families
    assert_equal 2, r.removed.size
    r.removed.each { |x| assert_equal text.byteslice(x[:range]), x[:text] }
  end

  def test_results_compare_by_value
    assert_equal ToolcallRecovery.detect(HERMES, enabled_tools: TOOLS),
                 ToolcallRecovery.detect(HERMES.dup, enabled_tools: TOOLS)
    refute_equal ToolcallRecovery.detect(HERMES, enabled_tools: TOOLS),
                 ToolcallRecovery.detect(CLEAN, enabled_tools: TOOLS)
  end

  def test_might_leak
    assert ToolcallRecovery.might_leak?(HERMES)
    refute ToolcallRecovery.might_leak?("plain words only")
  end

  def test_survives_gc_stress
    GC.stress = true
    results = [HERMES, SEED, CLEAN, MULTIBYTE].map { |t| ToolcallRecovery.detect(t.dup, enabled_tools: TOOLS.dup) }
    GC.stress = false
    GC.start
    GC.compact if GC.respond_to?(:compact)
    assert_equal ["Sure.", "You saw right through me.", CLEAN, "café ☕ après"], results.map(&:cleaned)
    assert_equal "likes tea", results[0].calls[0][:arguments]["content"]
  ensure
    GC.stress = false
  end
end
