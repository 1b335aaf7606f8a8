#!/usr/bin/env bash
# Builds the Ruby gem: the native extension (ruby/ext/toolcall_recovery, its own cargo
# workspace) in release mode, a staging copy of ruby/ with the shared library in its lib/,
# then `gem build` there. Leaves target/gem/toolcall_recovery-<version>-<platform>.gem.
# Needs Ruby with its headers (ruby-dev) and libclang (libclang-dev); no network past
# crates.io. Install with: gem install --local target/gem/toolcall_recovery-*.gem
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
ext=ruby/ext/toolcall_recovery
out=target/gem
stage=$out/stage

export CARGO_TARGET_DIR="$root/target/ruby-ext"
cargo build --release --locked --manifest-path "$ext/Cargo.toml"

rm -rf "$stage" "$out"/toolcall_recovery-*.gem
mkdir -p "$stage"
cp -R ruby/lib ruby/README.md ruby/toolcall_recovery.gemspec "$stage"/
install -m 0755 "$CARGO_TARGET_DIR/release/libtoolcall_recovery.so" \
  "$stage/lib/toolcall_recovery/toolcall_recovery.so"
(cd "$stage" && gem build toolcall_recovery.gemspec)
mv "$stage"/toolcall_recovery-*.gem "$out"/
ls "$out"/toolcall_recovery-*.gem
