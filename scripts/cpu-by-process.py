#!/usr/bin/env python3
"""CPU by process group, second by second, while a benchmark runs beside it.

    scripts/cpu-by-process.py SECONDS [BUSY_COMM]

Samples utime + stime of every process in /proc once a second for SECONDS and prints, per
second, the CPU (in cores) of PostgreSQL (every `postgres` process), RabbitMQ (`beam.smp`),
the worker (`toolcall-recove`, the kernel's 15-byte name), the load harness (`load`) and the
rest. At the end it averages the seconds in which BUSY_COMM (default: the worker) used at
least a fifth of a core: the middle of a drain, without the seeding before it. Divide each
group's cores by the events per second of the same seconds to get its CPU per event
(BENCHMARKS.md §2, "Where a recovery's CPU goes"). Linux only; no dependencies.
"""
import os
import sys
import time

GROUPS = ("postgres", "rabbitmq", "worker", "harness", "other")


def group(comm):
    if comm.startswith("postgres"):
        return "postgres"
    if comm == "beam.smp" or comm.startswith(("erl_child_setup", "epmd", "inet_gethost")):
        return "rabbitmq"
    if comm.startswith("toolcall-recove"):
        return "worker"
    if comm == "load":
        return "harness"
    return "other"


def ticks_by_pid():
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        # A thread's CPU is in its process's utime + stime (fields 14 and 15).
        out[pid] = (group(comm), int(fields[11]) + int(fields[12]))
    return out


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 30
    busy = sys.argv[2] if len(sys.argv) > 2 else "worker"
    hz = os.sysconf("SC_CLK_TCK")
    before = ticks_by_pid()
    start = time.monotonic()
    rows = []
    print("second " + " ".join(f"{g:>9}" for g in GROUPS), flush=True)
    while time.monotonic() - start < seconds:
        time.sleep(1)
        now = ticks_by_pid()
        used = dict.fromkeys(GROUPS, 0)
        for pid, (g, t) in now.items():
            old = before.get(pid)
            # A pid seen for the first time counts from zero; one that went away is lost
            # for its last second (a process that ends mid-window is the harness's own).
            used[g] += t - (old[1] if old and old[0] == g else 0)
        before = now
        row = {g: used[g] / hz for g in GROUPS}
        rows.append(row)
        print(f"{time.monotonic() - start:6.1f} " + " ".join(f"{row[g]:9.2f}" for g in GROUPS), flush=True)
    mid = [r for r in rows if r[busy] >= 0.2]
    if mid:
        print(f"average over the {len(mid)} s with {busy} >= 0.2 cores: " + ", ".join(
            f"{g} {sum(r[g] for r in mid) / len(mid):.2f}" for g in GROUPS))


if __name__ == "__main__":
    main()
