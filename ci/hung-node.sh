#!/usr/bin/env bash
# A hung broker node (issue #33), reproduced: a 3-node RabbitMQ cluster on localhost, a TCP
# proxy in front of it standing in for a Kubernetes Service with a readiness probe, the
# worker connected through the proxy and the load harness feeding it, the queue leader
# frozen with SIGSTOP for FREEZE_SECS; reports the longest gap in moderation output, when
# the broker had a new leader, and the worker's broker warnings. Too slow for .ci/run
# (several minutes); see docs/operations.md, "A hung broker node".
#
#   bash ci/hung-node.sh            # builds the debug worker and the harness first
#
# Environment: FREEZE_SECS (60), EVENTS (12000), RATE (events/s, 80), NET_TICKTIME (the
# cluster's, 60: how long the healthy nodes take to give the frozen one up), BASE_PORT
# (57200: the proxy; the nodes take BASE_PORT+1..3, their distribution BASE_PORT+11..13),
# KEEP=1 keeps the temporary directory.
#
# Touches nothing of the machine's own RabbitMQ (5672, /var/lib/rabbitmq, /etc/rabbitmq):
# the nodes have their own names, ports, data, logs, config and Erlang cookie (HOME is the
# temporary directory) and are stopped at the end, whatever happens.
set -euo pipefail
cd "$(dirname "$0")/.."

FREEZE_SECS=${FREEZE_SECS:-60}
EVENTS=${EVENTS:-12000}
RATE=${RATE:-80}
NET_TICKTIME=${NET_TICKTIME:-60}
BASE_PORT=${BASE_PORT:-57200}
PROXY_PORT=$BASE_PORT
TARGET=${CARGO_TARGET_DIR:-target}
RMQ=/usr/lib/rabbitmq/bin
T=$(mktemp -d /tmp/tcr-hung.XXXXXX)
NODES=(tcrhung1 tcrhung2 tcrhung3)
PIDS_TO_KILL=()
FROZEN_PID=

log() { printf '== %s %s\n' "$(date +%T)" "$*"; }

node_env() { # index -> the environment of that node
  local i=$1 name=${NODES[$1]}
  echo "HOME=$T RABBITMQ_NODENAME=$name@localhost RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
RABBITMQ_NODE_PORT=$((BASE_PORT + 1 + i)) RABBITMQ_DIST_PORT=$((BASE_PORT + 11 + i)) \
RABBITMQ_MNESIA_BASE=$T/$name/mnesia RABBITMQ_LOG_BASE=$T/$name/log \
RABBITMQ_CONFIG_FILE=$T/$name/rabbitmq.conf RABBITMQ_ADVANCED_CONFIG_FILE=$T/$name/advanced.config \
RABBITMQ_CONF_ENV_FILE=$T/rabbitmq-env.conf RABBITMQ_ENABLED_PLUGINS_FILE=$T/enabled_plugins \
RABBITMQ_PID_FILE=$T/$name/pid ERL_EPMD_ADDRESS=127.0.0.1"
}

ctl() { # index, rabbitmqctl args...
  local i=$1; shift
  env $(node_env "$i") timeout "${CTL_TIMEOUT:-30}" "$RMQ/rabbitmqctl" -n "${NODES[$i]}@localhost" "$@"
}

cleanup() {
  set +e
  [[ -n $FROZEN_PID ]] && kill -CONT "$FROZEN_PID" 2>/dev/null
  for p in "${PIDS_TO_KILL[@]}"; do kill "$p" 2>/dev/null; done
  for i in 0 1 2; do
    pid=$(cat "$T/${NODES[$i]}/pid" 2>/dev/null)
    if [[ -n $pid ]]; then
      ctl "$i" stop >/dev/null 2>&1 || kill -9 "$pid" 2>/dev/null
    fi
  done
  if [[ ${KEEP:-0} == 1 ]]; then echo "kept $T"; else rm -rf "$T"; fi
}
trap cleanup EXIT

log "building the worker and the load harness"
cargo build --quiet --bin toolcall-recovery --example load
BIN=$TARGET/debug/toolcall-recovery
LOAD=$TARGET/debug/examples/load

log "starting 3 nodes in $T"
printf 'tcr-hung-node-%s' "$RANDOM$RANDOM" >"$T/.erlang.cookie"
chmod 400 "$T/.erlang.cookie"
: >"$T/rabbitmq-env.conf"
echo '[].' >"$T/enabled_plugins"
for i in 0 1 2; do
  name=${NODES[$i]}
  mkdir -p "$T/$name/mnesia" "$T/$name/log"
  cat >"$T/$name/rabbitmq.conf" <<EOF
listeners.tcp.default = 127.0.0.1:$((BASE_PORT + 1 + i))
EOF
  echo "[{kernel, [{net_ticktime, $NET_TICKTIME}]}]." >"$T/$name/advanced.config"
  env $(node_env "$i") "$RMQ/rabbitmq-server" >"$T/$name/stdout.log" 2>&1 &
  PIDS_TO_KILL+=($!)
done
for i in 0 1 2; do
  up=0
  for _ in $(seq 90); do
    if ctl "$i" await_startup >/dev/null 2>&1; then up=1; break; fi
    sleep 2
  done
  (( up )) || { echo "node ${NODES[$i]} did not start; see $T/${NODES[$i]}" >&2; KEEP=1; exit 1; }
  echo "$(ctl "$i" eval 'os:getpid().' | tr -d '"')" >"$T/${NODES[$i]}/pid"
done
for i in 1 2; do
  ctl "$i" stop_app >/dev/null
  ctl "$i" join_cluster "${NODES[0]}@localhost" >/dev/null
  ctl "$i" start_app >/dev/null
done
ctl 0 cluster_status | sed -n '/Running Nodes/,/^$/p'

log "starting the proxy on $PROXY_PORT (first node that answers AMQP, in order)"
python3 - "$PROXY_PORT" $((BASE_PORT + 1)) $((BASE_PORT + 2)) $((BASE_PORT + 3)) \
  >"$T/proxy.log" 2>&1 <<'EOF' &
# A TCP proxy standing in for a Kubernetes Service with a readiness probe: every 0.5 s each
# backend is probed (TCP connect, the AMQP protocol header, a frame back within 1 s); a new
# connection goes to the first backend that passed its last probe. A connection already
# made stays on its backend, answered or not (as a Service's would).
import socket, sys, threading, time
listen, backends = int(sys.argv[1]), [int(p) for p in sys.argv[2:]]
healthy = {p: False for p in backends}
def probe(port):
    while True:
        ok = False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.settimeout(1)
                s.sendall(b"AMQP\x00\x00\x09\x01")
                ok = s.recv(1) == b"\x01"
        except OSError:
            pass
        if ok != healthy[port]:
            print(f"{time.time():.2f} backend {port} {'ready' if ok else 'NOT ready'}", flush=True)
        healthy[port] = ok
        time.sleep(0.5)
def pipe(a, b):
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
for p in backends:
    threading.Thread(target=probe, args=(p,), daemon=True).start()
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", listen))
srv.listen(64)
while True:
    client, _ = srv.accept()
    ready = [p for p in backends if healthy[p]]
    if not ready:
        client.close()
        continue
    try:
        upstream = socket.create_connection(("127.0.0.1", ready[0]), timeout=2)
        upstream.settimeout(None)
    except OSError:
        client.close()
        continue
    print(f"{time.time():.2f} connection to {ready[0]}", flush=True)
    threading.Thread(target=pipe, args=(client, upstream), daemon=True).start()
    threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()
EOF
PIDS_TO_KILL+=($!)
sleep 2

log "load: $EVENTS events at $RATE/s; the worker through the proxy, the harness on node 3"
"$LOAD" --only worker --feeds live --events "$EVENTS" --rate "$RATE" --leak-share 0.02 \
  --bin "$BIN" --amqp "amqp://guest:guest@127.0.0.1:$((BASE_PORT + 3))/%2f" \
  --worker-amqp "amqp://guest:guest@127.0.0.1:$PROXY_PORT/%2f" >"$T/load.log" 2>&1 &
LOAD_PID=$!
PIDS_TO_KILL+=($LOAD_PID)

# The worker's queue: the quorum queue of this run with a consumer.
queue_row() { ctl 2 list_queues name type leader consumers --no-table-headers -q 2>/dev/null \
  | awk '$2 == "quorum" && $1 ~ /^tcrload_worker_.*[.]finalized$/ && $4 > 0' | head -n1; }
for _ in $(seq 300); do
  row=$(queue_row); [[ -n $row ]] && break; sleep 1
done
[[ -n ${row:-} ]] || { echo "the worker never consumed; see $T/load.log" >&2; KEEP=1; exit 1; }
queue=$(awk '{print $1}' <<<"$row")
leader=$(awk '{print $3}' <<<"$row")
log "queue $queue, leader $leader; 20 s of steady load first"
sleep 20
idx=-1
for i in 0 1 2; do [[ $leader == "${NODES[$i]}@localhost" ]] && idx=$i; done
(( idx >= 0 )) || { echo "leader $leader is none of ours" >&2; exit 1; }
FROZEN_PID=$(cat "$T/${NODES[$idx]}/pid")
survivor=$(( idx == 2 ? 1 : 2 ))
FREEZE_AT=$(date +%s.%N)
kill -STOP "$FROZEN_PID"
log "froze $leader (pid $FROZEN_PID) at unix $FREEZE_AT for $FREEZE_SECS s"
NEW_LEADER_AT=
end=$(( $(date +%s) + FREEZE_SECS ))
while (( $(date +%s) < end )); do
  if [[ -z $NEW_LEADER_AT ]]; then
    # The leader as the surviving node's own Ra member sees it (list_queues would wait on
    # the frozen node).
    l=$(CTL_TIMEOUT=5 ctl "$survivor" eval "{ok, Q} = rabbit_amqqueue:lookup(rabbit_misc:r(<<\"/\">>, queue, <<\"$queue\">>)), {N, _} = amqqueue:get_pid(Q), case ra:members({N, node()}, 2000) of {ok, _, {_, L}} -> L; _ -> none end." 2>/dev/null || true)
    if [[ -n $l && $l != none && $l != "$leader" ]]; then
      NEW_LEADER_AT=$(date +%s.%N)
      log "the broker elected $l at unix $NEW_LEADER_AT"
    fi
  fi
  sleep 1
done
kill -CONT "$FROZEN_PID"
THAW_AT=$(date +%s.%N)
FROZEN_PID=
log "thawed $leader at unix $THAW_AT"
wait "$LOAD_PID" || { echo "the load harness failed; see $T/load.log" >&2; KEEP=1; }

log "results"
grep -E "longest gap|events=|worker" "$T/load.log" | head -n 12
gap=$(grep -o 'longest gap.*' "$T/load.log" || true)
gap_from=$(sed -n 's/.*unix \([0-9.]*\) to \([0-9.]*\).*/\1/p' <<<"$gap")
gap_to=$(sed -n 's/.*unix \([0-9.]*\) to \([0-9.]*\).*/\2/p' <<<"$gap")
if [[ -n $gap_from ]]; then
  python3 - "$FREEZE_AT" "$gap_from" "$gap_to" "${NEW_LEADER_AT:-}" "$THAW_AT" <<'EOF'
import sys
freeze, gfrom, gto, leader, thaw = sys.argv[1:6]
f = float(freeze)
print(f"gap starts {float(gfrom) - f:+.1f} s and ends {float(gto) - f:+.1f} s after the freeze")
if leader:
    print(f"new leader {float(leader) - f:+.1f} s after the freeze; output resumed "
          f"{float(gto) - float(leader):+.1f} s after it")
else:
    print("no new leader while frozen (the healthy nodes had not given the frozen one up)")
print(f"thawed {float(thaw) - f:+.1f} s after the freeze; output resumed {float(gto) - float(thaw):+.1f} s after the thaw")
EOF
fi
echo "worker warnings (broker):"
grep -iE "broker|heartbeat|timed out" "$T/load.log" | grep -iv "^events=" | cut -c1-300 | head -n 20
echo "proxy:"; grep -v "connection to" "$T/proxy.log" | head -n 10
