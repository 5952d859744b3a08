"""Fixtures for the end-to-end tests: real gpuctld, gpuctl and workloads.

Every test gets its own temporary directory (socket, store, downloads, logs)
and a daemon on 127.0.0.1 port 0, so test files run in parallel safely.
Nothing waits on a fixed delay: each wait polls a condition up to a deadline.
"""

import os
import signal
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest

from e2e_util import (DEFAULT_DEADLINE_S, TraceDir, parse_processes, preload_value,
                      sanitizer_report, wait_until)


@pytest.fixture(scope="session")
def build_dir():
    # CTest sets it; by hand, the default build dir of scripts/test.sh.
    raw = os.environ.get("GPUCTL_BUILD_DIR")
    path = Path(raw).resolve() if raw else Path(__file__).resolve().parents[2] / "build"
    if not path.is_dir():
        pytest.fail(f"build directory {path} does not exist (set GPUCTL_BUILD_DIR)")
    return path


def build_output(build_dir, relative):
    path = build_dir / relative
    if not path.exists():
        pytest.fail(f"missing build output {path}: build the project first")
    return path


@pytest.fixture
def workdir():
    # Short path under /tmp: Unix socket paths are limited to 107 bytes.
    with tempfile.TemporaryDirectory(prefix="gpuctl-e2e-") as d:
        yield Path(d)


class LineReader:
    """Drains a child's stdout on a thread and keeps every line."""

    def __init__(self, stream):
        self.lines = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, args=(stream,), daemon=True)
        self._thread.start()

    def _run(self, stream):
        for raw in iter(stream.readline, b""):
            with self._lock:
                self.lines.append(raw.decode("utf-8", "replace").rstrip("\n"))
        stream.close()

    def snapshot(self):
        with self._lock:
            return list(self.lines)

    def join(self, timeout):
        self._thread.join(timeout)


def _stop_process(proc, timeout=10.0):
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Daemon:
    def __init__(self, build_dir, workdir, name, extra_args, wrapper=(), listen="127.0.0.1:0"):
        self.build_dir = build_dir
        # A command the daemon runs under (e.g. `unshare --net --`), and its
        # gRPC address (`unix:PATH` reaches one in another network namespace).
        self.wrapper = [str(a) for a in wrapper]
        self.listen = listen
        # Daemons named gpuctld* (one after another, e.g. across a restart)
        # use the paths the workload fixture defaults to; any other name gets
        # its own socket and store.
        # Each stands for its own host too: named apart, as a fleet's daemons are.
        if name.startswith("gpuctld"):
            self.socket = workdir / "gpuctl.sock"
            self.store = workdir / "store"
            self.host_name = "e2e-gpuctld"
        else:
            self.socket = workdir / f"{name}.sock"
            self.store = workdir / f"{name}-store"
            self.host_name = f"e2e-{name}"
        self.ready_file = workdir / f"{name}.ready"
        self.log_path = workdir / f"{name}.log"
        self.extra_args = list(extra_args)
        self.proc = None
        self.address = None
        self.killed = False
        self.died_before_stop = False
        self.stopped = False

    def start(self, timeout=DEFAULT_DEADLINE_S):
        if self.ready_file.exists():
            self.ready_file.unlink()
        cmd = self.wrapper + [
            str(build_output(self.build_dir, "bin/gpuctld")),
            "--listen", self.listen,
            "--socket", str(self.socket),
            "--store", str(self.store),
            "--ready-file", str(self.ready_file),
            "--host-name", self.host_name,
        ] + self.extra_args
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)

        def ready():
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"gpuctld exited with {self.proc.returncode} before it was ready:\n"
                    + self.log())
            if not self.ready_file.exists():
                return None
            text = self.ready_file.read_text().strip()
            return text or None

        self.address = wait_until(ready, timeout, what="gpuctld ready file")
        return self

    def log(self):
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        self.killed = True
        self.proc.kill()
        self.proc.wait()

    def stop(self, timeout=10.0):
        """SIGTERM; returns the exit code (graceful exit expected)."""
        if self.proc is None:
            return None
        if self.stopped:
            return self.proc.returncode
        self.stopped = True
        self.died_before_stop = self.proc.poll() is not None
        _stop_process(self.proc, timeout)
        self._log.close()
        return self.proc.returncode


class Cli:
    def __init__(self, build_dir, daemon_address_fn, workdir):
        self.binary = str(build_output(build_dir, "bin/gpuctl"))
        self._address = daemon_address_fn
        self.workdir = workdir

    def args(self, *args, host=None):
        return [self.binary] + list(args) + ["--host", host or self._address()]

    def run(self, *args, host=None, timeout=60.0):
        return subprocess.run(self.args(*args, host=host), capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)

    def popen(self, *args, host=None):
        return subprocess.Popen(self.args(*args, host=host), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)

    def processes(self):
        """Attached processes as the daemon reports them (gpuctl ps --json)."""
        result = self.run("ps", "--json")
        assert result.returncode == 0, f"gpuctl ps failed: {result.returncode}\n{result.stderr}"
        return parse_processes(result.stdout)

    def attached_pids(self):
        return {p["pid"] for p in self.processes()}

    def wait_attached(self, pids, timeout=DEFAULT_DEADLINE_S):
        pids = set(pids)
        wait_until(lambda: pids <= self.attached_pids(), timeout,
                   what=f"pids {sorted(pids)} in gpuctl ps")

    def trace(self, *args, timeout=60.0):
        """Runs gpuctl trace into a fresh download dir; returns (result, TraceDir|None)."""
        out = Path(tempfile.mkdtemp(prefix="dl-", dir=self.workdir))
        result = self.run("trace", *args, "-o", str(out), timeout=timeout)
        return result, TraceDir.find(out)


class Workload:
    def __init__(self, proc, reader):
        self.proc = proc
        self.reader = reader
        self.pid = proc.pid

    def lines(self):
        return self.reader.snapshot()

    def wait(self, timeout=DEFAULT_DEADLINE_S):
        code = self.proc.wait(timeout)
        self.reader.join(5)
        return code


@pytest.fixture
def lib_path(build_dir):
    return build_output(build_dir, "lib/libgpuctl.so")


@pytest.fixture
def start_daemon(build_dir, workdir, request):
    """start_daemon(*extra_args, name="gpuctld", wrapper=(), listen="127.0.0.1:0") -> Daemon,
    stopped at teardown."""
    started = []

    def start(*extra_args, name="gpuctld", wrapper=(), listen="127.0.0.1:0"):
        daemon = Daemon(build_dir, workdir, name, extra_args, wrapper, listen).start()
        started.append(daemon)
        return daemon

    yield start
    codes = [daemon.stop() for daemon in started]
    call = getattr(request.node, "rep_call", None)
    if call is not None and call.failed:
        for daemon in started:
            print(f"----- {daemon.log_path.name} -----\n{daemon.log()}")
    for daemon, code in zip(started, codes):
        log = daemon.log()
        assert not sanitizer_report(log), f"{daemon.log_path.name}:\n{log}"
        if daemon.killed:
            continue
        assert not daemon.died_before_stop, f"gpuctld died during the test ({code}):\n{log}"
        # One still running at teardown must handle SIGTERM gracefully.
        assert code == 0, f"gpuctld exited {code} on SIGTERM:\n{log}"


@pytest.fixture
def daemon(start_daemon):
    return start_daemon()


@pytest.fixture
def cli(build_dir, workdir, daemon):
    return Cli(build_dir, lambda: daemon.address, workdir)


@pytest.fixture
def cli_for(build_dir, workdir):
    """cli_for(daemon or "host:port") -> Cli; a Daemon is followed across restarts."""
    def make(target):
        if isinstance(target, Daemon):
            return Cli(build_dir, lambda: target.address, workdir)
        return Cli(build_dir, lambda: target, workdir)
    return make


@pytest.fixture
def start_workload(build_dir, lib_path, workdir):
    """start_workload(job=, rank=, world_size=, steps=, step_ms=, fork=, preload=,
    env=, args=, wrapper=) -> Workload running the sample workload (args: more
    of its options, e.g. ["--start-step", "500"]; wrapper: a command that
    execs it, e.g. ["setpriv", "--reuid=65534"]); killed at teardown."""
    procs = []
    workloads = []

    def start(job=None, rank=None, world_size=None, steps=100000, step_ms=5,
              fork=False, preload=True, socket=None, env=None, args=(), wrapper=()):
        child_env = {k: v for k, v in os.environ.items()
                     if not k.startswith("GPUCTL_") and k not in
                     ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LD_PRELOAD")}
        child_env["GPUCTL_SOCKET"] = str(socket or workdir / "gpuctl.sock")
        if preload:
            child_env["LD_PRELOAD"] = preload_value(lib_path)
        if job is not None:
            child_env["GPUCTL_JOB_ID"] = str(job)
        if rank is not None:
            child_env["RANK"] = str(rank)
            child_env["LOCAL_RANK"] = str(rank)
        if world_size is not None:
            child_env["WORLD_SIZE"] = str(world_size)
        child_env.update(env or {})
        cmd = [str(a) for a in wrapper] + [
            str(build_output(build_dir, "bin/gpuctl_sample_workload")),
            "--steps", str(steps), "--step-ms", str(step_ms)]
        if fork:
            cmd.append("--fork")
        cmd += [str(a) for a in args]
        proc = subprocess.Popen(cmd, env=child_env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        # The sample workload spins through its steps; niced (its spinning
        # main thread, and a forked child), it leaves the daemon and the CLI
        # their share of a small machine.
        try:
            os.setpriority(os.PRIO_PROCESS, proc.pid, 10)
        except OSError:
            pass
        procs.append(proc)
        workloads.append(Workload(proc, LineReader(proc.stdout)))
        return workloads[-1]

    yield start
    for proc in procs:
        # The whole session (each workload leads its own), so a forked child
        # that outlived its parent goes too.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    for workload in workloads:
        workload.reader.join(5)
        output = "\n".join(workload.lines())
        assert not sanitizer_report(output), f"workload {workload.pid}:\n{output}"


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, "rep_" + report.when, report)
