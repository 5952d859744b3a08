"""Fleet fan-out: one request to many daemons (each on its own port and
socket), some down or hung; cancelling every host at once."""

import json
import os
import signal
import socket
import subprocess
import tempfile
from pathlib import Path

from e2e_util import manifest_paths, parse_processes, snake_keys, wait_until


def free_port():
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gpuctl(build_dir, *args, timeout=120):
    return subprocess.run([str(build_dir / "bin" / "gpuctl"), *args], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def host_args(addresses):
    args = []
    for address in addresses:
        args += ["--host", address]
    return args


def start_fleet(start_daemon, start_workload, count, job):
    daemons, workloads = [], []
    for i in range(count):
        daemon = start_daemon(name=f"d{i}")
        daemons.append(daemon)
        workloads.append(start_workload(job=job, rank=i, world_size=count, socket=daemon.socket))
    return daemons, workloads


def wait_fleet_attached(cli_for, daemons, workloads):
    for daemon, workload in zip(daemons, workloads):
        cli_for(daemon).wait_attached([workload.pid])


def test_fan_out_delivers_every_live_host_and_names_the_failed_ones(
        build_dir, start_daemon, start_workload, cli_for, workdir):
    daemons, workloads = start_fleet(start_daemon, start_workload, 6, "fleet")
    hung = start_daemon(name="hung")
    wait_fleet_attached(cli_for, daemons, workloads)
    down = f"127.0.0.1:{free_port()}"
    out = Path(tempfile.mkdtemp(prefix="dl-", dir=workdir))

    os.kill(hung.proc.pid, signal.SIGSTOP)
    try:
        result = gpuctl(build_dir, "trace", "--job", "fleet", "--duration", "300ms",
                        "--host-timeout", "3s", "--json", "-o", str(out),
                        *host_args([d.address for d in daemons] + [down, hung.address]))
    finally:
        os.kill(hung.proc.pid, signal.SIGCONT)
    assert result.returncode == 1, result.stdout + result.stderr
    doc = snake_keys(json.loads(result.stdout))
    hosts = {h["host"]: h for h in doc["hosts"]}
    assert set(hosts) == {d.address for d in daemons} | {down, hung.address}, hosts.keys()
    for daemon, workload in zip(daemons, workloads):
        entry = hosts[daemon.address]
        assert not entry.get("error"), entry
        assert [int(r["pid"]) for r in entry["results"]] == [workload.pid], entry
        assert entry["results"][0]["status"] == "CAPTURE_STATUS_OK", entry
    for failed in (down, hung.address):
        assert hosts[failed].get("error"), hosts[failed]
        assert not hosts[failed].get("results"), hosts[failed]

    # One trace id everywhere; every delivered file in one directory.
    trace_dir = out / doc["trace_id"]
    files = sorted(p.name for p in trace_dir.glob("*.json.gz"))
    assert len(files) == 6, files
    for workload in workloads:
        assert any(f"pid{workload.pid}." in name for name in files), (workload.pid, files)
    manifests = manifest_paths(trace_dir)
    assert len(manifests) == 6, manifests
    assert not list(trace_dir.glob("*manifest*")), list(trace_dir.iterdir())
    for manifest in manifests:
        assert snake_keys(json.loads(manifest.read_text()))["trace_id"] == doc["trace_id"]


def test_ps_fans_out_over_a_hosts_file_and_a_dns_name(
        build_dir, start_daemon, start_workload, cli_for, workdir):
    daemons, workloads = start_fleet(start_daemon, start_workload, 3, "ps-fleet")
    wait_fleet_attached(cli_for, daemons, workloads)
    hosts_file = workdir / "hosts"
    hosts_file.write_text("# the fleet\n\n" + "\n".join(d.address for d in daemons) + "\n")

    listed = gpuctl(build_dir, "ps", "--hosts-file", str(hosts_file), "--json")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert {p["pid"] for p in parse_processes(listed.stdout)} == {w.pid for w in workloads}

    table = gpuctl(build_dir, "ps", "--hosts-file", str(hosts_file))
    assert table.returncode == 0, table.stderr
    for daemon, workload in zip(daemons, workloads):
        line = next(l for l in table.stdout.splitlines() if f" {workload.pid} " in f" {l} ")
        assert daemon.address in line, table.stdout

    # Every address "localhost" resolves to, at the first daemon's port.
    port = daemons[0].address.rsplit(":", 1)[1]
    by_name = gpuctl(build_dir, "ps", "--hosts", f"dns:localhost:{port}", "--json")
    assert by_name.returncode in (0, 1), by_name.stdout + by_name.stderr
    assert workloads[0].pid in {p["pid"] for p in parse_processes(by_name.stdout)}


def test_ctrl_c_cancels_the_capture_on_every_host(
        build_dir, start_daemon, start_workload, cli_for, workdir):
    daemons, workloads = start_fleet(start_daemon, start_workload, 3, "cancel")
    wait_fleet_attached(cli_for, daemons, workloads)

    tracer = subprocess.Popen(
        [str(build_dir / "bin" / "gpuctl"), "trace", "--job", "cancel", "--duration", "10m",
         "--no-download", *host_args(d.address for d in daemons)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)

    def states():
        found = {}
        for daemon in daemons:
            for p in cli_for(daemon).processes():
                found[p["pid"]] = p.get("capture_state")
        return found

    wait_until(lambda: all(states().get(w.pid) == "CAPTURE_STATE_CAPTURING" for w in workloads),
               what="every host capturing")
    tracer.send_signal(signal.SIGINT)
    stdout, stderr = tracer.communicate(timeout=60)
    assert tracer.returncode == 130, stdout + stderr
    wait_until(lambda: all(states().get(w.pid) == "CAPTURE_STATE_IDLE" for w in workloads),
               what="every process back to idle")
    for daemon in daemons:
        assert "trace cancelled" in daemon.log(), daemon.log()
    assert all(w.proc.poll() is None for w in workloads)
