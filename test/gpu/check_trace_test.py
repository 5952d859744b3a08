"""Tests of check_trace.py on synthetic traces (no GPU needed).

The traces are built in the layout gpuctld writes (docs/trace-format.md),
from a plan shaped like the one test/gpu/workload.cu prints.
"""

import copy
import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_trace  # noqa: E402

PLAN = {
    "kernels": {"wl_fill": 1, "wl_scale<float>": 1, "wl_saxpy": 2, "wl_graph_a": 1,
                "wl_graph_b": 1},
    "graph_kernels": ["wl_graph_a", "wl_graph_b"],
    "memcpy": {"Memcpy HtoD (Pinned -> Device)": [1, 1024],
               "Memcpy DtoH (Device -> Pageable)": [1, 256]},
    "memset": {"Memset (Device)": [2, 772]},
    "nvtx_ranges": {"wl_iteration": 1, "wl_compute": 1},
    "nvtx_marks": {"wl_mark": 1},
}
MANGLED = {"wl_scale<float>": "_Z8wl_scaleIfEvPT_S0_i"}
PID = 4242


class TraceBuilder:
    def __init__(self):
        self.events = []
        self.corr = 0
        self.ts = 1000.0

    def tick(self, dur=1.0):
        self.ts += dur
        return self.ts

    def gpu(self, cat, name, stream, args=None, graph=None):
        self.corr += 1
        self.events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
                            "pid": PID, "tid": PID, "ts": self.tick(), "dur": 0.5,
                            "args": {"cbid": 211, "correlation": self.corr}})
        a = {"device": 0, "context": 1, "stream": stream, "correlation": self.corr}
        a.update(args or {})
        if graph:
            a["graph id"], a["graph node id"] = graph
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream,
                            "ts": self.tick(), "dur": 2.0, "args": a})

    def iteration(self, plan=PLAN):
        start = self.tick()
        for name, count in plan["kernels"].items():
            for i in range(count):
                graph = (7, 100 + plan["graph_kernels"].index(name)) \
                    if name in plan["graph_kernels"] else None
                self.gpu("kernel", MANGLED.get(name, name), 7 if i % 2 else 13, graph=graph)
        for cat, key in (("gpu_memcpy", "memcpy"), ("gpu_memset", "memset")):
            for name, (count, total) in plan[key].items():
                for i in range(count):
                    size = total // count + (total % count if i == 0 else 0)
                    self.gpu(cat, name, 13, {"bytes": size})
        for name, count in plan["nvtx_marks"].items():
            for _ in range(count):
                self.events.append({"ph": "i", "s": "t", "cat": "user_annotation",
                                    "name": name, "pid": PID, "tid": PID, "ts": self.tick(),
                                    "args": {"nvtx marker id": 9}})
        for name, count in plan["nvtx_ranges"].items():
            for _ in range(count):
                self.events.append({"ph": "X", "cat": "user_annotation", "name": name,
                                    "pid": PID, "tid": PID, "ts": start, "dur": 0.5,
                                    "args": {"nvtx marker id": 3}})
        self.tick()

    def step(self, n, dur):
        self.events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}",
                            "pid": PID, "tid": PID, "ts": self.tick(0.1), "dur": dur,
                            "args": {"step": n}})

    def doc(self, **gpuctl):
        info = {"host_only": False, "cupti_active": True, "cupti_failed": False,
                "dropped_events": "0"}
        info.update(gpuctl)
        return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}],
                "gpuctl": info, "traceEvents": self.events}


def iteration_trace(n):
    b = TraceBuilder()
    for i in range(n):
        b.step(100 + i, 1000.0)
        b.iteration()
    return b


def failed(report):
    return [c["name"] for c in report.checks if not c["ok"]]


def test_iteration_window_with_exactly_the_plan_passes():
    report, observed = check_trace.check_workload(iteration_trace(3).doc(), PLAN, 3)
    assert report.ok, report.checks
    assert observed["kernels"]["wl_scale<float>"] == 3  # demangled to its base name
    assert observed["graph_ids"] == [7]


def test_a_missing_kernel_fails_with_the_count():
    b = iteration_trace(3)
    b.events.remove(next(e for e in b.events if e["name"] == "wl_fill"))
    report, _ = check_trace.check_workload(b.doc(), PLAN, 3)
    assert failed(report) == ["kernel names and counts (3 iterations)"]
    detail = report.checks[[c["name"] for c in report.checks].index(failed(report)[0])]["detail"]
    assert detail == {"wl_fill": {"expected": 3, "observed": 2}}


def test_wrong_copy_bytes_and_missing_nvtx_fail():
    b = iteration_trace(2)
    next(e for e in b.events if e.get("cat") == "gpu_memcpy")["args"]["bytes"] = 1
    b.events = [e for e in b.events if e["name"] != "wl_compute"]
    report, _ = check_trace.check_workload(b.doc(), PLAN, 2)
    assert set(failed(report)) == {"copies: bytes", "NVTX ranges"}


def test_time_window_counts_only_whole_steps():
    b = TraceBuilder()
    b.iteration()                       # before the first mark in the window: partial
    for i in range(4):
        b.step(10 + i, 0.0)
        b.iteration()                   # the last one is cut by the window's end
    last_kernel = max(i for i, e in enumerate(b.events) if e["cat"] == "kernel")
    del b.events[last_kernel]
    steps = check_trace.step_events(b.doc())
    for step, following in zip(steps, steps[1:]):
        step["dur"] = following["ts"] - step["ts"]
    steps[-1]["dur"] = b.tick() - steps[-1]["ts"]
    report, observed = check_trace.check_workload(b.doc(), PLAN, None)
    assert observed["iterations"] == 3
    assert report.ok, failed(report)
    lo, hi, n = check_trace.counted_region(b.doc(), None)
    assert (lo, hi, n) == (steps[0]["ts"], steps[2]["ts"] + steps[2]["dur"], 3)


def test_time_window_needs_two_step_marks():
    b = TraceBuilder()
    b.step(1, 10.0)
    b.iteration()
    with pytest.raises(ValueError, match="at least 2 step marks"):
        check_trace.check_workload(b.doc(), PLAN, None)


def test_graph_id_on_a_plain_kernel_fails():
    b = iteration_trace(1)
    next(e for e in b.events if e["name"] == "wl_fill")["args"]["graph id"] = 7
    report, _ = check_trace.check_workload(b.doc(), PLAN, 1)
    assert "graph kernels carry graph ids, and only they" in failed(report)


def test_host_only_and_drops_fail():
    report, _ = check_trace.check_workload(
        iteration_trace(1).doc(host_only=True, dropped_events="5"), PLAN, 1)
    assert {"GPU activity captured (not host-only)", "no dropped events"} <= set(failed(report))


def test_an_unlinked_kernel_fails():
    b = iteration_trace(1)
    b.events = [e for e in b.events
                if not (e["cat"] == "cuda_runtime" and e["args"]["correlation"] == 1)]
    report, _ = check_trace.check_workload(b.doc(), PLAN, 1)
    assert failed(report) == ["every kernel linked to its launch call"]


def torch_trace(steps, plan=PLAN):
    b = TraceBuilder()
    for _ in range(steps):
        b.iteration(plan)
    for e in b.events:  # kineto writes demangled names
        if e["cat"] == "kernel":
            e["name"] = check_trace.DEMANGLE(e["name"])
    return {"traceEvents": b.events}


def test_compare_matches_mangled_and_demangled_names_per_step():
    report, detail = check_trace.compare_kernels(iteration_trace(4).doc(), torch_trace(10), 10,
                                                 iterations=4)
    assert report.ok, report.checks
    assert detail["gpuctl_kernels_per_step"] == detail["torch_kernels_per_step"] == 6


def test_compare_reports_a_kernel_only_one_side_has_and_count_drift():
    plan = copy.deepcopy(PLAN)
    plan["kernels"]["extra_kernel"] = 1
    plan["kernels"]["wl_saxpy"] = 3
    report, _ = check_trace.compare_kernels(iteration_trace(4).doc(), torch_trace(10, plan), 10,
                                            iterations=4)
    assert set(failed(report)) == {"same set of kernel names",
                                   "kernel counts per step within 10%"}


def test_command_line_exit_codes(tmp_path):
    trace = tmp_path / "t.json.gz"
    trace.write_bytes(gzip.compress(json.dumps(iteration_trace(2).doc()).encode()))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(PLAN))
    script = Path(check_trace.__file__)

    def run(*args):
        return subprocess.run([sys.executable, str(script), *map(str, args)],
                              capture_output=True, text=True, timeout=60)

    ok = run("workload", trace, "--plan", plan, "--iterations", "2")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert json.loads(ok.stdout)["ok"] is True
    wrong = run("workload", trace, "--plan", plan, "--iterations", "3")
    assert wrong.returncode == 1 and json.loads(wrong.stdout)["ok"] is False
    assert run("workload", tmp_path / "missing.json.gz", "--plan", plan).returncode == 2
    assert run("workload", trace, "--plan", plan, "--iterations", "0").returncode == 2


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
