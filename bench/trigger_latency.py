#!/usr/bin/env python3
"""Trigger latency and start skew on one host.

    bench/trigger_latency.py BUILD_DIR [--processes 1,8,64] [--runs 40]

For each process count: one gpuctld and that many idle processes with
libgpuctl.so preloaded (`sleep`, so the measurement is not of CPU
contention), then `runs` traces of each kind:

  latency  --start-delay 0: the start instant is already past when the
           request arrives, so every process opens as soon as its request
           reaches it. Per trace: the latest window opening minus the
           daemon's receipt of the RPC (both from the stored manifest,
           CLOCK_REALTIME on one host).
  skew     --start-delay 200ms: per trace, the latest minus the earliest
           window opening, and the largest opening after the start instant.
           Processes arm their sources ahead of the instant and clip what
           comes before it, so a process armed in time opens exactly at the
           instant: the table also counts those, over all traces.

Baseline, run after each process count: bin/gpuctl_wakeup_floor, the same
number of processes asleep on Unix sockets woken one message at a time
with no gpuctl code (the floor this kernel and these cores set); the table
gives its p50/p99 and gpuctl's latency p50 as a multiple of it.

Prints one Markdown table; figures in milliseconds.
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import Fleet, snake, summary, timestamp_ns  # noqa: E402


def manifest(fleet, trace_id):
    out = Path(tempfile.mkdtemp(dir=fleet.dir))
    result, _ = fleet.gpuctl("get", trace_id, "--file", "manifest.json", "-o", str(out),
                             "--host", fleet.address(0))
    if result.returncode != 0:
        raise SystemExit(f"gpuctl get failed: {result.stderr}")
    return snake(json.loads((out / trace_id / "manifest.json").read_text()))


def one_trace(fleet, start_delay, count):
    # A start instant already past on arrival is refused beyond the max
    # start skew: 1s keeps a slow delivery on a loaded host measured.
    result, _ = fleet.gpuctl("trace", "--job", "bench", "--duration", "20ms", "--start-delay",
                             start_delay, "--max-start-skew", "1s", "--no-download", "--json",
                             "--host", fleet.address(0))
    if result.returncode != 0:
        raise SystemExit(f"gpuctl trace failed ({result.returncode}): {result.stderr}")
    doc = manifest(fleet, snake(json.loads(result.stdout))["trace_id"])
    opens = [timestamp_ns(r["window_start"]) for r in doc["results"]]
    if len(opens) != count:
        raise SystemExit(f"expected {count} results, got {len(opens)}")
    return doc, opens


def wakeup_floor(build_dir, count, runs):
    result = subprocess.run([str(Path(build_dir) / "bin/gpuctl_wakeup_floor"), str(count),
                             str(runs)], capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise SystemExit(f"gpuctl_wakeup_floor failed: {result.stderr}")
    return [float(line) / 1e3 for line in result.stdout.split()]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build_dir")
    parser.add_argument("--processes", default="1,8,64")
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()

    rows = []
    for count in (int(c) for c in args.processes.split(",")):
        with Fleet(args.build_dir) as fleet:
            fleet.start_daemon()
            fleet.wait_ready()
            for _ in range(count):
                fleet.attach_idle(0, "bench")
            fleet.wait_attached(0, count)
            latency, spread, late = [], [], []
            at_instant = 0
            for _ in range(args.runs):
                doc, opens = one_trace(fleet, "0s", count)
                latency.append((max(opens) - timestamp_ns(doc["clock"]["received_at"])) / 1e6)
            for _ in range(args.runs):
                doc, opens = one_trace(fleet, "200ms", count)
                start = timestamp_ns(doc["start_time"])
                spread.append((max(opens) - min(opens)) / 1e6)
                late.append((max(opens) - start) / 1e6)
                at_instant += sum(1 for o in opens if o == start)
        floor = summary(wakeup_floor(args.build_dir, count, args.runs))
        rows.append((count, summary(latency), summary(spread), summary(late),
                     f"{at_instant}/{count * args.runs}", floor))
        print(f"{count} processes done", file=sys.stderr)

    print("| processes | trigger latency p50 | p99 | max | wake-up floor p50 | p99 | "
          "latency p50 / floor p50 | open spread p50 | p99 | latest open after the instant "
          "p50 | p99 | opened at the instant |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for count, lat, spr, lte, exact, floor in rows:
        print(f"| {count} | {lat['p50']:.3f} | {lat['p99']:.3f} | {lat['max']:.3f} | "
              f"{floor['p50']:.3f} | {floor['p99']:.3f} | {lat['p50'] / floor['p50']:.1f}x | "
              f"{spr['p50']:.3f} | {spr['p99']:.3f} | {lte['p50']:.3f} | {lte['p99']:.3f} | "
              f"{exact} |")
    print(f"\n{args.runs} traces per cell; milliseconds.")


if __name__ == "__main__":
    main()
