#!/usr/bin/env python3
"""Prints a Prometheus rules file without the rules' annotations (for promtool test rules,
which compares annotations verbatim; see ci/alerts.test.yml)."""
import sys

import yaml

with open(sys.argv[1], encoding="utf-8") as f:
    doc = yaml.safe_load(f)
for group in doc["groups"]:
    for rule in group["rules"]:
        rule.pop("annotations", None)
yaml.safe_dump(doc, sys.stdout, sort_keys=False)
