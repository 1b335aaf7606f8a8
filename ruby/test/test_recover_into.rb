# frozen_string_literal: true

require_relative "test_helper"
require "ostruct"

class TestRecoverInto < Minitest::Test
  include Samples

  PlainMessage = Struct.new(:content, :tool_calls, keyword_init: true)
  CALL_ID = /\Acall_\h{24}\z/.freeze

  def test_struct_message_gets_the_call_as_a_hash_and_clean_content
    refute defined?(::RubyLLM), "these tests expect no RubyLLM constant"
    msg = PlainMessage.new(content: HERMES.dup, tool_calls: nil)
    assert_same msg, ToolcallRecovery.recover_into(msg, enabled_tools: TOOLS)
    assert_equal "Sure.", msg.content
    assert_equal 1, msg.tool_calls.size
    id, call = msg.tool_calls.first
    assert_match CALL_ID, id
    assert_equal({ id: id, name: "save_memory",
                   arguments: { "content" => "likes tea", "memory_type" => "fact" } }, call)
  end

  def test_open_struct_and_empty_tool_calls
    msg = OpenStruct.new(content: SEED.dup, tool_calls: {})
    ToolcallRecovery.recover_into(msg, enabled_tools: TOOLS)
    assert_equal "You saw right through me.", msg.content
    assert_equal ["save_memory"], msg.tool_calls.values.map { |c| c[:name] }
    assert_equal "journal", msg.tool_calls.values[0][:arguments]["memory_type"]
  end

  def test_ids_differ_between_calls
    text = 'A<tool_call>{"name": "save_memory", "arguments": {"content": "one", "memory_type": "fact"}}' \
           '</tool_call><tool_call>{"name": "save_memory", "arguments": {"content": "two", ' \
           '"memory_type": "fact"}}</tool_call>'
    msg = PlainMessage.new(content: text, tool_calls: nil)
    ToolcallRecovery.recover_into(msg, enabled_tools: TOOLS)
    assert_equal "A", msg.content
    assert_equal 2, msg.tool_calls.keys.uniq.size
    assert_equal %w[one two], msg.tool_calls.values.map { |c| c[:arguments]["content"] }
  end

  def test_structured_calls_are_left_alone
    calls = { "call_1" => { id: "call_1", name: "save_memory", arguments: {} } }
    msg = PlainMessage.new(content: HERMES.dup, tool_calls: calls)
    ToolcallRecovery.recover_into(msg, enabled_tools: TOOLS)
    assert_equal HERMES, msg.content
    assert_same calls, msg.tool_calls
    assert_equal ["call_1"], msg.tool_calls.keys
  end

  def test_clean_message_is_left_alone
    content = CLEAN.dup
    msg = PlainMessage.new(content: content, tool_calls: nil)
    ToolcallRecovery.recover_into(msg, enabled_tools: TOOLS)
    assert_same content, msg.content
    assert_nil msg.tool_calls
  end

  def test_nil_content_is_left_alone
    msg = PlainMessage.new(content: nil, tool_calls: nil)
    ToolcallRecovery.recover_into(msg, enabled_tools: TOOLS)
    assert_nil msg.content
    assert_nil msg.tool_calls
  end

  def test_a_kept_result_only_message_is_left_alone
    text = '{success: true, memory_type: "journal", content: "I lost track of..."}'
    msg = PlainMessage.new(content: text, tool_calls: nil)
    ToolcallRecovery.recover_into(msg, enabled_tools: TOOLS)
    assert_same text, msg.content
    assert_nil msg.tool_calls
  end

  def test_a_stripped_fake_result_without_a_call_cleans_only_the_text
    msg = PlainMessage.new(content: '{"success": true}Done.', tool_calls: nil)
    ToolcallRecovery.recover_into(msg, enabled_tools: TOOLS)
    assert_equal "Done.", msg.content
    assert_nil msg.tool_calls
  end

  def test_errors_come_through
    msg = PlainMessage.new(content: HERMES.dup, tool_calls: nil)
    assert_raises(TypeError) { ToolcallRecovery.recover_into(msg, enabled_tools: nil) }
    bad = PlainMessage.new(content: "\xff".dup.force_encoding("UTF-8"), tool_calls: nil)
    assert_raises(ArgumentError) { ToolcallRecovery.recover_into(bad, enabled_tools: TOOLS) }
  end
end

# The same against stand-ins for ruby_llm's classes, shaped as in ruby_llm's source
# (lib/ruby_llm/message.rb, lib/ruby_llm/tool_call.rb): Message has readers only for
# content and tool_calls on its main branch (released 1.4 to 1.16 add attr_writer :content),
# ToolCall.new takes id:, name:, arguments:. The real gem is not loaded here.
module FakeRubyLLM
  def self.define
    Object.const_set(:RubyLLM, Module.new)
    RubyLLM.module_eval <<~RUBY, __FILE__, __LINE__ + 1
      class ToolCall
        attr_reader :id, :name, :arguments
        attr_accessor :thought_signature

        def initialize(id:, name:, arguments: {}, thought_signature: nil)
          @id = id
          @name = name
          @arguments = arguments
          @thought_signature = thought_signature
        end
      end

      class Message
        attr_reader :role, :content, :tool_calls

        def initialize(options = {})
          @role = options.fetch(:role).to_sym
          @tool_calls = options[:tool_calls]
          @content = options.fetch(:content)
        end

        def tool_call?
          !tool_calls.nil? && !tool_calls.empty?
        end
      end

      # As released (1.4 to 1.16): a writer for content; it records its use.
      class ReleasedMessage < Message
        attr_reader :writes

        def content=(value)
          (@writes ||= []) << value
          @content = value
        end
      end
    RUBY
  end

  def self.remove
    Object.send(:remove_const, :RubyLLM) if defined?(::RubyLLM)
  end
end

class TestRecoverIntoRubyLLM < Minitest::Test
  include Samples

  def setup
    FakeRubyLLM.define
  end

  def teardown
    FakeRubyLLM.remove
  end

  def test_message_without_writers_gets_tool_call_objects
    msg = RubyLLM::Message.new(role: :assistant, content: HERMES.dup, tool_calls: {})
    refute msg.respond_to?(:content=)
    refute msg.tool_call?
    ToolcallRecovery.recover_into(msg, enabled_tools: TOOLS)
    assert msg.tool_call?
    assert_equal "Sure.", msg.content
    id, call = msg.tool_calls.first
    assert_instance_of RubyLLM::ToolCall, call
    assert_equal id, call.id
    assert_match(/\Acall_\h{24}\z/, call.id)
    assert_equal "save_memory", call.name
    assert_equal({ "content" => "likes tea", "memory_type" => "fact" }, call.arguments)
  end

  def test_released_message_content_goes_through_its_writer
    msg = RubyLLM::ReleasedMessage.new(role: :assistant, content: SEED.dup, tool_calls: {})
    ToolcallRecovery.recover_into(msg, enabled_tools: TOOLS)
    assert_equal ["You saw right through me."], msg.writes
    assert_equal ["save_memory"], msg.tool_calls.values.map(&:name)
  end

  def test_message_with_structured_calls_is_left_alone
    real = { "toolu_1" => RubyLLM::ToolCall.new(id: "toolu_1", name: "save_memory", arguments: {}) }
    msg = RubyLLM::Message.new(role: :assistant, content: HERMES.dup, tool_calls: real)
    ToolcallRecovery.recover_into(msg, enabled_tools: TOOLS)
    assert_same real, msg.tool_calls
    assert_equal HERMES, msg.content
  end
end
