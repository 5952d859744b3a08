"""Marks one gpuctl step per training iteration of a PyTorch program.

torch.optim.optimizer.register_optimizer_step_post_hook runs a hook after
every optimizer step of the process. The rules that turn those calls into
one step mark per iteration:

- Only the leading optimizer marks: the first one that steps, as long as it
  lives. Steps of any other optimizer (a GAN's second one, one per parameter
  group) mark nothing. When the leader is garbage-collected, the next
  optimizer that steps leads.
- The application's own marks win: once it calls gpuctl.step(), the hook
  marks nothing more for the life of the process.
- The hook never raises into the training loop.

The mark is taken after the step, so a step mark starts each iteration but
the first.

This module imports nothing from the package, so it can be loaded alone.
"""

import importlib.util
import threading
import weakref

# GPUCTL_TORCH_HOOK values that turn the automatic hook off.
_OFF_VALUES = ("0", "false", "no", "off")


def enabled_by(environ):
    """Whether GPUCTL_TORCH_HOOK in environ leaves the automatic hook on."""
    return environ.get("GPUCTL_TORCH_HOOK", "").strip().lower() not in _OFF_VALUES


def torch_is_installed():
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


def _reference(obj):
    """A callable returning obj: weak where obj allows it, so an optimizer
    that goes away can be replaced as the leader."""
    try:
        return weakref.ref(obj)
    except TypeError:
        return lambda: obj


class OptimizerStepHook:
    """A global optimizer step post hook: hook(optimizer, args, kwargs).

    mark() marks one step; thread: any thread that steps an optimizer.
    """

    def __init__(self, mark):
        self._mark = mark
        self._lock = threading.Lock()
        self._leader = None
        # Set by gpuctl.step(): from then on the application marks its steps.
        self.app_marks_steps = False

    def __call__(self, optimizer, args, kwargs):
        if self.app_marks_steps:
            return
        try:
            if self._leads(optimizer):
                self._mark()
        except Exception:  # noqa: BLE001 - never fail an optimizer step
            pass

    def _leads(self, optimizer):
        with self._lock:
            leader = self._leader() if self._leader is not None else None
            if leader is None:
                self._leader = _reference(optimizer)
                return True
            return leader is optimizer

    def forget_leader(self):
        with self._lock:
            self._leader = None


class TorchHookRegistration:
    """Registers one OptimizerStepHook with torch, at most once at a time."""

    def __init__(self, hook):
        self.hook = hook
        self._lock = threading.Lock()
        self._handle = None

    @property
    def installed(self):
        return self._handle is not None

    def install(self):
        """True if the hook is registered (now or before); False if torch
        cannot be imported or has no global optimizer step post hooks."""
        with self._lock:
            if self._handle is not None:
                return True
            try:
                from torch.optim.optimizer import register_optimizer_step_post_hook
            except Exception:  # noqa: BLE001 - a broken torch must not fail the import
                return False
            try:
                self._handle = register_optimizer_step_post_hook(self.hook)
            except Exception:  # noqa: BLE001
                return False
            return True

    def remove(self):
        """Unregisters the hook; True if it was registered."""
        with self._lock:
            handle, self._handle = self._handle, None
            self.hook.forget_leader()
            if handle is None:
                return False
            try:
                handle.remove()
            except Exception:  # noqa: BLE001
                pass
            return True
