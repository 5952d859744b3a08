"""Faults around a trace: processes killed, stopped or exiting mid-window, a
full disk, connection churn and silent gRPC connections. Each time the
affected process gets a clear status and the daemon keeps serving the rest.

A daemon SIGKILLed mid-capture and restarted is covered by
test_daemon_restart.py."""

import os
import signal
import socket
import subprocess
import time

import pytest

from e2e_util import TraceDir, check_workload_trace, wait_until
from test_ipc_robustness import FakeClient


def _capturing(cli, pids):
    """True once every pid in `pids` is in a trace (its window requested)."""
    current = {p["pid"]: p for p in cli.processes()}
    return all(current.get(pid, {}).get("current_trace_id") for pid in pids)


def _run_trace_with(cli, args, during, out_name):
    """Starts `gpuctl trace`, calls `during()` once every selected process is
    in the capture, and returns (output, exit code, TraceDir)."""
    out_dir = cli.workdir / out_name
    tracer = cli.popen("trace", *args, "-o", str(out_dir))
    try:
        during()
        out, err = tracer.communicate(timeout=90)
    finally:
        if tracer.poll() is None:
            tracer.kill()
            tracer.wait()
    return out + err, tracer.returncode, TraceDir.find(out_dir)


def _two_ranks(cli, start_workload, job, **kwargs):
    ranks = [start_workload(job=job, rank=r, world_size=2, **kwargs) for r in (0, 1)]
    cli.wait_attached([w.pid for w in ranks])
    return ranks


def test_client_killed_mid_capture_is_lost_and_others_ok(cli, daemon, start_workload):
    healthy, victim = _two_ranks(cli, start_workload, "faults-kill")

    def kill_victim():
        wait_until(lambda: _capturing(cli, [healthy.pid, victim.pid]), what="the capture")
        victim.proc.kill()
        victim.proc.wait()

    output, code, trace = _run_trace_with(cli, ["--job", "faults-kill", "--duration", "2s"],
                                          kill_victim, "killed")
    assert code != 0, output
    lost = trace.result_for(victim.pid)
    assert lost["status"] == "CAPTURE_STATUS_LOST", lost
    assert "lost the connection to the process" in lost["message"], lost
    assert "lost the connection" in output, output
    ok = trace.result_for(healthy.pid)
    assert ok["status"] == "CAPTURE_STATUS_OK", ok
    check_workload_trace(trace.path / ok["file"], healthy.pid, 0)
    assert daemon.alive()


def test_rank_exiting_mid_window_is_exited(cli, daemon, start_workload):
    # Rank 1 runs about 3 s of steps and exits normally inside the 6 s window.
    healthy = start_workload(job="faults-exit", rank=0, world_size=2)
    leaving = start_workload(job="faults-exit", rank=1, world_size=2, steps=300, step_ms=10)
    cli.wait_attached([healthy.pid, leaving.pid])

    def wait_for_exit():
        wait_until(lambda: _capturing(cli, [healthy.pid, leaving.pid]), what="the capture")
        assert leaving.wait(timeout=30) == 0, leaving.lines()

    output, code, trace = _run_trace_with(cli, ["--job", "faults-exit", "--duration", "6s"],
                                          wait_for_exit, "exited")
    gone = trace.result_for(leaving.pid)
    # The library either hands over what it recorded before exiting (kept,
    # valid) or says goodbye without data (exited).
    if gone["status"] == "CAPTURE_STATUS_OK":
        check_workload_trace(trace.path / gone["file"], leaving.pid, 1)
    else:
        assert gone["status"] == "CAPTURE_STATUS_EXITED", gone
        assert "exited during the capture" in gone["message"], gone
        assert not gone.get("file"), gone
    ok = trace.result_for(healthy.pid)
    assert ok["status"] == "CAPTURE_STATUS_OK", ok
    assert daemon.alive(), output


def test_stopped_client_times_out_and_others_ok(start_daemon, cli_for, start_workload):
    daemon = start_daemon("--result-grace", "1s")
    cli = cli_for(daemon)
    healthy, stopped = _two_ranks(cli, start_workload, "faults-stop")

    def stop_victim():
        wait_until(lambda: _capturing(cli, [healthy.pid, stopped.pid]), what="the capture")
        os.kill(stopped.pid, signal.SIGSTOP)

    try:
        output, code, trace = _run_trace_with(
            cli, ["--job", "faults-stop", "--duration", "1s"], stop_victim, "stopped")
    finally:
        os.kill(stopped.pid, signal.SIGCONT)
    assert code != 0, output
    late = trace.result_for(stopped.pid)
    assert late["status"] == "CAPTURE_STATUS_TIMED_OUT", late
    assert "no result within" in late["message"], late
    ok = trace.result_for(healthy.pid)
    assert ok["status"] == "CAPTURE_STATUS_OK", ok
    check_workload_trace(trace.path / ok["file"], healthy.pid, 0)


@pytest.fixture
def small_tmpfs(workdir):
    # The store path of a daemon started with name="diskfull" (conftest).
    mount_point = workdir / "diskfull-store"
    mount_point.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount_point)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.strip()}")
    yield mount_point
    subprocess.run(["umount", "-l", str(mount_point)], check=False)


def _fill(path):
    """Writes `path` until the filesystem is full."""
    with open(path, "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass


def test_full_disk_fails_the_trace_and_daemon_keeps_serving(start_daemon, cli_for,
                                                             start_workload, small_tmpfs):
    daemon = start_daemon(name="diskfull")
    assert daemon.store == small_tmpfs
    cli = cli_for(daemon)
    workload = start_workload(job="faults-disk", rank=0, world_size=1, socket=daemon.socket)
    cli.wait_attached([workload.pid])
    filler = small_tmpfs / "filler.bin"
    _fill(filler)

    result, _ = cli.trace("--job", "faults-disk", "--duration", "500ms")
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "No space left on device" in output or "no space" in output.lower(), output
    assert daemon.alive()

    filler.unlink()
    result, trace = cli.trace("--job", "faults-disk", "--duration", "500ms")
    assert result.returncode == 0, result.stdout + result.stderr
    res = trace.result_for(workload.pid)
    assert res["status"] == "CAPTURE_STATUS_OK", res
    check_workload_trace(trace.path / res["file"], workload.pid, 0)


def _fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def _rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _churn(daemon, count):
    for i in range(count):
        client = FakeClient(daemon.socket)
        client.hello(job="churn", rank=i % 64)
        client.expect_ack()
        client.close()


def test_connection_churn_leaves_no_fds_or_memory_behind(cli, daemon):
    pid = daemon.proc.pid
    _churn(daemon, 100)  # warm-up: allocator arenas, the registry's tables
    wait_until(lambda: not cli.processes(), what="the warm-up clients to detach")
    fds_before, rss_before = _fd_count(pid), _rss_kib(pid)

    _churn(daemon, 1000)
    wait_until(lambda: not cli.processes(), what="the churned clients to detach")
    wait_until(lambda: _fd_count(pid) <= fds_before + 2, timeout=10,
               what=f"gpuctld's fd count back near {fds_before}")
    assert daemon.alive()
    if os.environ.get("GPUCTL_E2E_PRELOAD_FIRST"):
        # Under ASan freed memory sits in the quarantine (up to 256 MiB), so
        # RSS says nothing here; LeakSanitizer checks the daemon at its exit
        # instead (the fixture fails the test on any report).
        return
    rss_after = _rss_kib(pid)
    assert rss_after - rss_before < 8 * 1024, (rss_before, rss_after)


def test_silent_grpc_connections_do_not_delay_others(cli, daemon):
    host, port = daemon.address.rsplit(":", 1)
    started = time.monotonic()
    assert cli.run("ps").returncode == 0
    normal = time.monotonic() - started

    silent = [socket.create_connection((host, int(port)), timeout=5) for _ in range(16)]
    try:
        started = time.monotonic()
        result = cli.run("ps", timeout=30)
        elapsed = time.monotonic() - started
        assert result.returncode == 0, result.stderr
        assert elapsed < normal + 2.0, (normal, elapsed)
    finally:
        for s in silent:
            s.close()
    assert daemon.alive()
