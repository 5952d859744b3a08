"""Selectors pick exactly the right processes: launcher vs workers vs forked
helpers, pids, rank sets, labels (incl. the Kubernetes downward API) and
limits."""

import json
import re

from e2e_util import trace_results, wait_until


def picked(cli, *selector):
    """Pids a short trace with this selector captured (nothing downloaded)."""
    result = cli.run("trace", *selector, "--duration", "200ms", "--json", "--no-download")
    assert result.returncode == 0, result.stdout + result.stderr
    results = trace_results(json.loads(result.stdout))
    assert all(r["status"] == "CAPTURE_STATUS_OK" for r in results), results
    return {int(r["pid"]) for r in results}


def process_tree(workload, workers, helpers):
    """{"launcher": pid, "workers": {rank: pid}, "helpers": {pid: parent}}
    from the sample workload's startup lines."""
    tree = {"launcher": None, "workers": {}, "helpers": {}}
    for line in workload.lines():
        if m := re.fullmatch(r"launcher pid=(\d+)", line):
            tree["launcher"] = int(m.group(1))
        elif m := re.fullmatch(r"worker pid=(\d+) rank=(-?\d+)", line):
            tree["workers"][int(m.group(2))] = int(m.group(1))
        elif m := re.fullmatch(r"helper pid=(\d+) parent=(\d+)", line):
            tree["helpers"][int(m.group(1))] = int(m.group(2))
    if tree["launcher"] and len(tree["workers"]) == workers and len(tree["helpers"]) == helpers:
        return tree
    return None


def test_launcher_workers_and_forked_helpers(cli, start_workload):
    launcher = start_workload(job="tree", args=["--spawn-workers", "2", "--helpers", "1"])
    tree = wait_until(lambda: process_tree(launcher, 2, 2), what="launcher, 2 workers, 2 helpers")
    workers = set(tree["workers"].values())
    helpers = set(tree["helpers"])
    everyone = {tree["launcher"]} | workers | helpers
    cli.wait_attached(everyone)
    assert set(tree["helpers"].values()) == workers

    roles = {p["pid"]: p.get("role") for p in cli.processes()}
    assert roles[tree["launcher"]] == "PROCESS_ROLE_LAUNCHER", roles
    assert all(roles[pid] == "PROCESS_ROLE_WORKER" for pid in workers), roles
    assert all(roles[pid] == "PROCESS_ROLE_HELPER" for pid in helpers), roles

    # The job's ranks are the workers, never the launcher or the helpers.
    assert picked(cli, "--job", "tree") == workers
    # A launcher's pid stands for its workers.
    assert picked(cli, "--pid", str(tree["launcher"])) == workers
    # A helper named by pid is taken as asked.
    helper = min(helpers)
    assert picked(cli, "--pid", str(helper)) == {helper}
    assert picked(cli, "--job", "tree", "--rank", "1") == {tree["workers"][1]}
    assert picked(cli, "--job", "tree", "--include-helpers") == everyone


def test_rank_sets_labels_and_limit(cli, start_workload, workdir):
    labels_file = workdir / "podinfo-labels"
    # The Kubernetes downward API's format for metadata.labels.
    labels_file.write_text('app="trainer"\nteam="b"\nnote="say \\"hi\\""\n')
    by_rank = {}
    for rank in range(5):
        env = {"GPUCTL_LABELS": f"team={'a' if rank < 2 else 'b'},idx={rank}"}
        if rank == 4:
            env = {"GPUCTL_LABELS_FILE": str(labels_file), "POD_NAME": "trainer-4",
                   "POD_NAMESPACE": "ml"}
        by_rank[rank] = start_workload(job="sets", rank=rank, world_size=5, env=env).pid
    cli.wait_attached(by_rank.values())

    def ranks(*selector):
        pids = picked(cli, *selector)
        return {rank for rank, pid in by_rank.items() if pid in pids}

    assert ranks("--rank", "0-1,4") == {0, 1, 4}
    assert ranks("--rank", "3", "--rank", "0") == {0, 3}
    assert ranks("--label", "team=b") == {2, 3, 4}
    assert ranks("--label", "team=b", "--rank", "3-4") == {3, 4}
    assert ranks("--label", "app=trainer") == {4}
    assert ranks("--label", "k8s.pod=trainer-4", "--label", "k8s.namespace=ml") == {4}
    assert ranks("--job", "sets", "--limit", "2") == {0, 1}

    labels = {p["pid"]: p.get("labels", {}) for p in cli.processes()}
    assert labels[by_rank[4]]["note"] == 'say "hi"', labels[by_rank[4]]
    assert labels[by_rank[0]] == {"team": "a", "idx": "0"}

    bad = cli.run("trace", "--rank", "3-1", "--duration", "1s")
    assert bad.returncode == 2, bad.stdout + bad.stderr
    assert "3-1" in bad.stderr
    none = cli.run("trace", "--label", "team=c", "--duration", "1s", "--no-download")
    assert none.returncode == 3, none.stdout + none.stderr
