"""A daemon that dies mid-capture must not hurt the workload, which comes back
to the next daemon on its own."""

import os
import time

from e2e_util import check_workload_trace, wait_until


def _cpu_ticks(pid):
    """utime + stime of a process, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def _state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def test_daemon_killed_during_capture_workload_survives_and_reattaches(
        start_daemon, cli_for, start_workload):
    daemon = start_daemon(name="gpuctld-1")
    cli = cli_for(daemon)
    workload = start_workload(job=42, rank=0, world_size=1, step_ms=1)
    cli.wait_attached([workload.pid])

    trace = cli.popen("trace", "--job", "42", "--duration", "5s", "-o", str(cli.workdir / "lost"))
    try:
        wait_until(lambda: any(p["pid"] == workload.pid and
                               p.get("current_trace_id")
                               for p in cli.processes()),
                   what="the capture to start")
        daemon.kill()
        _, err = trace.communicate(timeout=60)
    finally:
        if trace.poll() is None:
            trace.kill()
            trace.wait()
    assert trace.returncode != 0, err

    # The workload goes on: alive, not stopped, still burning its own CPU.
    before = _cpu_ticks(workload.pid)
    wait_until(lambda: _cpu_ticks(workload.pid) > before, what="the workload to keep running")
    assert workload.proc.poll() is None, workload.lines()
    assert _state(workload.pid) not in ("T", "t", "Z")

    # A new daemon on the same socket path; the library finds it by itself.
    restarted = start_daemon(name="gpuctld-2")
    assert restarted.socket == daemon.socket
    cli = cli_for(restarted)
    cli.wait_attached([workload.pid], timeout=60)

    result, downloaded = cli.trace("--job", "42", "--duration", "1s")
    assert result.returncode == 0, result.stdout + result.stderr
    res = downloaded.result_for(workload.pid)
    assert res["status"] == "CAPTURE_STATUS_OK", res
    check_workload_trace(downloaded.path / res["file"], workload.pid, 0)
    assert workload.proc.poll() is None
    assert os.path.exists(f"/proc/{workload.pid}")


def test_daemon_sigterm_exits_cleanly(start_daemon, cli_for, start_workload):
    daemon = start_daemon()
    cli = cli_for(daemon)
    workload = start_workload(job=42)
    cli.wait_attached([workload.pid])
    assert daemon.stop() == 0, daemon.log()
    assert workload.proc.poll() is None


def test_a_daemon_back_after_an_outage_is_reached_at_once(
        start_daemon, cli_for, start_workload):
    """After a few seconds without a daemon the library's backoff has grown
    to seconds; the watch on the socket's directory brings it back within
    moments of the daemon's return, not when the backoff runs out."""
    daemon = start_daemon(name="gpuctld-1")
    cli = cli_for(daemon)
    workload = start_workload(job=42, rank=0, world_size=1, env={"GPUCTL_DEBUG": "1"})
    cli.wait_attached([workload.pid])
    assert daemon.stop() == 0, daemon.log()
    time.sleep(5)  # the outage: what the backoff grows over
    restarted = start_daemon(name="gpuctld-2")
    cli = cli_for(restarted)
    back = time.monotonic()
    cli.wait_attached([workload.pid], timeout=60)
    took = time.monotonic() - back
    assert took < 3.0, f"re-attached {took:.1f}s after the daemon came back"
    # Reached because the socket appeared, not because a retry was due.
    assert any("the socket's path changed; attaching now" in line
               for line in workload.lines()), workload.lines()
    assert workload.proc.poll() is None
