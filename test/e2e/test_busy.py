"""Concurrent traces: a process already capturing answers busy, others go on."""

from e2e_util import wait_until


def _capturing(process):
    state = str(process.get("capture_state", ""))
    trace = process.get("current_trace_id", "")
    return bool(trace) or state.endswith(("ARMED", "CAPTURING"))


def test_second_trace_reports_busy_process_and_traces_the_rest(cli, start_workload):
    a = start_workload(job=42, rank=0, world_size=2)
    b = start_workload(job=42, rank=1, world_size=2)
    cli.wait_attached([a.pid, b.pid])

    long_out = cli.workdir / "long"
    long_trace = cli.popen("trace", "--job", "42", "--pid", str(a.pid), "--duration", "4s",
                           "-o", str(long_out))
    try:
        wait_until(lambda: any(p["pid"] == a.pid and _capturing(p) for p in cli.processes()),
                   what=f"pid {a.pid} capturing")

        result, trace = cli.trace("--job", "42", "--duration", "1s")
        assert result.returncode == 1, result.stdout + result.stderr
        busy = trace.result_for(a.pid)
        assert busy["status"] == "CAPTURE_STATUS_BUSY", busy
        assert busy.get("message"), busy
        assert not busy.get("file"), busy
        ok = trace.result_for(b.pid)
        assert ok["status"] == "CAPTURE_STATUS_OK", ok
        assert (trace.path / ok["file"]).exists()
        assert "busy" in (result.stdout + result.stderr).lower()

        out, err = long_trace.communicate(timeout=60)
    finally:
        if long_trace.poll() is None:
            long_trace.kill()
            long_trace.wait()
    # The first trace was not disturbed by the second.
    assert long_trace.returncode == 0, out + err
