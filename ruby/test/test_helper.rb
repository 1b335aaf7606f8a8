# frozen_string_literal: true

# Loads the gem as installed (no -I of the source tree needed or wanted: the native
# library only exists in a built gem). With TOOLCALL_RECOVERY_INSTALLED=1 (CI), checks
# that what was loaded is the gem installed in GEM_HOME, not a build directory.

require "minitest/autorun"
require "toolcall_recovery"

if ENV["TOOLCALL_RECOVERY_INSTALLED"] == "1"
  native = $LOADED_FEATURES.grep(%r{/toolcall_recovery/toolcall_recovery\.so\z}).first
  gem_home = ENV.fetch("GEM_HOME") { abort "TOOLCALL_RECOVERY_INSTALLED=1 needs GEM_HOME" }
  unless native&.start_with?(File.realpath(gem_home)) || native&.start_with?(gem_home)
    abort "toolcall_recovery was loaded from #{native.inspect}, not from the gem in #{gem_home}"
  end
  puts "testing the installed gem: #{native}"
end

module Samples
  TOOLS = ["save_memory"].freeze
  HERMES = 'Sure.<tool_call>{"name": "save_memory", "arguments": {"content": "likes tea", ' \
           '"memory_type": "fact"}}</tool_call>'
  HERMES_MARKUP = HERMES.delete_prefix("Sure.")
  SEED = '{success: true, memory_type: "journal", content: "I lost track of..."}' \
         "You saw right through me."
  CLEAN = "Tea is a drink made by pouring hot water over cured leaves. {Braces} stay."
  MULTIBYTE = 'café ☕ <tool_call>{"name": "save_memory", "arguments": {"content": "thé vert", ' \
              '"memory_type": "preference"}}</tool_call> après'
end
