"""Fixtures for the PyTorch end-to-end tests (test_kineto.py): the real
PyTorch from PyPI in its own environment (.venv-torch, made by
scripts/install_torch.sh), running test/e2e/torch/train_loop.py with
KINETO_USE_DAEMON=1, and a gpuctld serving libkineto's daemon protocol.

A test module takes them with `from torch_fixtures import *`.
"""

import os
import subprocess
from pathlib import Path

import pytest

from conftest import LineReader, Workload

REPO = Path(__file__).resolve().parents[2]
TRAIN_LOOP = Path(__file__).resolve().parent / "torch" / "train_loop.py"
# kineto polls the daemon this often (seconds) in the tests that do not ask
# for its default (5 s), so triggers need not wait long.
FAST_POLL_SECS = 1
# A kineto process first polls a few seconds after start (torch's import,
# then its poll period), and its start waits for the poll after a request.
KINETO_DEADLINE_S = 90.0


@pytest.fixture(scope="session")
def torch_python():
    # The environment itself, not the clone's link to it: a process in a
    # mount namespace of its own may not see the clone.
    python = (REPO / ".venv-torch").resolve() / "bin" / "python"
    if not python.exists():
        pytest.fail(f"{python} not found: run scripts/install_torch.sh (PyTorch from PyPI, "
                    "about 5 GB, once per machine)")
    return python


@pytest.fixture
def kineto_socket_dir(workdir):
    """The directory of the path sockets (KINETO_IPC_SOCKET_DIR): one per
    test, so parallel tests never meet on the abstract name."""
    path = workdir / "kineto"
    path.mkdir(mode=0o1777)
    os.chmod(path, 0o1777)  # sticky, writable by the processes' users
    return path


@pytest.fixture
def kineto_daemon(start_daemon, workdir, kineto_socket_dir):
    """A gpuctld with the kineto bridge serving kineto_socket_dir, and its
    metrics on a loopback port. `auto`, not `on`: tests run side by side and
    only one daemon can hold the abstract name; the loops reach this one by
    its path socket."""
    config = workdir / "kineto.yaml"
    config.write_text(f"kineto:\n  mode: auto\n  socket_dir: {kineto_socket_dir}\n")
    return start_daemon("--config", str(config), "--metrics-listen", "127.0.0.1:0")


@pytest.fixture
def start_torch(torch_python, workdir, kineto_socket_dir):
    """start_torch(job=, rank=, world_size=, steps=0, step_ms=10,
    poll_secs=FAST_POLL_SECS, socket_dir=<the test's>, own_profiler=False,
    env=None, wrapper=()) -> Workload running train_loop.py under
    KINETO_USE_DAEMON=1; killed at teardown. poll_secs None: kineto's
    default poll period (no KINETO_CONFIG). socket_dir None: the abstract
    names only (no KINETO_IPC_SOCKET_DIR)."""
    procs, workloads = [], []

    def start(job=None, rank=None, world_size=None, steps=0, step_ms=10,
              poll_secs=FAST_POLL_SECS, socket_dir=kineto_socket_dir, own_profiler=False,
              env=None, wrapper=()):
        child_env = {k: v for k, v in os.environ.items()
                     if not k.startswith(("GPUCTL_", "KINETO_")) and k not in
                     ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LD_PRELOAD", "SLURM_JOB_ID")}
        child_env["KINETO_USE_DAEMON"] = "1"
        if poll_secs is not None:
            config = workdir / f"kineto-{len(procs)}.conf"
            config.write_text(f"ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS={poll_secs}\n")
            child_env["KINETO_CONFIG"] = str(config)
        if socket_dir is not None:
            child_env["KINETO_IPC_SOCKET_DIR"] = str(socket_dir)
        if job is not None:
            child_env["GPUCTL_JOB_ID"] = str(job)
        if rank is not None:
            child_env["RANK"] = child_env["LOCAL_RANK"] = str(rank)
        if world_size is not None:
            child_env["WORLD_SIZE"] = str(world_size)
        child_env.update(env or {})
        cmd = [str(a) for a in wrapper] + [str(torch_python), str(TRAIN_LOOP),
                                           "--steps", str(steps), "--step-ms", str(step_ms)]
        if own_profiler:
            cmd.append("--own-profiler")
        proc = subprocess.Popen(cmd, env=child_env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        procs.append(proc)
        workloads.append(Workload(proc, LineReader(proc.stdout)))
        return workloads[-1]

    yield start
    for proc in procs:
        try:
            os.killpg(proc.pid, 9)
        except ProcessLookupError:
            pass
        proc.wait()
    for workload in workloads:
        workload.reader.join(5)


def steps_printed(workload):
    """The steps the loop has finished, from its own output."""
    return sum(1 for line in workload.lines() if line.startswith("step "))
