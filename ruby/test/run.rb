# frozen_string_literal: true

# Runs every test file here: ruby ruby/test/run.rb (the gem must be installed, or its
# built lib/ given with -I).
Dir[File.join(__dir__, "test_*.rb")].sort.each { |f| require f }
