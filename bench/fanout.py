#!/usr/bin/env python3
"""Fleet fan-out cost: one `gpuctl trace` to many daemons on loopback.

    bench/fanout.py BUILD_DIR [--daemons 1,16,128] [--runs 7] [--window 200ms]

For each fleet size: that many gpuctld processes (each on its own port and
socket) with one idle attached process each (`sleep` with libgpuctl.so
preloaded, so every trace is empty), then `runs` traces of the whole fleet
with --no-download. Reported per fleet size:

  dispatch  the latest receipt of the request by a daemon minus the CLI's
            send time (TraceStarted clock, one host, one clock).
  span      the latest receipt of the request by a daemon minus the start
            instant (--start-delay 0s: the CLI's clock before the first
            connection): what the start delay must cover, the clock probes
            before each request included.
  added     the CLI's wall time minus the window, with --start-delay 0 so
            only fan-out, collection and completion are counted, and its
            ratio to the one-daemon case of the same run.

Prints one Markdown table; figures in milliseconds.
"""

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import Fleet, snake, summary, timestamp_ns  # noqa: E402


def parse_ms(text):
    if text.endswith("ms"):
        return float(text[:-2])
    if text.endswith("s"):
        return float(text[:-1]) * 1000
    raise SystemExit(f"bad duration {text}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build_dir")
    parser.add_argument("--daemons", default="1,16,128")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--window", default="200ms")
    args = parser.parse_args()
    window_ms = parse_ms(args.window)

    rows = []
    for count in (int(c) for c in args.daemons.split(",")):
        with Fleet(args.build_dir) as fleet:
            for _ in range(count):
                fleet.start_daemon(["--max-duration", "1m"])
            fleet.wait_ready()
            for i in range(count):
                fleet.attach_idle(i, "bench", rank=i)
            for i in range(count):
                fleet.wait_attached(i, 1)
            hosts = []
            for i in range(count):
                hosts += ["--host", fleet.address(i)]
            added, dispatch, span = [], [], []
            for _ in range(args.runs):
                result, wall = fleet.gpuctl("trace", "--job", "bench", "--duration", args.window,
                                            "--start-delay", "0s", "--max-start-skew", "1s",
                                            "--no-download", "--json",
                                            "--parallel", "64", *hosts)
                if result.returncode != 0:
                    raise SystemExit(f"gpuctl trace failed ({result.returncode}):\n"
                                     f"{result.stderr[-4000:]}")
                doc = snake(json.loads(result.stdout))
                if len(doc["hosts"]) != count:
                    raise SystemExit(f"expected {count} hosts, got {len(doc['hosts'])}")
                latest = 0
                last_receipt = 0
                for host in doc["hosts"]:
                    clock = host["clock"]
                    latest = max(latest, timestamp_ns(clock["received_at"])
                                 - timestamp_ns(clock["caller_time"]))
                    last_receipt = max(last_receipt, timestamp_ns(clock["received_at"]))
                dispatch.append(latest / 1e6)
                span.append((last_receipt - timestamp_ns(doc["start_time"])) / 1e6)
                added.append(wall * 1000 - window_ms)
            rows.append((count, summary(dispatch), summary(span), summary(added)))
            print(f"{count} daemons done", file=sys.stderr)

    base = rows[0][3]["p50"]
    print("| daemons | dispatch p50 | p99 | span p50 | p99 | added beyond the window p50 | p99 "
          "| max | p50 ratio to 1 daemon |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for count, disp, spn, add in rows:
        print(f"| {count} | {disp['p50']:.1f} | {disp['p99']:.1f} | {spn['p50']:.1f} | "
              f"{spn['p99']:.1f} | {add['p50']:.1f} | {add['p99']:.1f} | {add['max']:.1f} | "
              f"{add['p50'] / base:.2f} |")
    print(f"\n{args.runs} traces per row, window {args.window}; milliseconds.")


if __name__ == "__main__":
    main()
