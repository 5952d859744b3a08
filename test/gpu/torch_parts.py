"""The PyTorch parts of the GPU validation (validate.py): traces compared
with torch.profiler, coexistence with it, overhead, and trigger latency
while the loop trains. train.py runs the loop and answers the commands.
"""

import json
import os
import statistics
from pathlib import Path

import check_trace
from harness import (Background, Child, Failed, keep_sample, one_check, part_latency,
                     percentile, record, require_ok, timestamp_ns)

JOB_TORCH = "gpu-validate-torch"


def torch_env(run, daemon):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("GPUCTL_") and k not in ("LD_PRELOAD", "CUDA_INJECTION64_PATH")}
    python_dir = str(Path(__file__).resolve().parents[2] / "python")
    env.update({"GPUCTL_SOCKET": str(daemon.socket), "GPUCTL_JOB_ID": JOB_TORCH,
                "CUDA_INJECTION64_PATH": run.args.lib, "GPUCTL_LIBRARY": run.args.lib,
                "PYTHONPATH": ":".join(p for p in (python_dir, os.environ.get("PYTHONPATH"))
                                       if p),
                "PYTHONUNBUFFERED": "1"})
    return env


def step_ms(steps):
    return [d / 1e6 for _, d in steps]


def median_ms(steps):
    return statistics.median(step_ms(steps)) if steps else None


def in_window(steps, start_ns, end_ns):
    return [s for s in steps if s[0] >= start_ns and s[0] + s[1] <= end_ns]


def window_of(result):
    return timestamp_ns(result["window_start"]), timestamp_ns(result["window_end"])


def part_torch(run, daemon, gpuctl):
    run.log("part: PyTorch (trace, coexistence, overhead, trigger latency)", show=True)
    cmd = [run.args.python, run.args.train_script]
    child = Child(run, "train", cmd, torch_env(run, daemon), stdin=True)
    ready = None
    try:
        ready = json.loads("{" + child.expect("{", 180))
        if "error" in ready:
            raise Failed(f"train.py: {ready['error']}")
        run.results["environment"].update(
            {"torch": ready["torch"], "torch_cuda": ready["cuda"], "cudnn": ready.get("cudnn"),
             "torch_device": ready["device"], "gpuctl_module": ready["gpuctl_module"]})
        run.save()
        gpuctl.wait_attached(child.pid)
        torch_parts(run, gpuctl, child, ready)
    finally:
        if ready and child.proc.poll() is None and run.left() > 10:
            try:
                child.request({"cmd": "quit"}, 5)
            except (Failed, OSError):
                pass
        child.stop()


def trace_while_training(gpuctl, child, *extra, download=True):
    """gpuctl trace while the loop steps; returns (exit code, result, file,
    the steps taken meanwhile). A trace that gave no answer raises Failed
    after the steps ended."""
    bg = Background(child, 60)
    try:
        code, _, result, path = gpuctl.trace(child.pid, *extra, download=download)
    except Failed as e:
        bg.finish()
        raise e
    return code, result, path, bg.finish()


def torch_parts(run, gpuctl, child, ready):
    n = run.args.overhead_steps
    phases = {"unprofiled_before": child.request({"cmd": "run", "steps": n}, 120)["steps"]}

    # A time window: overhead inside it, and the trace for the comparison.
    duration_trace = None
    try:
        code, result, duration_trace, steps = trace_while_training(
            gpuctl, child, "--duration", "2s")
        require_ok(code, result, "PyTorch trace (--duration)")
        start, end = window_of(result)
        phases["gpuctl_window"] = in_window(steps, start, end)
        record(run, "torch_trace", one_check("--duration trace ok", True),
               {"duration_events": result.get("event_count")})
    except Failed as e:
        duration_trace = None
        record(run, "torch_trace", error=str(e))
    phases["after_window"] = child.request({"cmd": "run", "steps": n}, 120)["steps"]

    iteration_trace = None
    if ready["gpuctl_module"].get("hook"):
        try:
            code, result, iteration_trace, _ = trace_while_training(
                gpuctl, child, "--iterations", str(run.args.iterations), "--duration", "30s")
            require_ok(code, result, "PyTorch trace (--iterations)")
            record(run, "torch_trace", one_check("--iterations trace ok", True),
                   {"iteration_events": result.get("event_count")})
            keep_sample(run, iteration_trace, "sample_torch_trace.json.gz")
        except Failed as e:
            iteration_trace = None
            record(run, "torch_trace", error=str(e))
    else:
        record(run, "torch_trace", detail={"iterations": "skipped: the gpuctl module's "
                                           f"torch hook is not active ({ready['gpuctl_module']})"})

    if "latency" in run.args.parts:
        part_latency(run, gpuctl, child.pid, keep_busy=child)

    torch_path = run.work / "torch_profiler_trace.json"
    answer = child.request({"cmd": "torch_profile", "steps": n, "path": str(torch_path)}, 300)
    phases["torch_profiler"] = answer["steps"]
    try:
        compare(run, duration_trace, iteration_trace, torch_path, n,
                len(phases.get("gpuctl_window", [])))
    except (Failed, ValueError, KeyError) as e:
        record(run, "torch_trace", error=f"comparing with torch.profiler: {e}")
    try:
        coexistence(run, gpuctl, child, run.work / "torch_coexist_trace.json", torch_path, n)
    except (Failed, ValueError, KeyError) as e:
        record(run, "coexistence", error=str(e))
    phases["unprofiled_after"] = child.request({"cmd": "run", "steps": n}, 120)["steps"]
    overhead(run, phases)


def compare(run, duration_trace, iteration_trace, torch_path, torch_steps, window_steps):
    """window_steps: steps of the time window by the loop's own clock, for a
    trace without step marks (the gpuctl module's hook inactive)."""
    torch_doc = check_trace.load_trace(torch_path)
    for kind, path, iterations in (("duration", duration_trace, None),
                                   ("iterations", iteration_trace, run.args.iterations)):
        if path is None:
            continue
        if iterations is None and len(check_trace.step_events(
                check_trace.load_trace(path))) < 2:
            iterations = max(1, window_steps)
        report, detail = check_trace.compare_kernels(
            check_trace.load_trace(path), torch_doc, torch_steps, iterations,
            run.args.tolerance)
        for c in report.checks:
            c["name"] = f"{kind} window vs torch.profiler: {c['name']}"
        record(run, "torch_trace", report, {f"{kind}_vs_torch_profiler": detail})


def coexistence(run, gpuctl, child, path, reference_path, n):
    part = "coexistence"
    child.request({"cmd": "torch_begin"}, 60)
    try:
        code, result, _, steps = trace_while_training(gpuctl, child, "--duration", "1s",
                                                      download=False)
    finally:
        child.request({"cmd": "torch_end", "path": str(path)}, 120)
    report = check_trace.Report()
    status = result.get("status") if result else None
    report.check("gpuctl reports busy while torch.profiler is active",
                 status == "CAPTURE_STATUS_BUSY" and code == 1,
                 {"exit": code, "status": status, "message": (result or {}).get("message")})
    ref = check_trace.kernel_counts(check_trace.load_trace(reference_path))
    got = check_trace.kernel_counts(check_trace.load_trace(path))
    per_step_ref = sum(ref.values()) / n
    per_step_got = sum(got.values()) / max(1, len(steps))
    report.check("torch.profiler's trace is intact (kernels per step as without gpuctl)",
                 set(got) == set(ref) and
                 abs(per_step_got - per_step_ref) <= run.args.tolerance * per_step_ref,
                 {"kernels_per_step": round(per_step_got, 2),
                  "reference_per_step": round(per_step_ref, 2), "steps": len(steps)})
    code, result, trace_path, _ = trace_while_training(gpuctl, child, "--duration", "1s")
    ok = code == 0 and result and result.get("status") == "CAPTURE_STATUS_OK"
    kernels = sum(check_trace.kernel_counts(check_trace.load_trace(trace_path)).values()) \
        if ok and trace_path else 0
    report.check("gpuctl traces again after torch.profiler ended", ok and kernels > 0,
                 {"exit": code, "status": (result or {}).get("status"),
                  "message": (result or {}).get("message"), "kernels": kernels})
    record(run, part, report)


def overhead(run, phases):
    base = [median_ms(phases[k]) for k in ("unprofiled_before", "unprofiled_after")]
    baseline = statistics.mean(b for b in base if b is not None)
    detail = {"baseline_ms": round(baseline, 4)}
    for name in ("unprofiled_before", "gpuctl_window", "after_window", "torch_profiler",
                 "unprofiled_after"):
        steps = phases.get(name, [])
        detail[name] = {"steps": len(steps), "median_ms": round(median_ms(steps), 4)
                        if steps else None,
                        "p90_ms": round(percentile(step_ms(steps), 0.9), 4) if steps else None,
                        "ratio": round(median_ms(steps) / baseline, 4) if steps else None}
    report = check_trace.Report()
    ours = detail["gpuctl_window"]["ratio"]
    theirs = detail["torch_profiler"]["ratio"]
    after = detail["after_window"]["ratio"]
    noise = abs(base[0] - base[1]) / baseline if None not in base else 0.0
    detail["baseline_spread"] = round(noise, 4)
    if ours is not None and theirs is not None:
        report.check("gpuctl in-window overhead <= half of torch.profiler's "
                     "(+ baseline spread)",
                     ours - 1 <= max(0.0, theirs - 1) / 2 + noise,
                     {"gpuctl": ours, "torch_profiler": theirs})
    else:
        report.check("steps measured in the gpuctl window", False, detail["gpuctl_window"])
    report.check("no measurable slowdown after the window (within 2% + baseline spread)",
                 after is not None and after <= 1.02 + noise, {"after": after})
    record(run, "overhead", report, detail)
