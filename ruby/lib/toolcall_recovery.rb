# frozen_string_literal: true

# Finds tool calls that a language model leaked into the text of its reply, in the app's
# own process: the Ruby face of the `toolcall-detect` crate (native code, built into this
# platform gem). See README.md beside the gem's lib/ for the API and the ruby_llm hook.
#
# Text in: a String in UTF-8 or US-ASCII, or a binary String whose bytes are valid UTF-8.
# Anything else that is a String raises ArgumentError; a non-String raises TypeError.

require "securerandom"
require_relative "toolcall_recovery/version"
require_relative "toolcall_recovery/toolcall_recovery" # the native extension

module ToolcallRecovery
  # What ToolcallRecovery.detect found in one text. Immutable. Made by the native code
  # (ext/toolcall_recovery/src/result.rs), which also defines the readers, each one call:
  # +text+ (the String examined, the very object passed in), +leaked?+ (a leak was found;
  # can be true while +changed?+ is false: a message that is nothing but a fake tool result
  # is reported and left as it is), +changed?+ (+cleaned+ differs from +text+), +cleaned+
  # (the text to show, in UTF-8: the input with every leaked span cut out or, when nothing
  # changed, the input String itself, not a copy; a binary input comes back as a UTF-8
  # copy), +calls+ ([{name: String, arguments: Hash (String keys) or the value as the
  # model wrote it}], in order), +families+ (the leak formats found, "hermes",
  # "result_prefix", ..., in order of first appearance), +removed+ ([{family: String,
  # range: start...end (byte offsets into text), text: String (those bytes, verbatim)}];
  # empty when nothing changed; the cleaning also trims the whitespace a cut leaves
  # behind) and +_found+: nil when nothing leaked, else the frozen [text, cleaned-or-nil,
  # calls, families, removed]. For a clean text, +calls+, +families+ and +removed+ are
  # all EMPTY, one frozen empty Array.
  class Result
    private_class_method :new, :allocate
    private :_found
    private_constant :EMPTY

    def to_h
      { cleaned: cleaned, changed: changed?, leaked: leaked?, calls: calls,
        families: families, removed: removed }
    end

    def ==(other)
      other.is_a?(Result) && other.text == text && other.to_h == to_h
    end
    alias eql? ==

    def hash
      [self.class, text, to_h].hash
    end

    def inspect
      return "#<ToolcallRecovery::Result clean>" unless leaked?

      "#<ToolcallRecovery::Result families=#{families.inspect} " \
        "calls=#{calls.map { |c| c[:name] }.inspect} changed=#{changed?}>"
    end
  end

  # What Stream#finish returns: +rest+, the text no push returned (pushes joined + rest ==
  # result.cleaned), and +result+, equal to what detect returns for the whole reply.
  class Finished
    attr_reader :rest, :result

    def initialize(rest, result) # :nodoc:
      @rest = rest
      @result = result
      freeze
    end
  end

  # One streamed reply, read delta by delta. push(delta) returns the text safe to show now
  # (possibly ""); finish returns a Finished. After finish, push and finish raise
  # ToolcallRecovery::Error. Not for sharing between threads without a lock.
  class Stream
    # push(delta), held, finished? are native (ext/toolcall_recovery/src/stream.rs).

    class << self
      def new(enabled_tools:)
        _new(enabled_tools)
      end
      private :_new
    end

    def finish
      Finished.new(*_finish)
    end
    private :_finish
  end

  class << self
    # Examines one reply. +enabled_tools+: the tool names the agent has enabled (Array of
    # Strings), required: some formats count as leaks only for tools the agent has.
    def detect(text, enabled_tools:)
      Native.detect(text, enabled_tools)
    end

    # false means detect would find nothing in +text+; one scan of its bytes.
    def might_leak?(text)
      Native.might_leak?(text)
    end

    # Moves a leaked call out of a message's text into its structured tool calls, as if
    # the model had made it properly. +message+ needs +content+, +tool_calls+, a
    # +content=+ writer (or an @content behind the reader) and a +tool_calls=+ writer (or
    # an @tool_calls behind the reader, as RubyLLM::Message has).
    #
    # Only a message without structured calls (tool_calls nil or empty) whose String
    # content holds a leak is touched: its content becomes the cleaned text, and its
    # tool_calls a Hash of new ids ("call_<24 hex>") to RubyLLM::ToolCall objects when
    # RubyLLM::ToolCall is defined, else to Hashes {id:, name:, arguments:}. Returns the
    # message.
    def recover_into(message, enabled_tools:)
      existing = message.tool_calls
      return message unless existing.nil? || existing.empty?

      content = message.content
      return message unless content.is_a?(String)

      result = detect(content, enabled_tools: enabled_tools)
      return message unless result.changed?

      calls = tool_calls_from(result.calls)
      assign(message, :tool_calls, calls) unless calls.empty?
      assign(message, :content, result.cleaned)
      message
    end

    private

    def tool_calls_from(calls)
      calls.each_with_object({}) do |call, out|
        id = "call_#{SecureRandom.hex(12)}"
        out[id] =
          if defined?(::RubyLLM::ToolCall)
            ::RubyLLM::ToolCall.new(id: id, name: call[:name], arguments: call[:arguments])
          else
            { id: id, name: call[:name], arguments: call[:arguments] }
          end
      end
    end

    def assign(object, name, value)
      writer = :"#{name}="
      if object.respond_to?(writer)
        object.public_send(writer, value)
      else
        object.instance_variable_set(:"@#{name}", value)
      end
    end
  end
end
