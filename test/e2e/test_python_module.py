"""The Python module (python/gpuctl): a real gpuctld traces Python scripts
that import gpuctl under LD_PRELOAD=libgpuctl.so; without the library the
module does nothing; the PyTorch optimizer step hook marks one step per
iteration.

torch is not installed here: the hook is exercised against a stand-in
`torch` package, written into a temp dir (see write_stand_in_torch).
"""

import gc
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import LineReader, Workload
from e2e_util import load_trace, sanitizer_report, wait_until

REPO = Path(__file__).resolve().parents[2]
PYTHON_DIR = REPO / "python"

# Shared by every workload script: a busy wait, so ranges have width.
SCRIPT_PRELUDE = """\
import json
import sys
import time

import gpuctl


def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def report(**values):
    print(json.dumps(values), flush=True)


def announce_when_connected(state):
    if not state.get("connected") and gpuctl.connected():
        state["connected"] = True
        print("connected", flush=True)
"""


# --- A stand-in for torch ------------------------------------------------
# It implements only what gpuctl uses, following torch's real API (torch >=
# 2.0, torch/optim/optimizer.py and torch/utils/hooks.py):
# register_optimizer_step_post_hook(hook) -> RemovableHandle, with
# handle.remove(); the hooks live in the module's _global_optimizer_post_hooks
# dict; every Optimizer subclass's step() is wrapped to call, after the step,
# the optimizer's own post hooks, then the global ones, each as
# hook(optimizer, args, kwargs), where args are the step's positional
# arguments including the optimizer itself.

STAND_IN_TORCH = {
    "torch/__init__.py": '''\
        """Stand-in for torch in gpuctl's tests: only the optimizer step hooks."""
        from torch import optim, utils
        ''',
    "torch/utils/__init__.py": '''\
        from torch.utils import hooks
        ''',
    "torch/utils/hooks.py": '''\
        import weakref


        class RemovableHandle:
            """As torch.utils.hooks.RemovableHandle: remove() deletes the hook."""

            next_id = 0

            def __init__(self, hooks_dict):
                self.hooks_dict_ref = weakref.ref(hooks_dict)
                self.id = RemovableHandle.next_id
                RemovableHandle.next_id += 1

            def remove(self):
                hooks_dict = self.hooks_dict_ref()
                if hooks_dict is not None and self.id in hooks_dict:
                    del hooks_dict[self.id]
        ''',
    "torch/optim/__init__.py": '''\
        from torch.optim.optimizer import Optimizer
        ''',
    "torch/optim/optimizer.py": '''\
        import functools
        from collections import OrderedDict
        from itertools import chain

        from torch.utils.hooks import RemovableHandle

        _global_optimizer_post_hooks = OrderedDict()


        def register_optimizer_step_post_hook(hook):
            handle = RemovableHandle(_global_optimizer_post_hooks)
            _global_optimizer_post_hooks[handle.id] = hook
            return handle


        def _with_step_hooks(step):
            @functools.wraps(step)
            def wrapper(*args, **kwargs):
                self = args[0]
                out = step(*args, **kwargs)
                for hook in chain(self._optimizer_step_post_hooks.values(),
                                  _global_optimizer_post_hooks.values()):
                    hook(self, args, kwargs)
                return out
            return wrapper


        class Optimizer:
            def __init__(self, params, defaults):
                self.defaults = defaults
                self.param_groups = [dict(defaults, params=list(params))]
                self._optimizer_step_post_hooks = OrderedDict()

            def __init_subclass__(cls, **kwargs):
                super().__init_subclass__(**kwargs)
                if "step" in cls.__dict__:
                    cls.step = _with_step_hooks(cls.step)

            def register_step_post_hook(self, hook):
                handle = RemovableHandle(self._optimizer_step_post_hooks)
                self._optimizer_step_post_hooks[handle.id] = hook
                return handle

            def step(self, closure=None):
                raise NotImplementedError
        ''',
}

# torch before 2.0: an Optimizer, but no global step hooks.
OLD_TORCH_OPTIMIZER = '''\
    class Optimizer:
        def __init__(self, params, defaults):
            self.defaults = defaults
    '''

BROKEN_TORCH_INIT = '''\
    raise RuntimeError("stand-in torch: its native libraries failed to load")
    '''


def write_stand_in_torch(root, variant="current"):
    """Writes the stand-in torch under root; returns root (for sys.path)."""
    files = dict(STAND_IN_TORCH)
    if variant == "old":
        files["torch/optim/optimizer.py"] = OLD_TORCH_OPTIMIZER
    elif variant == "broken":
        files["torch/__init__.py"] = BROKEN_TORCH_INIT
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


# --- Running Python scripts ----------------------------------------------

def python_env(workdir, lib_path, preload=True, torch_dir=None, env=None):
    """The environment of a script: gpuctl on PYTHONPATH (after the
    stand-in torch, if any), the test's socket, libgpuctl preloaded."""
    child = {k: v for k, v in os.environ.items()
             if not k.startswith("GPUCTL_") and k not in
             ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LD_PRELOAD", "PYTHONPATH")}
    paths = ([str(torch_dir)] if torch_dir else []) + [str(PYTHON_DIR)]
    child["PYTHONPATH"] = os.pathsep.join(paths)
    child["GPUCTL_SOCKET"] = str(workdir / "gpuctl.sock")
    child["PYTHONDONTWRITEBYTECODE"] = "1"
    # Set by CTest for sanitized builds: the runtime must load first.
    first = os.environ.get("GPUCTL_E2E_PRELOAD_FIRST")
    if first:
        # What the interpreter itself leaves allocated at exit is not gpuctl's.
        asan = os.environ.get("ASAN_OPTIONS")
        child["ASAN_OPTIONS"] = f"{asan}:detect_leaks=0" if asan else "detect_leaks=0"
    preloads = ([first] if first else []) + ([str(lib_path)] if preload else [])
    if preloads:
        child["LD_PRELOAD"] = ":".join(preloads)
    child.update(env or {})
    return child


def write_script(workdir, name, body):
    """body: one indented block, or a list of them (each dedented alone)."""
    parts = [body] if isinstance(body, str) else body
    path = workdir / name
    path.write_text(SCRIPT_PRELUDE + "".join("\n" + textwrap.dedent(part) for part in parts))
    return path


def run_script(workdir, lib_path, body, name="script.py", **env_args):
    """Runs a script to its end; returns its output lines (it must exit 0)."""
    path = write_script(workdir, name, body)
    result = subprocess.run([sys.executable, str(path)],
                            env=python_env(workdir, lib_path, **env_args),
                            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{name} exited {result.returncode}:\n{output}"
    assert not sanitizer_report(output), output
    return output.splitlines()


def last_json(lines):
    docs = [json.loads(line) for line in lines if line.startswith("{")]
    assert docs, "no JSON line in the script's output:\n" + "\n".join(lines)
    return docs[-1]


@pytest.fixture
def start_script(workdir, lib_path):
    """start_script(body, torch_dir=, preload=, env=) -> Workload running a
    Python script; killed at teardown."""
    workloads = []

    def start(body, name="workload.py", **env_args):
        path = write_script(workdir, name, body)
        proc = subprocess.Popen([sys.executable, str(path)],
                                env=python_env(workdir, lib_path, **env_args),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            os.setpriority(os.PRIO_PROCESS, proc.pid, 10)
        except OSError:
            pass
        workloads.append(Workload(proc, LineReader(proc.stdout)))
        return workloads[-1]

    yield start
    for workload in workloads:
        try:
            os.killpg(workload.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        workload.wait(10)
    for workload in workloads:
        output = "\n".join(workload.lines())
        assert not sanitizer_report(output), f"script {workload.pid}:\n{output}"


def wait_for_line(workload, predicate, what):
    def find():
        if workload.proc.poll() is not None:
            raise AssertionError(f"the script exited {workload.proc.returncode} before {what}:\n"
                                 + "\n".join(workload.lines()))
        return next((line for line in workload.lines() if predicate(line)), None)
    return wait_until(find, what=what)


def wait_ready(workload):
    """The script's first JSON report, once it is connected to gpuctld."""
    first = wait_for_line(workload, lambda line: line.startswith("{"), "the script's report")
    wait_for_line(workload, lambda line: line == "connected", "gpuctl.connected() in the script")
    return json.loads(first)


def trace_script(cli, workload, job):
    """Traces the job for 1s; returns the script's trace events."""
    cli.wait_attached([workload.pid])
    result, trace = cli.trace("--job", job, "--duration", "1s")
    assert result.returncode == 0, result.stdout + result.stderr
    assert trace is not None, "no trace downloaded:\n" + result.stdout + result.stderr
    res = trace.result_for(workload.pid)
    assert res["status"] == "CAPTURE_STATUS_OK", res
    _, doc = load_trace(trace.path / res["file"])
    assert workload.proc.poll() is None, "the script stopped while traced:\n" + "\n".join(
        workload.lines())
    return doc["traceEvents"]


def ns(micros):
    """Trace timestamps are microseconds with three decimals: exact in ns."""
    return round(micros * 1000)


def user_ranges(events, pid):
    ranges = [e for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation"]
    assert all(e["pid"] == pid for e in ranges), [e for e in ranges if e["pid"] != pid][:3]
    return ranges


def step_marks(ranges):
    """(start ns, step number) of each ProfilerStep#N, in time order."""
    marks = []
    for e in ranges:
        match = re.fullmatch(r"ProfilerStep#(\d+)", e["name"])
        if match:
            assert int(e["args"]["step"]) == int(match.group(1)), e
            marks.append((ns(e["ts"]), int(match.group(1))))
    return sorted(marks)


def assert_one_mark_per_iteration(ranges, marks):
    """Each "iteration" range holds exactly one step mark. The window cuts
    an iteration at each end: one that began before the window has no range
    (its mark, if in the window, comes before the first range); the last
    range is closed at the window's end, which may come before its mark is
    taken or after a mark the library still recorded."""
    iterations = sorted((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]))
                        for e in ranges if e["name"] == "iteration")
    assert len(iterations) >= 5, f"only {len(iterations)} iterations traced"
    before_first = [mark for mark in marks if mark[0] < iterations[0][0]]
    after_last = [mark for mark in marks if mark[0] > iterations[-1][1]]
    assert len(before_first) <= 1, (before_first, iterations[0])
    assert len(after_last) <= 1, (after_last, iterations[-1])
    counts = [sum(1 for ts, _ in marks if start <= ts <= end) for start, end in iterations]
    assert all(count == 1 for count in counts[:-1]), counts
    assert counts[-1] + len(after_last) <= 1, (counts[-1], after_last)
    assert sum(counts) + len(before_first) + len(after_last) == len(marks), (counts, marks)
    numbers = [number for _, number in marks]
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers))), numbers
    return numbers


# --- Tests ---------------------------------------------------------------

def test_script_steps_and_ranges_are_in_its_trace(cli, start_script):
    workload = start_script("""
        import asyncio


        @gpuctl.range("optimizer")
        def optimize():
            spin(0.001)


        @gpuctl.range("fetch")
        async def fetch():
            await asyncio.sleep(0)
            spin(0.0005)


        report(available=gpuctl.available(), version=gpuctl.version())
        state = {}
        i = 0
        while True:
            gpuctl.step(1000 + i)
            with gpuctl.range("forward"):
                spin(0.002)
            gpuctl.range_push("backward")
            spin(0.002)
            gpuctl.range_pop()
            optimize()
            asyncio.run(fetch())
            with gpuctl.range("données→λ"):
                spin(0.0002)
            with gpuctl.range("nul\\0name"):
                pass
            with gpuctl.range(b"raw bytes"):
                pass
            with gpuctl.range("lone \\udc80 surrogate"):
                pass
            announce_when_connected(state)
            i += 1
        """, env={"GPUCTL_JOB_ID": "py-ranges"})
    ready = wait_ready(workload)
    assert ready["available"] is True, ready
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", ready["version"] or ""), ready

    ranges = user_ranges(trace_script(cli, workload, "py-ranges"), workload.pid)
    names = {e["name"] for e in ranges}
    for name in ("forward", "backward", "optimizer", "fetch", "données→λ", "nul\ufffdname",
                 "raw bytes", "lone \\udc80 surrogate"):
        assert name in names, f"no {name!r} range among {sorted(names)[:20]}"
    # The application's own numbers, one per iteration, in order.
    numbers = [number for _, number in step_marks(ranges)]
    assert len(numbers) >= 5, numbers
    assert numbers[0] >= 1000, numbers
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers))), numbers


def test_torch_hook_marks_one_step_per_iteration_with_two_optimizers(cli, start_script,
                                                                     workdir):
    """Runs against the stand-in torch (write_stand_in_torch), which stands in
    for torch's real API and follows its signatures: the global hook is
    called as hook(optimizer, args, kwargs) after each step, and the handle
    from register_optimizer_step_post_hook has remove()."""
    torch_dir = write_stand_in_torch(workdir / "torch-stand-in")
    workload = start_script("""
        import torch


        class SpinningOptimizer(torch.optim.Optimizer):
            def __init__(self, seconds):
                super().__init__([], {"lr": 0.1})
                self.seconds = seconds

            def step(self, closure=None):
                spin(self.seconds)


        generator = SpinningOptimizer(0.001)
        discriminator = SpinningOptimizer(0.001)
        report(hooks=len(torch.optim.optimizer._global_optimizer_post_hooks))
        state = {}
        while True:
            with gpuctl.range("iteration"):
                spin(0.003)
                generator.step()  # steps first: the leader, its steps mark
                discriminator.step()
                discriminator.step()
            announce_when_connected(state)
        """, torch_dir=torch_dir, env={"GPUCTL_JOB_ID": "py-hook"})
    assert wait_ready(workload) == {"hooks": 1}

    ranges = user_ranges(trace_script(cli, workload, "py-hook"), workload.pid)
    assert_one_mark_per_iteration(ranges, step_marks(ranges))


def test_explicit_steps_turn_the_torch_hook_off(cli, start_script, workdir):
    """Runs against the stand-in torch (write_stand_in_torch), which stands in
    for torch's real API and follows its signatures: the global hook is
    called as hook(optimizer, args, kwargs) after each step, and the handle
    from register_optimizer_step_post_hook has remove()."""
    torch_dir = write_stand_in_torch(workdir / "torch-stand-in")
    workload = start_script("""
        import torch


        class SpinningOptimizer(torch.optim.Optimizer):
            def step(self, closure=None):
                spin(0.001)


        optimizer = SpinningOptimizer([], {})
        for _ in range(3):  # marked by the hook
            optimizer.step()
        report(hooks=len(torch.optim.optimizer._global_optimizer_post_hooks))
        state = {}
        i = 0
        while True:
            with gpuctl.range("iteration"):
                gpuctl.step(5000 + i)
                spin(0.003)
                optimizer.step()  # after gpuctl.step(): marks nothing
            announce_when_connected(state)
            i += 1
        """, torch_dir=torch_dir, env={"GPUCTL_JOB_ID": "py-explicit"})
    assert wait_ready(workload) == {"hooks": 1}

    ranges = user_ranges(trace_script(cli, workload, "py-explicit"), workload.pid)
    numbers = assert_one_mark_per_iteration(ranges, step_marks(ranges))
    assert numbers[0] >= 5000, numbers


def test_without_the_library_the_module_does_nothing(workdir, lib_path):
    torch_dir = write_stand_in_torch(workdir / "torch-stand-in")
    body = """
        failures = []


        def expect_error(error, call, *args):
            try:
                call(*args)
            except error:
                return
            failures.append(f"{call.__name__}{args!r} did not raise {error.__name__}")


        @gpuctl.range("decorated")
        def add_one(x):
            return x + 1


        state = {"available": gpuctl.available(), "connected": gpuctl.connected(),
                 "version": gpuctl.version(),
                 "torch_imported_by_gpuctl": "torch" in sys.modules}
        gpuctl.step()
        gpuctl.step(7)
        gpuctl.step(2**64 - 1)
        with gpuctl.range("outer"):
            gpuctl.range_push("inner\\0")
            gpuctl.range_pop()
        state["decorated"] = add_one(1)
        expect_error(ValueError, gpuctl.step, -1)
        expect_error(ValueError, gpuctl.step, 2**64)
        expect_error(TypeError, gpuctl.step, 1.5)
        expect_error(TypeError, gpuctl.step, True)
        expect_error(TypeError, gpuctl.range, 3)
        expect_error(TypeError, gpuctl.range, add_one)
        expect_error(TypeError, gpuctl.range_push, None)
        # Asked for explicitly, the hook registers; it marks nothing.
        import torch
        state["installed"] = gpuctl.install_torch_hook()
        state["hooks"] = len(torch.optim.optimizer._global_optimizer_post_hooks)
        state["removed"] = gpuctl.remove_torch_hook()
        state["hooks_after_remove"] = len(torch.optim.optimizer._global_optimizer_post_hooks)
        state["failures"] = failures
        report(**state)
        """
    expected = {"available": False, "connected": False, "version": None,
                "torch_imported_by_gpuctl": False, "decorated": 2, "installed": True,
                "hooks": 1, "removed": True, "hooks_after_remove": 0, "failures": []}
    libc = "libc.so.6"
    for env in ({}, {"GPUCTL_LIBRARY": str(workdir / "missing" / "libgpuctl.so")},
                {"GPUCTL_LIBRARY": libc}):
        lines = run_script(workdir, lib_path, body, preload=False, torch_dir=torch_dir, env=env)
        assert last_json(lines) == expected, (env, lines)


def test_gpuctl_library_attaches_a_process_without_preload(cli, start_script, lib_path):
    workload = start_script("""
        report(available=gpuctl.available())
        state = {}
        while True:
            gpuctl.step()
            with gpuctl.range("work"):
                spin(0.002)
            announce_when_connected(state)
        """, preload=False, env={"GPUCTL_LIBRARY": str(lib_path), "GPUCTL_JOB_ID": "py-dlopen"})
    assert wait_ready(workload) == {"available": True}
    ranges = user_ranges(trace_script(cli, workload, "py-dlopen"), workload.pid)
    assert "work" in {e["name"] for e in ranges}
    assert len(step_marks(ranges)) >= 5


def test_torch_hook_registration_follows_environment_and_torch(workdir, lib_path):
    """Runs against the stand-in torch (write_stand_in_torch), which stands in
    for torch's real API and follows its signatures: the global hook is
    called as hook(optimizer, args, kwargs) after each step, and the handle
    from register_optimizer_step_post_hook has remove()."""
    current = write_stand_in_torch(workdir / "torch-current")
    old = write_stand_in_torch(workdir / "torch-old", variant="old")
    broken = write_stand_in_torch(workdir / "torch-broken", variant="broken")
    count_hooks = """
        def hooks():
            return len(sys.modules["torch"].optim.optimizer._global_optimizer_post_hooks)
        """

    # Imported with the library loaded: torch is imported and the hook registered.
    lines = run_script(workdir, lib_path, [count_hooks, """
        state = {"available": gpuctl.available(), "torch_imported": "torch" in sys.modules}
        state["at_import"] = hooks()
        state["install_again"] = gpuctl.install_torch_hook()
        state["after_install_again"] = hooks()
        state["remove"] = gpuctl.remove_torch_hook()
        state["after_remove"] = hooks()
        state["remove_again"] = gpuctl.remove_torch_hook()
        state["reinstall"] = gpuctl.install_torch_hook()
        state["after_reinstall"] = hooks()
        report(**state)
        """], torch_dir=current)
    assert last_json(lines) == {"available": True, "torch_imported": True, "at_import": 1,
                                "install_again": True, "after_install_again": 1,
                                "remove": True, "after_remove": 0, "remove_again": False,
                                "reinstall": True, "after_reinstall": 1}

    # GPUCTL_TORCH_HOOK=0: neither imported nor registered.
    for value in ("0", "off"):
        lines = run_script(workdir, lib_path, [count_hooks, """
            state = {"torch_imported": "torch" in sys.modules}
            import torch
            state["hooks"] = hooks()
            report(**state)
            """], torch_dir=current, env={"GPUCTL_TORCH_HOOK": value})
        assert last_json(lines) == {"torch_imported": False, "hooks": 0}, value

    # A torch without global step hooks (< 2.0) or one that fails to import:
    # gpuctl imports and works; the hook is not registered.
    for torch_dir in (old, broken):
        lines = run_script(workdir, lib_path, """
            gpuctl.step()
            with gpuctl.range("x"):
                pass
            report(available=gpuctl.available(), installed=gpuctl.install_torch_hook())
            """, torch_dir=torch_dir)
        assert last_json(lines) == {"available": True, "installed": False}, torch_dir


def load_torch_hook_module():
    """python/gpuctl/_torch_hook.py alone: it imports nothing from gpuctl."""
    spec = importlib.util.spec_from_file_location("gpuctl_torch_hook_under_test",
                                                  PYTHON_DIR / "gpuctl" / "_torch_hook.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_torch_hook_rules_leader_explicit_steps_and_errors():
    module = load_torch_hook_module()
    marks = []
    hook = module.OptimizerStepHook(mark=lambda: marks.append(1))

    class Optimizer:
        pass

    class SlottedOptimizer:  # cannot be weakly referenced
        __slots__ = ()

    first, second = Optimizer(), Optimizer()
    for optimizer in (first, second, second, first, second, first):
        hook(optimizer, (optimizer,), {})
    assert len(marks) == 3, "only the first optimizer that stepped marks"

    # The leader gone, the next optimizer that steps leads.
    del first, optimizer
    gc.collect()
    marks.clear()
    third = Optimizer()
    for optimizer in (second, third, second):
        hook(optimizer, (optimizer,), {})
    assert len(marks) == 2

    # Forgotten (the hook removed), the next stepping optimizer leads.
    hook.forget_leader()
    marks.clear()
    slotted = SlottedOptimizer()
    for optimizer in (slotted, second, slotted):
        hook(optimizer, (optimizer,), {})
    assert len(marks) == 2

    # The application marks its own steps: the hook stops marking.
    hook.app_marks_steps = True
    marks.clear()
    hook(slotted, (slotted,), {})
    assert marks == []

    # A failing mark never reaches the optimizer step.
    def failing_mark():
        raise OSError("the library went away")
    module.OptimizerStepHook(mark=failing_mark)(second, (second,), {})

    for value in ("0", "false", "OFF", " no "):
        assert not module.enabled_by({"GPUCTL_TORCH_HOOK": value}), value
    for value in ("", "1", "yes", "on"):
        assert module.enabled_by({"GPUCTL_TORCH_HOOK": value}), value
    assert module.enabled_by({})
