"""What a preloaded shell execs on the way to the real program (a pyenv shim
runs dozens of helpers) must not flood the daemon's log or `gpuctl ps`; a
helper that stays is discoverable like any process."""

import os
import re
import shutil
import subprocess

from e2e_util import preload_value, wait_until


def _preloaded_env(lib_path, socket):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("GPUCTL_") and k != "LD_PRELOAD"}
    env["LD_PRELOAD"] = preload_value(lib_path)
    env["GPUCTL_SOCKET"] = str(socket)
    return env


def test_a_shells_short_lived_helpers_make_one_summary_line(daemon, cli, lib_path):
    true, sleep = shutil.which("true"), shutil.which("sleep")
    # 40 helpers gone at once, 5 that live past the attach delay but leave
    # within seconds, then the long-lived program the shell becomes.
    script = (f"for i in $(seq 40); do {true}; done; "
              f"for i in 1 2 3 4 5; do {sleep} 0.9; done; exec {sleep} 60")
    shell = subprocess.Popen(["/bin/sh", "-c", script], env=_preloaded_env(lib_path, daemon.socket),
                             stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        # The shell stays through its loops and is attached; once it execs
        # sleep, the same pid attaches again as sleep.
        def attached_as_sleep():
            return any(p["pid"] == shell.pid and "sleep" in " ".join(p.get("cmdline", []))
                       for p in cli.processes())
        wait_until(attached_as_sleep, timeout=60, what="the long-lived program in gpuctl ps")
        wait_until(lambda: len(re.findall(r'msg="process attached".*program=sleep', daemon.log())),
                   timeout=30, what="the long-lived program's attach line")
        # Only it (and the shell it was) among the attached.
        assert [p["pid"] for p in cli.processes()] == [shell.pid]
    finally:
        os.killpg(shell.pid, 9)
        shell.wait()
    assert daemon.stop() == 0, daemon.log()
    log = daemon.log()
    attached = re.findall(r'msg="process attached".*', log)
    assert all(f"pid={shell.pid} " in line for line in attached), attached
    assert len(attached) <= 2, attached  # the shell, then what it exec'd
    summaries = re.findall(r'msg="short-lived processes attached and left".*', log)
    assert len(summaries) == 1, log
    count = int(re.search(r"count=(\d+)", summaries[0]).group(1))
    # The five 0.9 s helpers; the 40 that were gone at once never attached
    # (a very slow start may let one or two of them through).
    assert 5 <= count <= 8, summaries[0]
    assert "programs=sleep" in summaries[0], summaries[0]
