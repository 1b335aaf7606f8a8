#!/usr/bin/env python3
"""Checks that .dockerignore keeps in the build context what `cargo build --locked` needs
in the Dockerfile's builder stage, and keeps out what it should.

    python3 ci/dockerignore_check.py

Implements Docker's .dockerignore rules: Go filepath.Match patterns with `**`, matched
against a path and each of its parent directories, the last matching line winning, `!`
re-including.
"""
import os
import re
import sys


def to_regex(pattern: str) -> re.Pattern[str]:
    out = ""
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**", i):
            out += ".*"
            i += 2
            if i < len(pattern) and pattern[i] == "/":
                out = out[:-2] + "(?:.*/)?"
                i += 1
            continue
        out += {"*": "[^/]*", "?": "[^/]"}.get(c, re.escape(c))
        i += 1
    return re.compile(f"^{out}$")


def rules(path: str) -> list[tuple[bool, re.Pattern[str]]]:
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            neg = line.startswith("!")
            pat = os.path.normpath(line.lstrip("!").strip("/"))
            out.append((neg, to_regex(pat)))
    return out


def excluded(path: str, rs: list[tuple[bool, re.Pattern[str]]]) -> bool:
    parts = path.split("/")
    result = False
    for neg, rx in rs:
        if any(rx.match("/".join(parts[: n + 1])) for n in range(len(parts))):
            result = not neg
    return result


def main() -> int:
    rs = rules(".dockerignore")
    needed = ["Cargo.toml", "Cargo.lock", "src/main.rs", "src/lib.rs", "crates/detect/Cargo.toml",
              "crates/detect/src/lib.rs", "migrations", "sql/chat_app_tables.sql", "build.rs",
              "examples/demo_publish.rs", "tests/it/main.rs", "tests/layers.rs"]
    left_out = ["target/debug/toolcall-recovery", ".git/HEAD", "fuzz/Cargo.toml", "crates/detect/target/x",
                "helm/toolcall-recovery/Chart.yaml", "deploy/prometheus/prometheus.yml"]
    bad = [p for p in needed if excluded(p, rs)] + [f"(kept) {p}" for p in left_out if not excluded(p, rs)]
    for p in needed:
        if os.path.exists(p) and not excluded(p, rs):
            continue
        if not os.path.exists(p):
            bad.append(f"(missing in the repository) {p}")
    if bad:
        print(f"  FAIL  .dockerignore: {bad}", file=sys.stderr)
        return 1
    print(f"  .dockerignore keeps {len(needed)} needed paths in the build context and {len(left_out)} others out")
    return 0


if __name__ == "__main__":
    sys.exit(main())
