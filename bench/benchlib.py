"""Shared by the trigger and fan-out benchmarks: real gpuctld processes on
loopback, idle attached processes (`sleep` with libgpuctl.so preloaded), the
gpuctl CLI, and percentiles."""

import json
import math
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path


def percentile(values, p):
    """Nearest-rank percentile of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def summary(values):
    return {"p50": percentile(values, 50), "p90": percentile(values, 90),
            "p99": percentile(values, 99), "max": max(values), "n": len(values)}


def timestamp_ns(text):
    import calendar
    m = re.fullmatch(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?Z", text)
    if not m:
        raise ValueError(f"not an RFC 3339 UTC timestamp: {text!r}")
    seconds = calendar.timegm(tuple(int(g) for g in m.groups()[:6]))
    return seconds * 1_000_000_000 + int((m.group(7) or "0").ljust(9, "0"))


def snake(node):
    if isinstance(node, list):
        return [snake(v) for v in node]
    if isinstance(node, dict):
        return {re.sub(r"(?<=[a-z0-9])([A-Z])", lambda m: "_" + m.group(1).lower(), k): snake(v)
                for k, v in node.items()}
    return node


def wait_until(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.02)


class Fleet:
    """Daemons (each with its own socket, store and port) and idle attached
    processes, all torn down on exit."""

    def __init__(self, build_dir):
        self.build = Path(build_dir).resolve()
        self.dir = Path(tempfile.mkdtemp(prefix="gpuctl-bench-"))
        self.daemons = []  # (proc, address, socket)
        self.workloads = []

    def start_daemon(self, extra=(), log_level="warning"):
        i = len(self.daemons)
        sock, ready = self.dir / f"d{i}.sock", self.dir / f"d{i}.ready"
        log = open(self.dir / f"d{i}.log", "ab")
        proc = subprocess.Popen(
            [str(self.build / "bin/gpuctld"), "--listen", "127.0.0.1:0", "--socket", str(sock),
             "--store", str(self.dir / f"d{i}-store"), "--ready-file", str(ready),
             "--log-level", log_level, *extra],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.daemons.append([proc, None, sock, ready])
        return len(self.daemons) - 1

    def wait_ready(self):
        for entry in self.daemons:
            proc, _, _, ready = entry
            entry[1] = wait_until(lambda: ready.exists() and ready.read_text().strip(), 60,
                                  f"gpuctld {proc.pid} ready")

    def address(self, i):
        return self.daemons[i][1]

    def attach_idle(self, daemon_index, job, rank=None):
        env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCTL_")}
        env.update(LD_PRELOAD=str(self.build / "lib/libgpuctl.so"),
                   GPUCTL_SOCKET=str(self.daemons[daemon_index][2]), GPUCTL_JOB_ID=job)
        if rank is not None:
            env["RANK"] = str(rank)
        proc = subprocess.Popen([shutil.which("sleep"), "100000"], env=env,
                                stdin=subprocess.DEVNULL)
        self.workloads.append(proc)
        return proc

    def gpuctl(self, *args, timeout=600):
        started = time.monotonic()
        result = subprocess.run([str(self.build / "bin/gpuctl"), *args], capture_output=True,
                                text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        return result, time.monotonic() - started

    def wait_attached(self, daemon_index, count):
        def attached():
            result, _ = self.gpuctl("ps", "--json", "--host", self.address(daemon_index))
            if result.returncode != 0:
                return False
            doc = json.loads(result.stdout)
            text = json.dumps(doc)
            return text.count('"pid"') >= count
        wait_until(attached, 120, f"{count} processes attached to daemon {daemon_index}")

    def close(self):
        for proc in self.workloads:
            proc.kill()
        for proc, *_ in self.daemons:
            proc.terminate()
        for proc in self.workloads:
            proc.wait()
        for proc, *_ in self.daemons:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
