#!/usr/bin/env python3
"""Helpers of ci/deploy-checks.sh for the live observability checks.

    obs.py free-port
    obs.py wait-http URL [--timeout S] [--status 200]
    obs.py publish AMQP_URL EXCHANGE ROUTING_KEY (--event-for MESSAGE_ID CHAT_ID AGENT_ID CONTENT | --raw TEXT)
                   [--model MODEL_ID]                              # model_id of --event-for; `null` for none
    obs.py wait-metric METRICS_URL 'NAME{label="v",...}' (--value N | --min N) [--timeout S]
                                                                    # polls a /metrics scrape (labels in any order)
    obs.py connection-pid CONNECTION_NAME                           # rabbitmqctl pid of a named connection
    obs.py prom-expect PROM_URL EXPR VALUE [--timeout S]            # PromQL instant query through the HTTP API
    obs.py prom-rules PROM_URL RULES_FILE [--expect-firing A,B]     # the rules are loaded and healthy
    obs.py names METRICS_URL DASHBOARD RULES...                     # every metric named by PromQL is exported
    obs.py run-dashboard PROM_URL DASHBOARD                         # every dashboard query executes
    obs.py lint DASHBOARD RULES...                                  # static: layout, $job/$instance, mode matchers
    obs.py compose-env SERVICE... --expect VAR=VALUE|VAR ...        # `docker-compose config` on stdin
    obs.py broker-delete AMQP_URL --exchange X ... --queue Q ...
    obs.py log-clean LOG TEXT...                                    # no message text in a log
    obs.py selftest                                                 # the PromQL and scrape parsers on known cases

Only the standard library and pika (pip) are used.
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from datetime import datetime, timezone
from typing import Any, Iterable

# ------------------------------------------------------------------ PromQL metric names

# Functions, aggregations and keywords: identifiers that are not metric names.
KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool",
    "and", "or", "unless", "atan2", "inf", "nan", "start", "end", "le",
}
TOKEN = re.compile(
    r"""
    (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<var>\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*|\[\[[^\]]*\]\])
  | (?P<number>(?:0[xX][0-9a-fA-F]+|[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)(?:ms|s|m|h|d|w|y)*)
  | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
  | (?P<open>[({\[])
  | (?P<close>[)}\]])
  | (?P<other>\S)
    """,
    re.VERBOSE,
)


# Metrics with a `mode` label (recover | observe, and disabled for the family gauge). In
# observe mode the counters among them carry would-be outcomes, so every query of them must
# say which mode it means (`lint`); `names` checks this list against the live scrape.
MODED = {
    "toolcall_recovery_events_total", "toolcall_recovery_calls_total", "toolcall_recovery_memories_created_total",
    "toolcall_recovery_mode", "toolcall_recovery_family_mode",
}

Matchers = dict[str, tuple[str, str]]  # label -> (operator, value)


def _matchers(tokens: list[tuple[str | None, str]], i: int) -> tuple[Matchers, int]:
    """The label matchers of the {...} opening at tokens[i], and the index after its '}'."""
    out: Matchers = {}
    i += 1
    while i < len(tokens) and tokens[i] != ("close", "}"):
        if tokens[i][0] == "ident":
            label, op, i = tokens[i][1], "", i + 1
            while i < len(tokens) and tokens[i][0] == "other" and tokens[i][1] in "=!~":
                op, i = op + tokens[i][1], i + 1
            if i < len(tokens) and tokens[i][0] == "string":
                out[label] = (op, tokens[i][1][1:-1])
        i += 1
    return out, i + 1


def selectors(expr: str) -> list[tuple[str, Matchers]]:
    """The series selectors of a PromQL expression (Grafana variables allowed): metric name
    and label matchers of each.

    Skips label names inside the (...) of by/without/on/ignoring/group_left/group_right,
    everything inside [...] (ranges, subqueries' steps), string literals, numbers and
    durations, and identifiers followed by '(' (functions and aggregations). A
    `{__name__="x"}` selector counts as metric x.
    """
    tokens = [(m.lastgroup, m.group()) for m in TOKEN.finditer(expr)]
    out: list[tuple[str, Matchers]] = []
    stack: list[str] = []  # kinds of the open brackets: "label" (by(...)), "range", "paren"
    i = 0
    while i < len(tokens):
        kind, text = tokens[i]
        nxt = tokens[i + 1] if i + 1 < len(tokens) else (None, "")
        if stack and stack[-1] in ("label", "range"):
            if kind == "open":
                stack.append("range" if text == "[" else "label")
            elif kind == "close":
                stack.pop()
        elif (kind, text) == ("open", "{"):
            m, i = _matchers(tokens, i)  # a selector without a name before it
            if "__name__" in m:
                out.append((m["__name__"][1], m))
            continue
        elif kind == "open":
            stack.append({"[": "range"}.get(text, "paren"))
        elif kind == "close":
            if stack:
                stack.pop()
        elif kind == "ident":
            if text in ("by", "without", "on", "ignoring", "group_left", "group_right") and nxt == ("open", "("):
                stack.append("label")
                i += 1
            elif nxt == ("open", "(") or text in KEYWORDS:
                pass  # a function, or an aggregation with its clause after the parentheses
            elif nxt in (("ident", "by"), ("ident", "without")):
                pass  # an aggregation with its clause first: sum by (x) (...)
            elif nxt == ("open", "{"):
                m, i = _matchers(tokens, i + 1)
                out.append((text, m))
                continue
            else:
                out.append((text, {}))
        i += 1
    return out


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects."""
    return {name for name, _ in selectors(expr)}


def grouping_labels(expr: str) -> set[str]:
    """Labels named in the by (...) clauses of an expression."""
    return {lbl for clause in re.findall(r"\bby\s*\(([^)]*)\)", expr) for lbl in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", clause)}


def matches(m: Matchers, labels: dict[str, str]) -> bool:
    """Whether a series with these labels satisfies the matchers (=, !=, =~, !~)."""
    for label, (op, want) in m.items():
        got = labels.get(label, "")
        ok = {"=": got == want, "!=": got != want}.get(op)
        if ok is None:
            ok = bool(re.fullmatch(want, got)) == (op == "=~")
        if not ok:
            return False
    return True


SERIES = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_series(line: str) -> tuple[str, dict[str, str], float] | None:
    """(name, labels, value) of a sample line of the Prometheus text format."""
    m = SERIES.match(line)
    if not m or line.startswith("#"):
        return None
    labels = {k: v.replace('\\"', '"').replace("\\\\", "\\") for k, v in LABEL.findall(m.group(2) or "")}
    return m.group(1), labels, float(m.group(3))


def exported_names(scrape: str) -> set[str]:
    """Metric names of a Prometheus text scrape, with the series names of histograms and
    summaries (_bucket, _sum, _count) spelled out."""
    names: set[str] = set()
    for line in scrape.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(None, 3)
            names.add(name)
            if typ in ("histogram", "summary"):
                names.update({f"{name}_sum", f"{name}_count"} | ({f"{name}_bucket"} if typ == "histogram" else set()))
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{\s]", line, maxsplit=1)[0])
    return names


def dashboard_exprs(path: str) -> list[tuple[str, str]]:
    """(where, expr) of every PromQL query of a Grafana dashboard, variables included."""
    with open(path, encoding="utf-8") as f:
        dash = json.load(f)
    out: list[tuple[str, str]] = []

    def panels(ps: Iterable[dict[str, Any]]) -> Iterable[dict[str, Any]]:
        for p in ps:
            yield p
            yield from panels(p.get("panels", []))

    for p in panels(dash.get("panels", [])):
        for t in p.get("targets", []):
            if t.get("expr"):
                out.append((f"panel '{p.get('title')}' {t.get('refId')}", t["expr"]))
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            q = v.get("query")
            q = q.get("query") if isinstance(q, dict) else q
            m = re.match(r"^\s*label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*$", q or "")
            if m:
                out.append((f"variable ${v['name']}", m.group(1)))
            elif q:
                out.append((f"variable ${v['name']}", q))
    return out


def rules_exprs(path: str) -> list[tuple[str, str]]:
    import yaml  # pyyaml comes with yamllint

    with open(path, encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    return [(f"rule {r.get('alert') or r.get('record')}", r["expr"]) for g in doc["groups"] for r in g["rules"]]


def grafana_to_promql(expr: str) -> str:
    """Replaces the dashboard's Grafana variables so Prometheus can run the query."""
    return (expr.replace("$__rate_interval", "1m").replace("$__interval", "15s").replace("$__range", "5m")
            .replace('"$job"', '"toolcall-recovery"').replace('"$instance"', '".*"'))


# ------------------------------------------------------------------------------ HTTP

def http_get(url: str, timeout: float = 5) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def prom_query(prom: str, expr: str) -> dict[str, Any]:
    status, body = http_get(f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    doc = json.loads(body)
    if doc.get("status") != "success":
        raise RuntimeError(f"query {expr!r} failed ({status}): {doc.get('errorType')}: {doc.get('error')}")
    return doc["data"]


# ------------------------------------------------------------------------ commands

def cmd_free_port(_: argparse.Namespace) -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    print(s.getsockname()[1])
    s.close()
    return 0


def cmd_wait_http(a: argparse.Namespace) -> int:
    deadline = time.monotonic() + a.timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            status, body = http_get(a.url, timeout=2)
            if status == a.status:
                return 0
            last = f"{status} {body.strip()}"
        except OSError as e:
            last = str(e)
        time.sleep(0.3)
    print(f"{a.url} did not answer {a.status} within {a.timeout}s (last: {last})", file=sys.stderr)
    return 1


def amqp_channel(url: str):  # type: ignore[no-untyped-def]
    import pika

    conn = pika.BlockingConnection(pika.URLParameters(url))
    return conn, conn.channel()


def cmd_publish(a: argparse.Namespace) -> int:
    import pika

    if a.raw is not None:
        body = a.raw.encode()
    else:
        mid, chat, agent, content = a.event_for
        body = json.dumps({
            "event_id": str(uuid.uuid4()),
            "type": "message.finalized",
            "occurred_at": datetime.now(timezone.utc).isoformat(),
            "message": {"id": int(mid), "chat_id": int(chat), "agent_id": int(agent) if agent else None,
                        "role": "assistant", "content": content, "tools_used": [],
                        "model_id": None if a.model == "null" else a.model},
        }).encode()
    conn, ch = amqp_channel(a.amqp_url)
    ch.confirm_delivery()
    ch.basic_publish(a.exchange, a.routing_key, body,
                     pika.BasicProperties(content_type="application/json", delivery_mode=2), mandatory=True)
    conn.close()
    print(f"published {len(body)} bytes to {a.exchange} / {a.routing_key}")
    return 0


def cmd_wait_metric(a: argparse.Namespace) -> int:
    """Waits for a series of the scrape that has the selector's name and labels (in any
    order; other labels may be there too) with the value asked for."""
    sel = selectors(a.selector)
    if len(sel) != 1:
        print(f"not one series selector: {a.selector!r}", file=sys.stderr)
        return 2
    name, m = sel[0]
    deadline = time.monotonic() + a.timeout
    seen: list[str] = []
    while time.monotonic() < deadline:
        try:
            _, body = http_get(a.metrics_url)
        except OSError:
            body = ""
        seen = []
        for line in body.splitlines():
            series = parse_series(line)
            if series and series[0] == name and matches(m, series[1]):
                seen.append(line)
                if series[2] == a.value if a.value is not None else series[2] >= a.min:
                    print(f"  {line}")
                    return 0
        time.sleep(0.25)
    want = f"= {a.value:g}" if a.value is not None else f">= {a.min:g}"
    print(f"no series {a.selector} {want} in {a.metrics_url} within {a.timeout}s; matching series: {seen or 'none'}", file=sys.stderr)
    return 1


def cmd_connection_pid(a: argparse.Namespace) -> int:
    # RabbitMQ 3.10 has no user_provided_name column: the name is in client_properties.
    out = subprocess.run(["rabbitmqctl", "-q", "list_connections", "--no-table-headers", "pid", "client_properties"],
                         check=True, capture_output=True, text=True).stdout
    needle = '{"connection_name","%s"}' % a.name
    for line in out.splitlines():
        pid, _, props = line.partition("\t")
        if needle in props:
            print(pid)
            return 0
    print(f"no broker connection named {a.name}", file=sys.stderr)
    return 1


def cmd_prom_expect(a: argparse.Namespace) -> int:
    deadline = time.monotonic() + a.timeout
    got: Any = None
    while time.monotonic() < deadline:
        data = prom_query(a.prom, a.expr)
        result = data["result"]
        if data["resultType"] == "vector" and len(result) == 1:
            got = float(result[0]["value"][1])
        elif data["resultType"] == "scalar":
            got = float(result[1])
        else:
            got = result
        if got == a.value:
            print(f"  PromQL {a.expr} = {got:g}")
            return 0
        time.sleep(0.5)
    print(f"PromQL {a.expr} gave {got}, expected {a.value:g} within {a.timeout}s", file=sys.stderr)
    return 1


def cmd_prom_rules(a: argparse.Namespace) -> int:
    import yaml

    with open(a.rules_file, encoding="utf-8") as f:
        want = {r.get("alert") or r.get("record") for g in yaml.safe_load(f)["groups"] for r in g["rules"]}
    _, body = http_get(f"{a.prom}/api/v1/rules")
    loaded = {r["name"]: r for g in json.loads(body)["data"]["groups"] for r in g["rules"]}
    missing = want - set(loaded)
    bad = {n: r.get("lastError") for n, r in loaded.items() if r.get("health") not in ("ok", "unknown")}
    firing = sorted(n for n, r in loaded.items() if r.get("state") in ("firing", "pending"))
    print(f"  Prometheus loaded {len(loaded)} rules, health ok; pending/firing now: {firing or 'none'}")
    if missing or bad:
        print(f"missing rules: {sorted(missing)}; unhealthy: {bad}", file=sys.stderr)
        return 1
    expected = set(a.expect_firing.split(",")) if a.expect_firing else set()
    if not expected <= set(firing):
        print(f"expected pending/firing: {sorted(expected)}, got {firing}", file=sys.stderr)
        return 1
    return 0


def cmd_names(a: argparse.Namespace) -> int:
    _, scrape = http_get(a.metrics_url)
    exported = exported_names(scrape) | {"up"}
    exprs = dashboard_exprs(a.dashboard)
    for r in a.rules:
        exprs += rules_exprs(r)
    used: dict[str, list[str]] = {}
    for where, expr in exprs:
        names = metric_names(expr)
        if not names:
            print(f"  FAIL  {where}: no metric name found in {expr!r}", file=sys.stderr)
            return 1
        for n in names:
            used.setdefault(n, []).append(where)
    unknown = {n: w for n, w in used.items() if n not in exported}
    moded = {p[0] for p in map(parse_series, scrape.splitlines()) if p and "mode" in p[1]}
    if moded != MODED:
        print(f"  FAIL  metrics with a mode label in the scrape: {sorted(moded)}; ci/obs.py MODED (what lint makes"
              f" every query filter or group by mode): {sorted(MODED)}", file=sys.stderr)
        return 1
    print(f"  the {len(MODED)} metrics with a mode label are the ones lint expects")
    own = sorted(n for n in exported if n.startswith("toolcall_recovery_"))
    print(f"  {len(exprs)} PromQL expressions (dashboard panels and variables, alert rules) name {len(used)} metrics")
    print(f"  the worker's scrape exports {len(own)} toolcall_recovery_* series names")
    for n in sorted(used):
        print(f"    {'ok ' if n in exported else 'MISSING'} {n} ({len(used[n])} uses)")
    histograms = {n[: -len("_bucket")] for n in own if n.endswith("_bucket")}
    unused = sorted(set(own) - set(used) - histograms - {f"{h}_sum" for h in histograms})
    if unused:
        print(f"  exported but on no panel or alert: {unused}")
    if unknown:
        for n, w in sorted(unknown.items()):
            print(f"  FAIL  {n} is not exported by the worker; used by {w}", file=sys.stderr)
        return 1
    return 0


def cmd_run_dashboard(a: argparse.Namespace) -> int:
    failed = 0
    exprs = dashboard_exprs(a.dashboard)
    for where, expr in exprs:
        try:
            prom_query(a.prom, grafana_to_promql(expr))
        except RuntimeError as e:
            print(f"  FAIL  {where}: {e}", file=sys.stderr)
            failed += 1
    print(f"  {len(exprs) - failed}/{len(exprs)} dashboard queries execute on Prometheus")
    return 1 if failed else 0


def cmd_lint(a: argparse.Namespace) -> int:
    """Static checks of the dashboard and the rules files, no Prometheus needed."""
    with open(a.dashboard, encoding="utf-8") as f:
        dash = json.load(f)
    problems: list[str] = []
    panels: list[dict[str, Any]] = []
    for p in dash.get("panels", []):
        panels += [p] + p.get("panels", [])
    ids = [p.get("id") for p in panels]
    problems += [f"panel id {i} used twice" for i in sorted({i for i in ids if ids.count(i) > 1})]
    cells: dict[tuple[int, int], str] = {}
    for p in panels:
        g = p["gridPos"]
        if g["x"] + g["w"] > 24:
            problems.append(f"panel '{p['title']}' is wider than the grid: {g}")
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                if (x, y) in cells and cells[(x, y)] != p["title"]:
                    problems.append(f"panels '{cells[(x, y)]}' and '{p['title']}' overlap")
                cells[(x, y)] = p["title"]
    exprs = [(w, e, True) for w, e in dashboard_exprs(a.dashboard) if w.startswith("panel ")]
    for r in a.rules:
        exprs += [(w, e, False) for w, e in rules_exprs(r)]
    for where, expr, on_dashboard in exprs:
        grouped = grouping_labels(expr)
        for name, m in selectors(expr):
            if on_dashboard and name != "up" and m.get("job") != ("=~", "$job"):
                problems.append(f"{where}: {name} without job=~\"$job\"")
            if on_dashboard and m.get("instance") != ("=~", "$instance"):
                problems.append(f"{where}: {name} without instance=~\"$instance\"")
            if name in MODED and "mode" not in m and "mode" not in grouped:
                problems.append(f"{where}: {name} mixes recover and observe passes: select a mode or group by mode")
    for p in sorted(set(problems)):
        print(f"  FAIL  {p}", file=sys.stderr)
    print(f"  lint: {len(panels)} panels, {len(exprs)} queries and rules: {len(set(problems))} problems")
    return 1 if problems else 0


def cmd_compose_env(a: argparse.Namespace) -> int:
    """The environment of services in `docker-compose config` (stdin) is as expected:
    VAR=VALUE, or VAR alone for a variable left unset (no value in the file)."""
    import yaml

    services = yaml.safe_load(sys.stdin)["services"]
    bad = 0
    for svc in a.services:
        env = services[svc].get("environment") or {}
        for exp in a.expect:
            var, eq, want = exp.partition("=")
            got = env.get(var)
            ok = (got == want) if eq else (var in env and got is None)
            bad += not ok
            print(f"  {'ok  ' if ok else 'FAIL'}  {svc}: {var}={got if got is not None else '(unset)'}")
    return 1 if bad else 0


def cmd_broker_delete(a: argparse.Namespace) -> int:
    import pika

    for q in a.queue or []:
        try:
            conn, ch = amqp_channel(a.amqp_url)
            ch.queue_delete(q)
            conn.close()
        except pika.exceptions.AMQPError as e:
            print(f"  could not delete queue {q}: {e!r}", file=sys.stderr)
    for x in a.exchange or []:
        try:
            conn, ch = amqp_channel(a.amqp_url)
            ch.exchange_delete(x)
            conn.close()
        except pika.exceptions.AMQPError as e:
            print(f"  could not delete exchange {x}: {e!r}", file=sys.stderr)
    return 0


def cmd_log_clean(a: argparse.Namespace) -> int:
    """The log holds none of the texts, neither as text nor as a Debug-printed byte array."""
    with open(a.log, encoding="utf-8", errors="replace") as f:
        log = f.read()
    found = []
    for text in a.texts:
        as_bytes = ", ".join(str(b) for b in text.encode())
        for form, needle in (("text", text), ("bytes", as_bytes)):
            for line in log.splitlines():
                if needle in line:
                    found.append(f"{form} of {text!r} in: {line[:200]}")
                    break
    for f_ in found:
        print(f"  FAIL  {f_}", file=sys.stderr)
    if not found:
        print(f"  the worker's log ({len(log.splitlines())} lines) carries none of the {len(a.texts)} message texts")
    return 1 if found else 0


def cmd_selftest(_: argparse.Namespace) -> int:
    cases = {
        'sum by (outcome) (rate(toolcall_recovery_events_total{job=~"$job", instance=~"$instance"}[$__rate_interval]))':
            {"toolcall_recovery_events_total"},
        'histogram_quantile(0.99, sum by (job, le) (rate(a_seconds_bucket{x="y"}[5m]))) > 2.5': {"a_seconds_bucket"},
        'up{job="toolcall-recovery"} == 0': {"up"},
        'absent(up{job="x"})': {"up"},
        'a > 0 and on (job) b offset 15m or count without (reason) (c{reason!~"x|y"}) unless d[5m:1m]': {"a", "b", "c", "d"},
        'sum(increase(x_total[$__range])) or vector(0)': {"x_total"},
        '{__name__="named_metric", job="j"}': {"named_metric"},
        'rate(m[1h30m]) * 1e3 / 0x10 + 2.5e-3': {"m"},
        'sum by (le) (rate(h_bucket[${__rate_interval}]))': {"h_bucket"},
        'a / ignoring (le) group_left (instance) b': {"a", "b"},
        'toolcall_recovery_in_flight_deliveries{job=~"$job"}': {"toolcall_recovery_in_flight_deliveries"},
        'count by (family, mode) (f{job=~"$job"} == 1) / on (job) group_left count(g)': {"f", "g"},
    }
    bad = 0
    for expr, want in cases.items():
        got = metric_names(expr)
        if got != want:
            print(f"  FAIL  metric_names({expr!r}) = {sorted(got)}, want {sorted(want)}", file=sys.stderr)
            bad += 1
    sel_cases = {
        'sum(e{job=~"$job", mode="recover", outcome!="clean"}[5m]) or c offset 1m':
            [("e", {"job": ("=~", "$job"), "mode": ("=", "recover"), "outcome": ("!=", "clean")}), ("c", {})],
        '{__name__="n", a!~"x|y"}': [("n", {"__name__": ("=", "n"), "a": ("!~", "x|y")})],
        'count by (job, mode) (m{i="1"} == 1)': [("m", {"i": ("=", "1")})],
    }
    for expr, want_sel in sel_cases.items():
        got_sel = selectors(expr)
        if got_sel != want_sel:
            print(f"  FAIL  selectors({expr!r}) = {got_sel}, want {want_sel}", file=sys.stderr)
            bad += 1
    if grouping_labels('sum by (job, mode) (x) / sum by(le) (y)') != {"job", "mode", "le"}:
        print("  FAIL  grouping_labels", file=sys.stderr)
        bad += 1
    # Prometheus orders label names alphabetically; the matcher must not care.
    line = 'toolcall_recovery_events_total{mode="recover",outcome="recovered"} 1'
    series = parse_series(line)
    m = selectors('toolcall_recovery_events_total{outcome="recovered", mode="recover"}')[0][1]
    if series != ("toolcall_recovery_events_total", {"mode": "recover", "outcome": "recovered"}, 1.0) or not matches(m, series[1]) \
            or matches({"mode": ("=", "observe")}, series[1]) or not matches({"outcome": ("=~", "rec.*")}, series[1]) \
            or parse_series('x_total{e="a.b\\"c"} 2.5') != ("x_total", {"e": 'a.b"c'}, 2.5) or parse_series("# TYPE x counter"):
        print(f"  FAIL  series matching: {series}", file=sys.stderr)
        bad += 1
    total = len(cases) + len(sel_cases) + 2
    print(f"  PromQL name, selector and series parsers: {total - bad}/{total} known cases right")
    return 1 if bad else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("free-port").set_defaults(fn=cmd_free_port)
    s = sub.add_parser("wait-http")
    s.add_argument("url")
    s.add_argument("--timeout", type=float, default=60)
    s.add_argument("--status", type=int, default=200)
    s.set_defaults(fn=cmd_wait_http)
    s = sub.add_parser("publish")
    s.add_argument("amqp_url")
    s.add_argument("exchange")
    s.add_argument("routing_key")
    g = s.add_mutually_exclusive_group(required=True)
    g.add_argument("--event-for", nargs=4, metavar=("MESSAGE_ID", "CHAT_ID", "AGENT_ID", "CONTENT"))
    g.add_argument("--raw")
    s.add_argument("--model", default="gemini-2.5-flash", help="message.model_id of --event-for (`null`: JSON null)")
    s.set_defaults(fn=cmd_publish)
    s = sub.add_parser("wait-metric")
    s.add_argument("metrics_url")
    s.add_argument("selector")
    g = s.add_mutually_exclusive_group(required=True)
    g.add_argument("--value", type=float)
    g.add_argument("--min", type=float)
    s.add_argument("--timeout", type=float, default=30)
    s.set_defaults(fn=cmd_wait_metric)
    s = sub.add_parser("connection-pid")
    s.add_argument("name")
    s.set_defaults(fn=cmd_connection_pid)
    s = sub.add_parser("prom-expect")
    s.add_argument("prom")
    s.add_argument("expr")
    s.add_argument("value", type=float)
    s.add_argument("--timeout", type=float, default=30)
    s.set_defaults(fn=cmd_prom_expect)
    s = sub.add_parser("prom-rules")
    s.add_argument("prom")
    s.add_argument("rules_file")
    s.add_argument("--expect-firing", default="", help="comma-separated alerts that must be pending or firing")
    s.set_defaults(fn=cmd_prom_rules)
    s = sub.add_parser("names")
    s.add_argument("metrics_url")
    s.add_argument("dashboard")
    s.add_argument("rules", nargs="+")
    s.set_defaults(fn=cmd_names)
    s = sub.add_parser("run-dashboard")
    s.add_argument("prom")
    s.add_argument("dashboard")
    s.set_defaults(fn=cmd_run_dashboard)
    s = sub.add_parser("lint")
    s.add_argument("dashboard")
    s.add_argument("rules", nargs="*")
    s.set_defaults(fn=cmd_lint)
    s = sub.add_parser("compose-env")
    s.add_argument("services", nargs="+")
    s.add_argument("--expect", action="append", required=True)
    s.set_defaults(fn=cmd_compose_env)
    s = sub.add_parser("broker-delete")
    s.add_argument("amqp_url")
    s.add_argument("--exchange", action="append")
    s.add_argument("--queue", action="append")
    s.set_defaults(fn=cmd_broker_delete)
    s = sub.add_parser("log-clean")
    s.add_argument("log")
    s.add_argument("texts", nargs="+")
    s.set_defaults(fn=cmd_log_clean)
    sub.add_parser("selftest").set_defaults(fn=cmd_selftest)
    a = p.parse_args()
    return int(a.fn(a))


if __name__ == "__main__":
    sys.exit(main())
