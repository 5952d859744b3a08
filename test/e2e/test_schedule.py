"""Scheduled sampling with the real gpuctld: daemons with the same schedule
and no link between them trace the ranks of a job in the same windows under
one trace id, the one a reimplementation of the documented hash gives."""

import hashlib
import json
import struct
import subprocess
import time

from e2e_util import manifest_paths, wait_until

SEED = "e2e-fleet"
RULE = "frequent"
JOB = "sched-e2e"
PERIOD_MS = 4000
WINDOW_MS = 500


def schedule_config(path, seed=SEED, period_ms=PERIOD_MS, window_ms=WINDOW_MS, probability="1",
                    daily_cap=0):
    path.write_text(
        "schedule:\n"
        f"  seed: {seed}\n"
        "  max_duty_cycle: 0.5\n"
        "  rules:\n"
        f"    - name: {RULE}\n"
        f"      selector: {{job: \"{JOB}\"}}\n"
        f"      period: {period_ms}ms\n"
        f"      window: {window_ms}ms\n"
        f"      probability: {probability}\n"
        f"      daily_cap: {daily_cap}\n")
    return path


def slot_digest(slot, seed=SEED):
    """daemon/scheduler/schedule_hash.h's layout."""
    data = b"gpuctl-schedule-v1\0t"
    for field in (seed, RULE, JOB):
        raw = field.encode()
        data += struct.pack(">I", len(raw)) + raw
    data += struct.pack(">q", slot)
    return hashlib.sha256(data).digest()


def expected_trace_id(slot, period_ms=PERIOD_MS, window_ms=WINDOW_MS):
    """slot_decision.cc's id."""
    digest = slot_digest(slot)
    offset_ms = int.from_bytes(digest[8:16], "big") % (period_ms - window_ms + 1)
    start_ms = slot * period_ms + offset_ms
    raw = bytearray(start_ms.to_bytes(6, "big") + digest[16:26])
    raw[6] = 0x70 | (raw[6] & 0x0F)
    raw[8] = 0x80 | (raw[8] & 0x3F)
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def completed_traces(daemon):
    """{trace id: [trace files]} of the traces whose manifest is written."""
    out = {}
    if not daemon.store.exists():
        return out
    for trace_dir in daemon.store.iterdir():
        if trace_dir.is_dir() and manifest_paths(trace_dir):
            out[trace_dir.name] = sorted(p.name for p in trace_dir.glob("*.json.gz"))
    return out


def test_two_hosts_capture_a_job_under_the_same_scheduled_trace_id(
        start_daemon, cli_for, start_workload, workdir):
    config = schedule_config(workdir / "schedule.yaml")
    hosts = [start_daemon("--config", str(config), name=name) for name in ("host-a", "host-b")]
    workloads = []
    for rank, daemon in enumerate(hosts):
        workload = start_workload(job=JOB, rank=rank, world_size=2, socket=daemon.socket)
        cli_for(daemon).wait_attached([workload.pid])
        workloads.append(workload)

    # Slots fall every 4 s; wait for a trace id both hosts completed.
    def common_trace():
        a, b = completed_traces(hosts[0]), completed_traces(hosts[1])
        shared = sorted(set(a) & set(b))
        return shared[-1] if shared else None

    trace_id = wait_until(common_trace, timeout=60.0, what="a trace id stored by both hosts")
    for rank, (daemon, workload) in enumerate(zip(hosts, workloads)):
        files = completed_traces(daemon)[trace_id]
        assert files == [f"{daemon.host_name}-rank{rank}-pid{workload.pid}.json.gz"], files
        manifest = json.loads(manifest_paths(daemon.store / trace_id)[0].read_text())
        assert manifest.get("selector", "").startswith(f'job "{JOB}"'), manifest
        assert "scheduled trace" in daemon.log(), daemon.log()

    # The id is the documented function of the slot its start falls in.
    start_ms = int(trace_id.replace("-", "")[:12], 16)
    slot = start_ms // PERIOD_MS
    assert trace_id == expected_trace_id(slot)

    # Each manifest says which rule and slot drew it, with the weight and
    # the schedule's fingerprint, alike on both hosts.
    triggers = []
    for daemon in hosts:
        manifest = json.loads(manifest_paths(daemon.store / trace_id)[0].read_text())
        triggers.append(manifest["trigger"])
    assert triggers[0] == triggers[1], triggers
    trigger = triggers[0]
    assert trigger["kind"] == "TRIGGER_KIND_SCHEDULED", trigger
    scheduled = trigger["scheduled"]
    assert scheduled["rule"] == RULE
    assert int(scheduled["slot"]) == slot
    assert scheduled["probability"] == 1 and scheduled["weight"] == 1
    assert len(scheduled["scheduleFingerprint"]) == 64

    # An on-demand trace has priority: asked while a scheduled window holds
    # the process, it starts, and the scheduled trace says it was preempted.
    cli = cli_for(hosts[0])

    def held_by_schedule():
        # Armed, with the window at least 300 ms ahead: the trace asked next
        # arrives while the scheduled capture still holds the process.
        for p in cli.processes():
            if p["pid"] == workloads[0].pid and p.get("capture_state") == "CAPTURE_STATE_ARMED":
                held = p.get("current_trace_id")
                if held and trace_start_ms(held) > time.time() * 1000 + 300:
                    return held
        return None

    held = wait_until(held_by_schedule, timeout=30.0, what="a scheduled window holding the process")
    result, _ = cli.trace("--job", JOB, "--duration", "200ms")
    assert result.returncode == 0, result.stderr
    preempted = json.loads(wait_until(lambda: manifest_paths(hosts[0].store / held), timeout=30.0,
                                      what="the preempted trace's manifest")[0].read_text())
    messages = [r.get("message", "") for r in preempted["results"]]
    assert messages[0].startswith("preempted by on-demand trace "), preempted
    shown = json.loads(cli.run("schedule", "--json").stdout)
    assert "preempted by an on-demand trace (local)" in json.dumps(shown), shown

    # An on-demand trace records who asked; `gpuctl traces --trigger`
    # tells the two apart.
    asked = json.loads(cli.run("traces", "--trigger", "on-demand", "--json").stdout)["traces"]
    assert len(asked) == 1, asked
    assert asked[0]["trigger"]["kind"] == "TRIGGER_KIND_ON_DEMAND"
    assert asked[0]["trigger"]["requestedBy"].startswith("ipv4:127.0.0.1:"), asked[0]
    listed = cli.run("traces", "--trigger", "scheduled")
    assert listed.returncode == 0, listed.stderr
    assert trace_id in listed.stdout and f"scheduled:{RULE}" in listed.stdout, listed.stdout
    assert asked[0]["traceId"] not in listed.stdout

    # A scheduled window that opens while an on-demand trace holds the
    # process is a skip of its own, naming the process and why; the rank on
    # the other host is captured as usual.
    holding = cli.popen("trace", "--pid", str(workloads[0].pid), "--duration", "9s",
                        "-o", str(workdir / "holding"))
    try:
        def busy_skips():
            return [e for e in schedule_events(cli)
                    if e.get("outcome", "").startswith("process busy")
                    and e.get("pid") == workloads[0].pid]

        busy = wait_until(busy_skips, timeout=20.0, what="a process-busy skip of the held rank")
        assert busy[0]["local"] is True, busy
        assert busy[0]["error"].startswith("already capturing trace "), busy
        assert not busy[0].get("captured"), busy
        skipped_id = busy[0]["traceId"]
        shown = cli.run("schedule")
        assert f"pid {workloads[0].pid}: already capturing trace" in shown.stdout, shown.stdout
        wait_until(lambda: skipped_id in completed_traces(hosts[1]), timeout=15.0,
                   what="the other host's capture of the slot the held rank skipped")
    finally:
        holding.kill()
        holding.communicate()


def trace_start_ms(trace_id):
    return int(trace_id.replace("-", "")[:12], 16)


def test_preview_lists_the_slots_the_daemons_then_capture(
        start_daemon, cli_for, start_workload, workdir):
    config = schedule_config(workdir / "half.yaml", period_ms=2000, window_ms=300,
                             probability="0.5")
    hosts = [start_daemon("--config", str(config), name=name) for name in ("host-a", "host-b")]
    for rank, daemon in enumerate(hosts):
        workload = start_workload(job=JOB, rank=rank, world_size=2, socket=daemon.socket)
        cli_for(daemon).wait_attached([workload.pid])
    other = start_daemon("--config", str(schedule_config(workdir / "other.yaml", seed="another",
                                                         period_ms=2000, window_ms=300,
                                                         probability="0.5")),
                         name="host-c")

    cli = cli_for(hosts[0])
    targets = []
    for daemon in hosts + [other]:
        targets += ["--host", daemon.address]
    asked = subprocess.run([cli.binary, "schedule", "--preview", "--job", JOB, "--hours", "1",
                            "--json"] + targets[:4], capture_output=True, text=True, timeout=60)
    assert asked.returncode == 0, asked.stderr
    answers = json.loads(asked.stdout)["hosts"]
    previews = [a["schedule"]["preview"] for a in answers]
    assert previews[0] == previews[1]
    # The first three captures from two seconds on (requests go out a
    # second ahead): the slots between them are not drawn.
    from_ms = time.time() * 1000 + 2000
    wanted = [p for p in previews[0]
              if p["outcome"] == "capture" and trace_start_ms(p["traceId"]) >= from_ms][:3]
    assert len(wanted) == 3, previews[0]
    to_ms = trace_start_ms(wanted[-1]["traceId"]) + 1
    expected = {p["traceId"] for p in wanted}

    def captured(daemon):
        return {t for t in completed_traces(daemon) if from_ms <= trace_start_ms(t) < to_ms}

    for daemon in hosts:
        wait_until(lambda d=daemon: captured(d) >= expected, timeout=60.0,
                   what=f"the previewed traces on {daemon.host_name}")
    for daemon in hosts:
        assert captured(daemon) == expected, (daemon.host_name, captured(daemon), expected)

    # The schedule itself: the rule, and the captures with their ids.
    shown = cli.run("schedule")
    assert shown.returncode == 0, shown.stderr
    assert f"{RULE}  job \"{JOB}\"" in shown.stdout, shown.stdout
    for trace_id in expected:
        assert trace_id in shown.stdout, shown.stdout
    # A host running another schedule stands out.
    fleet = subprocess.run([cli.binary, "schedule"] + targets, capture_output=True, text=True,
                           timeout=60)
    assert fleet.returncode == 0, fleet.stderr
    assert "hosts running another schedule than" in fleet.stderr, fleet.stderr
    assert other.address in fleet.stderr.split("):", 1)[1], fleet.stderr


DAY_MS = 86400 * 1000


def schedule_events(cli):
    """The events `gpuctl schedule --json` lists for the host of `cli`."""
    shown = cli.run("schedule", "--json")
    assert shown.returncode == 0, shown.stderr
    found = []

    def visit(node):
        if isinstance(node, list):
            for item in node:
                visit(item)
        elif isinstance(node, dict):
            if "outcome" in node and "slot" in node:
                found.append(node)
                return
            for value in node.values():
                visit(value)

    visit(json.loads(shown.stdout))
    return found


def test_four_hosts_store_each_slot_under_one_id_until_the_daily_cap(
        start_daemon, cli_for, start_workload, workdir):
    # Every slot is drawn; the daily cap is set so that the day's budget
    # runs out two slots after the daemons are up: the cap counts the day's
    # earlier drawn slots, from the hash alone, alike on every host.
    period_ms, window_ms = 2000, 300
    now_ms = int(time.time() * 1000)
    first_ms = now_ms + 10000
    if (first_ms + 30000) // DAY_MS != first_ms // DAY_MS:
        first_ms = (first_ms + 30000) // DAY_MS * DAY_MS  # the next UTC day
    first = -(-first_ms // period_ms)
    day_first = -(-(first * period_ms // DAY_MS * DAY_MS) // period_ms)
    cap = first - day_first + 2
    config = schedule_config(workdir / "capped.yaml", period_ms=period_ms, window_ms=window_ms,
                             daily_cap=cap)
    names = ("host-a", "host-b", "host-c", "host-d")
    hosts = [start_daemon("--config", str(config), name=name) for name in names]
    workloads = {}
    for h, daemon in enumerate(hosts):
        workloads[daemon.host_name] = [
            start_workload(job=JOB, rank=2 * h + i, world_size=8, socket=daemon.socket,
                           step_ms=20) for i in range(2)]
    for daemon in hosts:
        cli_for(daemon).wait_attached([w.pid for w in workloads[daemon.host_name]])
    assert time.time() * 1000 < first * period_ms - 1500, "the daemons started too slowly"

    expected = {expected_trace_id(s, period_ms, window_ms): s for s in (first, first + 1)}

    def captured(daemon):
        return {t: files for t, files in completed_traces(daemon).items()
                if trace_start_ms(t) >= first * period_ms}

    for daemon in hosts:
        wait_until(lambda d=daemon: set(captured(d)) >= set(expected), timeout=60.0,
                   what=f"the capped slots' traces on {daemon.host_name}")
    # Past the cap every host records the slot as skipped, and stores
    # nothing more.
    for daemon in hosts:
        cli = cli_for(daemon)
        wait_until(lambda c=cli: any(int(e["slot"]) == first + 2 and
                                     e["outcome"] == "daily cap reached"
                                     for e in schedule_events(c)),
                   timeout=15.0, what=f"a daily cap skip on {daemon.host_name}")
    for daemon in hosts:
        traces = captured(daemon)
        assert set(traces) == set(expected), (daemon.host_name, traces, expected)
        pids = sorted(w.pid for w in workloads[daemon.host_name])
        for trace_id, files in traces.items():
            assert len(files) == 2, (daemon.host_name, trace_id, files)
            assert sorted(int(f.rsplit("pid", 1)[1].split(".")[0]) for f in files) == pids, files


def test_a_host_with_a_skewed_clock_misses_the_window_and_is_named(
        start_daemon, cli_for, start_workload, workdir):
    # host-b's schedule runs 2.5 s behind (--clock-offset, for testing; its
    # trace windows keep the system clock): it asks for each window 1.5 s
    # after the window started, and records the refusal with the slot.
    config = schedule_config(workdir / "schedule.yaml")
    good = start_daemon("--config", str(config), name="host-a")
    skewed = start_daemon("--config", str(config), "--clock-offset=-2500ms", name="host-b")
    assert "shifted clock" in skewed.log(), skewed.log()
    for rank, daemon in enumerate((good, skewed)):
        workload = start_workload(job=JOB, rank=rank, world_size=2, socket=daemon.socket,
                                  step_ms=20)
        cli_for(daemon).wait_attached([workload.pid])

    # Slots from the next one on: the workloads attached after the current
    # one's window may have started, on either host.
    from_slot = int(time.time() * 1000) // PERIOD_MS + 1
    late = "in the past of this daemon's clock"

    def late_windows(daemon):
        return [e for e in schedule_events(cli_for(daemon))
                if late in e.get("error", "") and int(e["slot"]) >= from_slot]

    events = wait_until(lambda: late_windows(skewed), timeout=20.0,
                        what="a window the skewed host asked for too late")
    assert events[0]["traceId"] == expected_trace_id(int(events[0]["slot"]))
    assert "clocks out of sync" in events[0]["error"], events[0]
    # Recorded as a refusal of its own, local to the host, not a capture.
    assert events[0]["outcome"] == "refused by this daemon (local)", events[0]
    assert events[0]["local"] is True and not events[0].get("captured"), events[0]
    # The host in step captured that slot under the same id.
    wait_until(lambda: events[0]["traceId"] in completed_traces(good), timeout=15.0,
               what="the slot's trace on the host in step")
    assert not late_windows(good)
    assert events[0]["traceId"] not in completed_traces(skewed)

    # `gpuctl schedule` over both hosts names the skewed one.
    cli = cli_for(good)
    fleet = subprocess.run([cli.binary, "schedule", "--host", good.address, "--host",
                            skewed.address], capture_output=True, text=True, timeout=60)
    assert fleet.returncode == 0, fleet.stderr
    named = [line for line in fleet.stderr.splitlines() if "clock is" in line]
    assert len(named) == 1 and skewed.address in named[0] and "behind" in named[0], fleet.stderr
