#!/usr/bin/env python3
"""What serving Prometheus metrics costs gpuctld.

    bench/metrics_cost.py BUILD_DIR [--processes 1000] [--seconds 600] [--interval 15]

One gpuctld with `--metrics-listen 127.0.0.1:0` and N idle processes
attached (`sleep` with libgpuctl.so preloaded), run twice for the same
length: once scraped every `interval` seconds (GET /metrics, as Prometheus
does), once not scraped at all. A third run, with metrics off, is the
floor. The daemon's CPU time over each run comes from /proc/PID/stat
(utime + stime, read at the start and end of the window, after every
process has attached); its resident memory at the end from
/proc/PID/status.

After the scraped run's window, BURST scrapes back to back give one
scrape's CPU time (a single one is below the clock tick).

Prints one Markdown table: CPU seconds per run, the scraped run against the
unscraped one, the size and CPU time of one scrape.
"""

import argparse
import os
import re
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import Fleet  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")
BURST = 200


def cpu_seconds(pid):
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_mib(pid):
    found = re.search(r"VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    return int(found.group(1)) / 1024


def metrics_address(fleet):
    log = (fleet.dir / "d0.log").read_text()
    found = re.search(r'msg="gpuctld ready".* metrics=(\S+)', log)
    if not found:
        raise SystemExit("gpuctld did not log its metrics address:\n" + log)
    return found.group(1)


def scrape(address):
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=30) as response:
        return len(response.read())


def one_run(build_dir, processes, seconds, interval, metrics, scraped):
    with Fleet(build_dir) as fleet:
        # log_level=info: the ready line carries the metrics address.
        fleet.start_daemon(["--hello-rate", "0"] +
                           (["--metrics-listen", "127.0.0.1:0"] if metrics else []),
                           log_level="info")
        fleet.wait_ready()
        for i in range(processes):
            fleet.attach_idle(0, "bench", rank=i)
        fleet.wait_attached(0, processes)
        pid = fleet.daemons[0][0].pid
        address = metrics_address(fleet) if metrics else None
        scrapes, size = 0, 0
        began_cpu, began = cpu_seconds(pid), time.monotonic()
        end = began + seconds
        while True:
            now = time.monotonic()
            if now >= end:
                break
            if scraped:
                size = scrape(address)
                scrapes += 1
            # Pacing a load generator, not waiting for a condition.
            time.sleep(min(interval, max(0.0, end - time.monotonic())))
        cpu = cpu_seconds(pid) - began_cpu
        result = {"cpu": cpu, "wall": time.monotonic() - began, "rss": rss_mib(pid),
                  "scrapes": scrapes, "bytes": size, "per_scrape_ms": None}
        if scraped:
            # One scrape is below the clock tick: many back to back give
            # its CPU time.
            burst_cpu = cpu_seconds(pid)
            for _ in range(BURST):
                scrape(address)
            result["per_scrape_ms"] = 1000 * (cpu_seconds(pid) - burst_cpu) / BURST
        return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build_dir")
    parser.add_argument("--processes", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--interval", type=float, default=15)
    args = parser.parse_args()

    runs = [("metrics on, scraped every %gs" % args.interval, True, True),
            ("metrics on, not scraped", True, False),
            ("metrics off", False, False)]
    results = []
    for name, metrics, scraped in runs:
        r = one_run(args.build_dir, args.processes, args.seconds, args.interval, metrics,
                    scraped)
        results.append((name, r))
        print(f"{name}: {r}", file=sys.stderr)
    base = results[1][1]["cpu"]
    print(f"{args.processes} attached processes, {args.seconds:g} s per run\n")
    print("| run | daemon CPU s | CPU % of one core | vs not scraped | scrapes | "
          "bytes per scrape | CPU ms per scrape | RSS MiB |")
    print("|---|---|---|---|---|---|---|---|")
    for name, r in results:
        ratio = f"{r['cpu'] / base:.2f}x" if base > 0 else "n/a"
        per = f"{r['per_scrape_ms']:.2f}" if r["per_scrape_ms"] is not None else ""
        print(f"| {name} | {r['cpu']:.2f} | {100 * r['cpu'] / r['wall']:.3f} | {ratio} | "
              f"{r['scrapes']} | {r['bytes'] or ''} | {per} | {r['rss']:.0f} |")


if __name__ == "__main__":
    main()
