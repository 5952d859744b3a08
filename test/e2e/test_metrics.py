"""gpuctld's Prometheus metrics with the real binaries: the live /metrics
output passes `promtool check metrics`, a real Prometheus server (Debian's
`prometheus`) scrapes gpuctld on loopback and its query API returns what
the test caused (a trace taken, a Hello refused), and a non-loopback
metrics address is refused without the opt-in."""

import json
import os
import re
import shutil
import socket
import subprocess
import urllib.parse
import urllib.request

import pytest

from e2e_util import encode_hello, metrics_address, scrape, wait_until

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")


def require_prometheus():
    """Without Debian's prometheus package the test fails under CI=true and
    skips otherwise."""
    if PROMETHEUS is not None and PROMTOOL is not None:
        return
    reason = "prometheus and promtool are not installed (scripts/install_deps.sh installs them)"
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def free_port():
    # Prometheus takes no port 0: a port free now, on loopback.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def refuse_one_hello(socket_path):
    """Sends a Hello of another protocol major: the daemon refuses it."""
    client = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    client.settimeout(30)
    client.connect(str(socket_path))
    client.send(encode_hello(1, "refused", major=99))
    try:
        while client.recv(1 << 16):
            pass
    except ConnectionResetError:
        pass
    client.close()


class Prometheus:
    def __init__(self, workdir, target):
        self.port = free_port()
        self.config = workdir / "prometheus.yml"
        self.config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: gpuctld\n    static_configs:\n"
            f"      - targets: ['{target}']\n")
        self.log_path = workdir / "prometheus.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={self.config}",
             f"--storage.tsdb.path={workdir / 'prometheus-data'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def log(self):
        return self.log_path.read_text(errors="replace")

    def ready(self):
        assert self.proc.poll() is None, "prometheus exited:\n" + self.log()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready",
                                        timeout=5) as response:
                return response.status == 200
        except OSError:
            return False

    def value(self, query):
        """The query's single value now, or None when it has no sample."""
        url = (f"http://127.0.0.1:{self.port}/api/v1/query?"
               + urllib.parse.urlencode({"query": query}))
        with urllib.request.urlopen(url, timeout=10) as response:
            doc = json.load(response)
        assert doc["status"] == "success", doc
        result = doc["data"]["result"]
        assert len(result) <= 1, f"{query} names {len(result)} series: {result}"
        return float(result[0]["value"][1]) if result else None

    def wait_value(self, query, expected, at_least=False):
        def seen():
            value = self.value(query)
            return value is not None and (value >= expected if at_least else value == expected)
        wait_until(seen, timeout=60,
                   what=f"Prometheus to see {query} {'>=' if at_least else '=='} {expected}")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


@pytest.fixture
def prometheus(workdir):
    started = []

    def start(target):
        server = Prometheus(workdir, target)
        started.append(server)
        wait_until(server.ready, timeout=60, what="prometheus ready")
        return server

    yield start
    for server in started:
        server.stop()


def test_promtool_passes_and_a_real_prometheus_sees_the_trace_and_the_refusal(
        start_daemon, cli_for, start_workload, prometheus):
    require_prometheus()
    daemon = start_daemon("--metrics-listen", "127.0.0.1:0")
    address = metrics_address(daemon)
    assert address.startswith("127.0.0.1:")
    cli = cli_for(daemon)
    workload = start_workload(job="metrics", rank=0, world_size=1)
    cli.wait_attached([workload.pid])
    server = prometheus(address)
    server.wait_value('up{job="gpuctld"}', 1)
    server.wait_value('gpuctld_attached_processes{role="worker",kind="library"}', 1)

    result, trace = cli.trace("--job", "metrics", "--duration", "1s")
    assert result.returncode == 0, result.stdout + result.stderr
    assert trace.result_for(workload.pid)["status"] == "CAPTURE_STATUS_OK"
    refuse_one_hello(daemon.socket)

    text = scrape(address)
    check = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr + text
    assert "gpuctld_build_info{version=" in text

    server.wait_value('gpuctld_traces_total{trigger="on_demand",outcome="completed"}', 1)
    server.wait_value('gpuctld_traces_started_total{trigger="on_demand"}', 1)
    server.wait_value('gpuctld_process_results_total{status="ok"}', 1)
    server.wait_value('gpuctld_registration_refusals_total{reason="protocol_version"}', 1)
    server.wait_value('gpuctld_registrations_total', 1)
    server.wait_value('grpc_server_handled_total{grpc_service="gpuctl.v1.Gpuctl",'
                      'grpc_method="Trace",grpc_code="OK"}', 1)
    server.wait_value('gpuctld_store_traces', 1)
    server.wait_value('gpuctld_payload_bytes_count', 1)
    server.wait_value('gpuctld_conversion_seconds_count', 1)
    server.wait_value('gpuctld_trigger_latency_seconds_count', 1)
    server.wait_value('gpuctld_start_skew_seconds_count', 1)
    server.wait_value('gpuctld_captures_in_flight', 0)
    assert server.value('process_resident_memory_bytes') > 1 << 20
    assert server.value('process_cpu_seconds_total') > 0
    # What was stored is what the store gauge says.
    stored = sum(int(r["stored_bytes"]) for r in trace.results)
    assert server.value('gpuctld_store_bytes') >= stored


def test_metrics_are_off_unless_asked_and_non_loopback_needs_the_opt_in(
        build_dir, start_daemon, workdir):
    quiet = start_daemon(name="quiet")
    # The ready file can be written before the "gpuctld ready" line is.
    ready = wait_until(lambda: re.search(r'msg="gpuctld ready".*', quiet.log()),
                       what='the "gpuctld ready" line')
    assert " metrics=off" in ready.group(0), quiet.log()

    gpuctld = str(build_dir / "bin/gpuctld")
    base = ["--listen", "127.0.0.1:0", "--socket", str(workdir / "refused.sock"),
            "--store", str(workdir / "refused-store")]
    refused = subprocess.run([gpuctld] + base + ["--metrics-listen", "0.0.0.0:0"],
                             capture_output=True, text=True, timeout=30,
                             stdin=subprocess.DEVNULL)
    assert refused.returncode == 2, refused.stderr
    assert "refusing to serve metrics on 0.0.0.0:0" in refused.stderr
    config = workdir / "open-metrics.yaml"
    config.write_text("metrics:\n  listen: 0.0.0.0:0\n")
    from_file = subprocess.run([gpuctld] + base + ["--config", str(config)],
                               capture_output=True, text=True, timeout=30,
                               stdin=subprocess.DEVNULL)
    assert from_file.returncode == 2, from_file.stderr
    assert f"{config}:2: metrics.listen: refusing to serve metrics" in from_file.stderr
    ipv6 = subprocess.run([gpuctld] + base + ["--metrics-listen", "[::1]:9464"],
                          capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert ipv6.returncode == 2 and "IPv6" in ipv6.stderr, ipv6.stderr

    opted_in = start_daemon("--config", str(config), "--metrics-allow-insecure", name="open")
    address = metrics_address(opted_in)
    assert address.startswith("0.0.0.0:")
    port = address.rsplit(":", 1)[1]
    assert "gpuctld_registrations_total 0" in scrape(f"127.0.0.1:{port}")


def test_a_real_prometheus_sees_the_schedules_decisions_and_its_traces(
        start_daemon, cli_for, start_workload, workdir, prometheus):
    require_prometheus()
    config = workdir / "schedule.yaml"
    config.write_text("schedule:\n"
                      "  seed: metrics-e2e\n"
                      "  max_duty_cycle: 0.5\n"
                      "  rules:\n"
                      "    - name: every2s\n"
                      "      selector: {job: \"sampled\"}\n"
                      "      period: 2s\n"
                      "      window: 300ms\n"
                      "      probability: 1\n")
    daemon = start_daemon("--config", str(config), "--metrics-listen", "127.0.0.1:0")
    cli = cli_for(daemon)
    workload = start_workload(job="sampled", rank=0, world_size=1)
    cli.wait_attached([workload.pid])
    server = prometheus(metrics_address(daemon))
    # Every slot of a probability-1 rule is a capture: decisions and the
    # traces they start are counted alike.
    server.wait_value('gpuctld_schedule_decisions_total{rule="every2s",outcome="capture"}', 2,
                      at_least=True)
    server.wait_value('gpuctld_traces_total{trigger="scheduled",outcome="completed"}', 1,
                      at_least=True)
    assert server.value('gpuctld_schedule_decisions_total{rule="every2s",'
                        'outcome="not_sampled"}') is None
