"""gpuctl trace's live progress in a real terminal (a tmux pane)."""

import re
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from e2e_util import DEFAULT_DEADLINE_S, wait_until

TMUX = shutil.which("tmux")

# What a terminal shows for a cursor-control sequence it does not handle,
# or a code the pane kept as text.
GARBAGE = re.compile(r"\x1b|\[\d*[A-HJKF]|\[2K|\[J")


class Pane:
    """One tmux session on a private server, 120 columns by 30 lines."""

    def __init__(self, workdir, command):
        self.socket = str(workdir / "tmux.sock")
        self._tmux("-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "30", "-s", "gp",
                   command)

    def _tmux(self, *args):
        return subprocess.run([TMUX, "-S", self.socket] + list(args), check=True,
                              capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)

    def screen(self):
        """The visible pane, as a person sees it."""
        return self._tmux("capture-pane", "-p", "-t", "gp").stdout

    def everything(self):
        """The pane with its whole scrollback."""
        return self._tmux("capture-pane", "-p", "-S", "-", "-t", "gp").stdout

    def kill(self):
        subprocess.run([TMUX, "-S", self.socket, "kill-server"], capture_output=True, timeout=30)


@pytest.fixture
def pane(workdir):
    if TMUX is None:
        pytest.skip("tmux is not installed (scripts/install_deps.sh installs it)")
    panes = []

    def start(command):
        panes.append(Pane(workdir, command))
        return panes[-1]

    yield start
    for p in panes:
        p.kill()


def test_trace_on_a_terminal_counts_down_the_window_then_leaves_the_result(
        cli, start_workload, pane, workdir):
    rank0 = start_workload(job=42, rank=0, world_size=2)
    rank1 = start_workload(job=42, rank=1, world_size=2)
    cli.wait_attached([rank0.pid, rank1.pid])

    out = Path(tempfile.mkdtemp(prefix="dl-", dir=workdir))
    trace = shlex.join(cli.args("trace", "--job", "42", "--duration", "6s", "-o", str(out)))
    # The pane stays after gpuctl exits, showing its exit code.
    p = pane(f"{trace}; echo \"gpuctl exited $?\"; exec sleep 3600")

    # While capturing: the window's clock, the processes per phase and a
    # line per process, redrawn in place as the window runs (no event
    # comes between the capture's start and its end).
    live = re.compile(r"^  window (\d+):(\d\d) of 0:06, \d+:\d\d left; (.*)$", re.M)
    seen = set()

    def two_readings():
        screen = p.screen()
        if "gpuctl exited" in screen:
            raise AssertionError("gpuctl ended before two readings of the window:\n"
                                 + p.everything())
        for m in live.finditer(screen):
            assert "capturing" in m.group(3) or "requested" in m.group(3), screen
            assert re.search(rf"^  pid {rank0.pid}: (capturing|requested)", screen, re.M), screen
            assert re.search(rf"^  pid {rank1.pid}: (capturing|requested)", screen, re.M), screen
            # Drawn in place, not appended.
            assert len(live.findall(screen)) == 1, screen
            seen.add(int(m.group(1)) * 60 + int(m.group(2)))
        return len(seen) >= 2

    wait_until(two_readings, DEFAULT_DEADLINE_S, interval=0.1, what="the window counting down")

    final = wait_until(lambda: "gpuctl exited" in p.screen() and p.everything(),
                       DEFAULT_DEADLINE_S * 2, interval=0.2, what="gpuctl trace to end")
    assert "gpuctl exited 0" in final, final
    # The result table and where the files went stay; the live lines and
    # the download's progress are gone, and nothing of the cursor control
    # shows.
    for pid in (rank0.pid, rank1.pid):
        assert re.search(rf"\b{pid}\b.*\bok\b", final), final
    assert f"saved to {out}" in final, final
    assert "ui.perfetto.dev" in final, final
    assert not live.search(final), final
    assert "downloading" not in final and "selected on" not in final, final
    assert not GARBAGE.search(final), repr(final)


def test_fan_out_on_a_terminal_shows_a_line_per_host(start_daemon, start_workload, cli_for, pane,
                                                     workdir):
    daemons, workloads = [], []
    for i in range(2):
        daemons.append(start_daemon(name=f"d{i}"))
        workloads.append(start_workload(job=42, rank=i, world_size=2, socket=daemons[-1].socket))
    for daemon, workload in zip(daemons, workloads):
        cli_for(daemon).wait_attached([workload.pid])

    out = Path(tempfile.mkdtemp(prefix="dl-", dir=workdir))
    args = cli_for(daemons[0]).args("trace", "--job", "42", "--duration", "5s", "-o", str(out))
    args += ["--host", daemons[1].address]
    p = pane(f"{shlex.join(args)}; echo \"gpuctl exited $?\"; exec sleep 3600")

    # The fleet's clock and counts, then one line per host, as contacted.
    live = re.compile(r"^  window \d+:\d\d of 0:05, \d+:\d\d left; .*capturing", re.M)

    def fleet_lines():
        screen = p.screen()
        if "gpuctl exited" in screen:
            raise AssertionError("gpuctl ended before the fleet's lines:\n" + p.everything())
        if not live.search(screen):
            return False
        return all(re.search(rf"^  {re.escape(d.address)} +1 selected: 1 capturing$", screen, re.M)
                   for d in daemons) and screen.startswith("trace ")

    wait_until(fleet_lines, DEFAULT_DEADLINE_S, interval=0.1, what="a line per host")

    final = wait_until(lambda: "gpuctl exited" in p.screen() and p.everything(),
                       DEFAULT_DEADLINE_S * 2, interval=0.2, what="gpuctl trace to end")
    assert "gpuctl exited 0" in final, final
    for daemon, workload in zip(daemons, workloads):
        assert re.search(rf"^{re.escape(daemon.address)} .*\b{workload.pid}\b.*\bok\b", final,
                         re.M), final
    assert not live.search(final), final
    assert "selected:" not in final and "downloading" not in final, final
    assert not GARBAGE.search(final), repr(final)


def test_plain_progress_says_once_that_inline_data_arrives(cli, start_workload):
    # Forced to send its trace in chunks (60000 bytes each), as a process
    # without memfd does: the daemon reports the chunks as they arrive, and
    # the plain display writes that once per process, not once per chunk.
    workloads = [start_workload(job=42, rank=i, world_size=2, env={"GPUCTL_FORCE_INLINE": "1"})
                 for i in range(2)]
    cli.wait_attached([w.pid for w in workloads])
    result, trace = cli.trace("--job", "42", "--duration", "3s")
    assert result.returncode == 0, result.stdout + result.stderr
    assert trace is not None, result.stderr
    assert "\x1b" not in result.stderr, repr(result.stderr)
    # At most one line per process; a process whose last chunk came
    # within the trace's 250 ms of another's report may have none.
    lines = {}
    for workload in workloads:
        line = f"pid {workload.pid}: capturing (receiving trace data)\n"
        lines[workload.pid] = result.stderr.count(line)
        assert lines[workload.pid] <= 1, result.stderr
    if any(int(trace.result_for(w.pid)["payload_bytes"]) > 60000 for w in workloads):
        assert sum(lines.values()) >= 1, result.stderr
    assert "received" not in result.stderr, result.stderr
