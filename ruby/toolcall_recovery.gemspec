# frozen_string_literal: true

# A precompiled platform gem: scripts/ruby-gem.sh builds the native library, puts it at
# lib/toolcall_recovery/toolcall_recovery.so in a staging copy of this directory and runs
# `gem build` there. It is built for one Ruby minor version (the one that built it), hence
# required_ruby_version.

require_relative "lib/toolcall_recovery/version"

native = "lib/toolcall_recovery/toolcall_recovery.so"
unless File.exist?(File.join(__dir__, native))
  raise "#{native} is missing: build the gem with scripts/ruby-gem.sh"
end

Gem::Specification.new do |spec|
  spec.name = "toolcall_recovery"
  spec.version = ToolcallRecovery::VERSION
  spec.summary = "Finds tool calls an LLM leaked into its reply text (native, Rust)"
  spec.description = "Detects tool-call markup and fake tool results that a language model " \
                     "wrote into the text of its reply, returns the cleaned text and the " \
                     "calls, and can move them into a ruby_llm message's tool calls."
  spec.authors = ["toolcall-recovery developers"]
  spec.license = "Apache-2.0"
  spec.platform = Gem::Platform.local
  spec.required_ruby_version = "~> #{RUBY_VERSION[/\A\d+\.\d+/]}.0"
  spec.files = Dir.chdir(__dir__) { Dir["lib/**/*.rb"].sort } + [native, "README.md"]
  spec.require_paths = ["lib"]
end
