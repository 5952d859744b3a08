#!/usr/bin/env python3
"""What short-lived processes cost with libgpuctl.so preloaded: the helpers a
preloaded shell or a pyenv shim execs on the way to the real program.

Runs N processes of a program (default /bin/true) one after another, three
ways in the same script, against one real gpuctld:
  plain      no library;
  preloaded  LD_PRELOAD=libgpuctl.so with the default attach delay (500 ms):
             such a process is gone before it would attach;
  no delay   GPUCTL_ATTACH_DELAY_MS=0: each process attaches as it starts,
             which is what the delay saves the daemon.
For each: the wall time per process (p50/p90/p99, and the p50 as a ratio to
the plain run), the daemon's CPU time per 1000 processes (from
/proc/<pid>/stat), and the daemon's log lines about attaching.

Usage: bench/short_lived.py [--build build] [--count 300] [--program /bin/true]
"""

import argparse
import os
import subprocess
import time
from pathlib import Path

from benchlib import Fleet, summary


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_many(program, count, env):
    times = []
    for _ in range(count):
        started = time.perf_counter_ns()
        subprocess.run([program], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       check=True)
        times.append((time.perf_counter_ns() - started) / 1e6)
    return times


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--program", default="/bin/true")
    args = parser.parse_args()
    with Fleet(args.build) as fleet:
        # Info level: the attach lines are what is counted.
        index = fleet.start_daemon(log_level="info")
        fleet.wait_ready()
        daemon = fleet.daemons[index][0]
        base = {k: v for k, v in os.environ.items() if not k.startswith("GPUCTL_")}
        lib = str(Path(args.build).resolve() / "lib/libgpuctl.so")
        runs = [
            ("plain", base),
            ("preloaded", {**base, "LD_PRELOAD": lib, "GPUCTL_SOCKET": str(fleet.daemons[index][2])}),
            ("no delay", {**base, "LD_PRELOAD": lib, "GPUCTL_SOCKET": str(fleet.daemons[index][2]),
                          "GPUCTL_ATTACH_DELAY_MS": "0"}),
        ]
        log_path = fleet.dir / f"d{index}.log"
        results = []
        for label, env in runs:
            lines_before = log_path.read_text(errors="replace").count("\n")
            cpu_before = cpu_seconds(daemon.pid)
            times = run_many(args.program, args.count, env)
            time.sleep(0.5)  # the daemon's last disconnects
            cpu = cpu_seconds(daemon.pid) - cpu_before
            lines = log_path.read_text(errors="replace").count("\n") - lines_before
            results.append((label, summary(times), cpu * 1000 / args.count, lines))
        plain_p50 = results[0][1]["p50"]
        print(f"{args.count} runs of {args.program} each")
        print(f"{'run':<12}{'p50 ms':>9}{'p90 ms':>9}{'p99 ms':>9}{'p50 ratio':>11}"
              f"{'daemon CPU s/1000':>19}{'log lines':>11}")
        for label, s, cpu_per_1000, lines in results:
            print(f"{label:<12}{s['p50']:>9.2f}{s['p90']:>9.2f}{s['p99']:>9.2f}"
                  f"{s['p50'] / plain_p50:>11.3f}{cpu_per_1000:>19.3f}{lines:>11}")


if __name__ == "__main__":
    main()
