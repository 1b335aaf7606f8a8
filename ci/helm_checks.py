#!/usr/bin/env python3
"""Checks of the Helm chart, offline, with Helm's own Go SDK (helm-python-sdk) and the
Kubernetes OpenAPI schemas (kubernetes-validate).

    python3 ci/helm_checks.py CHART_DIR OUT_DIR

- lints the chart (strict) with minimal values and with every optional part on;
- renders it: chart defaults alone must fail with the "set secrets.existingSecret" message
  (the connection URLs have no safe default); defaults + an existing Secret, the chart
  managing the Secret, and ci/helm-values-full.yaml must render;
- validates every rendered manifest against the Kubernetes schemas (strict: unknown fields
  are errors) for the oldest and the newest Kubernetes version the chart supports. CRD
  kinds (ServiceMonitor, PodMonitor, PrometheusRule, ScaledObject, TriggerAuthentication) have no schema
  there: they are skipped by kubernetes-validate and checked structurally here instead, and
  the rendered PrometheusRule is written to OUT_DIR for `promtool check rules`;
- asserts what the chart promises (non-root read-only pod, probes, grace period longer than
  the drain timeout, hook Job, dashboard ConfigMap identical to the dashboard file, ...);
- shows that values.schema.json rejects bad values (ci/helm-values-bad.yaml and more).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable

import helm_python as helm
import kubernetes_validate
import yaml

CRD_GROUPS = ("monitoring.coreos.com/", "keda.sh/")
K8S_VERSIONS = ("1.25.0", kubernetes_validate.latest_version())

failures: list[str] = []


def check(cond: bool, what: str) -> None:
    if cond:
        print(f"  ok    {what}")
    else:
        print(f"  FAIL  {what}")
        failures.append(what)


def load_yaml(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f) or {}


def render(chart: helm.Chart, values: dict[str, Any]) -> list[dict[str, Any]]:
    manifests = chart.render(values, name="tcr", namespace="chat", is_install=True)
    docs: list[dict[str, Any]] = []
    for path, text in sorted(manifests.items()):
        if path.endswith("NOTES.txt"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc:
                doc.setdefault("__template", path)
                docs.append(doc)
    return docs


def k8s_validate(docs: list[dict[str, Any]], label: str) -> None:
    skipped = set()
    for doc in docs:
        obj = {k: v for k, v in doc.items() if k != "__template"}
        kind = f"{obj['apiVersion']} {obj['kind']}"
        if obj["apiVersion"].startswith(CRD_GROUPS):
            skipped.add(kind)
            continue
        for version in K8S_VERSIONS:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as e:
                path = "/".join(str(p) for p in e.caught.absolute_path)
                check(False, f"{label}: {kind} {obj['metadata']['name']} valid for Kubernetes {version}: {path}: {e.caught.message}")
                break
            except kubernetes_validate.SchemaNotFoundError as e:
                check(False, f"{label}: {kind}: {e.message}")
                break
        else:
            check(True, f"{label}: {kind} {obj['metadata']['name']} valid (strict) for Kubernetes {', '.join(K8S_VERSIONS)}")
    if skipped:
        print(f"  skip  {label}: no Kubernetes schema for CRDs {sorted(skipped)} (checked structurally below)")


def by_kind(docs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for d in docs:
        out.setdefault(d["kind"], []).append(d)
    return out


def expect_fail(label: str, fn: Callable[[], Any], exc: type[BaseException], *needles: str) -> None:
    """fn raises exc, and its message names every one of the needles (schema paths)."""
    try:
        fn()
    except exc as e:
        lines = [ln.strip() for ln in str(e).strip().splitlines()]
        shown = "; ".join(ln for ln in lines if any(n in ln for n in needles)) or lines[-1]
        check(all(n in str(e) for n in needles), f"{label}: rejected ({shown})")
        return
    check(False, f"{label}: should have been rejected")


def worker_checks(k: dict[str, list[dict[str, Any]]], label: str, values: dict[str, Any], merged: dict[str, Any]) -> None:
    dep = k["Deployment"][0]
    pod = dep["spec"]["template"]["spec"]
    c = pod["containers"][0]
    check(c["args"] == ["run"], f"{label}: container runs `run` (the image's entrypoint is the binary)")
    check(pod["securityContext"].get("runAsNonRoot") is True, f"{label}: pod runAsNonRoot")
    sc = c["securityContext"]
    check(sc.get("readOnlyRootFilesystem") is True and sc.get("allowPrivilegeEscalation") is False
          and sc.get("capabilities", {}).get("drop") == ["ALL"], f"{label}: container read-only root fs, no privilege escalation, no capabilities")
    check(c["livenessProbe"]["httpGet"]["path"] == "/healthz" and c["readinessProbe"]["httpGet"]["path"] == "/readyz"
          and c["startupProbe"]["httpGet"]["path"] == "/healthz", f"{label}: probes on /healthz (liveness, startup) and /readyz (readiness)")
    drain = merged["config"]["drainTimeoutSeconds"]
    check(pod["terminationGracePeriodSeconds"] > drain,
          f"{label}: terminationGracePeriodSeconds {pod['terminationGracePeriodSeconds']} > drain timeout {drain}")
    check("resources" in c and c["resources"].get("requests"), f"{label}: resources set")
    env = {e["name"]: e for e in c["env"]}
    check(all(n in env and "secretKeyRef" in env[n]["valueFrom"] for n in ("DATABASE_URL", "AMQP_URL", "TCR_ADMIN_TOKEN")),
          f"{label}: DATABASE_URL, AMQP_URL, TCR_ADMIN_TOKEN come from a Secret")
    cm = next(d for d in k["ConfigMap"] if d["metadata"]["name"] == dep["metadata"]["name"])
    check(cm["data"]["TCR_DRAIN_TIMEOUT_SECS"] == str(drain) and cm["data"]["TCR_HTTP_ADDR"].endswith(":9090"),
          f"{label}: ConfigMap carries the worker settings")
    # Rollout switches: the mode always, each family list only when it names a family (an
    # empty variable would reach the worker as one empty family name).
    cfg = merged["config"]
    want = {"TCR_MODE": cfg["mode"],
            "TCR_FAMILIES_DISABLED": ",".join(cfg["familiesDisabled"]) or None,
            "TCR_FAMILIES_OBSERVE": ",".join(cfg["familiesObserve"]) or None,
            "TCR_MODELS": ",".join(cfg["models"]) or None}
    got = {n: cm["data"].get(n) for n in want}
    check(got == want, f"{label}: ConfigMap rollout settings {got}")
    pods = {"worker": c} | {f"Job {j['metadata']['name']}": j["spec"]["template"]["spec"]["containers"][0]
                            for j in k["Job"] if "-backfill-" in j["metadata"]["name"]}
    check(all({"configMapRef": {"name": cm["metadata"]["name"]}} in pc.get("envFrom", []) for pc in pods.values()),
          f"{label}: the settings (TCR_MODE, TCR_FAMILIES_*) reach the {' and the '.join(pods)} through that ConfigMap")
    check(k["Service"][0]["spec"]["ports"][0]["targetPort"] == "http", f"{label}: Service targets the http port")
    job = next(j for j in k["Job"] if j["metadata"]["name"].endswith("-migrate"))
    selectors = {"Service": k["Service"][0]["spec"]["selector"], "Deployment": dep["spec"]["selector"]["matchLabels"]}
    if "PodDisruptionBudget" in k:
        selectors["PodDisruptionBudget"] = k["PodDisruptionBudget"][0]["spec"]["selector"]["matchLabels"]
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    job_pods = [j["spec"]["template"]["metadata"]["labels"] for j in k["Job"]]
    check(all(sel.items() <= pod_labels.items() and not any(sel.items() <= jl.items() for jl in job_pods) for sel in selectors.values()),
          f"{label}: {', '.join(selectors)} select the worker pods and no Job pod")
    ann = job["metadata"]["annotations"]
    check(ann["helm.sh/hook"] == "pre-install,pre-upgrade" and job["spec"]["template"]["spec"]["containers"][0]["args"] == ["migrate"],
          f"{label}: migration Job is a pre-install/pre-upgrade hook running `migrate`")
    jsec = job["spec"]["template"]["spec"]["containers"][0]["env"][-1]["valueFrom"]["secretKeyRef"]["name"]
    hook_secrets = [s for s in k.get("Secret", []) if "helm.sh/hook" in s["metadata"].get("annotations", {})]
    if values.get("secrets", {}).get("existingSecret"):
        check(jsec == values["secrets"]["existingSecret"] and not k.get("Secret"),
              f"{label}: existingSecret used by worker and Job, no Secret created")
    else:
        check(len(hook_secrets) == 1 and hook_secrets[0]["metadata"]["name"] == jsec
              and int(hook_secrets[0]["metadata"]["annotations"]["helm.sh/hook-weight"]) < int(ann["helm.sh/hook-weight"]),
              f"{label}: the Job reads a hook Secret created before it (the release's Secret does not exist yet on install)")


def main() -> int:
    chart_dir, out_dir = sys.argv[1], sys.argv[2]
    here = os.path.dirname(os.path.abspath(__file__))
    os.makedirs(out_dir, exist_ok=True)
    minimal = {"secrets": {"existingSecret": "toolcall-recovery-connections"}}
    managed = {"secrets": {"databaseUrl": "postgres://app:pw@db:5432/chat", "amqpUrl": "amqp://app:pw@mq:5672/%2f"}}
    full = load_yaml(os.path.join(here, "helm-values-full.yaml"))
    bad = load_yaml(os.path.join(here, "helm-values-bad.yaml"))
    dashboard_file = os.path.join(chart_dir, "dashboards", "toolcall-recovery.json")
    rules_file = os.path.join(chart_dir, "rules", "toolcall-recovery.rules.yml")

    print(f"helm SDK {helm.helm_sdk_version()} (helm-c {helm.helm_c_version()}), kubernetes-validate {kubernetes_validate.version.__version__}")

    print("lint")
    for label, values in (("minimal values", minimal), ("all optional parts on", full)):
        report = helm.lint(chart_dir, values, strict=True, namespace="chat")
        bad_msgs = [m for m in report["messages"] if m["severity"] >= 2] + [{"error": e} for e in report["errors"]]
        for m in report["messages"]:
            if m["severity"] < 2:
                print(f"  info  {label}: {m['path']}: {m['error']}")
        check(not bad_msgs, f"lint --strict with {label}" + (f": {bad_msgs}" if bad_msgs else ""))
    report = helm.lint(chart_dir, bad, strict=True)
    check(any(m["severity"] >= 3 for m in report["messages"]) or bool(report["errors"]),
          "lint reports an error for ci/helm-values-bad.yaml")

    with helm.Chart.load(chart_dir) as chart:
        print(f"chart {chart.name} {chart.version}")
        print("render: chart defaults alone")
        expect_fail("defaults without connection settings", lambda: chart.render(None, name="tcr", namespace="chat"),
                    helm.HelmRenderError, "set secrets.existingSecret")

        print("values.schema.json rejects bad values")
        expect_fail("ci/helm-values-bad.yaml (replicaCount: \"two\", config.mode: apply)",
                    lambda: chart.render(bad, name="tcr", namespace="chat"),
                    helm.HelmValuesError, "/replicaCount", "/config/mode")
        for label, extra, needle in (
            ("image.pullPolicy: Sometimes", {"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
            ("secrets.amqpUrl: http://mq", {"secrets": {"existingSecret": "", "databaseUrl": "postgres://x/y", "amqpUrl": "http://mq"}}, "/secrets/amqpUrl"),
            ("misspelt top-level key replicas: 3", {"replicas": 3}, "replicas"),
            ("config.logFormat: xml", {"config": {"logFormat": "xml"}}, "/config/logFormat"),
            ("config.mode: Observe", {"config": {"mode": "Observe"}}, "/config/mode"),
            ("config.familiesObserve: hermes (not a list)", {"config": {"familiesObserve": "hermes"}}, "/config/familiesObserve"),
            ("config.familiesDisabled: [Hermes]", {"config": {"familiesDisabled": ["Hermes"]}}, "/config/familiesDisabled/0"),
            ("config.models: [google/gemini-2.5-flash]", {"config": {"models": ["google/gemini-2.5-flash"]}}, "/config/models/0"),
            ("keda.queueLength: 0", {"keda": {"enabled": True, "queueLength": 0}}, "/keda/queueLength"),
        ):
            values = json.loads(json.dumps(minimal))
            for key, val in extra.items():
                values[key] = {**values.get(key, {}), **val} if isinstance(val, dict) else val
            expect_fail(label, lambda v=values: chart.render(v, name="tcr", namespace="chat"), helm.HelmValuesError, needle)

        expect_fail("index.job without the owner's URL", lambda: chart.render({**managed, "index": {"job": True}}, name="tcr", namespace="chat"),
                    helm.HelmRenderError, "secrets.indexDatabaseUrl")

        for label, values in (("defaults + existingSecret", minimal), ("defaults + chart-managed Secret", managed), ("all optional parts on", full)):
            print(f"render: {label}")
            docs = render(chart, values)
            merged = chart.merge_values(values)
            kinds = by_kind(docs)
            print("  kinds: " + ", ".join(f"{n}x{len(v)}" for n, v in sorted(kinds.items())))
            k8s_validate(docs, label)
            worker_checks(kinds, label, values, merged)
            with open(os.path.join(out_dir, label.replace(" ", "_").replace("+", "and") + ".yaml"), "w", encoding="utf-8") as f:
                yaml.safe_dump_all([{k: v for k, v in d.items() if k != "__template"} for d in docs], f, sort_keys=False)
            if label == "defaults + existingSecret":
                check("Deployment" in kinds and kinds["Deployment"][0]["spec"]["replicas"] == 2, f"{label}: Deployment with 2 replicas")
                check(all(x not in kinds for x in ("ServiceMonitor", "PrometheusRule", "ScaledObject")) and
                      not any(c["metadata"]["name"].endswith("-dashboard") for c in kinds["ConfigMap"]),
                      f"{label}: optional parts off by default")
                check("PodDisruptionBudget" in kinds, f"{label}: PodDisruptionBudget on by default")
                check(not any(j["metadata"]["name"].endswith("-index") for j in kinds["Job"]),
                      f"{label}: no index Job by default (the DBA builds the index as the owner of messages)")
                check(merged["config"]["mode"] == "recover", f"{label}: mode recover by default")
            if label == "all optional parts on":
                want = {"Deployment", "Service", "ConfigMap", "Secret", "Job", "ServiceAccount", "PodDisruptionBudget",
                        "ServiceMonitor", "PrometheusRule", "ScaledObject", "TriggerAuthentication", "PodMonitor"}
                check(want <= set(kinds), f"{label}: renders {sorted(want)}")
                check("replicas" not in kinds["Deployment"][0]["spec"], f"{label}: KEDA owns the replica count (no spec.replicas)")
                sm = kinds["ServiceMonitor"][0]
                ep = sm["spec"]["endpoints"][0]
                check(ep["port"] == "http" and ep["path"] == "/metrics"
                      and {"action": "replace", "targetLabel": "job", "replacement": "toolcall-recovery"} in ep["relabelings"]
                      and sm["metadata"]["labels"].get("release") == "kube-prometheus-stack",
                      f"{label}: ServiceMonitor scrapes http /metrics as job=toolcall-recovery")
                dash = next(c for c in kinds["ConfigMap"] if c["metadata"]["name"].endswith("-dashboard"))
                with open(dashboard_file, encoding="utf-8") as f:
                    same = json.loads(dash["data"]["toolcall-recovery.json"]) == json.load(f)
                check(same and dash["metadata"]["labels"].get("grafana_dashboard") == "1" and dash["metadata"]["namespace"] == "monitoring",
                      f"{label}: dashboard ConfigMap (label grafana_dashboard=\"1\") holds dashboards/toolcall-recovery.json unchanged")
                pr = kinds["PrometheusRule"][0]
                groups = pr["spec"]["groups"]
                rules = {r.get("alert"): r for g in groups for r in g["rules"]}
                source = {r["alert"]: r for g in load_yaml(rules_file)["groups"] for r in g["rules"]}
                check(set(source) - {"ToolcallRecoveryTargetMissing"} <= set(rules) and "ToolcallRecoveryTargetMissing" not in rules,
                      f"{label}: PrometheusRule holds the rules file's alerts minus the disabled one")
                check(rules["ToolcallRecoveryHighLatency"]["for"] == "15m" and rules["ToolcallRecoveryHighLatency"]["labels"]["severity"] == "critical"
                      and rules["ToolcallRecoveryHighLatency"]["expr"] == source["ToolcallRecoveryHighLatency"]["expr"],
                      f"{label}: per-alert override applied, rest of the rule from the file")
                check(all(r["labels"].get("team") == "chat" for r in rules.values() if r.get("alert") != "ToolcallRecoveryNoRecoveries"),
                      f"{label}: extraAlertLabels on every alert")
                check("ToolcallRecoveryNoRecoveries" in rules, f"{label}: additionalRules appended")
                with open(os.path.join(out_dir, "prometheusrule-rendered.rules.yml"), "w", encoding="utf-8") as f:
                    yaml.safe_dump({"groups": groups}, f, sort_keys=False)
                so = kinds["ScaledObject"][0]
                trig = so["spec"]["triggers"][0]
                check(trig["type"] == "rabbitmq" and trig["metadata"]["mode"] == "QueueLength"
                      and trig["metadata"]["queueName"] == merged["config"]["names"]["queue"]
                      and so["spec"]["scaleTargetRef"]["name"] == kinds["Deployment"][0]["metadata"]["name"]
                      and trig["authenticationRef"]["name"] == kinds["TriggerAuthentication"][0]["metadata"]["name"],
                      f"{label}: KEDA ScaledObject scales the Deployment on the input queue's length")
                ta = kinds["TriggerAuthentication"][0]["spec"]["secretTargetRef"][0]
                check(ta["parameter"] == "host" and ta["key"] == "AMQP_URL", f"{label}: KEDA reads the broker URL from the Secret")
                check(kinds["ConfigMap"][0]["data"].get("TCR_MIGRATE") == "true" or any(c["data"].get("TCR_MIGRATE") == "true" for c in kinds["ConfigMap"]),
                      f"{label}: migrateOnStart sets TCR_MIGRATE")
                bf = next(j for j in kinds["Job"] if "-backfill-" in j["metadata"]["name"])
                bc = bf["spec"]["template"]["spec"]["containers"][0]
                check(bc["args"][:3] == ["backfill", "--metrics-addr", "0.0.0.0:9091"] and bc["args"][3:] == full["backfill"]["args"]
                      and "helm.sh/hook" not in bf["metadata"].get("annotations", {}),
                      f"{label}: backfill Job runs `backfill --metrics-addr` with the extra flags")
                ix = next(j for j in kinds["Job"] if j["metadata"]["name"].endswith("-index"))
                ixc = ix["spec"]["template"]["spec"]["containers"][0]
                ixenv = {e["name"]: e for e in ixc["env"]}
                managed_secret = next(x for x in kinds["Secret"] if "helm.sh/hook" not in x["metadata"].get("annotations", {}))
                check(ix["metadata"]["annotations"]["helm.sh/hook"] == "post-install,post-upgrade" and ixc["args"] == ["index"]
                      and ixenv["DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {"name": managed_secret["metadata"]["name"], "key": "INDEX_DATABASE_URL"}
                      and "INDEX_DATABASE_URL" in managed_secret["data"],
                      f"{label}: index Job is a post-install/post-upgrade hook running `index` as the owner of messages (INDEX_DATABASE_URL)")
                pm = kinds["PodMonitor"][0]["spec"]
                check(pm["podMetricsEndpoints"][0]["port"] == "metrics"
                      and pm["podMetricsEndpoints"][0]["relabelings"][0]["replacement"] == "toolcall-recovery-backfill"
                      and pm["selector"]["matchLabels"].items() <= bf["spec"]["template"]["metadata"]["labels"].items(),
                      f"{label}: PodMonitor scrapes the backfill pod as job toolcall-recovery-backfill")
        notes = chart.render(full, name="tcr", namespace="chat", is_install=True)
        note = next(v for p, v in notes.items() if p.endswith("NOTES.txt"))
        check("scaled by KEDA" in note and "port-forward" in note, "NOTES.txt renders")
        check(full["config"]["mode"] == "observe" and "Mode: observe" in note
              and "Families that only observe: json_fence, llama3_json." in note and "Families switched off: pythonic." in note,
              "NOTES.txt says the workers observe, and which families observe or are off")

    print(f"\nhelm checks: {'FAILED: ' + str(len(failures)) if failures else 'all passed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
