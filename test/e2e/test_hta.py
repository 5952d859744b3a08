"""Holistic Trace Analysis opens a trace directory as gpuctl downloads it."""

import json
import subprocess
import sys

from e2e_util import manifest_paths

# Run in a child: HTA's import is slow and its logging noisy; the child
# prints the rank -> file map HTA built and the ranks it loaded.
HTA_SCRIPT = """
import json, sys
from hta.common.trace_file import get_trace_files
from hta.trace_analysis import TraceAnalysis
files = get_trace_files(sys.argv[1])
analysis = TraceAnalysis(trace_dir=sys.argv[1])
print(json.dumps({"files": {str(k): v for k, v in files.items()},
                  "ranks": sorted(int(r) for r in analysis.t.traces.keys())}))
"""


def run_hta(trace_dir):
    out = subprocess.run([sys.executable, "-c", HTA_SCRIPT, str(trace_dir)],
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_hta_loads_a_downloaded_two_rank_trace_and_a_process_of_unknown_rank(
        cli, start_workload):
    ranks = [start_workload(job="hta", rank=r, world_size=2) for r in (0, 1)]
    # Started without RANK: it must not claim rank 0 (or 1) in HTA's map.
    unranked = start_workload(job="hta")
    cli.wait_attached([w.pid for w in ranks] + [unranked.pid])

    result, trace = cli.trace("--job", "hta", "--duration", "300ms")
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(manifest_paths(trace.path)) == 1
    files = {f.name for f in trace.files()}
    assert len(files) == 3, files

    got = run_hta(trace.path)
    # One file per rank: the manifest is not among them, no file is lost to
    # a clash, and the known ranks keep theirs.
    assert sorted(got["files"].values()) == sorted(str(trace.path / f) for f in files), got
    by_rank = {int(k): v for k, v in got["files"].items()}
    for workload, rank in zip(ranks, (0, 1)):
        assert by_rank[rank].endswith(f"-rank{rank}-pid{workload.pid}.json.gz"), by_rank
    assert by_rank[2].endswith(f"-rank-1-pid{unranked.pid}.json.gz"), by_rank
    assert got["ranks"] == [0, 1, 2], got
