"""A preloaded program that drops privileges, as container entrypoints do
(setpriv, gosu, su-exec with LD_PRELOAD inherited), runs as it would without
the library, and its new credentials attach."""

import os
import shutil

import pytest

from e2e_util import DEFAULT_DEADLINE_S, wait_until

NOBODY = 65534
SETPRIV = shutil.which("setpriv")

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root"),
    pytest.mark.skipif(SETPRIV is None, reason="needs setpriv (util-linux)"),
]

DROP = [SETPRIV, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


def test_setpriv_dropping_privileges_runs_the_preloaded_workload(daemon, start_workload):
    # setpriv itself is preloaded too: it changes the uid first, keeping its
    # capabilities on its own thread only, then the gid and the groups.
    workload = start_workload(job=7, steps=30, step_ms=1, wrapper=DROP)
    assert workload.wait() == 0, workload.lines()
    assert any("libgpuctl=loaded" in line for line in workload.lines()), workload.lines()


def test_workload_that_dropped_privileges_attaches(start_daemon, cli_for, workdir,
                                                   start_workload):
    # The socket reachable by nobody.
    os.chmod(workdir, 0o755)
    daemon = start_daemon("--socket-mode", "0666")
    cli = cli_for(daemon)
    workload = start_workload(job=7, wrapper=DROP)

    def uid():
        with open(f"/proc/{workload.pid}/status") as status:
            for line in status:
                if line.startswith("Uid:"):
                    return int(line.split()[1])
        return None

    assert wait_until(lambda: uid() == NOBODY or None, DEFAULT_DEADLINE_S,
                      what="the workload running as nobody")
    cli.wait_attached([workload.pid])
    assert workload.proc.poll() is None, workload.lines()
