"""A small CPU training loop for the kineto bridge's end-to-end tests.

Linear layers, an optimizer and `record_function` ranges, one line per
step on stdout ("step N"), forever or for --steps. Rank and job come from
the environment as torchrun and Slurm give them (RANK, LOCAL_RANK,
WORLD_SIZE, SLURM_JOB_ID / GPUCTL_JOB_ID); they are printed at start so a
test can check what the daemon read. With KINETO_USE_DAEMON=1 (set by the
test fixture) PyTorch's profiler takes orders from the host's daemon.

    python train_loop.py [--steps N] [--step-ms MS] [--own-profiler]

--own-profiler keeps the job's own torch.profiler active for the whole run,
so an on-demand request finds kineto busy.
"""

import argparse
import contextlib
import os
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile, record_function


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=0, help="0: run until killed")
    parser.add_argument("--step-ms", type=float, default=10.0,
                        help="least time per step, so polls and windows see many steps")
    parser.add_argument("--own-profiler", action="store_true")
    return parser.parse_args()


def build_model():
    torch.manual_seed(int(os.environ.get("RANK", "0")))
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128), torch.nn.ReLU(),
        torch.nn.Linear(128, 10))
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def train(args):
    model, optimizer = build_model()
    inputs = torch.randn(32, 64)
    targets = torch.randint(0, 10, (32,))
    step = 0
    while args.steps == 0 or step < args.steps:
        started = time.monotonic()
        with record_function("train_step"):
            with record_function("forward"):
                loss = torch.nn.functional.cross_entropy(model(inputs), targets)
            with record_function("backward"):
                optimizer.zero_grad()
                loss.backward()
            # kineto counts optimizer.step() calls as iterations.
            optimizer.step()
        print(f"step {step} loss {loss.item():.4f}", flush=True)
        step += 1
        left = args.step_ms / 1000.0 - (time.monotonic() - started)
        if left > 0:
            time.sleep(left)


def main():
    args = parse_args()
    print(f"pid {os.getpid()} rank {os.environ.get('RANK', '-1')} "
          f"job {os.environ.get('GPUCTL_JOB_ID') or os.environ.get('SLURM_JOB_ID') or ''} "
          f"torch {torch.__version__}", flush=True)
    own = (profile(activities=[ProfilerActivity.CPU]) if args.own_profiler
           else contextlib.nullcontext())
    with own:
        if args.own_profiler:
            print("own profiler active", flush=True)
        train(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
