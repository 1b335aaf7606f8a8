#!/usr/bin/env bash
# Backfill throughput on N seeded messages, next to a plain COPY of the same rows, in the
# same run on the same database (BENCHMARKS.md).
#
#   scripts/bench-backfill.sh [N=1000000] [DIRTY_PER_MILLE=10] [BIN=target/release/toolcall-recovery]
#
# The backfill runs at its defaults plus `--no-publish`; FLAGS in the environment adds flags
# (FLAGS="--dry-run", FLAGS="--concurrency 4"). PUBLISH=1 drops `--no-publish`: the run then
# publishes to the exchanges TCR_MODERATION_EXCHANGE and TCR_TOOL_CALLS_EXCHANGE name, which
# need a queue bound to them (routing key message.ready / tool_call.recovered), or every
# publish comes back unroutable. Every run uses a fresh database and checks its effects.
#
# LIVE_RATE=5000 also runs the live worker beside it (the load harness, its own database on
# the same server, 2% leaks at that many events per second, 20 s) and prints its latency,
# so that what a backfill costs the live path is measured, not guessed. Needs
# `cargo build --release --example load`.
#
# Seeds a fresh database: N assistant messages of one agent, DIRTY_PER_MILLE of every 1000 leaked
# save_memory results, 30% of the clean ones with a markdown link (so they pass the SQL
# prefilter and cost a detection), the rest plain prose. Drops the database at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000000}
DIRTY=${2:-10}
BIN=${3:-target/release/toolcall-recovery}
DB="tcr_bench_backfill_$(date +%s)"
PG="postgres://postgres@127.0.0.1:5432"
export DATABASE_URL="$PG/$DB"
cleanup() { psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS \"$DB\" WITH (FORCE)" >/dev/null 2>&1 || true; }
trap cleanup EXIT

"$BIN" migrate --create-app-tables --log-format pretty 2>/dev/null
psql -q "$DATABASE_URL" >/dev/null <<SQL
INSERT INTO agents (id, name, enabled_tools) VALUES (1, 'bench', '{save_memory}');
INSERT INTO chats (id) SELECT g FROM generate_series(1, 1000) g;
INSERT INTO messages (id, chat_id, agent_id, role, content)
SELECT g, g % 1000 + 1, 1, 'assistant',
  CASE
    WHEN g % 1000 < $DIRTY THEN '{success: true, memory_type: "journal", content: "note ' || g || '"}You saw right through me.'
    WHEN g % 10 < 3 THEN 'See [the docs](https://example.com/' || g || ') for the details of step ' || g || '. It takes about five minutes and needs nothing else.'
    ELSE 'The weather in Paris tomorrow looks mild, around 14 degrees with light wind; message ' || g || '.'
  END
FROM generate_series(1, $N) g;
SELECT setval(pg_get_serial_sequence('messages', 'id'), $N);
-- Hint bits, visibility map and statistics now, and the seed's dirty pages written out, so
-- neither measurement pays for the seeding: the first reader of fresh rows would otherwise
-- rewrite every page (that was the COPY), and a checkpoint could land in either.
VACUUM (ANALYZE) messages;
CHECKPOINT;
SQL
echo "seeded $N messages, ${DIRTY} per mille dirty, in $DB; load average $(cut -d' ' -f1-3 /proc/loadavg)"

t0=$(date +%s.%N)
psql -q "$DATABASE_URL" -c "\\copy (SELECT id, chat_id, agent_id, role, content, tools_used FROM messages WHERE role = 'assistant' AND agent_id IS NOT NULL ORDER BY id) TO '/dev/null'"
t1=$(date +%s.%N)
copy_s=$(echo "$t1 - $t0" | bc -l)

live=""
if [ -n "${LIVE_RATE:-}" ]; then
  target/release/examples/load --events $((LIVE_RATE * 20)) --leak-share 0.02 --rate "$LIVE_RATE" \
    --only worker >/tmp/tcr-bench-live.out 2>&1 &
  live=$!
  sleep 8 # the harness seeds its own database first
fi

publish="--no-publish"
if [ -n "${PUBLISH:-}" ]; then publish=""; fi
t0=$(date +%s.%N)
# shellcheck disable=SC2086 # FLAGS is a list of flags, $publish one flag or none
"$BIN" backfill $publish ${FLAGS:-} --log-format json >/tmp/tcr-bench-backfill.out 2>/dev/null
t1=$(date +%s.%N)
bf_s=$(echo "$t1 - $t0" | bc -l)
fixed=$(psql -tAq "$DATABASE_URL" -c "SELECT count(*) FROM agent_memories")
left=$(psql -tAq "$DATABASE_URL" -c "SELECT count(*) FROM messages WHERE role = 'assistant' AND content LIKE '{success%'")

printf '| workload | rows | seconds | rows/s |\n|---|---|---|---|\n'
printf '| COPY of the same rows (ceiling) | %d | %.2f | %.0f |\n' "$N" "$copy_s" "$(echo "$N / $copy_s" | bc -l)"
printf '| backfill (defaults %s %s) | %d | %.2f | %.0f |\n' "$publish" "${FLAGS:-}" "$N" "$bf_s" "$(echo "$N / $bf_s" | bc -l)"
printf 'ratio backfill/COPY: %.2f; memories created %s, dirty rows left %s\n' "$(echo "$copy_s / $bf_s" | bc -l)" "$fixed" "$left"
if [ "$fixed" -gt 0 ]; then
  # Against the bare transaction's ceilings of examples/load.rs (`--only txn`).
  printf 'recoveries/s over the whole run: %.0f\n' "$(echo "$fixed / $bf_s" | bc -l)"
fi
grep -v -e '^message ' -e '^{"message_id' /tmp/tcr-bench-backfill.out | head -8 || true
if [ -n "$live" ]; then
  wait "$live"
  echo "live worker during the backfill:"
  grep '^| worker' /tmp/tcr-bench-live.out
fi
