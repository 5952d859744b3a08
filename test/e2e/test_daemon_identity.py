"""Who a daemon is: the host name it reports and stores under, the gRPC
address it holds alone, and whose start delay a trace opens after."""

import json
import subprocess
import tempfile
from pathlib import Path

from e2e_util import DEFAULT_DEADLINE_S, TraceDir, snake_keys, timestamp_ns

MS = 1_000_000


def gpuctl(build_dir, *args, timeout=120):
    return subprocess.run([str(build_dir / "bin" / "gpuctl"), *args], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def test_each_daemon_names_itself_by_its_host_name(
        build_dir, start_daemon, start_workload, cli_for, workdir):
    # The fixture gives each daemon its own --host-name (e2e-<name>).
    daemons = [start_daemon(name=f"node{i}") for i in range(2)]
    workloads = [start_workload(job="named", rank=i, world_size=2, socket=d.socket)
                 for i, d in enumerate(daemons)]
    for daemon, workload in zip(daemons, workloads):
        cli_for(daemon).wait_attached([workload.pid])

    out = Path(tempfile.mkdtemp(prefix="dl-", dir=workdir))
    hosts = [arg for d in daemons for arg in ("--host", d.address)]
    result = gpuctl(build_dir, "trace", "--job", "named", "--duration", "300ms", "--json",
                    "-o", str(out), *hosts)
    assert result.returncode == 0, result.stdout + result.stderr
    doc = snake_keys(json.loads(result.stdout))
    by_address = {h["host"]: h for h in doc["hosts"]}
    for daemon, workload in zip(daemons, workloads):
        entry = by_address[daemon.address]
        assert entry["hostname"] == daemon.host_name, entry
        (res,) = entry["results"]
        assert res["host"] == daemon.host_name, res
        assert res["file"].startswith(f"{daemon.host_name}-rank"), res
        assert (out / doc["trace_id"] / res["file"]).exists(), res

    status = gpuctl(build_dir, "status", "--json", "--host", daemons[1].address)
    assert status.returncode == 0, status.stdout + status.stderr
    assert daemons[1].host_name in status.stdout, status.stdout


def test_a_bad_host_name_stops_the_start_with_the_reason(build_dir, workdir):
    daemon = subprocess.run(
        [str(build_dir / "bin" / "gpuctld"), "--listen", "127.0.0.1:0",
         "--socket", str(workdir / "bad.sock"), "--store", str(workdir / "bad-store"),
         "--host-name", "$(NODE_NAME)"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert daemon.returncode == 2, daemon.stdout + daemon.stderr
    assert "--host-name" in daemon.stderr and "must start with a letter or digit" in daemon.stderr, \
        daemon.stderr


def test_a_second_daemon_on_a_taken_address_fails_and_the_first_keeps_serving(
        build_dir, start_daemon, cli_for, workdir):
    first = start_daemon()
    second = subprocess.run(
        [str(build_dir / "bin" / "gpuctld"), "--listen", first.address,
         "--socket", str(workdir / "second.sock"), "--store", str(workdir / "second-store")],
        capture_output=True, text=True, timeout=DEFAULT_DEADLINE_S, stdin=subprocess.DEVNULL)
    output = second.stdout + second.stderr
    assert second.returncode != 0, output
    assert "address in use" in output, output
    assert first.address in output, output
    assert not (workdir / "second.sock").exists()

    # Every call reaches the first daemon (a shared port would split them).
    cli = cli_for(first)
    for _ in range(8):
        status = cli.run("status", "--json")
        assert status.returncode == 0, status.stdout + status.stderr
        assert str(first.socket) in status.stdout, status.stdout
    assert first.alive()


def test_without_start_delay_the_daemons_start_delay_applies(start_daemon, cli_for,
                                                             start_workload):
    daemon = start_daemon("--start-delay", "3s")
    cli = cli_for(daemon)
    workload = start_workload(job="delayed", rank=0, world_size=1)
    cli.wait_attached([workload.pid])

    result, trace = cli.trace("--job", "delayed", "--duration", "200ms")
    assert result.returncode == 0, result.stdout + result.stderr
    received = timestamp_ns(trace.manifest["clock"]["received_at"])
    start = timestamp_ns(trace.manifest["start_time"])
    assert start - received == 3_000 * MS, trace.manifest
    res = trace.result_for(workload.pid)
    assert res["status"] == "CAPTURE_STATUS_OK", res
    assert timestamp_ns(res["window_start"]) >= received + 3_000 * MS, res

    # An explicit --start-delay wins over the daemon's.
    result, trace = cli.trace("--job", "delayed", "--duration", "200ms", "--start-delay", "1s")
    assert result.returncode == 0, result.stdout + result.stderr
    caller = timestamp_ns(trace.manifest["clock"]["caller_time"])
    start = timestamp_ns(trace.manifest["start_time"])
    assert start <= caller + 1_000 * MS, trace.manifest
    assert start < timestamp_ns(trace.manifest["clock"]["received_at"]) + 3_000 * MS

