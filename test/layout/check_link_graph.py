#!/usr/bin/env python3
"""Fails when a target links what its room must not: reads CMake's own
dependency graph (`cmake --graphviz`) of a scratch configuration of the
source tree, so it sees what is linked, not what is included.

    check_link_graph.py SOURCE_DIR SCRATCH_DIR [cmake args...]

Rules (what each target must never reach, directly or transitively):
  gpuctl_daemon_core, gpuctl_convert, gpuctl_store, gpuctl_scheduler, gpuctl_analysis,
  gpuctl_merge, gpuctl_hostctx: gRPC (gRPC::*)
  gpuctl_hostctx: the core (gpuctl_daemon_core)
  libgpuctl: gRPC, protobuf, abseil, libcuda
"""
import re
import subprocess
import sys
from collections import defaultdict

FORBIDDEN = {
    "gpuctl_daemon_core": ["gRPC::"],
    "gpuctl_convert": ["gRPC::"],
    "gpuctl_analysis": ["gRPC::"],
    "gpuctl_merge": ["gRPC::"],
    "gpuctl_store": ["gRPC::"],
    "gpuctl_scheduler": ["gRPC::"],
    "gpuctl_hostctx": ["gRPC::", "gpuctl_daemon_core"],
    "gpuctl_proto_messages": ["gRPC::"],
    "libgpuctl": ["gRPC::", "protobuf::", "absl::", "CUDA::cuda_driver", "cuda"],
}
# Each rule target must reach this, or the graph is not what the rules assume.
REQUIRED = {"gpuctl_daemon_core": ["protobuf::libprotobuf", "gpuctl_proto_messages"]}

NODE_RE = re.compile(r'^\s*"(node\d+)"\s*\[\s*label\s*=\s*"([^"]+)"(?:,\s*shape\s*=\s*(\w+))?')
# CMake draws executables as eggs. An edge into one is a build-order
# dependency (a generator run by a custom command), never a link: nothing
# links an executable, so what it links does not reach its dependers.
EXECUTABLE_SHAPE = "egg"
EDGE_RE = re.compile(r'^\s*"(node\d+)"\s*->\s*"(node\d+)"')


def parse_dot(text):
    """(target names, {target: what it links}) from CMake's graphviz file."""
    names, edges, executables = {}, defaultdict(set), set()
    for line in text.splitlines():
        m = NODE_RE.match(line)
        if m:
            names[m.group(1)] = m.group(2).replace("\\n", "")
            if m.group(3) == EXECUTABLE_SHAPE:
                executables.add(m.group(1))
            continue
        m = EDGE_RE.match(line)
        if m:
            edges[m.group(1)].add(m.group(2))
    graph = defaultdict(set)
    for src, dsts in edges.items():
        graph[names[src]].update(names[d] for d in dsts if d not in executables)
    return set(names.values()), graph


def reachable(graph, start):
    seen, todo = set(), [start]
    while todo:
        node = todo.pop()
        for nxt in graph.get(node, ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def violations(nodes, graph):
    problems = []
    for target, prefixes in FORBIDDEN.items():
        if target not in nodes:
            problems.append(f"{target}: not in the dependency graph (renamed? update the rules)")
            continue
        reach = reachable(graph, target)
        for dep in sorted(reach):
            if any(dep == p or dep.startswith(p) for p in prefixes):
                path = path_to(graph, target, dep)
                problems.append(f"{target} reaches {dep}: {' -> '.join(path)}")
    for target, deps in REQUIRED.items():
        reach = reachable(graph, target)
        for dep in deps:
            if dep not in reach:
                problems.append(f"{target} does not reach {dep}: the graph is not what the rules assume")
    return problems


def path_to(graph, start, goal):
    prev, todo = {start: None}, [start]
    while todo:
        node = todo.pop(0)
        if node == goal:
            break
        for nxt in sorted(graph.get(node, ())):
            if nxt not in prev:
                prev[nxt] = node
                todo.append(nxt)
    path, node = [], goal
    while node is not None:
        path.append(node)
        node = prev.get(node)
    return list(reversed(path))


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    source, scratch, extra = argv[0], argv[1], argv[2:]
    dot = f"{scratch}/deps.dot"
    subprocess.run(["cmake", "-S", source, "-B", scratch, f"--graphviz={dot}", "-DGPUCTL_BUILD_TESTS=OFF",
                    "-DGPUCTL_BUILD_BENCH=OFF", *extra], check=True, stdout=subprocess.DEVNULL)
    with open(dot, encoding="utf-8") as f:
        nodes, graph = parse_dot(f.read())
    problems = violations(nodes, graph)
    for p in problems:
        print(p)
    print(f"check_link_graph: {len(nodes)} targets, {len(FORBIDDEN)} rules, {len(problems)} violations")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
