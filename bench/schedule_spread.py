#!/usr/bin/env python3
"""Start spread of scheduled captures: daemons on loopback with one schedule
and no link between them, one idle attached process each, every rank of one
job.

    bench/schedule_spread.py BUILD_DIR [--daemons 16] [--slots 10] [--period 3s]

Each daemon decides each slot alone and opens the window at the derived
instant; for every slot that all daemons stored, the spread is the latest
window opening (each process's window_start, in the manifests) minus the
earliest, with the count of late starts; the lead is how long before the
instant each daemon had the trace under way (manifest start_time minus
created_at: the slack of its StartCaptures, requested a second ahead).
Prints one Markdown table; figures in milliseconds.
"""

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import Fleet, snake, summary, timestamp_ns, wait_until  # noqa: E402


def config(path, period_s):
    path.write_text(
        "schedule:\n"
        "  seed: bench\n"
        "  max_duty_cycle: 0.5\n"
        "  rules:\n"
        "    - name: spread\n"
        "      selector: {job: bench}\n"
        f"      period: {period_s}s\n"
        "      window: 200ms\n"
        "      probability: 1\n")
    return path


def manifests(store):
    """{trace id: manifest} of the completed traces in one store."""
    out = {}
    if not store.exists():
        return out
    for trace in store.iterdir():
        found = sorted(trace.glob("_gpuctl/*.json")) + sorted(trace.glob("manifest.json"))
        if trace.is_dir() and found:
            out[trace.name] = snake(json.loads(found[0].read_text()))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build_dir")
    parser.add_argument("--daemons", type=int, default=16)
    parser.add_argument("--slots", type=int, default=10)
    parser.add_argument("--period", type=int, default=3, help="slot length in seconds")
    args = parser.parse_args()
    with Fleet(args.build_dir) as fleet:
        path = config(fleet.dir / "schedule.yaml", args.period)
        for i in range(args.daemons):
            fleet.start_daemon(["--config", str(path), "--host-name", f"bench-{i}"])
        fleet.wait_ready()
        for i in range(args.daemons):
            fleet.attach_idle(i, "bench", rank=i)
        for i in range(args.daemons):
            fleet.wait_attached(i, 1)
        started = time.time()
        stores = [fleet.dir / f"d{i}-store" for i in range(args.daemons)]

        def common():
            ids = None
            for store in stores:
                done = {t for t in manifests(store) if int(t.replace("-", "")[:12], 16) / 1000
                        > started + 2}
                ids = done if ids is None else ids & done
            return ids if ids is not None and len(ids) >= args.slots else None

        ids = sorted(wait_until(common, args.slots * args.period + 120, "the slots on every host"))
        spreads, leads, late = [], [], 0
        for trace_id in ids[:args.slots]:
            opened = []
            for store in stores:
                manifest = manifests(store)[trace_id]
                # How long before the instant this daemon had the trace
                # under way: the slack its StartCaptures had.
                leads.append((timestamp_ns(manifest["start_time"])
                              - timestamp_ns(manifest["created_at"])) / 1e6)
                for result in manifest["results"]:
                    opened.append(timestamp_ns(result["window_start"]))
                    late += 1 if result.get("late_start") else 0
            spreads.append((max(opened) - min(opened)) / 1e6)
    s, lead = summary(spreads), summary(leads)
    print("| daemons | slots | spread p50 ms | spread max ms | late starts | "
          "lead min ms | lead p50 ms |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| {args.daemons} | {s['n']} | {s['p50']:.3f} | {s['max']:.3f} | {late} | "
          f"{min(leads):.1f} | {lead['p50']:.1f} |")


if __name__ == "__main__":
    main()
