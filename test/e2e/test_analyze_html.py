"""`gpuctl analyze --html` opened in a real headless Chromium (Debian's
chromium and chromedriver, driven by selenium): the page loads with no
console error and no network request but its own file, and the rendered DOM
carries the numbers of a hand-made two-rank trace whose answers are known,
with a hostile kernel and range name shown as text. A screenshot of the page
is kept in BUILD/test-artifacts/analyze-html.png.
"""

import gzip
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from conftest import build_output

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
US = 1000
WINDOW_NS = 1000 * US
BASE_NS = 1_700_000_000_000_000_000  # Unix time of ts 0; gpuctl's window is in Unix time
HOSTILE_KERNEL = "<script>alert(1)</script>"
HOSTILE_RANGE = 'DataLoader.__next__"><img src=x onerror=alert(2)>'


def us_text(ns):
    return f"{ns // 1000}.{ns % 1000:03d}"


def complete(cat, name, pid, tid, start, dur, args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid,
            "ts": float(us_text(start)), "dur": float(us_text(dur)), "args": args}


def kernel(name, start, dur, corr, stream=7):
    return complete("kernel", name, 0, stream, start, dur,
                    {"device": 0, "context": 1, "stream": stream, "correlation": corr})


def runtime(name, start, dur, corr, pid):
    return complete("cuda_runtime", name, pid, pid + 1, start, dur,
                    {"cbid": 211, "correlation": corr})


def write_trace(path, rank, pid, events):
    meta = {"trace_id": "0190c0de-0000-7000-8000-00000000beef", "host": "node1", "pid": pid,
            "job_id": "42", "rank": rank, "world_size": 2, "library_version": "1.0",
            "dropped_events": 0, "window_start_ns": BASE_NS, "window_end_ns": BASE_NS + WINDOW_NS,
            "host_only": False, "host_only_reason": "",
            "activities": ["kernel", "memcpy", "runtime", "sync"], "cupti_version": 24,
            "cupti_path": "", "cupti_active": True, "cupti_failed": False, "cupti_message": "",
            "cupti_dropped_records": 0, "dropped_at_cap": 0}
    doc = {"schemaVersion": 1, "deviceProperties": [],
           "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2},
           "gpuctl": meta, "traceEvents": events, "traceName": path.name,
           "displayTimeUnit": "ms", "baseTimeNanoseconds": BASE_NS}
    with gzip.open(path, "wt") as out:
        json.dump(doc, out)


def memory_counter(start, bytes_):
    """gpuctl's device memory counter sample (GPU 0), as the converter writes it."""
    return {"ph": "C", "cat": "gpu_memory", "name": "Device memory allocated (GPU 0)", "pid": 0,
            "tid": 0, "ts": float(us_text(start)), "args": {"bytes": bytes_}}


def union_ns(intervals):
    total, end = 0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


# rank 0: the hostile kernel [10, 110) µs; the host is in the hostile range
# until 290 µs and launches "conv" at 300 µs, which runs [310, 410): a 200 µs
# host-bound gap. cudaDeviceSynchronize holds the host [600, 660). Steps:
# [0, 420) and [420, window end) (cut by the window). GPU 0's allocated
# memory: 0 at 0, 64 MiB at 100 µs, 96 MiB at 400 µs (so 96 MiB at step 1's
# end).
RANK0_KERNELS = [(10 * US, 110 * US), (310 * US, 410 * US)]
RANK0_SYNC = (600 * US, 660 * US)
MIB = 1 << 20
RANK0_MEMORY = [(0, 0), (100 * US, 64 * MIB), (400 * US, 96 * MIB)]
# rank 1: ten 50 µs "gemm" kernels back to back from 100 µs, each launched
# 40 µs ahead; a 1 MB pinned HtoD copy [700, 800) on another stream.
RANK1_KERNELS = [(100 * US + i * 50 * US, 150 * US + i * 50 * US) for i in range(10)]
RANK1_COPY = (700 * US, 800 * US)


def make_traces(root):
    pid0, pid1 = 5000, 5001
    rank0 = [runtime("cudaLaunchKernel", 0, 5 * US, 1, pid0),
             kernel(HOSTILE_KERNEL, 10 * US, 100 * US, 1),
             complete("user_annotation", HOSTILE_RANGE, pid0, pid0 + 1, 110 * US, 180 * US, {}),
             runtime("cudaLaunchKernel", 300 * US, 5 * US, 2, pid0),
             kernel("conv", 310 * US, 100 * US, 2),
             runtime("cudaDeviceSynchronize", RANK0_SYNC[0], RANK0_SYNC[1] - RANK0_SYNC[0], 3,
                     pid0),
             complete("user_annotation", "ProfilerStep#1", pid0, pid0 + 1, 0, 420 * US, {}),
             complete("user_annotation", "ProfilerStep#2", pid0, pid0 + 1, 420 * US,
                      WINDOW_NS - 420 * US, {})]
    rank0 += [memory_counter(ts, b) for ts, b in RANK0_MEMORY]
    rank1 = []
    for i, (a, b) in enumerate(RANK1_KERNELS):
        rank1 += [runtime("cudaLaunchKernel", a - 40 * US, 5 * US, 10 + i, pid1),
                  kernel("gemm", a, b - a, 10 + i)]
    rank1 += [runtime("cudaMemcpyAsync", 550 * US, 5 * US, 30, pid1),
              complete("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 0, 8, RANK1_COPY[0],
                       RANK1_COPY[1] - RANK1_COPY[0],
                       {"device": 0, "context": 1, "stream": 8, "correlation": 30,
                        "bytes": 1_000_000})]
    root.mkdir()
    write_trace(root / f"node1-rank0-pid{pid0}.json.gz", 0, pid0, rank0)
    write_trace(root / f"node1-rank1-pid{pid1}.json.gz", 1, pid1, rank1)
    return root


def start_browser(driver_log):
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1200,900", "--no-first-run", "--disable-extensions",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-default-apps"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    # The driver is Debian's: selenium is given its path, so it never looks
    # for one to download.
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER, log_output=driver_log),
                            options=options)


def network_requests(driver):
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def cell_ns(row, cls):
    return int(row.find_element(By.CSS_SELECTOR, f"td.{cls}").get_attribute("data-ns"))


def test_html_report_renders_the_numbers_offline_in_chromium(build_dir, workdir):
    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        pytest.skip(f"{CHROMIUM} or {CHROMEDRIVER} is not installed "
                    "(scripts/install_deps.sh installs chromium and chromium-driver)")
    gpuctl = str(build_output(build_dir, "bin/gpuctl"))
    traces = make_traces(workdir / "traces")
    report = workdir / "report.html"
    run = subprocess.run([gpuctl, "analyze", "--json", "--html", str(report), str(traces)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)  # --json still owns stdout
    assert report.stat().st_size > 0

    artifacts = build_dir / "test-artifacts"
    artifacts.mkdir(exist_ok=True)
    driver = start_browser(str(workdir / "chromedriver.log"))
    try:
        driver.get(report.as_uri())
        assert driver.title == "gpuctl analyze: 2 traces"
        with pytest.raises(NoAlertPresentException):
            driver.switch_to.alert.accept()  # a hostile name that ran would have left one

        # Per-rank summary: the span and the classes, as the trace was built.
        rows = driver.find_elements(By.CSS_SELECTOR, "#summary-table tr.trace-row")
        assert [r.get_attribute("data-rank") for r in rows] == ["0", "1"]
        span0 = RANK0_KERNELS[-1][1] - RANK0_KERNELS[0][0]
        assert int(rows[0].find_element(By.CSS_SELECTOR, "td[data-ns]").get_attribute(
            "data-ns")) == span0
        assert cell_ns(rows[0], "compute") == union_ns(RANK0_KERNELS)
        assert cell_ns(rows[0], "idle") == span0 - union_ns(RANK0_KERNELS)
        assert rows[0].find_element(By.CSS_SELECTOR, "td.compute").text == "50.0%"
        span1 = RANK1_COPY[1] - RANK1_KERNELS[0][0]
        assert cell_ns(rows[1], "compute") == union_ns(RANK1_KERNELS)
        assert cell_ns(rows[1], "memory") == RANK1_COPY[1] - RANK1_COPY[0]
        assert cell_ns(rows[1], "idle") == span1 - union_ns(RANK1_KERNELS) - 100 * US
        # The JSON of the same run says the same: one report model.
        for row, trace in zip(rows, doc["traces"]):
            assert cell_ns(row, "compute") == trace["gpu"]["compute_ns"]

        # Heatmap: one row per rank, 100 buckets of 10 µs; each cell's busy
        # share adds up to the rank's busy time.
        heat_rows = driver.find_elements(By.CSS_SELECTOR, "#heatmap-svg g.heat-row")
        assert [r.get_attribute("data-rank") for r in heat_rows] == ["0", "1"]
        for row, busy in zip(heat_rows, (union_ns(RANK0_KERNELS),
                                         union_ns(RANK1_KERNELS) + 100 * US)):
            cells = row.find_elements(By.CSS_SELECTOR, "rect.heat-cell")
            assert len(cells) == 100
            shares = [float(c.get_attribute("data-busy-pct")) for c in cells]
            assert sum(shares) / 100 * 10 * US == pytest.approx(busy)
        assert [float(c.get_attribute("data-busy-pct")) for c in
                heat_rows[0].find_elements(By.CSS_SELECTOR, "rect.heat-cell")][:3] == [
                    0.0, 100.0, 100.0]

        # Stacked step bars: rank 0's whole step [0, 420) µs holds both
        # kernels; the second step is cut by the window.
        bars = driver.find_elements(By.CSS_SELECTOR, "svg.step-bars[data-rank='0'] g.step-bar")
        assert [b.get_attribute("data-step") for b in bars] == ["1", "2"]
        assert "clipped" in bars[1].get_attribute("class")
        segs = {s.get_attribute("class").split()[-1]: int(s.get_attribute("data-ns"))
                for s in bars[0].find_elements(By.CSS_SELECTOR, "rect.seg")}
        assert segs == {"seg-compute": union_ns(RANK0_KERNELS), "seg-communication": 0,
                        "seg-memory": 0, "seg-idle": 420 * US - union_ns(RANK0_KERNELS)}

        # Top tables: the hostile kernel name is text, not markup.
        names = [td.text for td in driver.find_elements(
            By.CSS_SELECTOR, "table.top-kernels[data-rank='0'] td.name")]
        assert names == [HOSTILE_KERNEL, "conv"]
        assert driver.find_elements(By.TAG_NAME, "script") == []
        assert driver.find_elements(By.TAG_NAME, "img") == []
        copy = driver.find_element(By.CSS_SELECTOR, "table.top-copies[data-rank='1'] tbody tr")
        assert copy.find_element(By.CSS_SELECTOR, "td.name").text == \
            "Memcpy HtoD (Pinned -> Device)"
        assert copy.find_element(By.CSS_SELECTOR, "td[data-bytes]").text == "1.00 MB"
        sync = driver.find_element(By.CSS_SELECTOR, "table.top-syncs[data-rank='0'] tbody tr")
        assert sync.find_element(By.CSS_SELECTOR, "td.name").text == "cudaDeviceSynchronize"
        assert int(sync.find_element(By.CSS_SELECTOR, "td[data-ns]").get_attribute(
            "data-ns")) == RANK0_SYNC[1] - RANK0_SYNC[0]

        # Device memory: rank 0's peak, and its step boundaries drawn as a line.
        memory = driver.find_element(By.CSS_SELECTOR,
                                     "table.memory-devices[data-rank='0'] tbody tr")
        peak = memory.find_elements(By.CSS_SELECTOR, "td[data-bytes]")[0]
        assert int(peak.get_attribute("data-bytes")) == 96 * MIB
        assert peak.text == "0.09 GiB"
        assert driver.find_elements(By.CSS_SELECTOR, "table.memory-devices[data-rank='1']") == []
        chart = driver.find_element(By.CSS_SELECTOR, "svg.memory-chart[data-device='0']")
        points = chart.find_elements(By.CSS_SELECTOR, "circle.memory-point")
        assert [int(p.get_attribute("data-bytes")) for p in points] == [0, 96 * MIB]
        line = chart.find_element(By.CSS_SELECTOR, "polyline.memory-line")
        box = driver.execute_script("const b = arguments[0].getBBox(); return [b.width, b.height];",
                                    line)
        assert box[0] > 100 and box[1] > 50, box  # drawn across the chart, rising

        # Findings, ranked, with their numbers and where to look.
        findings = driver.find_elements(By.CSS_SELECTOR, "ol.findings > li.finding")
        assert [(f.get_attribute("data-id"), f.get_attribute("data-rank")) for f in findings] == [
            ("clipped_window", "0"), ("host_bound_idle", "0"), ("sync_stalls", "0")]
        host_bound = findings[1]
        assert int(host_bound.get_attribute("data-recoverable-ns")) == 200 * US
        assert host_bound.find_element(By.CSS_SELECTOR, ".recoverable").text == "200 us"
        assert HOSTILE_RANGE in host_bound.find_element(By.CSS_SELECTOR, ".advice").text
        where = host_bound.find_element(By.CSS_SELECTOR, ".where")
        assert (int(where.get_attribute("data-start-ns")),
                int(where.get_attribute("data-end-ns"))) == (110 * US, 310 * US)
        assert where.find_element(By.CSS_SELECTOR, "code.perfetto-query").text == (
            "select id, ts, dur, name from slice where ts <= 310000 and ts + dur >= 110000 "
            "order by ts")
        assert where.find_element(By.CSS_SELECTOR, "a.perfetto").get_attribute(
            "href") == "https://ui.perfetto.dev/"
        assert int(findings[2].get_attribute("data-recoverable-ns")) == \
            RANK0_SYNC[1] - RANK0_SYNC[0]
        assert [f["id"] for f in doc["findings"]] == [f.get_attribute("data-id")
                                                      for f in findings]

        # Offline: the page asked for nothing but itself, and logged no error.
        assert network_requests(driver) == [report.as_uri()]
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == []

        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(1200, min(int(height) + 100, 16000))
        shot = artifacts / "analyze-html.png"
        assert driver.save_screenshot(str(shot))
        print(f"screenshot: {shot}")
        shutil.copy(report, artifacts / "analyze-html.html")
    finally:
        driver.quit()


def test_html_flag_rejects_paths_it_cannot_write(build_dir, workdir):
    gpuctl = str(build_output(build_dir, "bin/gpuctl"))
    traces = make_traces(workdir / "traces")
    for path, message in ((workdir / "missing" / "r.html", "is not a directory"),
                          (workdir, "is a directory")):
        run = subprocess.run([gpuctl, "analyze", "--html", str(path), str(traces)],
                             capture_output=True, text=True, timeout=60)
        assert run.returncode == 2, run.stderr  # usage: cli/exit_codes.h
        assert "--html: " in run.stderr and message in run.stderr, run.stderr
        assert run.stdout == ""  # refused before any trace was read
    # A file whose directory cannot take it (read-only /proc): nothing read.
    run = subprocess.run([gpuctl, "analyze", "--html", "/proc/gpuctl-report.html", str(traces)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run.stderr
    assert "gpuctl analyze: --html:" in run.stderr and "/proc/gpuctl-report.html" in run.stderr
    assert run.stdout == ""


def make_after_traces(root):
    """The traces of make_traces after a change: rank 0's first step takes
    500 µs instead of 420, rank 1's ten gemm kernels 80 µs instead of 50, and
    a new 20 µs "fused" kernel follows them."""
    pid0, pid1 = 5000, 5001
    rank0 = [runtime("cudaLaunchKernel", 0, 5 * US, 1, pid0),
             kernel("conv", 10 * US, 100 * US, 1),
             complete("user_annotation", "ProfilerStep#1", pid0, pid0 + 1, 0, 500 * US, {}),
             complete("user_annotation", "ProfilerStep#2", pid0, pid0 + 1, 500 * US,
                      WINDOW_NS - 500 * US, {})]
    rank1 = []
    for i in range(10):
        start = 100 * US + i * 80 * US
        rank1 += [runtime("cudaLaunchKernel", start - 40 * US, 5 * US, 10 + i, pid1),
                  kernel("gemm", start, 80 * US, 10 + i)]
    rank1 += [runtime("cudaLaunchKernel", 880 * US, 5 * US, 40, pid1),
              kernel("fused", 900 * US, 20 * US, 40)]
    root.mkdir()
    write_trace(root / f"node1-rank0-pid{pid0}.json.gz", 0, pid0, rank0)
    write_trace(root / f"node1-rank1-pid{pid1}.json.gz", 1, pid1, rank1)
    return root


def test_diff_html_renders_the_shift_offline_in_chromium(build_dir, workdir):
    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        pytest.skip(f"{CHROMIUM} or {CHROMEDRIVER} is not installed "
                    "(scripts/install_deps.sh installs chromium and chromium-driver)")
    gpuctl = str(build_output(build_dir, "bin/gpuctl"))
    before = make_traces(workdir / "before")
    after = make_after_traces(workdir / "after")
    report = workdir / "diff.html"
    run = subprocess.run([gpuctl, "analyze", "--diff", str(before), str(after), "--html",
                          str(report)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert f"HTML report: {report}" in run.stdout
    doc = json.loads(subprocess.run(
        [gpuctl, "analyze", "--json", "--diff", str(before), str(after)],
        capture_output=True, text=True, timeout=60, check=True).stdout)

    driver = start_browser(str(workdir / "chromedriver-diff.log"))
    try:
        driver.get(report.as_uri())
        assert driver.title == "gpuctl analyze --diff"
        assert driver.find_element(By.ID, "before").text == str(before)

        # Step time: the one whole step of each side (rank 0's first).
        p50 = driver.find_element(By.CSS_SELECTOR, "#diff-steps-table tr[data-pct='p50']")
        assert cell_ns(p50, "before") == 420 * US
        assert cell_ns(p50, "after") == 500 * US
        assert p50.find_element(By.CSS_SELECTOR, "td.ratio").text == "x1.19"
        assert float(p50.find_element(By.CSS_SELECTOR, "td.ratio").get_attribute(
            "data-ratio")) == pytest.approx(doc["step_p50_ratio"], abs=1e-4)
        bars = driver.find_elements(By.CSS_SELECTOR,
                                    "#diff-steps-svg g[data-pct='p50'] rect.step-shift-bar")
        assert [(b.get_attribute("data-side"), int(b.get_attribute("data-ns"))) for b in bars] \
            == [("before", 420 * US), ("after", 500 * US)]

        # Busy shift in points, as the JSON says.
        busy = driver.find_element(By.CSS_SELECTOR, "#diff-busy-table tr[data-share='busy']")
        assert float(busy.find_element(By.CSS_SELECTOR, "td.shift").get_attribute(
            "data-points")) == pytest.approx(doc["busy_pct_shift"], abs=0.01)

        def kernel_rows(kind):
            table = driver.find_element(By.CSS_SELECTOR, f"table.diff-kernels[data-kind='{kind}']")
            return {r.find_element(By.CSS_SELECTOR, "td.name").text: r for r in
                    table.find_elements(By.CSS_SELECTOR, "tr.kernel-row")}

        changed = kernel_rows("changed")
        assert int(changed["gemm"].find_element(By.CSS_SELECTOR, "td.delta").get_attribute(
            "data-ns")) == 10 * 30 * US
        assert cell_ns(changed["gemm"], "mean-before") == 50 * US
        assert cell_ns(changed["gemm"], "mean-after") == 80 * US
        assert list(kernel_rows("appeared")) == ["fused"]
        assert list(kernel_rows("disappeared")) == [HOSTILE_KERNEL]  # shown as text
        assert driver.find_elements(By.TAG_NAME, "script") == []

        only_before = [li.get_attribute("data-id") for li in driver.find_elements(
            By.CSS_SELECTOR, "ol.diff-findings[data-side='before'] li.finding")]
        assert only_before == [f["id"] for f in doc["findings_only_before"]]
        assert network_requests(driver) == [report.as_uri()]
        assert [e for e in driver.get_log("browser") if e["level"] == "SEVERE"] == []
    finally:
        driver.quit()
