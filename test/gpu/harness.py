"""The pieces of the GPU validation (validate.py) that run things: the
run's deadline, log and results; a private gpuctld; workload processes; the
gpuctl CLI; and the trigger-latency measurement the parts share.

Every wait has a deadline taken from the run's (Run.budget).
"""

import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_trace  # noqa: E402

class Failed(Exception):
    """A step of a part failed; the part records why and the run goes on."""


def snake(node):
    if isinstance(node, list):
        return [snake(item) for item in node]
    if isinstance(node, dict):
        return {re.sub(r"(?<=[a-z0-9])([A-Z])", lambda m: "_" + m.group(1).lower(), k):
                snake(v) for k, v in node.items()}
    return node


def timestamp_ns(text):
    import calendar
    m = re.fullmatch(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?Z", text or "")
    if not m:
        raise Failed(f"not an RFC 3339 UTC timestamp: {text!r}")
    seconds = calendar.timegm(tuple(int(g) for g in m.groups()[:6]))
    return seconds * 1_000_000_000 + int((m.group(7) or "0").ljust(9, "0"))


def percentile(values, q):
    ordered = sorted(values)
    if not ordered:
        return None
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


class Run:
    """Paths, the clock against the deadline, the log and the results."""

    def __init__(self, args):
        self.args = args
        self.out = Path(args.out)
        self.work = Path(args.work)
        self.deadline = time.monotonic() + args.deadline_s
        self.log_file = open(self.out / "run.log", "a", buffering=1)
        self.results = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                        "dry_run": args.dry_run, "environment": {}, "parts": {}}
        self.cli_env = dict(os.environ)
        if args.deps_dir:
            self.cli_env["LD_LIBRARY_PATH"] = ":".join(
                p for p in (args.deps_dir, os.environ.get("LD_LIBRARY_PATH")) if p)
        self.children = []

    def log(self, text, show=False):
        """A line in run.log; with show, on stderr too."""
        line = f"[{time.strftime('%H:%M:%S')}] {text}"
        self.log_file.write(line + "\n")
        if show:
            print(line, file=sys.stderr, flush=True)

    def left(self):
        return self.deadline - time.monotonic()

    def budget(self, wanted):
        """A step's timeout: wanted, cut to the time left."""
        left = self.left() - 5
        if left < 1:
            raise Failed("the run's deadline has passed")
        return min(wanted, left)

    def save(self):
        tmp = self.out / ".results.json.tmp"
        tmp.write_text(json.dumps(self.results, indent=1, default=str))
        tmp.replace(self.out / "results.json")

    def run(self, cmd, timeout, env=None, check=False):
        self.log("$ " + " ".join(str(c) for c in cmd))
        try:
            res = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                                 timeout=self.budget(timeout), env=env or self.cli_env,
                                 stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            raise Failed(f"{Path(str(cmd[0])).name} timed out after {e.timeout:.0f}s") from None
        if res.returncode != 0:
            self.log(f"  exit {res.returncode}: {res.stderr.strip()[-2000:]}")
            if check:
                raise Failed(f"{Path(str(cmd[0])).name} {cmd[1] if len(cmd) > 1 else ''} "
                             f"exited {res.returncode}: {res.stderr.strip()[-500:]}")
        return res


class Daemon:
    def __init__(self, run):
        self.run = run
        self.dir = run.work / "daemon"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.socket = self.dir / "gpuctl.sock"
        self.log_path = self.dir / "gpuctld.log"
        self.proc = None
        self.address = None

    def start(self):
        ready = self.dir / "ready"
        cmd = [self.run.args.gpuctld, "--listen", "127.0.0.1:0", "--socket", self.socket,
               "--store", self.dir / "store", "--ready-file", ready,
               "--store-max-count", "0", "--store-max-age", "0"]
        self.run.log("$ " + " ".join(map(str, cmd)))
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([str(c) for c in cmd], stdout=self._log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env=self.run.cli_env, start_new_session=True)
        end = time.monotonic() + self.run.budget(30)
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise Failed(f"gpuctld exited {self.proc.returncode}: {self.tail()}")
            if ready.exists() and ready.read_text().strip():
                self.address = ready.read_text().strip()
                return
            time.sleep(0.05)
        raise Failed("gpuctld was not ready within 30s: " + self.tail())

    def tail(self, chars=3000):
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return ""

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Child:
    """A workload process: stdout lines through a queue, stdin for commands."""

    def __init__(self, run, name, cmd, env, stdin=False):
        self.run, self.name = run, name
        self.lines = queue.Queue()
        self.stderr_path = run.work / f"{name}.stderr"
        self._err = open(self.stderr_path, "wb")
        run.log(f"$ [{name}] " + " ".join(map(str, cmd)))
        self.proc = subprocess.Popen([str(c) for c in cmd], env=env, stdout=subprocess.PIPE,
                                     stderr=self._err,
                                     stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                     text=True, start_new_session=True)
        self.pid = self.proc.pid
        self.broken = False
        run.children.append(self)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def stderr_tail(self, chars=2000):
        try:
            return self.stderr_path.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return ""

    def expect(self, prefix, timeout):
        """The first stdout line starting with prefix (the rest of it)."""
        timeout = self.run.budget(timeout)
        end = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.05, end - time.monotonic()))
            except queue.Empty:
                raise Failed(f"{self.name}: no {prefix!r} line within {timeout:.0f}s; "
                             f"stderr: {self.stderr_tail()}") from None
            if line is None:
                raise Failed(f"{self.name} exited ({self.proc.wait()}) before {prefix!r}; "
                             f"stderr: {self.stderr_tail()}")
            if line.startswith(prefix):
                return line[len(prefix):]
            if time.monotonic() > end:
                raise Failed(f"{self.name}: no {prefix!r} line within {timeout:.0f}s")

    def send(self, request):
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()

    def answer(self, timeout, retry=False):
        """The answer to the last command. A command left unanswered makes
        the process unusable (a late answer would be taken for the next
        one), unless retry: the caller asks again."""
        if self.broken:
            raise Failed(f"{self.name} left an earlier command unanswered")
        try:
            doc = json.loads("{" + self.expect("{", timeout))
        except Failed:
            self.broken = not retry
            raise
        if "error" in doc:
            raise Failed(f"{self.name}: {doc['error']}")
        return doc

    def request(self, req, timeout):
        if self.broken:
            raise Failed(f"{self.name} left an earlier command unanswered")
        self.send(req)
        return self.answer(timeout)

    def stop(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGTERM)
                self.proc.wait(5)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait()
        self._err.close()


class Gpuctl:
    def __init__(self, run, daemon):
        self.run, self.daemon = run, daemon

    def cmd(self, *args):
        return [self.run.args.gpuctl, *args, "--host", self.daemon.address]

    def wait_attached(self, pid, timeout=30):
        end = time.monotonic() + self.run.budget(timeout)
        while time.monotonic() < end:
            res = self.run.run(self.cmd("ps", "--json"), 10)
            if res.returncode == 0:
                for host in json.loads(res.stdout).get("hosts", []):
                    if any(int(p["pid"]) == pid for p in host.get("processes", [])):
                        return
            time.sleep(0.2)
        raise Failed(f"pid {pid} did not attach to gpuctld within {timeout}s")

    def trace(self, pid, *extra, timeout=60, download=True):
        """gpuctl trace --json; returns (exit code, document, this pid's result, file)."""
        out = Path(tempfile.mkdtemp(prefix="dl-", dir=self.run.work))
        args = ["trace", "--pid", str(pid), "--json", *extra]
        args += ["-o", str(out)] if download else ["--no-download"]
        res = self.run.run(self.cmd(*args), timeout)
        try:
            doc = snake(json.loads(res.stdout))
        except json.JSONDecodeError:
            raise Failed(f"gpuctl trace exited {res.returncode} without a JSON document: "
                         f"{res.stderr.strip()[-500:]}") from None
        host = doc["hosts"][0]
        result = next((r for r in host.get("results", []) if int(r["pid"]) == pid), None)
        path = None
        if result and result.get("file") and host.get("saved_to"):
            path = Path(host["saved_to"]) / result["file"]
        return res.returncode, doc, result, path

    def manifest(self, trace_id):
        out = Path(tempfile.mkdtemp(prefix="get-", dir=self.run.work))
        self.run.run(self.cmd("get", trace_id, "--file", "manifest.json", "-o", str(out)), 30,
                     check=True)
        return snake(json.loads((out / trace_id / "manifest.json").read_text()))


def require_ok(code, result, what):
    if result is None:
        raise Failed(f"{what}: no result for the process (gpuctl exit {code})")
    if code != 0 or result.get("status") != "CAPTURE_STATUS_OK":
        raise Failed(f"{what}: gpuctl exit {code}, {result.get('status')}: "
                     f"{result.get('message', '')}")


def record(run, part, report=None, detail=None, error=None, skipped=None):
    if error:
        run.log(f"{part}: {error}", show=True)
    entry = run.results["parts"].setdefault(part, {"checks": [], "detail": {}})
    if report is not None:
        entry["checks"] += report.checks
    if detail:
        entry["detail"].update(detail)
    if error:
        entry["error"] = f"{entry['error']}; {error}" if entry.get("error") else error
    if skipped:
        entry["skipped"] = skipped
    checks_ok = all(c["ok"] for c in entry["checks"])
    entry["ok"] = None if skipped and not entry["checks"] else checks_ok and "error" not in entry
    run.save()


def one_check(name, ok, detail=None):
    report = check_trace.Report()
    report.check(name, ok, detail)
    return report


def keep_sample(run, path, name):
    if path and Path(path).exists():
        shutil.copyfile(path, run.out / name)
        run.results.setdefault("samples", []).append(name)


class Background:
    """A request to the training process that runs while gpuctl traces."""

    def __init__(self, child, seconds):
        self.child = child
        child.send({"cmd": "run_for", "seconds": seconds})
        self.seconds = seconds

    def finish(self):
        """Ends the steps (SIGUSR1, repeated until answered: the first may
        come before the loop began) and returns them."""
        end = time.monotonic() + self.seconds + 30
        while True:
            if self.child.proc.poll() is None:
                os.kill(self.child.pid, signal.SIGUSR1)
            last = self.child.proc.poll() is not None or time.monotonic() > end
            try:
                return self.child.answer(1, retry=not last)["steps"]
            except Failed:
                if last:
                    raise


# ---- trigger latency ----------------------------------------------------------

def part_latency(run, gpuctl, pid, keep_busy):
    part = "trigger_latency"
    latencies, failures = [], []
    bg = Background(keep_busy, 120) if keep_busy else None
    try:
        for _ in range(run.args.triggers):
            if run.left() < 60:
                failures.append("stopped early: the run's deadline is near")
                break
            try:
                # --max-start-skew: an instant already past on arrival is
                # refused beyond it.
                code, doc, result, _ = gpuctl.trace(pid, "--duration", "20ms", "--start-delay",
                                                    "0s", "--max-start-skew", "1s",
                                                    download=False, timeout=30)
                if code != 0 or not result:
                    failures.append(f"exit {code}: {(result or {}).get('message', '')}")
                    continue
                manifest = gpuctl.manifest(doc["trace_id"])
                opens = [timestamp_ns(r["window_start"]) for r in manifest["results"]]
                received = timestamp_ns(manifest["clock"]["received_at"])
                latencies.append((max(opens) - received) / 1e6)
            except (Failed, KeyError, ValueError) as e:
                failures.append(str(e))
    finally:
        if bg:
            bg.finish()
    detail = {"triggers": len(latencies), "failures": failures[:5],
              "p50_ms": round(percentile(latencies, 0.5), 3) if latencies else None,
              "p99_ms": round(percentile(latencies, 0.99), 3) if latencies else None,
              "max_ms": round(max(latencies), 3) if latencies else None,
              "while": "PyTorch training steps" if keep_busy else
              ("the sample workload (fake CUPTI)" if run.args.dry_run else "the CUDA workload")}
    record(run, part, one_check("every trigger traced", latencies and not failures,
                                failures[:5] or None), detail)
