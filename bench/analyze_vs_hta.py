#!/usr/bin/env python3
"""gpuctl analyze against the floor of reading its input and against Holistic
Trace Analysis (HTA), in one run on the same files.

bin/gpuctl_make_traces (bench/make_traces.cc) writes a synthetic trace
directory of --ranks ranks with --events trace events each, exactly as
gpuctld stores it (its own converter and gzip, one member per file, the
manifest). Then, on rank 0's file, each pinned to one CPU (--cpu):

  floor   zlib's inflate of the file alone (gpuctl_make_traces --inflate: C
          zlib, 1 MiB of output at a time, the file already in memory; CPU
          time of the inflating thread); beside it, for reference, ISA-L's
          inflate of the same bytes, which gpuctl's reader uses
  gpuctl  gpuctl analyze FILE --json --html OUT: parse, every diagnosis, both
          reports (wall and CPU seconds and peak RSS of the process)
  HTA     TraceAnalysis(trace_dir=D) of a directory holding only that file,
          in the project's .venv (--python): its CPU seconds, its worker
          processes' included, measured around the constructor only; peak
          RSS of the largest of its processes, the interpreter included

and gpuctl analyze of the whole directory with each of --jobs (files read at
once; every CPU this process may use), to show that memory follows the
jobs, not the events in all files: its "x floor" is against the floor of
all its files. Percentiles are nearest-rank over --runs runs (--hta-runs for
HTA). The defaults take about four minutes on a 2-CPU machine, HTA most of
it. Prints a
markdown table and the issue's goals against it.

Usage: bench/analyze_vs_hta.py [--build build] [--events 1000000] [--ranks 4]
       [--runs 5] [--hta-runs 3] [--jobs 1,2] [--cpu N] [--python .venv/bin/python]
       [--skip-hta] [--keep DIR] [--quick]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import percentile  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TABLE_HEADER = ("| measure | runs | wall p50 s | wall p90 s | CPU p50 s | CPU p90 s | "
                "peak RSS MB | RSS B/event | x floor (CPU p50) |")

# Run by the venv's interpreter: HTA's load alone, CPU of the process and of
# the parsing workers it has waited for.
HTA_LOAD = r"""
import json, resource, sys, time
import pandas
from importlib.metadata import version
from hta.trace_analysis import TraceAnalysis


def cpu():
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


cpu0, wall0 = cpu(), time.monotonic()
analysis = TraceAnalysis(trace_dir=sys.argv[1])
cpu1, wall1 = cpu(), time.monotonic()
rows = sum(len(df) for df in analysis.t.traces.values())
print("HTA_RESULT " + json.dumps({
    "cpu": cpu1 - cpu0, "wall": wall1 - wall0, "rows": rows,
    "hta": version("holistictraceanalysis"), "pandas": pandas.__version__}))
"""


def measured(cmd, cpu_set, stdout=subprocess.DEVNULL):
    """Runs `cmd` pinned to `cpu_set`; returns its wall and CPU seconds
    (waited-for descendants included), peak RSS in bytes (its largest
    process) and its output."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                stdout=out if stdout is None else stdout, stderr=err,
                                preexec_fn=lambda: os.sched_setaffinity(0, cpu_set))
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - started
        out.seek(0)
        err.seek(0)
        text, errors = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, cmd))} exited {proc.returncode}:\n{errors[-4000:]}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
            "rss": usage.ru_maxrss * 1024, "out": text}


def make_traces(build, out_dir, ranks, events):
    result = subprocess.run([str(build / "bin/gpuctl_make_traces"), "--out", str(out_dir),
                             "--ranks", str(ranks), "--events", str(events)],
                            capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"gpuctl_make_traces failed:\n{result.stderr[-4000:]}")
    lines = result.stdout.strip().splitlines()
    files = [json.loads(line) for line in lines[:-1]]
    return Path(lines[-1]), files


def floor(build, path, runs, cpu):
    run = measured([str(build / "bin/gpuctl_make_traces"), "--inflate", str(path),
                    "--runs", str(runs)], {cpu}, stdout=None)
    doc = json.loads(run["out"])
    return ({"wall": doc["wall_seconds"], "cpu": doc["seconds"], "rss": None},
            {"wall": doc["isal_seconds"], "cpu": doc["isal_seconds"], "rss": None})


def gpuctl_analyze(build, target, runs, cpu_set, work, extra=()):
    samples = {"wall": [], "cpu": [], "rss": []}
    for _ in range(runs):
        run = measured([str(build / "bin/gpuctl"), "analyze", str(target), "--json",
                        "--html", str(work / "report.html"), *extra], cpu_set)
        for key in samples:
            samples[key].append(run[key])
    return samples


def hta_available(python):
    if not Path(python).exists():
        return f"{python} not found (scripts/install_deps.sh makes it)"
    probe = subprocess.run([str(python), "-c", "import hta.trace_analysis"],
                           capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        raise SystemExit(f"{python} cannot import HTA:\n{probe.stderr[-2000:]}")
    return None


def hta_load(python, trace_file, runs, cpu, work):
    single = work / "hta-one-rank"
    single.mkdir(exist_ok=True)
    linked = single / trace_file.name
    if not linked.exists():
        try:
            os.link(trace_file, linked)
        except OSError:
            shutil.copyfile(trace_file, linked)
    samples = {"wall": [], "cpu": [], "rss": []}
    info = {}
    for _ in range(runs):
        run = measured([str(python), "-c", HTA_LOAD, str(single)], {cpu}, stdout=None)
        line = next(x for x in run["out"].splitlines() if x.startswith("HTA_RESULT "))
        info = json.loads(line[len("HTA_RESULT "):])
        samples["wall"].append(info["wall"])
        samples["cpu"].append(info["cpu"])
        samples["rss"].append(run["rss"])
    return samples, info


def row(name, samples, events, floor_cpu):
    runs = len(samples["cpu"])
    cells = [name, str(runs)]
    for key in ("wall", "cpu"):
        cells += [f"{percentile(samples[key], 50):.4f}", f"{percentile(samples[key], 90):.4f}"]
    if samples["rss"]:
        rss = max(samples["rss"])
        cells += [f"{rss / 1e6:.1f}", f"{rss / events:.0f}"]
    else:
        cells += ["-", "-"]
    ratio = percentile(samples["cpu"], 50) / floor_cpu
    cells.append(f"{ratio:.2f}")
    return "| " + " | ".join(cells) + " |"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default=str(ROOT / "build"),
                        help="build directory with bin/gpuctl and bin/gpuctl_make_traces")
    parser.add_argument("--events", type=int, default=1_000_000, help="trace events per rank")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--hta-runs", type=int, default=3)
    parser.add_argument("--jobs", default="1,2",
                        help="gpuctl analyze --jobs values for the directory")
    parser.add_argument("--cpu", type=int,
                        help="the CPU one-core runs are pinned to (default: the first allowed)")
    parser.add_argument("--python", default=str(ROOT / ".venv/bin/python"),
                        help="interpreter with holistictraceanalysis (and pandas < 3)")
    parser.add_argument("--skip-hta", action="store_true")
    parser.add_argument("--keep", help="write the traces and reports here and keep them")
    parser.add_argument("--quick", action="store_true",
                        help="smoke check: 5000 events, 3 ranks, one run each")
    args = parser.parse_args()
    if args.quick:
        args.events, args.ranks, args.runs, args.hta_runs = 5000, 3, 1, 1
    try:
        args.jobs = [int(j) for j in args.jobs.split(",")]
    except ValueError:
        parser.error(f"--jobs: not a comma-separated list of numbers: {args.jobs!r}")
    allowed = os.sched_getaffinity(0)
    if args.cpu is None:
        args.cpu = min(allowed)
    if args.events < 1 or args.events > 1 << 32:
        parser.error("--events must be 1 to 2^32")
    if args.runs < 1 or args.hta_runs < 1:
        parser.error("--runs and --hta-runs must be at least 1")
    if not args.jobs or min(args.jobs) < 1:
        parser.error("--jobs values must be at least 1")
    if args.ranks < 1 or args.ranks > 1024 or args.ranks <= max(args.jobs):
        parser.error("--ranks must be 1 to 1024 and more than every --jobs value")
    if args.cpu not in allowed:
        parser.error(f"--cpu {args.cpu} is not one this process may run on: {sorted(allowed)}")
    args.build = Path(args.build).resolve()
    for binary in ("gpuctl", "gpuctl_make_traces"):
        if not (args.build / "bin" / binary).exists():
            parser.error(f"{args.build}/bin/{binary} not found (build the target {binary})")
    return args


def main():
    args = parse_args()
    hta_skipped = "--skip-hta" if args.skip_hta else hta_available(args.python)
    work = Path(args.keep or tempfile.mkdtemp(prefix="gpuctl-analyze-bench-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    try:
        trace_dir, files = make_traces(args.build, work / "store", args.ranks, args.events)
        first = files[0]
        events, json_bytes = first["events"], first["json_bytes"]
        all_events = sum(f["events"] for f in files)
        cpu = args.cpu
        base, isal = floor(args.build, first["file"], args.runs, cpu)
        floor_cpu = percentile(base["cpu"], 50)
        one = gpuctl_analyze(args.build, first["file"], args.runs, {cpu}, work)
        hta, info = (None, {}) if hta_skipped else hta_load(
            Path(args.python), Path(first["file"]), args.hta_runs, cpu, work)
        directory = {j: gpuctl_analyze(args.build, trace_dir, args.runs, os.sched_getaffinity(0),
                                       work, ("--jobs", str(j))) for j in args.jobs}
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    print(f"{len(files)} ranks of {events} trace events: {json_bytes / 1e6:.1f} MB of JSON per "
          f"rank ({json_bytes / events:.0f} B/event), {first['gzip_bytes'] / 1e6:.1f} MB gzip "
          f"(one member, {json_bytes / first['gzip_bytes']:.1f}x); one-core rows on CPU {cpu}, "
          f"the directory on CPUs {sorted(os.sched_getaffinity(0))}")
    if hta:
        print(f"HTA {info['hta']} (pandas {info['pandas']}) keeps {info['rows']} rows of the "
              f"file's {events} events")
    print()
    print(TABLE_HEADER)
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(row("floor: zlib inflate of the file alone", base, events, floor_cpu))
    print(row("ISA-L inflate of the file alone (gpuctl's inflater; CPU only)", isal, events,
              floor_cpu))
    print(row("gpuctl analyze FILE --json --html", one, events, floor_cpu))
    if hta:
        print(row("HTA: TraceAnalysis(trace_dir) load alone", hta, events, floor_cpu))
    else:
        print(f"| HTA: skipped ({hta_skipped}) | 0 | - | - | - | - | - | - | - |")
    for j, samples in directory.items():
        print(row(f"gpuctl analyze DIR ({len(files)} files) --jobs {j}", samples, all_events,
                  floor_cpu * len(files)))
    print()
    gpuctl_cpu = percentile(one["cpu"], 50)
    rss_per_event = max(one["rss"]) / events
    print(f"gpuctl analyze FILE: {gpuctl_cpu / floor_cpu:.2f}x the inflate floor (goal <= 3), "
          f"{rss_per_event:.0f} B of peak RSS per event (goal <= 250)")
    if hta:
        print(f"HTA load / gpuctl analyze, CPU p50: {percentile(hta['cpu'], 50) / gpuctl_cpu:.1f}x "
              f"(goal >= 25)")
    peaks = ", ".join(f"--jobs {j}: {max(s['rss']) / 1e6:.1f} MB" for j, s in directory.items())
    print(f"directory of {all_events} events, peak RSS {peaks}; one file alone "
          f"{max(one['rss']) / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
