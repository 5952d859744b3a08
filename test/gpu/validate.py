#!/usr/bin/env python3
"""Drives the GPU validation; run it through test/gpu/run.sh.

Starts a private gpuctld, runs the CUDA workload and the PyTorch loop with
libgpuctl.so attached, traces them with the real gpuctl CLI and checks the
stored traces (check_trace.py). Writes results.json and summary.txt into
--out as each part ends, so a run cut short still leaves what it measured.
Every wait has a deadline; the whole run ends by --deadline-s.
"""

import argparse
import json
import os
import platform
import re
import shutil
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_trace  # noqa: E402
from harness import (Child, Daemon, Failed, Gpuctl, Run, keep_sample, part_latency,  # noqa: E402
                     record, require_ok)
from torch_parts import part_torch  # noqa: E402

JOB_WORKLOAD = "gpu-validate-workload"


# ---- environment -------------------------------------------------------------

def environment(run):
    env = {"host": platform.node(), "kernel": platform.release(),
           "python": platform.python_version()}
    if shutil.which("nvidia-smi"):
        res = run.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,"
                       "compute_cap", "--format=csv,noheader"], 30)
        env["gpus"] = [line.strip() for line in res.stdout.splitlines() if line.strip()]
        head = run.run(["nvidia-smi"], 30).stdout
        m = re.search(r"CUDA Version:\s*([\d.]+)", head)
        env["driver_cuda_version"] = m.group(1) if m else None
    else:
        env["gpus"] = []
    if run.args.nvcc:
        res = run.run([run.args.nvcc, "--version"], 30)
        m = re.search(r"release ([\d.]+), V([\d.]+)", res.stdout)
        env["nvcc"] = m.group(2) if m else res.stdout.strip()[-200:]
    res = run.run([run.args.gpuctl, "--version"], 10)
    env["gpuctl_version"] = res.stdout.strip()
    env["cupti_for_nvtx"] = run.args.cupti
    run.results["environment"].update(env)
    run.save()


# ---- part 1: the CUDA workload ---------------------------------------------------

def workload_env(run, daemon):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("GPUCTL_") and k not in ("LD_PRELOAD", "CUDA_INJECTION64_PATH")}
    env.update({"GPUCTL_SOCKET": str(daemon.socket), "GPUCTL_JOB_ID": JOB_WORKLOAD,
                "LD_PRELOAD": run.args.lib})
    return env


def part_workload(run, daemon, gpuctl):
    part = "workload"
    run.log("part: CUDA workload", show=True)
    env = workload_env(run, daemon)
    if run.args.dry_run:
        return part_workload_dry(run, gpuctl, env)
    if run.args.cupti:
        env["NVTX_INJECTION64_PATH"] = run.args.cupti
    child = Child(run, "workload", [run.args.workload, "--seconds", "90", "--iter-ms", "10"], env)
    try:
        plan = json.loads(child.expect("WORKLOAD_PLAN ", 60))
        if not run.args.cupti:
            plan["nvtx_ranges"], plan["nvtx_marks"] = {}, {}
            record(run, part, detail={"nvtx": "not checked: no libcupti for NVTX injection"})
        (run.work / "plan.json").write_text(json.dumps(plan))
        gpuctl.wait_attached(child.pid)
        for kind, extra, iterations in (
                ("iterations", ["--iterations", "5", "--duration", "30s"], 5),
                ("duration", ["--duration", "1s"], None)):
            try:
                code, _, result, path = gpuctl.trace(child.pid, *extra)
                require_ok(code, result, f"workload trace ({kind})")
                report, observed = check_trace.check_workload(
                    check_trace.load_trace(path), plan, iterations)
            except (Failed, ValueError, KeyError) as e:
                record(run, part, error=f"{kind} window: {e}")
                continue
            for c in report.checks:
                c["name"] = f"{kind} window: {c['name']}"
            record(run, part, report, {f"{kind}_trace": observed,
                                       f"{kind}_events": result.get("event_count")})
            if iterations:
                keep_sample(run, path, "sample_workload_trace.json.gz")
        if "latency" in run.args.parts and "torch" not in run.args.parts:
            part_latency(run, gpuctl, child.pid, keep_busy=None)
    finally:
        child.stop()


def latency_with_workload(run, daemon, gpuctl):
    """Trigger latency on the CUDA workload, when the PyTorch part did not
    get to measure it."""
    env = workload_env(run, daemon)
    child = Child(run, "workload_latency",
                  [run.args.workload, "--seconds", "90", "--iter-ms", "10"], env)
    try:
        child.expect("WORKLOAD_PLAN ", 60)
        gpuctl.wait_attached(child.pid)
        part_latency(run, gpuctl, child.pid, keep_busy=None)
    finally:
        child.stop()


def part_workload_dry(run, gpuctl, env):
    """No GPU: the sample workload with the fake CUPTI through the same path."""
    part = "workload"
    env.update({"GPUCTL_CUPTI_PATH": run.args.fake_cupti,
                "GPUCTL_FAKE_CUPTI_SCENARIO": "multi_device"})
    child = Child(run, "sample_workload", [run.args.sample_workload, "--steps", "100000",
                                           "--step-ms", "10"], env)
    try:
        gpuctl.wait_attached(child.pid)
        for kind, extra, iterations in (
                ("iterations", ["--iterations", "5", "--duration", "30s"], 5),
                ("duration", ["--duration", "1s"], None)):
            code, _, result, path = gpuctl.trace(child.pid, *extra)
            require_ok(code, result, f"dry trace ({kind})")
            doc = check_trace.load_trace(path)
            report = check_trace.Report()
            check_trace.check_capture_info(report, doc)
            kernels = check_trace.kernel_counts(doc)
            report.check("kernels from the fake CUPTI", sum(kernels.values()) > 0, dict(kernels))
            if iterations:
                steps = len(check_trace.step_events(doc))
                report.check("the window holds its steps", steps == iterations, steps)
            for c in report.checks:
                c["name"] = f"{kind} window: {c['name']}"
            record(run, part, report, {f"{kind}_events": result.get("event_count")})
            if iterations:
                keep_sample(run, path, "sample_dry_trace.json.gz")
        part_latency(run, gpuctl, child.pid, keep_busy=None)
    finally:
        child.stop()


# ---- summary -----------------------------------------------------------------------

def summary(run):
    lines = ["gpuctl GPU validation" + (" (dry run: fake CUPTI, no GPU)" if run.args.dry_run
                                        else "")]
    env = run.results["environment"]
    for key in ("gpus", "driver_cuda_version", "nvcc", "torch", "torch_cuda", "gpuctl_version"):
        if env.get(key):
            lines.append(f"  {key}: {env[key]}")
    for name, part in run.results["parts"].items():
        state = {True: "PASS", False: "FAIL", None: "SKIP"}[part.get("ok")]
        lines.append(f"{state:4} {name}")
        for c in part["checks"]:
            if not c["ok"]:
                lines.append(f"     x {c['name']}: {json.dumps(c['detail'])[:300]}")
        if part.get("error"):
            lines.append(f"     error: {part['error'][:400]}")
        if part.get("skipped"):
            lines.append(f"     skipped: {part['skipped']}")
    ov = run.results["parts"].get("overhead", {}).get("detail", {})
    if ov:
        lines.append("  step time ratios to unprofiled: " + ", ".join(
            f"{k} {v['ratio']}" for k, v in ov.items() if isinstance(v, dict)))
    lat = run.results["parts"].get("trigger_latency", {}).get("detail", {})
    if lat:
        lines.append(f"  trigger latency: p50 {lat.get('p50_ms')} ms, p99 {lat.get('p99_ms')} ms "
                     f"({lat.get('triggers')} triggers)")
    ok = all(p.get("ok") is not False for p in run.results["parts"].values())
    lines.append("RESULT: " + ("PASS" if ok and run.results["parts"] else "FAIL"))
    text = "\n".join(lines) + "\n"
    (run.out / "summary.txt").write_text(text)
    print(text, end="")
    return ok


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gpuctld", required=True)
    p.add_argument("--gpuctl", required=True)
    p.add_argument("--lib", required=True, help="libgpuctl.so")
    p.add_argument("--deps-dir", help="shared libraries of gpuctld/gpuctl (LD_LIBRARY_PATH)")
    p.add_argument("--workload", help="the built test/gpu/workload.cu")
    p.add_argument("--sample-workload", help="gpuctl_sample_workload (dry run)")
    p.add_argument("--fake-cupti", help="libcupti_fake.so (dry run)")
    p.add_argument("--cupti", help="libcupti for NVTX_INJECTION64_PATH")
    p.add_argument("--nvcc")
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--train-script", default=str(Path(__file__).resolve().parent / "train.py"),
                   help="the training program (train.py's protocol)")
    p.add_argument("--out", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--parts", default="workload,torch,latency")
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--deadline-s", type=float, default=280)
    p.add_argument("--triggers", type=int, default=20)
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--overhead-steps", type=int, default=300)
    p.add_argument("--tolerance", type=float, default=0.1)
    args = p.parse_args()
    args.parts = set(args.parts.split(","))
    run = Run(args)

    def on_term(_signum, _frame):
        raise SystemExit("terminated at the run's time limit")
    signal.signal(signal.SIGTERM, on_term)

    daemon = Daemon(run)
    current = "environment"
    try:
        environment(run)
        current = "daemon"
        daemon.start()
        gpuctl = Gpuctl(run, daemon)
        if "workload" in args.parts or args.dry_run:
            current = "workload"
            try:
                part_workload(run, daemon, gpuctl)
            except (Failed, OSError, ValueError, KeyError) as e:
                record(run, "workload", error=f"{type(e).__name__}: {e}")
        if args.dry_run:
            record(run, "torch", skipped="dry run: no GPU")
        elif "torch" in args.parts:
            current = "torch"
            try:
                part_torch(run, daemon, gpuctl)
            except (Failed, OSError, ValueError, KeyError) as e:
                record(run, "torch", error=f"{type(e).__name__}: {e}")
        if ("latency" in args.parts and "trigger_latency" not in run.results["parts"]
                and args.workload and not args.dry_run):
            current = "trigger_latency"
            try:
                latency_with_workload(run, daemon, gpuctl)
            except (Failed, OSError, ValueError, KeyError) as e:
                record(run, "trigger_latency", error=f"{type(e).__name__}: {e}")
    except (Failed, SystemExit, KeyboardInterrupt) as e:
        record(run, current, error=str(e) or type(e).__name__)
    finally:
        for child in run.children:
            child.stop()
        daemon.stop()
        run.log("gpuctld log (tail):\n" + daemon.tail(4000))
        run.results["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        run.save()
    return 0 if summary(run) else 1


if __name__ == "__main__":
    sys.exit(main())
