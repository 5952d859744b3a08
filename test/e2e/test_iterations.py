"""Iteration windows: every rank captures the same steps, whatever its
counter said when the request came, even one that attaches afterwards."""

import json
import re
import tempfile
from pathlib import Path

from e2e_util import TraceDir, step_marks, trace_results, wait_until


def current_steps(cli):
    return {p["pid"]: int(p["current_step"]) for p in cli.processes() if "current_step" in p}


def chosen_start_step(stderr):
    m = re.search(r"steps (\d+)-(\d+)", stderr)
    assert m, f"gpuctl did not say which steps it captures:\n{stderr}"
    return int(m.group(1)), int(m.group(2))


def test_every_rank_captures_the_same_steps_though_their_counters_differ(cli, start_workload):
    # Rank 1 numbers its steps itself and is far ahead; ranks 0 and 2 count
    # from 0 with gpuctl_step(), rank 2 from a later start.
    rank0 = start_workload(job="iter", rank=0, world_size=3, step_ms=2)
    rank1 = start_workload(job="iter", rank=1, world_size=3, step_ms=2,
                           args=["--start-step", "400"])
    cli.wait_attached([rank0.pid, rank1.pid])
    wait_until(lambda: current_steps(cli).get(rank1.pid, 0) >= 400
               and rank0.pid in current_steps(cli), what="both ranks stepping")
    rank2 = start_workload(job="iter", rank=2, world_size=3, step_ms=2)
    cli.wait_attached([rank2.pid])
    before = current_steps(cli)
    assert before[rank1.pid] > before[rank0.pid], before

    out = Path(tempfile.mkdtemp(prefix="dl-", dir=cli.workdir))
    result = cli.run("trace", "--job", "iter", "--iterations", "3", "--step-roundup", "50",
                     "--duration", "60s", "-o", str(out), timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    first, last = chosen_start_step(result.stderr + result.stdout)
    assert last == first + 2
    assert first % 50 == 0 and first > before[rank1.pid], (first, before)

    trace = TraceDir.find(out)
    assert int(trace.manifest["start_step"]) == first
    assert int(trace.manifest["iterations"]) == 3
    for workload in (rank0, rank1, rank2):
        res = trace.result_for(workload.pid)
        assert res["status"] == "CAPTURE_STATUS_OK", res
        assert int(res["first_step"]) == first and int(res["steps"]) == 3, res
        assert step_marks(trace.path / res["file"]) == [first, first + 1, first + 2], res["file"]


def test_a_rank_that_attaches_after_the_request_captures_the_same_steps(cli, start_workload):
    # Rank 0 starts at step 1000 and steps every 4 ms; the start step is the
    # next multiple of 3000, at least 5 s away however slowly this machine
    # got here, so rank 1 attaches (starting at step 2500) before it.
    early = start_workload(job="join", rank=0, world_size=2, step_ms=4,
                           args=["--start-step", "1000"])
    cli.wait_attached([early.pid])
    wait_until(lambda: early.pid in current_steps(cli), what="rank 0 stepping")

    out = Path(tempfile.mkdtemp(prefix="dl-", dir=cli.workdir))
    tracer = cli.popen("trace", "--job", "join", "--iterations", "2", "--step-roundup", "3000",
                       "--duration", "60s", "-o", str(out))

    def armed():
        states = {p["pid"]: p.get("capture_state") for p in cli.processes()}
        return states.get(early.pid) == "CAPTURE_STATE_ARMED"

    wait_until(armed, what="rank 0 waiting for the start step")
    late = start_workload(job="join", rank=1, world_size=2, step_ms=4,
                          args=["--start-step", "2500"])
    stdout, stderr = tracer.communicate(timeout=120)
    assert tracer.returncode == 0, stdout + stderr
    first, _ = chosen_start_step(stderr + stdout)

    trace = TraceDir.find(out)
    assert {int(r["pid"]) for r in trace.results} == {early.pid, late.pid}
    assert trace.result_for(late.pid).get("joined_late") is True
    assert not trace.result_for(early.pid).get("joined_late", False)
    for workload in (early, late):
        res = trace.result_for(workload.pid)
        assert res["status"] == "CAPTURE_STATUS_OK", res
        assert step_marks(trace.path / res["file"]) == [first, first + 1], res


def test_a_rank_that_never_reaches_the_start_step_says_so(cli, start_workload):
    ahead = start_workload(job="behind", rank=0, world_size=2, step_ms=2,
                           args=["--start-step", "1000000"])
    behind = start_workload(job="behind", rank=1, world_size=2, step_ms=2)
    cli.wait_attached([ahead.pid, behind.pid])
    wait_until(lambda: {ahead.pid, behind.pid} <= set(current_steps(cli)),
               what="both ranks stepping")

    result = cli.run("trace", "--job", "behind", "--iterations", "2", "--duration", "2s",
                     "--json", "--no-download", timeout=60)
    assert result.returncode == 1, result.stdout + result.stderr
    results = {int(r["pid"]): r for r in trace_results(json.loads(result.stdout))}
    assert results[ahead.pid]["status"] == "CAPTURE_STATUS_OK", results
    slow = results[behind.pid]
    assert slow["status"] == "CAPTURE_STATUS_TIMED_OUT", slow
    assert "did not reach step" in slow["message"], slow
