"""dynolog's RPC served by gpuctld (kineto.dyno_rpc_listen): `dyno status`
and `dyno gputrace`, as dynolog's CLI sends them (dyno_client.py), trace a
real process with the gpuctl library and the trace is stored like any
other."""

import re
import socket
import struct
import subprocess

from dyno_client import call, gputrace, status
from e2e_util import TraceDir, wait_until

JOB = "4242"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_with_dyno_rpc(start_daemon, workdir):
    config = workdir / "dyno.yaml"
    config.write_text(f"kineto:\n  dyno_rpc_listen: 127.0.0.1:{free_port()}\n")
    daemon = start_daemon("--config", str(config))
    address = wait_until(
        lambda: (re.search(r"serving dynolog's RPC.*address=\S*:(\d+)", daemon.log()) or [None, None])[1],
        what="the dyno RPC line in gpuctld's log")
    return daemon, int(address)


def test_dyno_status_and_gputrace_trace_a_library_process(start_daemon, cli_for,
                                                          start_workload, workdir):
    daemon, port = start_with_dyno_rpc(start_daemon, workdir)
    cli = cli_for(daemon)
    assert status(port) == {"status": 1}
    rank0 = start_workload(job=JOB, rank=0, world_size=2)
    rank1 = start_workload(job=JOB, rank=1, world_size=2)
    other = start_workload(job="7", rank=0)
    cli.wait_attached([rank0.pid, rank1.pid, other.pid])

    answer = gputrace(port, job_id=int(JOB), log_file="/tmp/dyno_trace.json", duration_ms=300,
                      with_stacks=True)
    assert sorted(answer["processesMatched"]) == sorted([rank0.pid, rank1.pid]), answer
    assert sorted(answer["activityProfilersTriggered"]) == sorted([rank0.pid, rank1.pid])
    assert answer["activityProfilersBusy"] == 0
    assert answer["eventProfilersTriggered"] == [] and answer["eventProfilersBusy"] == 0
    assert answer["ignoredConfigKeys"] == ["ACTIVITIES_LOG_FILE"]
    trace_id = answer["traceId"]

    # Stored like a gpuctl trace: fetched by id, one ok result per rank.
    def fetched():
        out = workdir / "fetched"
        got = cli.run("get", trace_id, "-o", str(out))
        return out / trace_id if got.returncode == 0 else None

    trace = TraceDir(wait_until(fetched, what=f"gpuctl get {trace_id}"))
    assert {int(r["pid"]) for r in trace.results} == {rank0.pid, rank1.pid}
    assert all(r["status"] == "CAPTURE_STATUS_OK" for r in trace.results), trace.results
    assert len(trace.files()) == 2


def test_dyno_requests_gpuctld_refuses_get_answers(start_daemon, cli_for, start_workload,
                                                   workdir):
    daemon, port = start_with_dyno_rpc(start_daemon, workdir)
    cli = cli_for(daemon)
    workload = start_workload(job=JOB, rank=0)
    cli.wait_attached([workload.pid])

    assert "failed: the request is not a JSON object" in call(port, "{not json")
    assert "unknown fn" in call(port, '{"fn": "dcgmProfPause", "duration_s": 1}')
    # No process of that job: what dyno reports as "no processes matched".
    assert gputrace(port, job_id=99, log_file="/tmp/x.json")["processesMatched"] == []
    # A length over the bound gets an answer too, and the daemon carries on.
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(struct.pack("=i", 1 << 30))
        (size,) = struct.unpack("=i", s.recv(4))
        assert b"failed: a message of" in s.recv(size)
    # The process was never disturbed: a real trace still works.
    answer = gputrace(port, job_id=int(JOB), log_file="/tmp/x.json", duration_ms=200)
    assert answer["activityProfilersTriggered"] == [workload.pid]
    assert daemon.alive()


def test_a_non_loopback_dyno_rpc_address_is_refused_at_start(build_dir, workdir):
    config = workdir / "open.yaml"
    config.write_text("kineto:\n  dyno_rpc_listen: 0.0.0.0:1778\n")
    result = subprocess.run([str(build_dir / "bin/gpuctld"), "--check-config", str(config)],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2, result
    assert "kineto.dyno_rpc_listen" in result.stderr
    assert "not a loopback address" in result.stderr
