"""Local access control with the real gpuctld, gpuctl and libgpuctl.so: the
IPC socket's mode, an allow-list of uids (a refused process keeps running,
says why once, and shows in `gpuctl ps --all`), and credentials redacted
from the command lines gpuctld reports."""

import json
import os
import stat
import subprocess
import sys

from conftest import LineReader, Workload
from e2e_util import preload_value, snake_keys, wait_until


def start_preloaded(lib_path, socket, argv):
    """A process running `argv` with libgpuctl.so preloaded (killed by the
    caller)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("GPUCTL_") and k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE")}
    env["LD_PRELOAD"] = preload_value(lib_path)
    env["GPUCTL_SOCKET"] = str(socket)
    env["GPUCTL_JOB_ID"] = "access"
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    return Workload(proc, LineReader(proc.stdout))


def stop(workload):
    workload.proc.kill()
    workload.wait()


def test_socket_is_0660_by_default_and_takes_another_mode(start_daemon, workdir):
    default = start_daemon()
    assert stat.S_IMODE(os.stat(default.socket).st_mode) == 0o660
    other = start_daemon("--socket-mode", "0600", name="private")
    assert stat.S_IMODE(os.stat(other.socket).st_mode) == 0o600


def test_bad_socket_mode_or_group_stops_startup(build_dir, workdir):
    gpuctld = str(build_dir / "bin/gpuctld")
    base = ["--listen", "127.0.0.1:0", "--socket", str(workdir / "s.sock"),
            "--store", str(workdir / "store")]
    for flags, message in ((["--socket-mode", "0680"], 'socket mode "0680" is not octal'),
                           (["--socket-group", "no-such-group-gpuctl"],
                            'no group named "no-such-group-gpuctl"')):
        result = subprocess.run([gpuctld] + base + flags, capture_output=True, text=True,
                                timeout=30, stdin=subprocess.DEVNULL)
        assert result.returncode == 2, result.stderr
        assert message in result.stderr
    # A world-writable socket directory without the sticky bit is refused.
    shared = workdir / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    result = subprocess.run([gpuctld, "--listen", "127.0.0.1:0", "--socket",
                             str(shared / "s.sock"), "--store", str(workdir / "store")],
                            capture_output=True, text=True, timeout=30,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 1
    assert "anyone may write to it" in result.stdout + result.stderr


def test_a_uid_not_allowed_is_refused_keeps_running_and_is_listed(
        start_daemon, cli_for, start_workload, workdir):
    config = workdir / "gpuctld.yaml"
    # Only some other uid may attach: this test's own processes are refused.
    config.write_text(f"ipc:\n  allowed_uids: [{os.getuid() + 1}]\n")
    daemon = start_daemon("--config", str(config))
    cli = cli_for(daemon)
    workload = start_workload(job="denied", rank=0, world_size=1)

    def listed():
        result = cli.run("ps", "--all", "--json")
        assert result.returncode == 0, result.stderr
        doc = snake_keys(json.loads(result.stdout))
        host = doc["hosts"][0]
        assert host["processes"] == []
        return [r for r in host["rejected"] if int(r["pid"]) == workload.pid]

    rejected = wait_until(listed, what="the refused workload in gpuctl ps --all")[0]
    assert int(rejected["uid"]) == os.getuid()
    assert rejected["job_id"] == "denied"
    assert rejected["reason"] == f"uid {os.getuid()} may not attach (not in ipc.allowed_uids)"

    table = cli.run("ps", "--all")
    assert table.returncode == 0, table.stderr
    assert "Refused lately:" in table.stdout
    row = next(line for line in table.stdout.splitlines() if f" {workload.pid} " in line)
    assert f"{os.getuid()}" in row and "denied" in row and "may not attach" in row

    # The library said why, once, and the job runs on.
    said = wait_until(lambda: [l for l in workload.lines() if "gpuctld refused" in l],
                      what="the library's refusal line")
    assert len(said) == 1, said
    assert "may not attach (not in ipc.allowed_uids)" in said[0]
    assert workload.proc.poll() is None


def test_credentials_are_redacted_from_listed_command_lines(daemon, cli, lib_path):
    script = "import time\nprint('up', flush=True)\ntime.sleep(600)\n"
    argv = [sys.executable, "-c", script, "--steps=5", "--hf-token", "hf_SECRETVALUE",
            "--password=hunter2", "WANDB_API_KEY=abc123", "--db=postgres://alice:pw0rd@db/x",
            "--keyboard", "us"]
    workload = start_preloaded(lib_path, daemon.socket, argv)
    try:
        cli.wait_attached([workload.pid])
        result = cli.run("ps", "--json")
        assert result.returncode == 0, result.stderr
        assert "SECRETVALUE" not in result.stdout
        assert "hunter2" not in result.stdout and "abc123" not in result.stdout
        assert "pw0rd" not in result.stdout
        process = next(p for p in cli.processes() if p["pid"] == workload.pid)
        assert process["cmdline"][3:] == [
            "--steps=5", "--hf-token", "***", "--password=***", "WANDB_API_KEY=***",
            "--db=postgres://alice:***@db/x", "--keyboard", "us"]
        # Nor does the daemon's log carry them.
        assert "hunter2" not in daemon.log()
    finally:
        stop(workload)
