"""The Pod Security Standards' checks (baseline and restricted), as the
admission controller applies them to a pod spec; no API server runs here,
so the manifest tests apply them themselves. Each control has the name the
Kubernetes documentation gives it; check() returns the controls a pod spec
breaks, with why."""

BASELINE_CAPABILITIES = {
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
    "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start", "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes",
}
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t",
                 "container_engine_t"}
RESTRICTED_VOLUME_SOURCES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
    "persistentVolumeClaim", "projected", "secret", "image",
}
VOLUME_META_KEYS = {"name"}


def containers(spec):
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for container in spec.get(key) or []:
            yield container


def _sc(container):
    return container.get("securityContext") or {}


def _baseline(spec):
    broken = {}
    pod_sc = spec.get("securityContext") or {}
    all_sc = [pod_sc] + [_sc(c) for c in containers(spec)]
    if any((sc.get("windowsOptions") or {}).get("hostProcess") for sc in all_sc):
        broken["hostProcess"] = "windowsOptions.hostProcess is set"
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key):
            broken.setdefault("hostNamespaces", f"{key}: true")
    if any(_sc(c).get("privileged") for c in containers(spec)):
        broken["privileged"] = "a container is privileged"
    for c in containers(spec):
        added = set((_sc(c).get("capabilities") or {}).get("add") or [])
        if added - BASELINE_CAPABILITIES:
            broken["capabilities"] = f"{c['name']} adds {sorted(added - BASELINE_CAPABILITIES)}"
    for volume in spec.get("volumes") or []:
        if "hostPath" in volume:
            broken["hostPathVolumes"] = f"volume {volume['name']} is a hostPath"
    for c in containers(spec):
        for port in c.get("ports") or []:
            if port.get("hostPort", 0):
                broken["hostPorts"] = f"{c['name']} uses hostPort {port['hostPort']}"
    for sc in all_sc:
        if (sc.get("appArmorProfile") or {}).get("type") not in (None, "RuntimeDefault",
                                                                 "Localhost"):
            broken["appArmor"] = "an AppArmor profile other than RuntimeDefault or Localhost"
        se = sc.get("seLinuxOptions") or {}
        if se.get("type", "") not in SELINUX_TYPES or se.get("user") or se.get("role"):
            broken["seLinux"] = "a custom SELinux type, user or role"
        if (sc.get("seccompProfile") or {}).get("type") == "Unconfined":
            broken["seccompBaseline"] = "seccompProfile Unconfined"
    for c in containers(spec):
        if _sc(c).get("procMount", "Default") != "Default":
            broken["procMount"] = f"{c['name']} sets procMount"
    for sysctl in pod_sc.get("sysctls") or []:
        if sysctl["name"] not in SAFE_SYSCTLS:
            broken["sysctls"] = f"unsafe sysctl {sysctl['name']}"
    return broken


def _restricted(spec):
    broken = _baseline(spec)
    for volume in spec.get("volumes") or []:
        sources = set(volume) - VOLUME_META_KEYS
        if sources - RESTRICTED_VOLUME_SOURCES:
            broken["volumeTypes"] = f"volume {volume['name']} is {sorted(sources)}"
    pod_sc = spec.get("securityContext") or {}
    for c in containers(spec):
        sc = _sc(c)
        if sc.get("allowPrivilegeEscalation") is not False:
            broken["privilegeEscalation"] = f"{c['name']} allows privilege escalation"
        non_root = sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot"))
        if non_root is not True:
            broken["runAsNonRoot"] = f"{c['name']} may run as root"
        if sc.get("runAsUser", pod_sc.get("runAsUser")) == 0:
            broken["runAsUser"] = f"{c['name']} runs as uid 0"
        seccomp = (sc.get("seccompProfile") or pod_sc.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            broken["seccompRestricted"] = f"{c['name']} has no RuntimeDefault seccomp profile"
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            broken["capabilitiesDropAll"] = f"{c['name']} does not drop ALL capabilities"
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            broken["capabilitiesRestricted"] = f"{c['name']} adds {caps['add']}"
    if pod_sc.get("runAsUser") == 0:
        broken["runAsUser"] = "the pod runs as uid 0"
    return broken


def check(spec, level):
    """The controls of `level` ("baseline" or "restricted") the pod spec
    breaks: {control: why}."""
    return {"baseline": _baseline, "restricted": _restricted}[level](spec)


def _set(path, value):
    def mutate(spec):
        node = spec
        for key in path[:-1]:
            if isinstance(key, int):
                node = node[key]
            else:
                node = node.setdefault(key, {})
        node[path[-1]] = value
    return mutate


def _first(key):
    return ["containers", 0, "securityContext", key]


# One pod change per control, each breaking that control and no other of
# a pod that passes restricted: the check is shown to fail on every control
# it claims to check.
BREAKERS = {
    "hostProcess": _set(_first("windowsOptions"), {"hostProcess": True}),
    "hostNamespaces": _set(["hostNetwork"], True),
    "privileged": _set(_first("privileged"), True),
    "capabilities": _set(_first("capabilities"), {"drop": ["ALL"], "add": ["SYS_ADMIN"]}),
    "hostPathVolumes": lambda spec: spec["volumes"].append(
        {"name": "host", "hostPath": {"path": "/", "type": "Directory"}}),
    "hostPorts": _set(["containers", 0, "ports"], [{"containerPort": 80, "hostPort": 80}]),
    "appArmor": _set(_first("appArmorProfile"), {"type": "Unconfined"}),
    "seLinux": _set(_first("seLinuxOptions"), {"type": "spc_t"}),
    "seccompBaseline": _set(_first("seccompProfile"), {"type": "Unconfined"}),
    "procMount": _set(_first("procMount"), "Unmasked"),
    "sysctls": _set(["securityContext", "sysctls"], [{"name": "kernel.msgmax", "value": "1"}]),
    "volumeTypes": lambda spec: spec["volumes"].append(
        {"name": "nfs", "nfs": {"server": "nfs.example", "path": "/"}}),
    "privilegeEscalation": _set(_first("allowPrivilegeEscalation"), True),
    "runAsNonRoot": _set(_first("runAsNonRoot"), False),
    "runAsUser": _set(_first("runAsUser"), 0),
    "seccompRestricted": lambda spec: [
        sc.pop("seccompProfile", None)
        for sc in [spec.setdefault("securityContext", {})]
        + [c.setdefault("securityContext", {}) for c in containers(spec)]],
    "capabilitiesDropAll": _set(_first("capabilities"), {"drop": ["NET_RAW"]}),
    "capabilitiesRestricted": _set(_first("capabilities"), {"drop": ["ALL"], "add": ["CHOWN"]}),
}
BASELINE_CONTROLS = {"hostProcess", "hostNamespaces", "privileged", "capabilities",
                     "hostPathVolumes", "hostPorts", "appArmor", "seLinux",
                     "seccompBaseline", "procMount", "sysctls"}
