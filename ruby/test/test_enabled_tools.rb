# frozen_string_literal: true

require_relative "test_helper"

# The enabled tools as detect reads them: the last frozen Array of frozen Strings that a
# detection needed is remembered (ext/toolcall_recovery/src/tools.rs); every other list is
# read afresh on each call, so a change made between two calls is always seen.
class TestEnabledTools < Minitest::Test
  include Samples

  # A leak only when "save_memory" is an enabled tool (a bare JSON call).
  BARE = '{"name": "save_memory", "arguments": {"content": "likes tea"}}'

  def leaks?(tools)
    ToolcallRecovery.detect(BARE, enabled_tools: tools).leaked?
  end

  def test_an_array_changed_between_calls_is_read_again
    tools = []
    refute leaks?(tools)
    tools << "save_memory"
    assert leaks?(tools)
    tools.clear
    refute leaks?(tools)
    tools.push("search", "save_memory")
    assert leaks?(tools)
  end

  def test_a_string_changed_in_place_inside_a_frozen_array_is_read_again
    name = +"search"
    tools = [name].freeze
    refute leaks?(tools)
    name.replace("save_memory")
    assert leaks?(tools)
    name.replace("search")
    refute leaks?(tools)
  end

  def test_frozen_lists_of_frozen_strings_each_give_their_own_answer
    with = ["save_memory"].freeze
    without = ["search"].freeze
    3.times do
      assert leaks?(with)
      assert leaks?(with)
      refute leaks?(without)
      refute leaks?(without)
      assert_equal ToolcallRecovery.detect(BARE, enabled_tools: ["save_memory"]),
                   ToolcallRecovery.detect(BARE, enabled_tools: with)
    end
  end

  def test_a_remembered_list_survives_gc_and_new_lists_are_not_mistaken_for_it
    names = %w[save_memory search]
    400.times do |i|
      name = names[i % 2]
      tools = [name.dup.freeze].freeze
      assert_equal name == "save_memory", leaks?(tools), "call #{i} with #{tools.inspect}"
      if (i % 50).zero?
        GC.start
        GC.compact if GC.respond_to?(:compact)
      end
    end
  end

  def test_bad_lists_raise_on_every_call_after_a_good_one_was_remembered
    assert leaks?(["save_memory"].freeze)
    bad = ["save_memory", 1].freeze
    2.times do
      error = assert_raises(TypeError) { leaks?(bad) }
      assert_match(/element 1 is a Integer/, error.message)
    end
    assert_raises(TypeError) { leaks?(nil) }
    invalid = ["\xff".dup.force_encoding(Encoding::UTF_8).freeze].freeze
    2.times { assert_raises(ArgumentError) { leaks?(invalid) } }
  end

  def test_a_clean_result_shares_one_frozen_empty_array
    r = ToolcallRecovery.detect(CLEAN, enabled_tools: TOOLS)
    assert_equal [], r.calls
    assert r.calls.frozen?
    assert_same r.calls, r.families
    assert_same r.calls, r.removed
    assert_raises(FrozenError) { r.calls << 1 }
    assert_equal [], ToolcallRecovery.detect("other", enabled_tools: []).calls
  end
end
