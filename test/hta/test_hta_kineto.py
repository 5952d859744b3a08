"""Holistic Trace Analysis on kineto traces as gpuctld stores them.

A real torch.profiler file (test/fixtures/kineto/, the same writer as an
on-demand kineto trace) goes through gpuctl_kineto_convert_fixture
(ConvertKinetoTrace: validate, tag, gzip) once per rank; HTA must load the
directory, find each rank from gpuctl's tag, and see every CPU operator of
the original with gpuctl's trace id beside kineto's metadata.
"""

import collections
import json
import os
import subprocess

import pytest

TRACE_ID = "018cc251-f47b-7c4d-9a2b-3c4d5e6f7a8b"
FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "kineto",
                       "torch_profiler_cpu.json")


def original_categories():
    with open(FIXTURE) as f:
        events = json.load(f)["traceEvents"]
    return collections.Counter(e.get("cat") for e in events if e.get("ph") == "X")


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory):
    build_dir = os.environ.get("GPUCTL_BUILD_DIR")
    assert build_dir, "GPUCTL_BUILD_DIR must point at the CMake build directory"
    tool = os.path.join(build_dir, "bin", "gpuctl_kineto_convert_fixture")
    assert os.access(tool, os.X_OK), f"{tool} is not built"
    out_dir = tmp_path_factory.mktemp("hta_kineto")
    for rank in (0, 1):
        out = subprocess.run(
            [tool, "--in", FIXTURE, "--dir", str(out_dir), "--trace-id", TRACE_ID,
             "--host", f"node{rank}", "--rank", str(rank), "--pid", str(500 + rank),
             "--job", "job-7"],
            check=True, capture_output=True, text=True, timeout=60)
        path, summary = out.stdout.strip().split("\n")
        assert path.endswith(f"node{rank}-rank{rank}-pid{500 + rank}.json.gz")
        assert json.loads(summary)["cpu_op_count"] == original_categories()["cpu_op"]
    return str(out_dir)


@pytest.fixture(scope="module")
def analysis(trace_dir):
    from hta.trace_analysis import TraceAnalysis

    return TraceAnalysis(trace_dir=trace_dir)


def test_hta_finds_each_rank_from_the_tag(analysis):
    assert sorted(analysis.t.traces.keys()) == [0, 1]


def test_hta_sees_every_cpu_operator(analysis):
    expected = original_categories()
    assert expected["cpu_op"] > 300
    names = analysis.t.symbol_table.get_sym_table()
    for rank in (0, 1):
        df = analysis.t.get_trace(rank)
        got = collections.Counter(df["cat"].map(lambda i: names[i]))
        assert got["cpu_op"] == expected["cpu_op"], rank
        assert got["user_annotation"] == expected["user_annotation"], rank


def test_metadata_carries_gpuctls_tag_and_kinetos_own(analysis):
    with open(FIXTURE) as f:
        original = json.load(f)
    for rank in (0, 1):
        meta = analysis.t.meta_data[rank]
        assert meta["gpuctl"] == {"trace_id": TRACE_ID, "host": f"node{rank}", "rank": rank,
                                  "pid": 500 + rank, "job_id": "job-7"}
        assert meta["distributedInfo"] == {"rank": rank}
        assert meta["trace_id"] == original["trace_id"]
        assert meta["baseTimeNanoseconds"] == original["baseTimeNanoseconds"]
