#!/usr/bin/env python3
"""The PyTorch training loop of the GPU validation (test/gpu/run.sh).

A small MLP trained with AdamW on random data, one step per iteration,
synchronized at the end of each step so each step's wall time is its own.
It has no gpuctl code: the validation attaches libgpuctl.so with
CUDA_INJECTION64_PATH, and when the gpuctl Python module is importable
(PYTHONPATH=python, GPUCTL_LIBRARY=libgpuctl.so) its torch.optim hook marks
the steps.

The driver (validate.py) sends one JSON command a line on stdin and reads
one JSON answer a line on stdout; anything else goes to stderr.

    {"cmd": "run", "steps": N}                 N steps
    {"cmd": "run_for", "seconds": S}           steps for S seconds, or until SIGUSR1
    {"cmd": "torch_profile", "steps": N, "path": P}
                                               N steps under torch.profiler
                                               (CUDA activities only), trace to P
    {"cmd": "torch_begin"} / {"cmd": "torch_end", "path": P}
                                               start / stop and export torch.profiler
    {"cmd": "quit"}

Step answers: {"steps": [[start_ns, duration_ns], ...]}, start in
CLOCK_REALTIME ns (to compare with a capture window), duration from the
monotonic clock.
"""

import argparse
import json
import signal
import sys
import time

import torch

_stop = False


def _on_usr1(_signum, _frame):
    global _stop
    _stop = True


def build(args):
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = torch.nn.Sequential(
        torch.nn.Linear(args.width, 4 * args.width), torch.nn.GELU(),
        torch.nn.Linear(4 * args.width, 4 * args.width), torch.nn.GELU(),
        torch.nn.Linear(4 * args.width, args.width)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    x = torch.randn(args.batch, args.width, device=dev)
    y = torch.randn(args.batch, args.width, device=dev)
    return model, opt, x, y


class Loop:
    def __init__(self, model, opt, x, y):
        self.model, self.opt, self.x, self.y = model, opt, x, y

    def step(self):
        start_ns = time.time_ns()
        t0 = time.perf_counter_ns()
        self.opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(self.model(self.x), self.y)
        loss.backward()
        self.opt.step()
        torch.cuda.synchronize()
        return [start_ns, time.perf_counter_ns() - t0]

    def run(self, steps):
        return [self.step() for _ in range(steps)]

    def run_for(self, seconds):
        global _stop
        _stop = False
        end = time.monotonic() + seconds
        out = []
        while not _stop and time.monotonic() < end:
            out.append(self.step())
        return out


def profiler():
    from torch.profiler import ProfilerActivity, profile
    return profile(activities=[ProfilerActivity.CUDA])


def serve(loop):
    prof = None
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        cmd = req.get("cmd")
        if cmd == "run":
            answer = {"steps": loop.run(int(req["steps"]))}
        elif cmd == "run_for":
            answer = {"steps": loop.run_for(float(req["seconds"]))}
        elif cmd == "torch_profile":
            with profiler() as p:
                steps = loop.run(int(req["steps"]))
            p.export_chrome_trace(req["path"])
            answer = {"steps": steps, "path": req["path"]}
        elif cmd == "torch_begin":
            prof = profiler()
            prof.start()
            answer = {}
        elif cmd == "torch_end":
            prof.stop()
            prof.export_chrome_trace(req["path"])
            prof = None
            answer = {"path": req["path"]}
        elif cmd == "quit":
            print(json.dumps({"bye": True}), flush=True)
            return
        else:
            answer = {"error": f"unknown command {cmd!r}"}
        print(json.dumps(answer), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--warmup", type=int, default=30)
    args = parser.parse_args()
    signal.signal(signal.SIGUSR1, _on_usr1)
    try:
        import gpuctl
        module = {"imported": True, "available": gpuctl.available(),
                  "hook": gpuctl.install_torch_hook() if gpuctl.available() else False}
    except ImportError as e:
        module = {"imported": False, "error": str(e)}
    if not torch.cuda.is_available():
        print(json.dumps({"error": "torch.cuda.is_available() is False"}), flush=True)
        return 1
    loop = Loop(*build(args))
    loop.run(args.warmup)
    print(json.dumps({
        "ready": True, "torch": torch.__version__, "cuda": torch.version.cuda,
        "device": torch.cuda.get_device_name(0), "gpuctl_module": module,
        "cudnn": torch.backends.cudnn.version()}), flush=True)
    serve(loop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
