"""`gpuctl analyze --trace-id ID --host ...` and `--since D --job J --host ...`
against a real gpuctld: the traces are fetched as `gpuctl get` fetches them
and analysed as the downloaded directory is; hosts that are down or lack the
trace are named with the documented exit codes; the temporary directory is
gone afterwards, and --keep keeps the files.
"""

import json
import os
import socket
import subprocess
from pathlib import Path

from conftest import build_output

MISSING_ID = "0190c3a2-7b1e-7c4d-9a2b-3c4d5e6f7a8b"


def free_port():
    """A port nothing listens on: bound, then released."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def analyze_local(build_dir, *args):
    return subprocess.run([str(build_output(build_dir, "bin/gpuctl")), "analyze", *args],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def files_and_pids(doc):
    return sorted((Path(t["file"]).name, t["pid"], t["rank"]) for t in doc["traces"])


def take_trace(cli, job):
    result, trace = cli.trace("--job", str(job), "--duration", "1s")
    assert result.returncode == 0, result.stdout + result.stderr
    assert trace is not None, result.stdout + result.stderr
    return trace


def test_trace_id_is_analysed_as_its_downloaded_directory(cli, start_workload, build_dir,
                                                          workdir, daemon):
    rank0 = start_workload(job=42, rank=0, world_size=2)
    rank1 = start_workload(job=42, rank=1, world_size=2)
    cli.wait_attached([rank0.pid, rank1.pid])
    trace = take_trace(cli, 42)

    local = analyze_local(build_dir, str(trace.path), "--json")
    assert local.returncode == 0, local.stderr
    expected = files_and_pids(json.loads(local.stdout))
    assert {pid for _, pid, _ in expected} == {rank0.pid, rank1.pid}

    tmp = workdir / "tmp"
    tmp.mkdir()
    fetched = subprocess.run(cli.args("analyze", "--trace-id", trace.trace_id, "--json"),
                             capture_output=True, text=True, timeout=60,
                             stdin=subprocess.DEVNULL, env={**os.environ, "TMPDIR": str(tmp)})
    assert fetched.returncode == 0, fetched.stderr
    doc = json.loads(fetched.stdout)
    assert doc["schema"] == "gpuctl.analyze/1"
    assert files_and_pids(doc) == expected
    assert doc["errors"] == []
    # The same numbers as the local directory's, file by file.
    local_gpu = {Path(t["file"]).name: t["gpu"] for t in json.loads(local.stdout)["traces"]}
    assert {Path(t["file"]).name: t["gpu"] for t in doc["traces"]} == local_gpu
    assert list(tmp.iterdir()) == [], "the temporary download directory was left behind"

    # --keep: the files stay, under the host's directory.
    keep = workdir / "kept"
    kept = cli.run("analyze", "--trace-id", trace.trace_id, "--keep", str(keep))
    assert kept.returncode == 0, kept.stderr
    assert "Findings" in kept.stdout or "findings" in kept.stdout.lower(), kept.stdout
    kept_files = sorted(p.name for p in keep.glob(f"*/{trace.trace_id}/*.json.gz"))
    assert kept_files == sorted(f.name for f in trace.files())

    # A second host that is down is named; what the first delivered is still analysed.
    down = f"127.0.0.1:{free_port()}"
    partial = subprocess.run(
        [str(build_output(build_dir, "bin/gpuctl")), "analyze", "--trace-id", trace.trace_id,
         "--json", "--host", daemon.address, "--host", down],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert partial.returncode == 1, partial.stderr
    assert f"cannot reach gpuctld at {down}" in partial.stderr
    assert files_and_pids(json.loads(partial.stdout)) == expected


def test_trace_id_not_found_or_unreachable_exit_codes(cli, daemon):
    missing = cli.run("analyze", "--trace-id", MISSING_ID)
    assert missing.returncode == 3, missing.stderr
    assert f"no trace {MISSING_ID} on {daemon.address}" in missing.stderr

    down = f"127.0.0.1:{free_port()}"
    unreachable = cli.run("analyze", "--trace-id", MISSING_ID, host=down)
    assert unreachable.returncode == 4, unreachable.stderr
    assert f"cannot reach gpuctld at {down}" in unreachable.stderr


def test_since_job_fetches_each_trace_and_aggregates(cli, start_workload, workdir):
    worker = start_workload(job=77, rank=0, world_size=1)
    other = start_workload(job=8, rank=0, world_size=1)
    cli.wait_attached([worker.pid, other.pid])
    first = take_trace(cli, 77)
    second = take_trace(cli, 77)
    take_trace(cli, 8)

    result = cli.run("analyze", "--since", "1h", "--job", "77", "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["schema"] == "gpuctl.analyze.set/1"
    assert doc["job_id"] == "77"
    assert doc["matched"] == 2 and doc["analyzed"] == 2
    # Newest first; each report is the trace's own, naming the job's process only.
    assert [t["trace_id"] for t in doc["traces"]] == [second.trace_id, first.trace_id]
    for t in doc["traces"]:
        assert t["report"]["schema"] == "gpuctl.analyze/1"
        assert [r["pid"] for r in t["report"]["traces"]] == [worker.pid]
        assert all(r["trace_id"] == t["trace_id"] for r in t["report"]["traces"])
    # The aggregate sums the processes of both traces.
    agg = doc["aggregate"]
    reports = [r for t in doc["traces"] for r in t["report"]["traces"]]
    assert agg["processes"] == 2
    assert agg["gpu_span_ns"] == sum(r["gpu"]["span_ns"] for r in reports)
    assert agg["idle_ns"] == sum(r["gpu"]["idle_ns"] for r in reports)
    whole_steps = sum(1 for r in reports for s in r["steps"] if not s["clipped"])
    assert agg["steps"]["count"] == whole_steps

    # --max-traces bounds the fetch and says that more matched.
    bounded = cli.run("analyze", "--since", "1h", "--job", "77", "--max-traces", "1")
    assert bounded.returncode == 0, bounded.stderr
    assert "2 traces matched; analyzing the newest 1" in bounded.stderr
    assert f"trace {second.trace_id}" in bounded.stdout
    assert first.trace_id not in bounded.stdout
    assert "=== aggregate ===" in bounded.stdout
    assert all(len(line) <= 100 for line in bounded.stdout.splitlines()), bounded.stdout

    none = cli.run("analyze", "--since", "1h", "--job", "nosuchjob")
    assert none.returncode == 3, none.stderr
    assert "no traces of job nosuchjob in the last 1h" in none.stderr


def test_diff_of_two_fetched_traces(cli, start_workload, build_dir):
    worker = start_workload(job=5, rank=0, world_size=1)
    cli.wait_attached([worker.pid])
    first = take_trace(cli, 5)
    second = take_trace(cli, 5)

    result = cli.run("analyze", "--json", "--diff", f"trace:{first.trace_id}",
                     f"trace:{second.trace_id}")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["schema"] == "gpuctl.analyze.diff/1"
    assert doc["before"]["input"] == f"trace:{first.trace_id}"
    # Each side is its trace's own analysis.
    for side, trace in (("before", first), ("after", second)):
        local = analyze_local(build_dir, str(trace.path), "--json")
        assert local.returncode == 0, local.stderr
        reports = json.loads(local.stdout)["traces"]
        summary = doc[side]["summary"]
        assert summary["processes"] == len(reports) == 1
        assert summary["gpu_span_ns"] == sum(r["gpu"]["span_ns"] for r in reports)

    # One side fetched, the other a local directory: the same trace, no change.
    same = cli.run("analyze", "--json", "--diff", f"trace:{first.trace_id}", str(first.path))
    assert same.returncode == 0, same.stderr
    same_doc = json.loads(same.stdout)
    assert same_doc["kernels"]["changed_total"] == 0
    assert same_doc["kernels"]["appeared_total"] == 0
    assert same_doc["step_p50_ratio"] in (0, 1.0)

    missing = cli.run("analyze", "--diff", f"trace:{MISSING_ID}", str(first.path))
    assert missing.returncode == 3, missing.stderr


def test_conflicting_or_bad_fetch_flags_are_usage_errors(cli, workdir):
    cases = [
        (["analyze", str(workdir), "--trace-id", MISSING_ID], "two inputs"),
        (["analyze", "--since", "1h"], "--since needs --job"),
        (["analyze", "--job", "42"], "--job needs --since"),
        (["analyze", "--since", "forever", "--job", "42"], "--since"),
        (["analyze", "--since", "367d", "--job", "42"], "366d maximum"),
        (["analyze", str(workdir), "--bucket"], "--bucket goes with"),
        (["analyze", "--trace-id", "not-a-uuid"], "--trace-id"),
        (["analyze", "--trace-id", MISSING_ID, "--max-traces", "3"], "--max-traces"),
        (["analyze", "--since", "1h", "--job", "4", "--max-traces", "0"], "--max-traces"),
    ]
    for args, needle in cases:
        result = cli.run(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert needle in result.stderr, (args, result.stderr)
