#!/usr/bin/env python3
"""Checks stored gpuctl traces (.json.gz) against what ran on the GPU.

    check_trace.py workload TRACE --plan PLAN.json [--iterations N]
    check_trace.py compare GPUCTL_TRACE TORCH_TRACE --torch-steps M
                   [--iterations N] [--tolerance 0.1]

workload: TRACE is a trace of test/gpu/workload.cu; PLAN.json is the
workload's WORKLOAD_PLAN line (what one iteration does). With --iterations N
(an iteration window) every GPU operation of the file counts and N
iterations are expected; without (a time window) the operations between
the first and the last step mark in the window count, and the iterations
are the steps that lie wholly in the window.

compare: the kernels of a gpuctl trace against torch.profiler's trace
(kineto JSON, .json or .json.gz) of M steps of the same loop: the same
set of kernel names (demangled), and per-step counts within the tolerance.

Prints one JSON document ({"ok": bool, "checks": [...], ...}); exit 0 when
every check passed, 1 when one failed, 2 on bad input.
"""

import argparse
import ctypes
import ctypes.util
import gzip
import json
import sys
from collections import Counter
from pathlib import Path

GPU_OP_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def load_trace(path):
    """A Chrome trace document from a .json or .json.gz file."""
    raw = Path(path).read_bytes()
    text = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    doc = json.loads(text)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise ValueError(f"{path}: not a Chrome trace (no traceEvents list)")
    return doc


class Demangler:
    """Itanium C++ names to readable ones with libstdc++'s __cxa_demangle,
    as kineto does; a name that is not mangled is returned unchanged."""

    def __init__(self):
        self._cache = {}
        self._fn = None
        try:
            lib = ctypes.CDLL(ctypes.util.find_library("stdc++") or "libstdc++.so.6")
            libc = ctypes.CDLL(None)
            # getattr: inside a class, Python would mangle lib.__cxa_demangle.
            fn = getattr(lib, "__cxa_demangle")
            fn.restype = ctypes.c_void_p
            fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                           ctypes.POINTER(ctypes.c_int)]
            libc.free.argtypes = [ctypes.c_void_p]
            self._fn, self._free = fn, libc.free
        except (OSError, AttributeError):
            self._fn = None

    @property
    def available(self):
        return self._fn is not None

    def __call__(self, name):
        if not name.startswith("_Z") or self._fn is None:
            return name
        if name not in self._cache:
            status = ctypes.c_int(0)
            ptr = self._fn(name.encode(), None, None, ctypes.byref(status))
            if ptr and status.value == 0:
                self._cache[name] = ctypes.string_at(ptr).decode("utf-8", "replace")
            else:
                self._cache[name] = name
            if ptr:
                self._free(ptr)
        return self._cache[name]


DEMANGLE = Demangler()


def base_name(name):
    """A kernel's name without return type and parameters:
    "void wl_scale<float>(float*, float, int)" -> "wl_scale<float>"."""
    text = DEMANGLE(name)
    depth = 0
    for i, ch in enumerate(text):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            text = text[:i]
            break
    if text.startswith("void "):
        text = text[len("void "):]
    return text.strip()


def step_events(doc):
    return sorted((e for e in doc["traceEvents"]
                   if e.get("cat") == "user_annotation" and e.get("ph") == "X"
                   and str(e.get("name", "")).startswith("ProfilerStep#")),
                  key=lambda e: e["ts"])


def counted_region(doc, iterations):
    """(first ts, last ts, iterations) of the part of the trace to count.
    An iteration window counts the whole file; a time window the steps
    wholly inside it (every step but the last, which ends at the window's
    end)."""
    if iterations is not None:
        return float("-inf"), float("inf"), iterations
    steps = step_events(doc)
    if len(steps) < 2:
        raise ValueError(f"a time window needs at least 2 step marks, found {len(steps)}")
    full = steps[:-1]
    return full[0]["ts"], full[-1]["ts"] + full[-1].get("dur", 0), len(full)


def in_region(event, lo, hi):
    return lo <= event.get("ts", 0) <= hi


class Report:
    def __init__(self):
        self.checks = []

    def check(self, name, ok, detail=None):
        self.checks.append({"name": name, "ok": bool(ok), "detail": detail})
        return ok

    @property
    def ok(self):
        return all(c["ok"] for c in self.checks)


def check_capture_info(report, doc):
    info = doc.get("gpuctl", {})
    report.check("GPU activity captured (not host-only)", not info.get("host_only", False),
                 info.get("host_only_reason"))
    report.check("CUPTI subscribed and did not fail",
                 info.get("cupti_active", False) and not info.get("cupti_failed", False),
                 {k: info.get(k) for k in ("cupti_path", "cupti_version", "cupti_message")})
    report.check("no dropped events", int(info.get("dropped_events", 0)) == 0,
                 info.get("dropped_events"))
    props = doc.get("deviceProperties", [])
    report.check("deviceProperties present", bool(props),
                 [p.get("name") for p in props])


def expect_counts(report, what, observed, expected):
    diff = {k: {"expected": expected.get(k, 0), "observed": observed.get(k, 0)}
            for k in set(expected) | set(observed) if expected.get(k, 0) != observed.get(k, 0)}
    report.check(what, not diff, diff or None)


def check_workload(doc, plan, iterations=None):
    """Every check of a workload trace; returns (Report, observed summary)."""
    report = Report()
    check_capture_info(report, doc)
    lo, hi, n = counted_region(doc, iterations)
    report.check("at least one iteration counted", n >= 1, n)
    events = [e for e in doc["traceEvents"] if in_region(e, lo, hi)]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    copies = [e for e in events if e.get("cat") == "gpu_memcpy"]
    memsets = [e for e in events if e.get("cat") == "gpu_memset"]

    kernel_counts = Counter(base_name(e["name"]) for e in kernels)
    expect_counts(report, f"kernel names and counts ({n} iterations)", kernel_counts,
                  {k: v * n for k, v in plan["kernels"].items()})
    for cat, key, evs in (("copies", "memcpy", copies), ("memsets", "memset", memsets)):
        counts = Counter(e["name"] for e in evs)
        expect_counts(report, f"{cat}: kinds and counts", counts,
                      {k: v[0] * n for k, v in plan[key].items()})
        total = Counter()
        for e in evs:
            total[e["name"]] += int(e.get("args", {}).get("bytes", -1))
        expect_counts(report, f"{cat}: bytes", total, {k: v[1] * n for k, v in plan[key].items()})

    marker_events = [e for e in events if e.get("cat") == "user_annotation"
                     and "nvtx marker id" in e.get("args", {})]
    ranges = Counter(e["name"] for e in marker_events if e.get("ph") == "X")
    marks = Counter(e["name"] for e in marker_events if e.get("ph") == "i")
    expect_counts(report, "NVTX ranges", ranges,
                  {k: v * n for k, v in plan["nvtx_ranges"].items()})
    expect_counts(report, "NVTX marks", marks, {k: v * n for k, v in plan["nvtx_marks"].items()})

    graph_kernels = [e for e in kernels if "graph id" in e.get("args", {})]
    graph_names = {base_name(e["name"]) for e in graph_kernels}
    report.check("graph kernels carry graph ids, and only they",
                 graph_names == set(plan["graph_kernels"]), sorted(graph_names))
    graph_ids = {e["args"]["graph id"] for e in graph_kernels}
    node_ids = {e["args"].get("graph node id") for e in graph_kernels}
    report.check("one graph, one node id per graph kernel",
                 len(graph_ids) == 1 and len(node_ids) == len(plan["graph_kernels"]),
                 {"graph_ids": sorted(graph_ids), "node_ids": sorted(map(str, node_ids))})

    plain = [e for e in kernels if "graph id" not in e.get("args", {})]
    streams = sorted({e["args"].get("stream") for e in plain})
    report.check("kernels on two streams", len(streams) >= 2, streams)
    runtime_corr = {e["args"].get("correlation") for e in doc["traceEvents"]
                    if e.get("cat") == "cuda_runtime"}
    unlinked = [e["name"] for e in plain if e["args"].get("correlation") not in runtime_corr]
    report.check("every kernel linked to its launch call", not unlinked,
                 Counter(unlinked) or None)

    observed = {"iterations": n, "kernels": dict(kernel_counts),
                "copies": dict(Counter(e["name"] for e in copies)),
                "memsets": dict(Counter(e["name"] for e in memsets)),
                "nvtx_ranges": dict(ranges), "graph_ids": sorted(graph_ids),
                "streams": streams, "plan_streams": plan.get("streams"),
                "devices": [p.get("name") for p in doc.get("deviceProperties", [])]}
    return report, observed


def kernel_counts(doc, region=None):
    lo, hi = region or (float("-inf"), float("inf"))
    return Counter(DEMANGLE(e["name"]) for e in doc["traceEvents"]
                   if e.get("cat") == "kernel" and in_region(e, lo, hi))


def compare_kernels(gpuctl_doc, torch_doc, torch_steps, iterations=None, tolerance=0.1):
    """gpuctl's kernels per step against torch.profiler's; returns (Report, detail)."""
    report = Report()
    check_capture_info(report, gpuctl_doc)
    lo, hi, n = counted_region(gpuctl_doc, iterations)
    ours = kernel_counts(gpuctl_doc, (lo, hi))
    theirs = kernel_counts(torch_doc)
    report.check("gpuctl captured kernels", sum(ours.values()) > 0, sum(ours.values()))
    report.check("torch.profiler captured kernels", sum(theirs.values()) > 0,
                 sum(theirs.values()))
    only_ours = sorted(set(ours) - set(theirs))
    only_theirs = sorted(set(theirs) - set(ours))
    report.check("same set of kernel names", not only_ours and not only_theirs,
                 {"only_gpuctl": only_ours[:20], "only_torch_profiler": only_theirs[:20]}
                 if only_ours or only_theirs else None)
    off = {}
    for name in set(ours) & set(theirs):
        a, b = ours[name] / n, theirs[name] / torch_steps
        if abs(a - b) > tolerance * max(a, b):
            off[name[:120]] = {"gpuctl_per_step": round(a, 3), "torch_per_step": round(b, 3)}
    report.check(f"kernel counts per step within {tolerance:.0%}", not off, off or None)
    detail = {"gpuctl_steps": n, "torch_steps": torch_steps,
              "gpuctl_kernels_per_step": round(sum(ours.values()) / n, 3),
              "torch_kernels_per_step": round(sum(theirs.values()) / torch_steps, 3),
              "distinct_kernels": len(set(ours) | set(theirs)),
              "demangler": DEMANGLE.available}
    return report, detail


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("workload", help="check a trace of test/gpu/workload.cu")
    w.add_argument("trace")
    w.add_argument("--plan", required=True, help="the WORKLOAD_PLAN JSON, as a file")
    w.add_argument("--iterations", type=int, help="the trace is an iteration window of N")
    c = sub.add_parser("compare", help="compare kernels with a torch.profiler trace")
    c.add_argument("gpuctl_trace")
    c.add_argument("torch_trace")
    c.add_argument("--torch-steps", type=int, required=True)
    c.add_argument("--iterations", type=int)
    c.add_argument("--tolerance", type=float, default=0.1)
    args = parser.parse_args(argv)
    for value in (getattr(args, "iterations", None), getattr(args, "torch_steps", None)):
        if value is not None and value < 1:
            parser.error("step and iteration counts must be at least 1")
    try:
        if args.command == "workload":
            plan = json.loads(Path(args.plan).read_text())
            report, detail = check_workload(load_trace(args.trace), plan, args.iterations)
        else:
            report, detail = compare_kernels(load_trace(args.gpuctl_trace),
                                             load_trace(args.torch_trace), args.torch_steps,
                                             args.iterations, args.tolerance)
    except (OSError, ValueError, KeyError) as e:
        print(f"check_trace.py: {e}", file=sys.stderr)
        return 2
    print(json.dumps({"ok": report.ok, "checks": report.checks, "observed": detail}, indent=1))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
