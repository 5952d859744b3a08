"""The Kubernetes deployment (deploy/kubernetes) checked without a cluster:
every kustomization rendered offline by the project's kubectl, validated
against the API schemas, and held to what the manifests claim (Pod
Security levels, no plain-text API, ports behind a NetworkPolicy, a
configuration gpuctld accepts, image paths that the install provides).
No API server runs here (docs/kubernetes.md, "What is tested")."""

import copy
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
import time

import pytest
import yaml

import pod_security

SOURCE = pathlib.Path(__file__).resolve().parents[2]
DEPLOY = SOURCE / "deploy" / "kubernetes"
VENV_BIN = SOURCE / ".venv" / "bin"
BUILD = pathlib.Path(os.environ.get("GPUCTL_BUILD_DIR", SOURCE / "build"))
# Kinds whose schemas kubernetes-validate does not bundle (CRDs).
CRD_GROUPS = ("cert-manager.io/", "monitoring.coreos.com/")
# The CRD kinds each overlay adds, by the directory's name.
CRD_KINDS = {"cert-manager": {"Issuer", "Certificate"},
             "prometheus-operator": {"PodMonitor"}}
MIN_VERSION = "1.29.0"


def kustomizations():
    return sorted(p.parent for p in DEPLOY.rglob("kustomization.yaml"))


_rendered = {}


def render(directory):
    if directory not in _rendered:
        # The venv's kubectl: another, older one may be on the PATH.
        out = subprocess.run([str(VENV_BIN / "kubectl"), "kustomize", str(directory)],
                             check=True, capture_output=True, text=True, timeout=120)
        _rendered[directory] = (out.stdout, [d for d in yaml.safe_load_all(out.stdout) if d])
    return _rendered[directory]


def documents(directory):
    return render(directory)[1]


def all_documents():
    for directory in kustomizations():
        for doc in documents(directory):
            yield directory, doc


def pod_templates():
    """(kustomization, owning document, pod spec, pod labels) of every pod."""
    for directory, doc in all_documents():
        kind = doc["kind"]
        if kind == "Pod":
            yield directory, doc, doc["spec"], doc["metadata"].get("labels") or {}
        elif kind in ("DaemonSet", "Deployment", "StatefulSet", "Job", "ReplicaSet"):
            template = doc["spec"]["template"]
            yield directory, doc, template["spec"], template["metadata"].get("labels") or {}


def newest_bundled_version():
    import kubernetes_validate
    schemas = pathlib.Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    versions = [re.match(r"v(\d+)\.(\d+)\.(\d+)-local-strict$", p.name)
                for p in schemas.iterdir()]
    return ".".join(map(str, max(tuple(map(int, m.groups())) for m in versions if m)))


def test_every_kustomization_renders_and_validates_strictly():
    dirs = kustomizations()
    names = {str(d.relative_to(DEPLOY)) for d in dirs}
    assert {"daemonset", "daemonset/cert-manager", "daemonset/kineto-training",
            "daemonset/prometheus-operator", "daemonset/training-pod", "sidecar"} <= names, names
    newest = newest_bundled_version()
    for directory in dirs:
        docs = documents(directory)
        assert docs, f"{directory} renders nothing"
        checked = [d for d in docs if not d["apiVersion"].startswith(CRD_GROUPS)]
        skipped = {d["kind"] for d in docs if d["apiVersion"].startswith(CRD_GROUPS)}
        assert skipped == CRD_KINDS.get(directory.name, set()), (directory, skipped)
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
            yaml.safe_dump_all(checked, f)
            f.flush()
            for version in (MIN_VERSION, newest):
                out = subprocess.run(
                    [str(VENV_BIN / "kubernetes-validate"), "--strict", "--quiet",
                     "-k", version, f.name], capture_output=True, text=True, timeout=120)
                assert out.returncode == 0, (
                    f"{directory} against {version}:\n{out.stdout}{out.stderr}")


# Fields whose values the schemas leave as plain strings.
ENUMS = {
    "restartPolicy": {"Always", "OnFailure", "Never"},
    "imagePullPolicy": {"Always", "IfNotPresent", "Never"},
    "protocol": {"TCP", "UDP", "SCTP"},
    "dnsPolicy": {"ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"},
    "completionMode": {"NonIndexed", "Indexed"},
    "medium": {"", "Memory", "HugePages"},
    "operator": {"Exists", "Equal", "In", "NotIn", "DoesNotExist", "Gt", "Lt"},
    "effect": {"NoSchedule", "PreferNoSchedule", "NoExecute"},
    "fieldPath": None,  # checked below
}
HOST_PATH_TYPES = {"", "DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket",
                   "CharDevice", "BlockDevice"}
FIELD_PATHS = re.compile(
    r"^(metadata\.(name|namespace|uid|labels|annotations)"
    r"|metadata\.(labels|annotations)\['[^']+'\]"
    r"|spec\.(nodeName|serviceAccountName)|status\.(hostIP|hostIPs|podIP|podIPs))$")


def walk(node, path=()):
    if isinstance(node, dict):
        for key, value in node.items():
            yield path + (key,), key, value
            yield from walk(value, path + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from walk(value, path + (i,))


def enum_errors(doc):
    errors = []
    for path, key, value in walk(doc):
        if key in ENUMS and ENUMS[key] and isinstance(value, str) and value not in ENUMS[key]:
            errors.append(f"{'.'.join(map(str, path))}: {value!r}")
        if key == "fieldPath" and not FIELD_PATHS.match(value):
            errors.append(f"{'.'.join(map(str, path))}: {value!r} is no downward-API field")
        if key == "hostPath" and value.get("type", "") not in HOST_PATH_TYPES:
            errors.append(f"{'.'.join(map(str, path))}.type: {value['type']!r}")
        if key in ("seccompProfile", "appArmorProfile") and value.get("type") not in (
                "RuntimeDefault", "Localhost", "Unconfined"):
            errors.append(f"{'.'.join(map(str, path))}.type: {value.get('type')!r}")
        if key == "capabilities":
            for cap in (value.get("add") or []) + (value.get("drop") or []):
                if not re.fullmatch(r"[A-Z_]+", cap) or cap.startswith("CAP_"):
                    errors.append(f"{'.'.join(map(str, path))}: {cap!r}")
    if doc["kind"] in ("Job",):
        policy = doc["spec"]["template"]["spec"].get("restartPolicy")
        if policy not in ("Never", "OnFailure"):
            errors.append(f"a Job's pods restart {policy!r}: Never or OnFailure")
    if doc["kind"] == "DaemonSet":
        if doc["spec"]["template"]["spec"].get("restartPolicy", "Always") != "Always":
            errors.append("a DaemonSet's pods restart Always")
    for spec in ([doc["spec"]["template"]["spec"]] if "template" in doc.get("spec", {}) else []):
        for init in spec.get("initContainers") or []:
            if init.get("restartPolicy", "Always") != "Always":
                errors.append(f"init container {init['name']}: restartPolicy is Always or unset")
        for c in spec.get("containers") or []:
            if "restartPolicy" in c:
                errors.append(f"container {c['name']} sets restartPolicy (init containers only)")
    return errors


def test_enum_fields_hold_values_the_api_accepts():
    errors = [f"{d.name}: {doc['kind']}/{doc['metadata']['name']}: {e}"
              for d, doc in all_documents() for e in enum_errors(doc)]
    assert not errors, "\n".join(errors)


def test_the_enum_check_fails_on_bad_values():
    job, _ = pod_named("sidecar", "Job")
    assert not enum_errors(job)
    for mutate, expected in [
            (lambda s: s.update(restartPolicy="Sometimes"), "'Sometimes'"),
            (lambda s: s.update(restartPolicy="Always"), "Never or OnFailure"),
            (lambda s: s["initContainers"][1].update(restartPolicy="Never"), "init container"),
            (lambda s: s["containers"][0].update(restartPolicy="Always"), "init containers only"),
            (lambda s: s["containers"][0]["ports"][0].update(protocol="tcp"), "'tcp'"),
            (lambda s: s["volumes"].append({"name": "h", "hostPath": {"path": "/",
                                                                      "type": "Dir"}}), "'Dir'"),
            (lambda s: s["containers"][0]["env"][2]["valueFrom"]["fieldRef"].update(
                fieldPath="metadata.label"), "downward-API")]:
        broken = copy.deepcopy(job)
        mutate(broken["spec"]["template"]["spec"])
        assert any(expected in e for e in enum_errors(broken)), (expected, enum_errors(broken))


def pod_named(kustomization, kind):
    for directory, doc, spec, labels in pod_templates():
        if directory == DEPLOY / kustomization and doc["kind"] == kind:
            return doc, spec
    raise AssertionError(f"no {kind} in {kustomization}")


def namespace_level(kustomization, namespace):
    for doc in documents(DEPLOY / kustomization):
        if doc["kind"] == "Namespace" and doc["metadata"]["name"] == namespace:
            return doc["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
    raise AssertionError(f"no Namespace {namespace} in {kustomization}")


def test_the_sidecar_pod_meets_pod_security_restricted():
    job, spec = pod_named("sidecar", "Job")
    assert pod_security.check(spec, "restricted") == {}
    assert namespace_level("sidecar", job["metadata"]["namespace"]) == "restricted"


# The training pods of daemonset mode: with the library, and PyTorch
# through libkineto's daemon protocol.
TRAINING_PODS = [("daemonset/training-pod", "Pod"), ("daemonset/kineto-training", "Job")]


@pytest.mark.parametrize("kustomization,kind", TRAINING_PODS)
def test_the_training_pod_of_daemonset_mode_meets_baseline_but_for_host_path(kustomization, kind):
    # Baseline refuses hostPath, which this mode needs (docs/kubernetes.md):
    # that is the one control it breaks, and its namespace says so.
    pod, spec = pod_named(kustomization, kind)
    assert set(pod_security.check(spec, "baseline")) == {"hostPathVolumes"}
    without_host_paths = copy.deepcopy(spec)
    without_host_paths["volumes"] = [v for v in spec["volumes"] if "hostPath" not in v]
    assert pod_security.check(without_host_paths, "baseline") == {}
    assert namespace_level(kustomization, pod["metadata"]["namespace"]) == "privileged"
    # One namespace for both examples, declared alike in each.
    namespaces = [d for k, _ in TRAINING_PODS for d in documents(DEPLOY / k)
                  if d["kind"] == "Namespace"]
    assert all(n == namespaces[0] for n in namespaces), namespaces


def test_the_daemonset_namespace_is_privileged_for_host_pid_and_host_path():
    ds, spec = pod_named("daemonset", "DaemonSet")
    # SYS_PTRACE: the kineto bridge and host context read other users'
    # processes; PERFMON: host context's perf events on their threads.
    assert set(pod_security.check(spec, "baseline")) == {
        "hostNamespaces", "hostPathVolumes", "capabilities"}
    gpuctld = next(c for c in spec["containers"] if c["name"] == "gpuctld")
    assert gpuctld["securityContext"]["capabilities"] == {
        "drop": ["ALL"], "add": ["SYS_PTRACE", "PERFMON"]}
    assert namespace_level("daemonset", ds["metadata"]["namespace"]) == "privileged"
    assert spec["priorityClassName"] == "system-node-critical"


@pytest.mark.parametrize("control", sorted(pod_security.BREAKERS))
def test_the_pod_security_check_fails_on_each_control(control):
    # The sidecar pod passes restricted; one change breaks one control.
    _, spec = pod_named("sidecar", "Job")
    broken = copy.deepcopy(spec)
    pod_security.BREAKERS[control](broken)
    level = "baseline" if control in pod_security.BASELINE_CONTROLS else "restricted"
    assert set(pod_security.check(broken, level)) == {control}
    assert control in pod_security.check(broken, "restricted")


def test_no_plain_text_api_ships():
    for directory in kustomizations():
        text = render(directory)[0]
        assert "--insecure" not in text, directory
        assert not re.search(r"^\s*insecure:\s*true", text, re.M), directory
    for path in (SOURCE / "deploy").rglob("*"):
        if path.is_file():
            assert "--insecure" not in path.read_text(errors="replace"), path


def selects(selector, labels):
    expressions = selector.get("matchExpressions")
    assert not expressions, "matchExpressions: not handled by this check"
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def test_every_container_port_is_behind_a_network_policy():
    for directory, doc, spec, labels in pod_templates():
        namespace = doc["metadata"].get("namespace")
        policies = [p for p in documents(directory) if p["kind"] == "NetworkPolicy"
                    and p["metadata"].get("namespace") == namespace
                    and selects(p["spec"]["podSelector"], labels)]
        for container in pod_security.containers(spec):
            for port in container.get("ports") or []:
                names = {port["containerPort"], port.get("name")}
                admitted = [rule for p in policies for rule in p["spec"].get("ingress") or []
                            if any(rp.get("port") in names for rp in rule.get("ports") or [])]
                assert admitted, (f"{directory.name}: {container['name']} port "
                                  f"{port['containerPort']}: no NetworkPolicy rule")
                for rule in admitted:
                    # A rule without `from` admits everyone.
                    assert rule.get("from"), f"port {port['containerPort']} is open to all"


# The fields of a PodMonitor (monitoring.coreos.com/v1) this deployment may
# use: kubernetes-validate has no schema for it, so a misspelt key would
# otherwise pass unnoticed (the operator ignores unknown fields).
POD_MONITOR_SPEC_KEYS = {"selector", "namespaceSelector", "podMetricsEndpoints", "jobLabel",
                         "podTargetLabels", "sampleLimit", "targetLimit", "attachMetadata"}
POD_METRICS_ENDPOINT_KEYS = {"port", "portNumber", "path", "scheme", "interval", "scrapeTimeout",
                             "honorLabels", "honorTimestamps", "relabelings",
                             "metricRelabelings", "params", "tlsConfig", "bearerTokenSecret",
                             "basicAuth", "authorization", "followRedirects", "enableHttp2",
                             "filterRunning", "proxyUrl"}
RELABEL_KEYS = {"sourceLabels", "separator", "targetLabel", "regex", "modulus", "replacement",
                "action"}


def metrics_port(container):
    """The port of the container's --metrics-listen, and whether it serves
    TLS (gpuctld's metrics listener never does: docs/metrics.md)."""
    for arg in container.get("args") or []:
        if arg.startswith("--metrics-listen="):
            return int(arg.rsplit(":", 1)[1]), False
    return None, False


def pod_monitor_errors(docs):
    """What is wrong with each PodMonitor of one rendered kustomization:
    fields the operator does not know, a selector matching no pod, an
    endpoint port that no matched container names, or one that is not
    where gpuctld serves its metrics, with the scheme it serves."""
    errors = []
    pods = []
    for doc in docs:
        if doc["kind"] in ("DaemonSet", "Deployment", "StatefulSet", "Job"):
            template = doc["spec"]["template"]
            pods.append((doc["metadata"].get("namespace"), template["metadata"].get("labels") or {},
                         template["spec"]))
    for monitor in (d for d in docs if d["kind"] == "PodMonitor"):
        name = monitor["metadata"]["name"]
        spec = monitor["spec"]
        errors += [f"{name}: spec.{k}: unknown field" for k in set(spec) - POD_MONITOR_SPEC_KEYS]
        namespaces = (spec.get("namespaceSelector") or {}).get(
            "matchNames", [monitor["metadata"]["namespace"]])
        matched = [pod for ns, labels, pod in pods
                   if ns in namespaces and selects(spec["selector"], labels)]
        if not matched:
            errors.append(f"{name}: its selector matches no pod")
        for endpoint in spec.get("podMetricsEndpoints") or []:
            errors += [f"{name}: podMetricsEndpoints.{k}: unknown field"
                       for k in set(endpoint) - POD_METRICS_ENDPOINT_KEYS]
            for relabel in endpoint.get("relabelings") or []:
                errors += [f"{name}: relabelings.{k}: unknown field"
                           for k in set(relabel) - RELABEL_KEYS]
            if endpoint.get("path", "/metrics") != "/metrics":
                errors.append(f"{name}: path {endpoint['path']!r}: gpuctld serves /metrics only")
            for pod in matched:
                found = [(c, p) for c in pod_security.containers(pod)
                         for p in c.get("ports") or [] if p.get("name") == endpoint.get("port")]
                if not found:
                    errors.append(f"{name}: no container port named {endpoint.get('port')!r}")
                    continue
                container, port = found[0]
                listen, tls = metrics_port(container)
                if listen != port["containerPort"]:
                    errors.append(f"{name}: port {endpoint['port']} ({port['containerPort']}) is "
                                  f"not {container['name']}'s --metrics-listen ({listen})")
                if endpoint.get("scheme", "http") != ("https" if tls else "http"):
                    errors.append(f"{name}: scheme {endpoint.get('scheme')!r}: the metrics "
                                  f"listener serves {'https' if tls else 'http'}")
    return errors


def test_the_pod_monitor_scrapes_the_daemonsets_metrics_port():
    docs = documents(DEPLOY / "daemonset" / "prometheus-operator")
    assert [d["kind"] for d in docs].count("PodMonitor") == 1
    assert pod_monitor_errors(docs) == []
    for directory in kustomizations():
        assert pod_monitor_errors(documents(directory)) == [], directory
    # The overlay is the base and the PodMonitor, nothing changed.
    base = documents(DEPLOY / "daemonset")
    def key(doc):
        return doc["kind"], doc["metadata"]["name"]
    assert sorted((d for d in docs if d["kind"] != "PodMonitor"), key=key) == sorted(base, key=key)


def test_the_pod_monitor_check_fails_on_a_mismatch():
    docs = documents(DEPLOY / "daemonset" / "prometheus-operator")
    index = next(i for i, d in enumerate(docs) if d["kind"] == "PodMonitor")

    def broken(mutate):
        copied = copy.deepcopy(docs)
        mutate(copied[index]["spec"])
        return pod_monitor_errors(copied)

    for mutate, expected in [
            (lambda s: s["selector"]["matchLabels"].update(
                {"app.kubernetes.io/name": "gpuctl"}), "matches no pod"),
            (lambda s: s["podMetricsEndpoints"][0].update(port="grpc"), "not gpuctld's"),
            (lambda s: s["podMetricsEndpoints"][0].update(port="prometheus"),
             "no container port named 'prometheus'"),
            (lambda s: s["podMetricsEndpoints"][0].update(scheme="https"), "serves http"),
            (lambda s: s["podMetricsEndpoints"][0].update(path="/stats"), "/metrics only"),
            (lambda s: s["podMetricsEndpoints"][0].update(intervall="1m"), "unknown field"),
            (lambda s: s.update(namespaceSelector={"matchNames": ["monitoring"]}),
             "matches no pod")]:
        errors = broken(mutate)
        assert any(expected in e for e in errors), (expected, errors)


DOCS = SOURCE / "docs" / "kubernetes.md"
FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"


def table_cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def privilege_table(text):
    """The table under "## Privileges": (column headers, rows), each row its
    cells."""
    section = text.split("\n## Privileges\n", 1)
    assert len(section) == 2, "no section \"## Privileges\""
    lines = section[1].split("\n## ", 1)[0].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    table = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        table.append(table_cells(line))
    return table[0], table[2:]


def image_user():
    text = (SOURCE / "deploy/container/Dockerfile").read_text()
    return re.findall(r"^USER (\d+)", text, re.M)[-1]


def yes_no(value):
    return "yes" if value else "no"


def privileges(spec, container):
    """What one container of a pod holds, as the table writes it."""
    pod_sc = spec.get("securityContext") or {}
    sc = container.get("securityContext") or {}
    caps = sc.get("capabilities") or {}
    mounted = {m["name"] for m in container.get("volumeMounts") or []}
    host_paths = sorted(v["hostPath"]["path"] for v in spec.get("volumes") or []
                        if "hostPath" in v and v["name"] in mounted)
    groups = pod_sc.get("supplementalGroups") or []
    return {
        "hostPID": yes_no(spec.get("hostPID")),
        "hostNetwork": yes_no(spec.get("hostNetwork")),
        "hostIPC": yes_no(spec.get("hostIPC")),
        "shareProcessNamespace": yes_no(spec.get("shareProcessNamespace")),
        "runAsUser": str(sc.get("runAsUser", pod_sc.get("runAsUser", image_user()))),
        "supplementalGroups": ", ".join(map(str, groups)) or "none",
        "hostPath": ", ".join(host_paths) or "none",
        "privileged": yes_no(sc.get("privileged")),
        "allowPrivilegeEscalation": yes_no(sc.get("allowPrivilegeEscalation", True)),
        "readOnlyRootFilesystem": yes_no(sc.get("readOnlyRootFilesystem")),
        "seccompProfile": (sc.get("seccompProfile") or pod_sc.get("seccompProfile")
                           or {"type": "unset"})["type"],
        "added": set(caps.get("add") or []),
        "dropped": set(caps.get("drop") or []),
    }


# Rows the table must have, by their first cell.
PRIVILEGE_ROWS = {"hostPID", "shareProcessNamespace", "hostNetwork", "runAsUser",
                  "supplementalGroups", "hostPath volumes", "SYS_PTRACE", "PERFMON", "SYS_ADMIN",
                  "every other capability", "privileged", "allowPrivilegeEscalation",
                  "readOnlyRootFilesystem", "seccompProfile"}


def privilege_columns(header, docs_by_pod):
    """The containers each value column of the table speaks for:
    "DaemonSet `gpuctld`" or "sidecar `gpuctld`, `prepare`"."""
    columns = []
    for title in header[1:-1]:
        pod = title.split()[0]
        spec = docs_by_pod[pod]
        names = re.findall(r"`([^`]+)`", title)
        found = [c for c in pod_security.containers(spec) if c["name"] in names]
        assert len(found) == len(names), f"column {title!r}: no container {names} in the {pod}"
        columns.append((title, spec, found))
    return columns


def privilege_errors(text, docs_by_pod):
    """Where docs/kubernetes.md's privilege table and the pods disagree."""
    header, rows = privilege_table(text)
    columns = privilege_columns(header, docs_by_pod)
    errors = []
    named_caps = set()
    seen = set()
    for row in rows:
        first, values = row[0], row[1:len(columns) + 1]
        fields = re.findall(r"`([^`]+)`", first)
        if first.startswith("capabilit"):
            named_caps |= set(fields)
            seen |= set(fields)
        else:
            seen.add(fields[0] if fields else first)
        for (title, spec, containers), cell in zip(columns, values):
            for container in containers:
                held = privileges(spec, container)
                where = f"{title} ({container['name']}), {first}"
                if first.startswith("capabilit"):
                    for cap in fields:
                        actual = "added" if cap in held["added"] else "no"
                        if cell != actual:
                            errors.append(f"{where}: the table says {cell!r}, the pod {actual!r}")
                elif first == "every other capability":
                    actual = "dropped" if "ALL" in held["dropped"] else "kept"
                    if cell != actual:
                        errors.append(f"{where}: the table says {cell!r}, the pod {actual!r}")
                elif first == "hostPath volumes":
                    documented = ", ".join(sorted(re.findall(r"`([^`]+)`", cell))) or cell
                    if documented != held["hostPath"]:
                        errors.append(f"{where}: the table says {documented!r}, "
                                      f"the pod {held['hostPath']!r}")
                else:
                    for field in fields:
                        if field not in held:
                            errors.append(f"{first}: not a privilege this check knows")
                            continue
                        documented = cell.replace("`", "")
                        if documented != held[field]:
                            errors.append(f"{where}: the table says {documented!r}, "
                                          f"the pod {held[field]!r}")
    for title, spec, containers in columns:
        for container in containers:
            for cap in privileges(spec, container)["added"] - named_caps:
                errors.append(f"{title} ({container['name']}) adds {cap}: not in the table")
    errors += [f"the table has no row {row!r}" for row in sorted(PRIVILEGE_ROWS - seen)]
    return errors


def privileged_pods():
    return {"DaemonSet": pod_named("daemonset", "DaemonSet")[1],
            "sidecar": pod_named("sidecar", "Job")[1]}


def test_the_privilege_table_matches_the_manifests():
    header, rows = privilege_table(DOCS.read_text())
    assert privilege_errors(DOCS.read_text(), privileged_pods()) == []
    # Every container of the DaemonSet and every gpuctl container of the
    # sidecar pod has its column.
    covered = {(title.split()[0], c["name"])
               for title, _, containers in privilege_columns(header, privileged_pods())
               for c in containers}
    pods = privileged_pods()
    assert {("DaemonSet", c["name"]) for c in pod_security.containers(pods["DaemonSet"])} | {
        ("sidecar", c["name"]) for c in pod_security.containers(pods["sidecar"])
        if c["image"].startswith("gpuctl:")} == covered


def test_the_privilege_check_fails_on_drift():
    text = DOCS.read_text()
    pods = privileged_pods()

    def row_replaced(row_start, column, value):
        lines = text.splitlines()
        i = next(i for i, line in enumerate(lines) if line.startswith(f"| {row_start} |"))
        cells = table_cells(lines[i])
        cells[column] = value
        lines[i] = "| " + " | ".join(cells) + " |"
        return "\n".join(lines) + "\n"

    def container(spec, name):
        return next(c for c in pod_security.containers(spec) if c["name"] == name)

    def manifest(mutate):
        broken = copy.deepcopy(pods)
        mutate(broken)
        return privilege_errors(text, broken)

    for errors, expected in [
            # The documentation drifts.
            (privilege_errors(row_replaced("capability `SYS_PTRACE`", 1, "no"), pods),
             "SYS_PTRACE`: the table says 'no', the pod 'added'"),
            (privilege_errors(row_replaced("`runAsUser`", 1, "`65532`"), pods),
             "runAsUser`: the table says '65532', the pod '0'"),
            (privilege_errors(row_replaced("`hostPID`", 3, "yes"), pods),
             "hostPID`: the table says 'yes', the pod 'no'"),
            (privilege_errors(row_replaced("hostPath volumes", 1, "`/run/gpuctl`"), pods),
             "the pod '/run/gpuctl, /var/lib/gpuctl/traces'"),
            (privilege_errors(text.replace("| capability `PERFMON` |", "| `PERFMON` |"), pods),
             "not a privilege this check knows"),
            (privilege_errors("\n".join(line for line in text.splitlines()
                                        if not line.startswith("| capability `SYS_ADMIN`")),
                              pods), "no row 'SYS_ADMIN'"),
            # The manifests drift.
            (manifest(lambda p: container(p["DaemonSet"], "gpuctld")["securityContext"][
                "capabilities"]["add"].remove("PERFMON")),
             "PERFMON`: the table says 'added', the pod 'no'"),
            (manifest(lambda p: container(p["sidecar"], "gpuctld")["securityContext"].setdefault(
                "capabilities", {}).setdefault("add", []).append("PERFMON")),
             "PERFMON`: the table says 'no', the pod 'added'"),
            (manifest(lambda p: container(p["DaemonSet"], "gpuctld")["securityContext"][
                "capabilities"]["add"].append("NET_ADMIN")), "adds NET_ADMIN: not in the table"),
            (manifest(lambda p: p["sidecar"].update(hostPID=True)),
             "hostPID`: the table says 'no', the pod 'yes'"),
            (manifest(lambda p: container(p["sidecar"], "prepare")["securityContext"].update(
                runAsUser=0)), "(prepare), `runAsUser`: the table says '65532', the pod '0'"),
            (manifest(lambda p: container(p["DaemonSet"], "install-library")[
                "securityContext"]["capabilities"].update(drop=["NET_RAW"])),
             "every other capability: the table says 'dropped', the pod 'kept'"),
            (manifest(lambda p: p["DaemonSet"]["securityContext"].pop("seccompProfile")),
             "(install-library), `seccompProfile`: the table says 'RuntimeDefault'")]:
        assert any(expected in e for e in errors), (expected, errors)
    # A table as it stood before the kineto bridge's SYS_PTRACE: that one
    # claim is refused.
    stale = privilege_errors((FIXTURES / "kubernetes_privileges_stale.md").read_text(), pods)
    assert stale == ["DaemonSet `gpuctld` (gpuctld), capability `SYS_PTRACE`: "
                     "the table says 'no', the pod 'added'"], stale


def gpuctld_containers():
    for directory, doc, spec, labels in pod_templates():
        for container in pod_security.containers(spec):
            if "--config=/etc/gpuctl/gpuctld.yaml" in (container.get("args") or []):
                yield directory, spec, container


def config_map_of(directory, spec, container):
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == "/etc/gpuctl")
    volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    name = next(s["configMap"]["name"] for s in volume["projected"]["sources"]
                if "configMap" in s)
    return next(d for d in documents(directory)
                if d["kind"] == "ConfigMap" and d["metadata"]["name"] == name)


def expand(arg):
    values = {"POD_IP": "10.1.2.3", "POD_NAME": "train-example-0-x7k2p",
              "NODE_NAME": "gpu-node-1"}
    return re.sub(r"\$\((\w+)\)", lambda m: values[m.group(1)], arg)


def check_config(config_text, args):
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "gpuctld.yaml"
        path.write_text(config_text)
        return subprocess.run(
            [str(BUILD / "bin" / "gpuctld"), "--check-config", str(path)] + args,
            capture_output=True, text=True, timeout=60)


def test_each_config_map_passes_gpuctld_check_config_with_its_flags():
    found = set()
    for directory, spec, container in gpuctld_containers():
        config = config_map_of(directory, spec, container)["data"]["gpuctld.yaml"]
        args = [expand(a) for a in container["args"] if not a.startswith("--config=")]
        out = check_config(config, args)
        assert out.returncode == 0, f"{directory}: {out.stdout}{out.stderr}"
        assert out.stdout.endswith(": OK\n")
        # Without its TLS flags the DaemonSet's listener would be refused.
        without_tls = [a for a in args if not a.startswith("--tls-")]
        if without_tls != args:
            refused = check_config(config, without_tls)
            assert refused.returncode == 2 and "transport security" in refused.stderr
        found.add(directory.relative_to(DEPLOY).parts[0])
    assert found == {"daemonset", "sidecar"}
    # The ConfigMap of the DaemonSet is deploy/config/gpuctld.yaml.
    ds_config = next(d for d in documents(DEPLOY / "daemonset") if d["kind"] == "ConfigMap")
    assert ds_config["data"]["gpuctld.yaml"] == (SOURCE / "deploy/config/gpuctld.yaml").read_text()


def sidecar_config():
    _, spec = pod_named("sidecar", "Job")
    gpuctld = next(c for c in spec["initContainers"] if c["name"] == "gpuctld")
    return config_map_of(DEPLOY / "sidecar", spec, gpuctld)["data"]["gpuctld.yaml"]


def test_check_config_refuses_a_broken_config_map():
    config = sidecar_config()
    out = check_config(config.replace("socket_mode:", "socket_mdoe:"), [])
    assert out.returncode == 2 and "ipc.socket_mdoe: unknown key" in out.stderr, out.stderr


def test_the_sidecar_socket_is_in_a_directory_gpuctld_creates():
    # An emptyDir is 0777, which gpuctld refuses for the socket's directory:
    # the socket is one level below the mount, in a directory gpuctld makes.
    _, spec = pod_named("sidecar", "Job")
    config = yaml.safe_load(sidecar_config())
    socket_dir = os.path.dirname(config["socket"])
    for container in spec["initContainers"][1:] + spec["containers"]:
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        parent = os.path.dirname(socket_dir)
        assert socket_dir not in mounts and parent in mounts, container["name"]
        volume = next(v for v in spec["volumes"] if v["name"] == mounts[parent])
        assert "emptyDir" in volume
    trainer = spec["containers"][0]
    env = {e["name"]: e.get("value") for e in trainer["env"]}
    assert env["GPUCTL_SOCKET"] == config["socket"]
    assert spec["shareProcessNamespace"] is True
    gpuctld = next(c for c in spec["initContainers"] if c["name"] == "gpuctld")
    assert gpuctld["restartPolicy"] == "Always" and "startupProbe" in gpuctld


def duration_seconds(text):
    """A gpuctld duration of one unit ("90s", "2m", "1h"), in seconds."""
    match = re.fullmatch(r"(\d+)(s|m|h)", str(text))
    assert match, f"not a duration of one unit: {text!r}"
    return int(match.group(1)) * {"s": 1, "m": 60, "h": 3600}[match.group(2)]


def test_the_sidecar_uploads_what_is_pending_within_the_grace_period():
    # On SIGTERM gpuctld uploads what is pending for up to shutdown_wait; the
    # kubelet kills the pod at terminationGracePeriodSeconds, which the
    # trainer's own stop shares: a quarter of it is left to the trainer.
    _, spec = pod_named("sidecar", "Job")
    s3 = yaml.safe_load(sidecar_config())["store"]["s3"]
    wait = duration_seconds(s3["shutdown_wait"])
    grace = spec["terminationGracePeriodSeconds"]
    assert 0 < wait <= grace * 3 // 4, f"shutdown_wait {wait}s, grace period {grace}s"


def daemonset_kineto_socket_dir():
    """(the directory of gpuctld's kineto path socket, as the DaemonSet
    configures it, and that directory on the node)."""
    _, spec = pod_named("daemonset", "DaemonSet")
    gpuctld = next(c for c in spec["containers"] if c["name"] == "gpuctld")
    config = yaml.safe_load(config_map_of(DEPLOY / "daemonset", spec, gpuctld)["data"][
        "gpuctld.yaml"])
    flags = dict(a[2:].split("=", 1) for a in gpuctld["args"] if "=" in a)
    kineto = config.get("kineto") or {}
    assert kineto.get("mode", "auto") != "off"
    socket = flags.get("socket", config.get("socket"))
    socket_dir = kineto.get("socket_dir", os.path.join(os.path.dirname(socket), "kineto"))
    host = host_path_of(spec, gpuctld, socket_dir)
    return socket_dir, host


def host_path_of(spec, container, path):
    """The node's path of `path` in the container, through a hostPath mount."""
    for mount in container.get("volumeMounts") or []:
        prefix = mount["mountPath"].rstrip("/")
        if path == prefix or path.startswith(prefix + "/"):
            volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
            if "hostPath" in volume:
                return volume["hostPath"]["path"].rstrip("/") + path[len(prefix):]
    return None


def test_the_kineto_training_job_reaches_the_daemonsets_kineto_socket():
    socket_dir, host = daemonset_kineto_socket_dir()
    assert host is not None, f"{socket_dir} is not on the node"
    _, spec = pod_named("daemonset/kineto-training", "Job")
    trainer = spec["containers"][0]
    env = {e["name"]: e.get("value") for e in trainer["env"]}
    assert env["KINETO_USE_DAEMON"] == "1"
    # libkineto matches the reply's sender against this text: the same
    # spelling as gpuctld's, no trailing slash, room for its socket names.
    assert env["KINETO_IPC_SOCKET_DIR"] == socket_dir
    assert not socket_dir.endswith("/") and len(socket_dir.encode()) <= 53
    # The node's directory, mounted where the variable says, and the library
    # nowhere: kineto alone.
    assert host_path_of(spec, trainer, socket_dir) == host
    mount = next(m for m in trainer["volumeMounts"] if m["mountPath"] == socket_dir)
    assert not mount.get("readOnly"), "each process binds its own socket in the directory"
    volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    # DirectoryOrCreate would make it 0755 root's before gpuctld makes it
    # 1777: processes of other users could not bind their sockets there.
    assert volume["hostPath"]["type"] == "Directory"
    assert "LD_PRELOAD" not in env and "GPUCTL_SOCKET" not in env
    # KINETO_CONFIG names a file of a mounted ConfigMap.
    config_dir, config_file = os.path.split(env["KINETO_CONFIG"])
    config_mount = next(m for m in trainer["volumeMounts"] if m["mountPath"] == config_dir)
    config_volume = next(v for v in spec["volumes"] if v["name"] == config_mount["name"])
    config_map = next(d for d in documents(DEPLOY / "daemonset/kineto-training")
                      if d["kind"] == "ConfigMap"
                      and d["metadata"]["name"] == config_volume["configMap"]["name"])
    assert "ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS=" in config_map["data"][config_file]
    # The job id gpuctld reads from the environment.
    job_id = next(e for e in trainer["env"] if e["name"] == "GPUCTL_JOB_ID")
    assert job_id["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.labels['gpuctl.dev/job']"


def dockerfile_copies():
    """(sources, destination) of each COPY --from=build of the Dockerfile."""
    text = (SOURCE / "deploy/container/Dockerfile").read_text()
    copies = []
    for line in text.splitlines():
        words = line.split()
        if words[:2] == ["COPY", "--from=build"]:
            copies.append((words[2:-1], words[-1]))
    return copies


def test_every_path_the_image_and_manifests_name_is_installed():
    copies = dockerfile_copies()
    assert copies
    staging = pathlib.Path(tempfile.mkdtemp(prefix="gpuctl-staging-"))
    try:
        subprocess.run([os.environ.get("GPUCTL_CMAKE", "cmake"), "--install", str(BUILD),
                        "--prefix", str(staging)], check=True, capture_output=True, timeout=300)
        image = set()
        for sources, destination in copies:
            for source in sources:
                assert source.startswith("/staging/"), source
                staged = staging / source[len("/staging/"):]
                assert staged.is_file(), f"{source}: not installed ({staged})"
                image.add(destination.rstrip("/") + "/" + staged.name
                          if destination.endswith("/") else destination)
        assert "/usr/bin/gpuctld" in image and "/opt/gpuctl/lib/libgpuctl.so" in image
        entrypoint = re.search(r'ENTRYPOINT \["([^"]+)"', (
            SOURCE / "deploy/container/Dockerfile").read_text()).group(1)
        assert entrypoint in image
        named = 0
        for directory, doc, spec, labels in pod_templates():
            for container in pod_security.containers(spec):
                if not container["image"].startswith("gpuctl:"):
                    continue
                words = " ".join(container.get("command") or []).split()
                for word in words:
                    if word.startswith(("/opt/gpuctl/", "/usr/bin/gpuctl")):
                        assert word in image, f"{directory.name}: {container['name']}: {word}"
                        named += 1
                    elif word.startswith("/") and not word.startswith(
                            tuple(m["mountPath"] for m in container.get("volumeMounts") or [])):
                        # The base image's tools (debian:12-slim, as this host).
                        assert shutil.which(word) or pathlib.Path(word).exists(), word
        assert named >= 2
    finally:
        shutil.rmtree(staging, ignore_errors=True)


SANITIZER_RUNTIME = re.compile(r"lib(clang_rt\.|asan|tsan|ubsan|lsan)")


def runtime_packages():
    """The Debian packages the image's final stage installs."""
    text = (SOURCE / "deploy/container/Dockerfile").read_text().replace("\\\n", " ")
    final = text[text.rindex("\nFROM "):]
    install = re.search(r"apt-get install -y --no-install-recommends (.*?)&&", final)
    assert install, "the final stage installs no packages"
    return set(install.group(1).split())


def depends_closure(packages):
    """`packages` and every package they depend on, as dpkg here records them."""
    seen, todo = set(), list(packages)
    while todo:
        package = todo.pop()
        if package in seen:
            continue
        seen.add(package)
        query = subprocess.run(["dpkg-query", "-W", "-f=${Pre-Depends},${Depends}", package],
                               capture_output=True, text=True)
        if query.returncode != 0:
            continue  # a virtual package, provided by one already seen
        for alternatives in query.stdout.split(","):
            for name in alternatives.split("|"):
                name = name.strip().split(" ")[0].split(":")[0]
                if name:
                    todo.append(name)
    return seen


def owning_package(path):
    """The package that installed `path` (either side of the /usr merge)."""
    candidates = [path, os.path.realpath(path)]
    for p in list(candidates):
        if p.startswith("/usr/lib/"):
            candidates.append(p[len("/usr"):])
        elif p.startswith("/lib/"):
            candidates.append("/usr" + p)
    for candidate in candidates:
        search = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
        if search.returncode == 0:
            return search.stdout.split(":")[0].strip()
    return None


def test_the_image_installs_every_shared_library_its_binaries_need():
    # Each library the image's binaries link directly must come from a
    # package its final stage installs, one they depend on, or the base
    # image (debian:12-slim: the packages of priority required and their
    # dependencies). A library added to the build and not to the image
    # fails here, not when the image's gpuctld first starts.
    listed = runtime_packages()
    available = depends_closure(listed)
    required = subprocess.run(["dpkg-query", "-W", "-f=${Package} ${Priority}\\n"],
                              capture_output=True, text=True, check=True).stdout
    available |= depends_closure(
        line.split()[0] for line in required.splitlines() if line.endswith(" required"))
    staging = pathlib.Path(tempfile.mkdtemp(prefix="gpuctl-staging-"))
    try:
        subprocess.run([os.environ.get("GPUCTL_CMAKE", "cmake"), "--install", str(BUILD),
                        "--prefix", str(staging)], check=True, capture_output=True, timeout=300)
        binaries = [staging / source[len("/staging/"):]
                    for sources, _ in dockerfile_copies() for source in sources]
        assert len(binaries) >= 3, binaries
        checked, missing = 0, []
        for binary in binaries:
            dynamic = subprocess.run(["readelf", "-d", str(binary)], capture_output=True,
                                     text=True, check=True).stdout
            needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic)
            ldd = subprocess.run(["ldd", str(binary)], capture_output=True, text=True,
                                 check=True).stdout
            resolved = dict(re.findall(r"^\s*(\S+) => (/\S+)", ldd, re.MULTILINE))
            # The dynamic loader, named by its path alone.
            resolved.update((os.path.basename(path), path)
                            for path in re.findall(r"^\s*(/\S+) \(", ldd, re.MULTILINE))
            for soname in needed:
                if SANITIZER_RUNTIME.match(soname):
                    continue  # a sanitizer build's own runtime, never in the image's build
                assert soname in resolved, f"{binary.name}: {soname} is not found here"
                package = owning_package(resolved[soname])
                assert package, f"{binary.name}: {resolved[soname]} belongs to no package"
                if package not in available:
                    missing.append(f"{binary.name} needs {soname} from {package}")
                checked += 1
        assert not missing, ("the image's final stage (deploy/container/Dockerfile) does not "
                             "install: " + "; ".join(missing))
        assert checked >= 10
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def test_make_certs_output_serves_mutual_tls_and_a_token():
    # make-certs.sh's files, as the DaemonSet gets them from its Secrets,
    # served by a real gpuctld and reached by gpuctl through the name the
    # certificate carries.
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        certs = tmp / "certs"
        subprocess.run([str(DEPLOY / "daemonset" / "make-certs.sh"), str(certs)], check=True,
                       capture_output=True, timeout=120)
        secrets = list(yaml.safe_load_all((certs / "secrets.yaml").read_text()))
        assert {s["metadata"]["name"] for s in secrets} == {"gpuctld-tls", "gpuctld-token"}
        assert set(secrets[0]["data"]) == {"tls.crt", "tls.key", "ca.crt"}
        ready = tmp / "ready"
        daemon = subprocess.Popen(
            [str(BUILD / "bin" / "gpuctld"), "--listen", "127.0.0.1:0",
             f"--tls-cert={certs / 'server.pem'}", f"--tls-key={certs / 'server.key'}",
             f"--tls-client-ca={certs / 'ca.pem'}", f"--auth-token-file={certs / 'token'}",
             "--socket", str(tmp / "run" / "gpuctl.sock"), "--store", str(tmp / "traces"),
             "--ready-file", str(ready)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        try:
            end = time.monotonic() + 60
            while not (ready.exists() and ready.read_text().strip()):
                assert daemon.poll() is None, daemon.stderr.read().decode()
                assert time.monotonic() < end, "gpuctld did not get ready"
                time.sleep(0.05)
            address = ready.read_text().strip()

            def status(*flags):
                return subprocess.run(
                    [str(BUILD / "bin" / "gpuctl"), "status", "--host", address,
                     "--tls-ca", str(certs / "ca.pem"),
                     "--tls-server-name", "gpuctld.gpuctl.svc"] + list(flags),
                    capture_output=True, text=True, timeout=60)

            client = ["--tls-cert", str(certs / "client.pem"),
                      "--tls-key", str(certs / "client.key")]
            token = ["--token-file", str(certs / "token")]
            ok = status(*client, *token)
            assert ok.returncode == 0, ok.stdout + ok.stderr
            assert status(*token).returncode != 0  # no client certificate
            assert status(*client).returncode != 0  # no token
        finally:
            daemon.terminate()
            daemon.wait(timeout=30)
