# frozen_string_literal: true

require_relative "test_helper"
require_relative "test_recover_into" # FakeRubyLLM

# The hooks of README.md ("Hooking ruby_llm"), verbatim, against stand-ins shaped like
# ruby_llm's StreamAccumulator#to_message(response) and Provider#complete(messages,
# tools:, ...). Keep the module bodies here and in the README the same.
class TestRubyLLMHook < Minitest::Test
  include Samples

  def setup
    FakeRubyLLM.define
    RubyLLM.module_eval <<~RUBY, __FILE__, __LINE__ + 1
      class StreamAccumulator
        def initialize
          @content = +""
          @tool_calls = {}
        end

        def add(text)
          @content << text
        end

        def to_message(_response)
          Message.new(role: :assistant, content: @content.empty? ? nil : @content, tool_calls: @tool_calls)
        end
      end

      class Provider
        def complete(_messages, tools:, temperature:, model:, **_options)
          Message.new(role: :assistant, content: yield, tool_calls: {})
        end
      end
    RUBY
  end

  def teardown
    Thread.current[:toolcall_recovery_tools] = nil
    FakeRubyLLM.remove
  end

  # From README.md, the StreamAccumulator hook.
  module ToolcallRecoveryHook
    def to_message(*)
      ToolcallRecovery.recover_into(super, enabled_tools: Thread.current[:toolcall_recovery_tools] || [])
    end
  end

  # From README.md, the Provider#complete variant.
  module ToolcallRecoveryProviderHook
    def complete(messages, tools:, **options, &block)
      ToolcallRecovery.recover_into(super, enabled_tools: tools.keys.map(&:to_s))
    end
  end

  def test_stream_accumulator_hook_recovers_the_streamed_reply
    RubyLLM::StreamAccumulator.prepend(ToolcallRecoveryHook)
    Thread.current[:toolcall_recovery_tools] = ["save_memory"]
    acc = RubyLLM::StreamAccumulator.new
    HERMES.scan(/.{1,7}/m) { |chunk| acc.add(chunk) }
    msg = acc.to_message(:faraday_response)
    assert msg.tool_call?
    assert_equal "Sure.", msg.content
    assert_equal ["save_memory"], msg.tool_calls.values.map(&:name)
    assert_instance_of RubyLLM::ToolCall, msg.tool_calls.values[0]
  end

  def test_stream_accumulator_hook_without_tools_set_sees_no_tools
    RubyLLM::StreamAccumulator.prepend(ToolcallRecoveryHook)
    text = "Checking.\n```json\n{\"name\": \"save_memory\", \"arguments\": {\"content\": \"x\", " \
           "\"memory_type\": \"fact\"}}\n```"
    acc = RubyLLM::StreamAccumulator.new
    acc.add(text)
    refute acc.to_message(nil).tool_call?, "json_fence counts only for enabled tools"
    Thread.current[:toolcall_recovery_tools] = ["save_memory"]
    acc = RubyLLM::StreamAccumulator.new
    acc.add(text)
    assert acc.to_message(nil).tool_call?
  end

  def test_provider_hook_takes_the_tools_from_the_call
    RubyLLM::Provider.prepend(ToolcallRecoveryProviderHook)
    tools = { save_memory: Object.new }
    msg = RubyLLM::Provider.new.complete([], tools: tools, temperature: nil, model: "m") { SEED.dup }
    assert_equal "You saw right through me.", msg.content
    assert_equal ["save_memory"], msg.tool_calls.values.map(&:name)
    none = RubyLLM::Provider.new.complete([], tools: {}, temperature: nil, model: "m") { CLEAN }
    refute none.tool_call?
  end
end
