# frozen_string_literal: true

module ToolcallRecovery
  # The gem's version; the native crate (ext/toolcall_recovery/Cargo.toml) carries the same.
  VERSION = "0.1.0"
end
