"""The two Kubernetes topologies run for real with Linux namespaces and the
real binaries (docs/kubernetes.md):
- sidecar mode: gpuctld and the workloads in one fresh pid namespace, what
  shareProcessNamespace gives a pod, with the socket's parent directory
  0777 like an emptyDir;
- daemonset mode: gpuctld in this pid namespace (hostPID) and each workload
  in a pid and mount namespace of its own, as a container is.
In both, `gpuctl trace --job` returns every workload with the pid gpuctld's
namespace knows it by and its rank."""

import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "e2e"))
from e2e_util import TraceDir, parse_processes, preload_value, wait_until  # noqa: E402

BUILD = pathlib.Path(os.environ.get("GPUCTL_BUILD_DIR",
                                    pathlib.Path(__file__).resolve().parents[2] / "build"))
GPUCTLD = BUILD / "bin" / "gpuctld"
GPUCTL = BUILD / "bin" / "gpuctl"
LIB = BUILD / "lib" / "libgpuctl.so"
# Generous: the suite also runs under sanitizers on a loaded 2-core machine.
DEADLINE_S = 60.0


def namespaces_available():
    try:
        return subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"],
                              capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


pytestmark = pytest.mark.skipif(not namespaces_available(),
                                reason="needs unshare --pid --mount-proc (root or user namespaces)")


@pytest.fixture
def workdir():
    path = pathlib.Path(tempfile.mkdtemp(prefix="gpuctl-topology-"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def workload_env(socket, job, rank):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("GPUCTL_") and k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE",
                                                         "LD_PRELOAD")}
    env.update(LD_PRELOAD=preload_value(LIB), GPUCTL_SOCKET=str(socket), GPUCTL_JOB_ID=job,
               RANK=str(rank), WORLD_SIZE="2")
    return env


def read_address(ready, proc):
    def ready_address():
        assert proc.poll() is None, f"exited with {proc.returncode}"
        return ready.read_text().strip() if ready.exists() else None
    return wait_until(ready_address, DEADLINE_S, what="gpuctld's ready file")


def trace(address, job, workdir, expected):
    """gpuctl trace --job JOB once `expected` ({pid: rank}) are attached;
    returns {pid: rank} of the results, each ok."""
    def attached():
        out = subprocess.run([str(GPUCTL), "ps", "--host", address, "--job", job, "--json"],
                             capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            return None
        pids = {p["pid"] for p in parse_processes(out.stdout)}
        return pids >= set(expected)
    wait_until(attached, DEADLINE_S, interval=0.1, what=f"pids {sorted(expected)} attached")
    out_dir = workdir / "download"
    result = subprocess.run([str(GPUCTL), "trace", "--host", address, "--job", job,
                             "--duration", "1s", "-o", str(out_dir)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    trace_dir = TraceDir.find(out_dir)
    assert trace_dir is not None, result.stdout + result.stderr
    for r in trace_dir.results:
        assert r["status"].endswith("OK"), r
    return {int(r["pid"]): int(r.get("rank", -1)) for r in trace_dir.results}


def stop_namespace(proc):
    """Ends an `unshare --fork --kill-child`: unshare ignores SIGTERM while
    it waits, and its death kills the namespace's pid 1 (so all of it)."""
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=30)


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


SIDECAR_POD = r'''
set -eu
"$GPUCTLD" --listen 127.0.0.1:0 --socket "$RUN/sock/gpuctl.sock" --store "$STORE" \
  --ready-file "$READY" --host-name pod-0 &
for rank in 0 1; do
  env LD_PRELOAD="$PRELOAD" GPUCTL_SOCKET="$RUN/sock/gpuctl.sock" GPUCTL_JOB_ID=sidecar-job \
    RANK=$rank WORLD_SIZE=2 sleep 100000 &
  echo "$! $rank" >>"$PIDS"
done
wait
'''


def test_sidecar_mode_one_pid_namespace_and_a_0777_socket_parent(workdir):
    run = workdir / "run"
    run.mkdir()
    os.chmod(run, 0o777)  # what the kubelet makes an emptyDir
    # gpuctld refuses the 0777 directory itself for its socket...
    refused = subprocess.run([str(GPUCTLD), "--listen", "127.0.0.1:0", "--socket",
                              str(run / "gpuctl.sock"), "--store", str(workdir / "s0")],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "anyone may write" in refused.stderr, refused.stderr
    # ...and creates a directory of its own below it.
    ready, pids = workdir / "ready", workdir / "pids"
    env = dict(os.environ, GPUCTLD=str(GPUCTLD), RUN=str(run), STORE=str(workdir / "store"),
               READY=str(ready), PIDS=str(pids), PRELOAD=preload_value(LIB))
    pod = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", "--kill-child",
                            "/bin/sh", "-c", SIDECAR_POD], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           stdin=subprocess.DEVNULL)
    try:
        address = read_address(ready, pod)
        assert oct((run / "sock").stat().st_mode & 0o777) == oct(0o755)
        wait_until(lambda: pids.exists() and len(pids.read_text().split("\n")) > 2, DEADLINE_S,
                   what="the workloads' pids")
        expected = {int(p): int(r) for p, r in
                    (line.split() for line in pids.read_text().splitlines())}
        # The pids of the pod's namespace: gpuctld is in it too.
        assert all(pid < 100 for pid in expected), expected
        assert trace(address, "sidecar-job", workdir, expected) == expected
    finally:
        stop_namespace(pod)


def child_of(pid):
    def child():
        path = pathlib.Path(f"/proc/{pid}/task/{pid}/children")
        text = path.read_text().split() if path.exists() else []
        return int(text[0]) if text else None
    return wait_until(child, DEADLINE_S, what=f"the child of {pid}")


# A process in another pid namespace is pid 1 to itself (its Hello and its
# trace data say so) and another pid to gpuctld, which lists and names it by
# that one.
def test_daemonset_mode_each_workload_in_its_own_pid_and_mount_namespace(workdir):
    socket = workdir / "run" / "gpuctl.sock"
    ready = workdir / "ready"
    daemon = subprocess.Popen([str(GPUCTLD), "--listen", "127.0.0.1:0", "--socket", str(socket),
                               "--store", str(workdir / "store"), "--ready-file", str(ready),
                               "--host-name", "node-1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL)
    containers = []
    try:
        address = read_address(ready, daemon)
        expected = {}
        for rank in (0, 1):
            container = subprocess.Popen(
                ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child",
                 "sleep", "100000"], env=workload_env(socket, "ds-job", rank),
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
            containers.append(container)
            # pid 1 in its namespace; gpuctld knows it by its pid here.
            expected[child_of(container.pid)] = rank
        assert trace(address, "ds-job", workdir, expected) == expected
    finally:
        for container in containers:
            stop_namespace(container)
        stop(daemon)
