"""Who a daemon is: the host name it reports and stores under, the gRPC
address it holds alone, and whose start delay a trace opens after."""

import json
import os
import stat
import subprocess
import tempfile
import time
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



def test_a_daemon_on_a_unix_socket_is_reached_without_a_tcp_port(build_dir, workdir):
    api = workdir / "api" / "gpuctl-api.sock"
    ready = workdir / "unix.ready"
    daemon = subprocess.Popen(
        [str(build_dir / "bin" / "gpuctld"), "--listen", f"unix:{api}",
         "--socket", str(workdir / "unix-ipc.sock"), "--store", str(workdir / "unix-store"),
         "--ready-file", str(ready), "--host-name", "e2e-unix"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        deadline = time.monotonic() + DEFAULT_DEADLINE_S
        while not (ready.exists() and ready.read_text().strip()):
            assert daemon.poll() is None, daemon.stderr.read()
            assert time.monotonic() < deadline, "gpuctld did not get ready"
            time.sleep(0.05)
        assert ready.read_text().strip() == f"unix:{api}"
        assert stat.S_IMODE(os.lstat(api).st_mode) == 0o600
        status = gpuctl(build_dir, "status", "--json", "--host", f"unix:{api}")
        assert status.returncode == 0, status.stdout + status.stderr
        assert json.loads(status.stdout)["host"] == "e2e-unix"
        if os.geteuid() == 0:
            # Owner-only: another user cannot call it.
            refused = subprocess.run(
                ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                 str(build_dir / "bin" / "gpuctl"), "status", "--host", f"unix:{api}"],
                capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
            assert refused.returncode == 4, refused.stdout + refused.stderr
        # A second daemon on the same path fails and the first keeps it.
        second = subprocess.run(
            [str(build_dir / "bin" / "gpuctld"), "--listen", f"unix:{api}",
             "--socket", str(workdir / "unix-ipc2.sock"), "--store", str(workdir / "unix-store2")],
            capture_output=True, text=True, timeout=DEFAULT_DEADLINE_S, stdin=subprocess.DEVNULL)
        assert second.returncode != 0
        assert "address in use" in second.stderr, second.stderr
        assert gpuctl(build_dir, "status", "--host", f"unix:{api}").returncode == 0
    finally:
        daemon.terminate()
        daemon.wait(30)
    assert not api.exists(), "the socket is removed at shutdown"
