#!/usr/bin/env python3
"""Conversion cost of this tree against an earlier revision, in one run.

Builds bench/convert_bench.cc at REV (a git worktree in a scratch
directory, its own build directory, the compiler cache shared) and runs
that binary and this tree's alternately, ROUNDS times each, so both see
the same machine load. Each round is one `gpuctl_convert_bench --runs 3`;
the figure taken from it is the daemon's end-to-end cost per record (read
+ validate + JSON + gzip, streamed, one thread) and the compressed size.

    python3 bench/convert_compare.py BUILD_DIR REV [--rounds 9]

Prints a markdown table: p50 / p90 of ns per record for each, records per
second per core, the ratio (REV's time / this tree's), and the gzip sizes.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import percentile  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
PER_RECORD = re.compile(r"daemon end-to-end per record \(p50\): (\d+) ns")
SIZES = re.compile(r"(\d+) records .* gzip level \d+ ([0-9.]+) MB")


def build_at(rev, scratch):
    tree = scratch / "tree"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), rev],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    build = scratch / "build"
    env = dict(os.environ, CCACHE_BASEDIR=str(tree), CCACHE_NOHASHDIR="1")
    subprocess.run(["cmake", "-S", str(tree), "-B", str(build), "-G", "Ninja",
                    "-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DGPUCTL_BUILD_TESTS=OFF"],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run(["ninja", "-C", str(build), "-j2", "gpuctl_convert_bench"], check=True,
                   env=env, stdout=subprocess.DEVNULL)
    return build / "bin" / "gpuctl_convert_bench"


def one_round(binary):
    out = subprocess.run([str(binary), "--runs", "3"], check=True, capture_output=True,
                         text=True).stdout
    per_record = PER_RECORD.search(out)
    sizes = SIZES.search(out)
    if not per_record or not sizes:
        raise SystemExit(f"unexpected output from {binary}:\n{out}")
    return int(per_record.group(1)), int(sizes.group(1)), float(sizes.group(2))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build_dir", type=Path)
    parser.add_argument("rev")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    ours = args.build_dir / "bin" / "gpuctl_convert_bench"
    if not ours.exists():
        raise SystemExit(f"{ours} not found: build gpuctl_convert_bench first")
    with tempfile.TemporaryDirectory(prefix="gpuctl-convert-compare-") as tmp:
        scratch = Path(tmp)
        try:
            theirs = build_at(args.rev, scratch)
            results = {"rev": [], "tree": []}
            sizes = {}
            for _ in range(args.rounds):
                for name, binary in (("rev", theirs), ("tree", ours)):
                    ns, records, mb = one_round(binary)
                    results[name].append(ns)
                    sizes[name] = (records, mb)
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force",
                            str(scratch / "tree")], check=False)
    print(f"{args.rounds} alternating rounds of `gpuctl_convert_bench --runs 3`; "
          f"{sizes['tree'][0]} records\n")
    print("| build | ns per record p50 | p90 | records/s per core (p50) | gzip MB |")
    print("|---|---:|---:|---:|---:|")
    for name, label in (("rev", args.rev), ("tree", "this tree")):
        p50 = statistics.median(results[name])
        print(f"| {label} | {p50:.0f} | {percentile(results[name], 90):.0f} | "
              f"{1e9 / p50 / 1e6:.2f} M | {sizes[name][1]:.3f} |")
    ratio = statistics.median(results["rev"]) / statistics.median(results["tree"])
    size_change = (sizes["tree"][1] / sizes["rev"][1] - 1) * 100
    print(f"\nthis tree converts {ratio:.2f}x the records per second of {args.rev}; "
          f"its output is {size_change:+.1f} % the size")


if __name__ == "__main__":
    main()
