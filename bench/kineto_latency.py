#!/usr/bin/env python3
"""Trigger latency of PyTorch processes traced through the kineto bridge,
against their poll period.

    bench/kineto_latency.py BUILD_DIR [--polls 1,5] [--runs 6] [--ranks 1]
                            [--torch-python .venv-torch/bin/python]

For each poll period P (kineto's ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS, set
through KINETO_CONFIG): one gpuctld with the bridge on a path socket, and
`--ranks` real PyTorch training loops (test/e2e/torch/train_loop.py,
KINETO_USE_DAEMON=1). Then `runs` traces of `gpuctl trace --duration 2s`,
each after a pause of a random fraction of P, so requests land at every
phase of the processes' polls. Per trace, from the stored manifest and the
CLI's wall clock (one host, CLOCK_REALTIME):

  start     the latest window kineto recorded (its profiler span) minus the
            daemon's receipt of the request: poll wait + controller tick +
            warm-up
  after     the CLI's wall time from request to stored results, less the
            start and the 2 s window: kineto writing its file, the
            daemon finding, validating and storing it

The baseline is the poll period itself: a process hears of a request only
at its next poll, so P is the least worst case any daemon of this protocol
can offer. The table gives the start p50 and max as multiples of P.

Prints one Markdown table; figures in seconds.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import Fleet, snake, summary, timestamp_ns, wait_until  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TRAIN_LOOP = REPO / "test" / "e2e" / "torch" / "train_loop.py"
WINDOW_S = 2.0


def start_loop(fleet, python, socket_dir, poll_s, rank, ranks):
    config = fleet.dir / f"kineto-{poll_s}-{rank}.conf"
    config.write_text(f"ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS={poll_s}\n")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GPUCTL_", "KINETO_")) and k != "LD_PRELOAD"}
    env.update(KINETO_USE_DAEMON="1", KINETO_CONFIG=str(config),
               KINETO_IPC_SOCKET_DIR=str(socket_dir), GPUCTL_JOB_ID="bench",
               RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(ranks))
    proc = subprocess.Popen([str(python), str(TRAIN_LOOP), "--steps", "0", "--step-ms", "10"],
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    fleet.workloads.append(proc)
    return proc


def listed(fleet):
    """gpuctl ps's processes by pid, or None when it failed."""
    result, _ = fleet.gpuctl("ps", "--json", "--host", fleet.address(0))
    if result.returncode != 0:
        return None
    return {p["pid"]: p for h in snake(json.loads(result.stdout))["hosts"]
            for p in h.get("processes", [])}


def kineto_attached(fleet, pids):
    procs = listed(fleet)
    return procs is not None and all(
        pid in procs and "KINETO" in procs[pid].get("kind", "") for pid in pids)


def one_trace(fleet, ranks):
    result, wall = fleet.gpuctl("trace", "--job", "bench", "--duration", f"{WINDOW_S:g}s",
                                "--no-download", "--json", "--host", fleet.address(0))
    if result.returncode != 0:
        log = (fleet.dir / "d0.log").read_text(errors="replace")[-6000:]
        raise SystemExit(f"gpuctl trace failed ({result.returncode}): {result.stderr}\n"
                         f"gpuctld's log ends:\n{log}")
    trace_id = snake(json.loads(result.stdout))["trace_id"]
    out = Path(tempfile.mkdtemp(dir=fleet.dir))
    got, _ = fleet.gpuctl("get", trace_id, "--file", "manifest.json", "-o", str(out),
                          "--host", fleet.address(0))
    if got.returncode != 0:
        raise SystemExit(f"gpuctl get failed: {got.stderr}")
    doc = snake(json.loads((out / trace_id / "manifest.json").read_text()))
    results = doc["results"]
    if len(results) != ranks or any(r["status"] != "CAPTURE_STATUS_OK" for r in results):
        raise SystemExit(f"expected {ranks} ok results: {results}")
    received = timestamp_ns(doc["clock"]["received_at"])
    start = max(timestamp_ns(r["window_start"]) for r in results)
    start_s = (start - received) / 1e9
    return start_s, wall - start_s - WINDOW_S


def measure(args, poll_s):
    with Fleet(args.build_dir) as fleet:
        socket_dir = fleet.dir / "kineto"
        socket_dir.mkdir()
        os.chmod(socket_dir, 0o1777)
        config = fleet.dir / "gpuctld.yaml"
        config.write_text(f"kineto:\n  mode: auto\n  socket_dir: {socket_dir}\n")
        fleet.start_daemon(extra=("--config", str(config)), log_level="info")
        fleet.wait_ready()
        pids = [start_loop(fleet, args.torch_python, socket_dir, poll_s, r, args.ranks).pid
                for r in range(args.ranks)]
        wait_until(lambda: kineto_attached(fleet, pids), 120, f"{args.ranks} kineto processes")
        starts, afters = [], []
        rng = random.Random(poll_s)
        for _ in range(args.runs):
            # kineto's profiler is free again once its file is written.
            wait_until(lambda: kineto_idle(fleet, pids), 60, "kineto processes idle")
            start, after = one_trace(fleet, args.ranks)
            starts.append(start)
            afters.append(after)
            time.sleep(rng.uniform(0, poll_s))
        return summary(starts), summary(afters)


def kineto_idle(fleet, pids):
    procs = listed(fleet)
    return procs is not None and all(
        pid in procs and not procs[pid].get("profiler_busy") for pid in pids)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build_dir")
    parser.add_argument("--polls", default="1,5")
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--ranks", type=int, default=1)
    parser.add_argument("--torch-python", type=Path,
                        default=(REPO / ".venv-torch").resolve() / "bin" / "python")
    args = parser.parse_args()
    if not args.torch_python.exists():
        raise SystemExit(f"{args.torch_python} not found: run scripts/install_torch.sh")

    print("| poll period P | request to window start p50 | max | start p50 / P | max / P | "
          "window end to stored result p50 | max |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for poll_s in (int(p) for p in args.polls.split(",")):
        start, after = measure(args, poll_s)
        print(f"| {poll_s} s | {start['p50']:.2f} | {start['max']:.2f} | "
              f"{start['p50'] / poll_s:.2f}x | {start['max'] / poll_s:.2f}x | "
              f"{after['p50']:.2f} | {after['max']:.2f} |", flush=True)
    print(f"\n{args.runs} traces per row, {args.ranks} rank(s); seconds.")


if __name__ == "__main__":
    main()
