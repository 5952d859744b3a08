"""`gpuctl doctor --pid N` with the real gpuctld, gpuctl and libgpuctl.so:
an attached workload, a process without the library, a preloaded process
pointed at a socket no daemon uses, and (as root) a process of another uid
that the socket's mode refuses."""

import json
import os
import shutil
import subprocess

import pytest

from conftest import LineReader, Workload
from e2e_util import preload_value, wait_until


def clean_env():
    return {k: v for k, v in os.environ.items()
            if not k.startswith("GPUCTL_") and k not in
            ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LD_PRELOAD", "CUDA_INJECTION64_PATH")}


def start(argv, env):
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    return Workload(proc, LineReader(proc.stdout))


def stop(workload):
    workload.proc.kill()
    workload.wait()


def library_mapped(pid):
    with open(f"/proc/{pid}/maps") as maps:
        return "libgpuctl" in maps.read()


def doctor(cli, pid, *extra):
    return cli.run("doctor", "--pid", str(pid), *extra)


def verdict_line(result):
    lines = [line for line in result.stdout.splitlines() if line.startswith("verdict: ")]
    assert len(lines) == 1, result.stdout + result.stderr
    return lines[0]


def test_doctor_says_an_attached_workload_is_attached(cli, start_workload):
    workload = start_workload(job="doc42", rank=1, world_size=2)
    cli.wait_attached([workload.pid])
    result = doctor(cli, workload.pid)
    assert result.returncode == 0, result.stdout + result.stderr
    assert verdict_line(result) == (
        f"verdict: pid {workload.pid} is attached to gpuctld on e2e-gpuctld (job doc42, rank 1)")
    assert "fix:" not in result.stdout
    # Only the library's variables of its environment are shown.
    assert "GPUCTL_JOB_ID=doc42" in result.stdout
    assert " PATH=" not in result.stdout and " HOME=" not in result.stdout

    as_json = doctor(cli, workload.pid, "--json")
    assert as_json.returncode == 0, as_json.stderr
    doc = json.loads(as_json.stdout)
    assert doc["cause"] == "attached"
    assert doc["pid"] == workload.pid
    assert doc["libraryPath"].endswith("libgpuctl.so")
    assert doc["environment"]["RANK"] == "1"
    # Sorted keys, as every --json output of gpuctl.
    assert list(doc) == sorted(doc)


def test_doctor_says_a_plain_process_has_no_library(cli, lib_path):
    sleeper = start([shutil.which("sleep"), "600"], clean_env())
    try:
        result = doctor(cli, sleeper.pid)
        assert result.returncode == 1, result.stdout + result.stderr
        assert verdict_line(result) == (
            f"verdict: pid {sleeper.pid} has no gpuctl library loaded")
        # The fix names the library next to this gpuctl.
        assert f"fix: start it with LD_PRELOAD={lib_path}" in result.stdout
    finally:
        stop(sleeper)


def test_doctor_finds_a_socket_the_daemon_does_not_use(cli, daemon, lib_path, workdir):
    env = clean_env()
    env["LD_PRELOAD"] = preload_value(lib_path)
    wrong = workdir / "wrong.sock"
    env["GPUCTL_SOCKET"] = str(wrong)
    sleeper = start([shutil.which("sleep"), "600"], env)
    try:
        wait_until(lambda: library_mapped(sleeper.pid), what="libgpuctl mapped into sleep")
        result = doctor(cli, sleeper.pid)
        assert result.returncode == 1, result.stdout + result.stderr
        assert verdict_line(result) == (
            f"verdict: the process uses GPUCTL_SOCKET={wrong} but the daemon at "
            f"{daemon.address} listens on {daemon.socket}")
        assert f"fix: start it with GPUCTL_SOCKET={daemon.socket}" in result.stdout
        assert f"GPUCTL_SOCKET={wrong}" in result.stdout

        # Without a daemon to ask, --socket names the daemon's socket; and
        # without either, the process's own socket is judged: nothing there.
        unreachable = cli.run("doctor", "--pid", str(sleeper.pid), "--socket",
                              str(daemon.socket), host="127.0.0.1:1")
        assert unreachable.returncode == 1, unreachable.stdout + unreachable.stderr
        assert "but the daemon listens on" in verdict_line(unreachable)
        # --socket wins over the daemon's own path (a daemon in a container
        # reports the path of its mount namespace).
        told = doctor(cli, sleeper.pid, "--socket", str(wrong), "--json")
        assert json.loads(told.stdout)["cause"] == "no_socket", told.stdout
        alone = cli.run("doctor", "--pid", str(sleeper.pid), "--json", host="127.0.0.1:1")
        assert alone.returncode == 1, alone.stdout + alone.stderr
        doc = json.loads(alone.stdout)
        assert doc["cause"] == "no_socket"
        assert doc["verdict"] == f"no daemon listens on {wrong} (No such file or directory)"
    finally:
        stop(sleeper)


def test_doctor_rejects_a_pid_that_does_not_exist(cli):
    # Past the kernel's pid_max limit (4194304 at most): never a live pid.
    result = doctor(cli, 2**31 - 1)
    assert result.returncode == 3, result.stdout + result.stderr
    assert verdict_line(result) == f"verdict: no process {2**31 - 1} on this host"
    usage = cli.run("doctor", "--pid", "abc")
    assert usage.returncode == 2
    assert "--pid" in usage.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a process as another uid")
def test_doctor_explains_a_socket_mode_that_refuses_the_uid(cli, daemon, lib_path, workdir):
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv is not installed")
    nobody = 65534
    # The socket's directory is searchable: the socket's own mode refuses.
    os.chmod(workdir, 0o755)
    # Only sleep is preloaded, not setpriv: setpriv changes the credentials
    # of its main thread only, and glibc aborts a process whose other threads
    # (the library's) then refuse the change.
    stranger = start([setpriv, f"--reuid={nobody}", f"--regid={nobody}", "--clear-groups",
                      "env", f"LD_PRELOAD={preload_value(lib_path)}",
                      f"GPUCTL_SOCKET={daemon.socket}", shutil.which("sleep"), "600"],
                     clean_env())
    try:
        wait_until(lambda: os.stat(f"/proc/{stranger.pid}").st_uid == nobody
                   and library_mapped(stranger.pid), what="sleep running as nobody")
        result = doctor(cli, stranger.pid)
        assert result.returncode == 1, result.stdout + result.stderr
        line = verdict_line(result)
        assert line.startswith(
            f"verdict: the socket {daemon.socket} refuses uid {nobody}"), result.stdout
        assert "(mode 0660 " in line
        assert "fix: add the user to group" in result.stdout
    finally:
        stop(stranger)


def test_doctor_reports_the_daemons_refusal(start_daemon, cli_for, start_workload, workdir):
    config = workdir / "gpuctld.yaml"
    # Only some other uid may attach: this test's workload is refused.
    config.write_text(f"ipc:\n  allowed_uids: [{os.getuid() + 1}]\n")
    cli = cli_for(start_daemon("--config", str(config)))
    workload = start_workload(job="denied", rank=0, world_size=1)

    def refused():
        result = cli.run("doctor", "--pid", str(workload.pid), "--json")
        doc = json.loads(result.stdout)
        return (result, doc) if doc["cause"] == "refused" else None

    result, doc = wait_until(refused, what="the refusal in gpuctld's list")
    assert result.returncode == 1
    assert doc["verdict"] == (
        f"the daemon refused it: uid {os.getuid()} may not attach (not in ipc.allowed_uids)")
    assert f"add uid {os.getuid()} to ipc.allowed_uids" in doc["fix"]
