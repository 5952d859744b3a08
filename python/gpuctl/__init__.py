"""Python API of gpuctl: training steps and named ranges for gpuctl traces.

Calls the C API of libgpuctl, which is normally attached to the process with
LD_PRELOAD=libgpuctl.so (GPUCTL_LIBRARY names a file to load otherwise).
Without the library every function does nothing and available() is False:
a program never fails because gpuctl is absent.

    import gpuctl

    for batch in loader:
        gpuctl.step()                 # or gpuctl.step(my_step_number)
        with gpuctl.range("forward"):
            loss = model(batch)

With PyTorch installed, importing gpuctl also marks a step at every
iteration from torch's optimizer step hook (see install_torch_hook). See
docs/python.md.
"""

import functools
import inspect
import operator
import os

from gpuctl import _native
from gpuctl._torch_hook import (OptimizerStepHook, TorchHookRegistration, enabled_by,
                                torch_is_installed)

__version__ = "0.1.0"

__all__ = [
    "available",
    "connected",
    "install_torch_hook",
    "range",
    "range_pop",
    "range_push",
    "remove_torch_hook",
    "step",
    "version",
]

_lib, _unavailable_reason = _native.load()

_MAX_STEP = (1 << 64) - 1
# A NUL would end the name early in C: it is written as U+FFFD instead.
_NUL_REPLACEMENT = "\ufffd".encode("utf-8")
# Encoded names, so a range in a loop encodes its name once.
_name_cache = {}
_NAME_CACHE_ENTRIES = 4096
_NAME_CACHE_MAX_CHARS = 256


def _noop(*_args):
    return None


def _encode_name(name):
    """bytes for the C API: UTF-8, without NUL bytes."""
    if isinstance(name, str):
        encoded = _name_cache.get(name)
        if encoded is None:
            # A lone surrogate, which UTF-8 cannot hold, is written as \udXXX.
            encoded = name.encode("utf-8", "backslashreplace").replace(b"\0", _NUL_REPLACEMENT)
            if len(name) <= _NAME_CACHE_MAX_CHARS and len(_name_cache) < _NAME_CACHE_ENTRIES:
                _name_cache[name] = encoded
        return encoded
    if isinstance(name, (bytes, bytearray, memoryview)):
        return bytes(name).replace(b"\0", _NUL_REPLACEMENT)
    raise TypeError(f"a gpuctl range name must be str or bytes, not {type(name).__name__}")


def _step_number(n):
    try:
        value = operator.index(n)
    except TypeError:
        raise TypeError(f"a step number must be an integer, not {type(n).__name__}") from None
    if isinstance(n, bool):
        raise TypeError("a step number must be an integer, not bool")
    if not 0 <= value <= _MAX_STEP:
        raise ValueError(f"a step number must be an integer in [0, 2**64), got {n!r}")
    return value


_push = _lib.range_push if _lib is not None else _noop
_pop = _lib.range_pop if _lib is not None else _noop
_step = _lib.step if _lib is not None else _noop
_step_n = _lib.step_n if _lib is not None else _noop

_torch_hook = TorchHookRegistration(OptimizerStepHook(mark=_step))


def available():
    """True when libgpuctl is loaded in this process and these calls reach it."""
    return _lib is not None


def connected():
    """True while the library is connected to a gpuctld."""
    return _lib is not None and _lib.connected() != 0


def version():
    """The library's version (e.g. "0.1.0"), or None without the library."""
    if _lib is None:
        return None
    raw = _lib.version()
    return raw.decode("utf-8", "replace") if raw is not None else None


def step(n=None):
    """Marks the start of a training step on the calling thread.

    With n, the step is numbered n (the application's own count, an integer
    in [0, 2**64)); without, the library numbers it one after the last step.
    From the first call on, the PyTorch hook marks nothing: the
    application's marks win.
    """
    number = None if n is None else _step_number(n)
    _torch_hook.hook.app_marks_steps = True
    if number is None:
        _step()
    else:
        _step_n(number)


def range_push(name):
    """Opens a range named name (str or bytes) on the calling thread."""
    _push(_encode_name(name))


def range_pop():
    """Closes the innermost open range of the calling thread."""
    _pop()


class range:  # noqa: A001 - gpuctl.range, as in the C API
    """A named range, as a context manager or a function decorator.

        with gpuctl.range("forward"):
            ...

        @gpuctl.range("load_batch")
        def load_batch(): ...

    Ranges belong to the thread that opens them and must nest.
    """

    __slots__ = ("_name",)

    def __init__(self, name):
        if callable(name):
            raise TypeError('gpuctl.range needs a name: decorate with @gpuctl.range("name")')
        self._name = _encode_name(name)

    @property
    def name(self):
        return self._name.decode("utf-8", "replace")

    def __repr__(self):
        return f"gpuctl.range({self.name!r})"

    def __enter__(self):
        _push(self._name)
        return self

    def __exit__(self, exc_type, exc, traceback):
        _pop()
        return False

    def __call__(self, func):
        name = self._name
        if inspect.iscoroutinefunction(func):
            @functools.wraps(func)
            async def async_wrapper(*args, **kwargs):
                _push(name)
                try:
                    return await func(*args, **kwargs)
                finally:
                    _pop()
            return async_wrapper

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            _push(name)
            try:
                return func(*args, **kwargs)
            finally:
                _pop()
        return wrapper


def install_torch_hook():
    """Marks a step after the steps of torch optimizers (see docs/python.md).

    Returns True if the hook is registered, False if torch cannot be
    imported or lacks register_optimizer_step_post_hook (torch < 2.0).
    Idempotent. Importing gpuctl calls it when the library is loaded, torch
    is installed and GPUCTL_TORCH_HOOK is not 0.
    """
    return _torch_hook.install()


def remove_torch_hook():
    """Unregisters the optimizer step hook; True if it was registered."""
    return _torch_hook.remove()


if _lib is not None and enabled_by(os.environ) and torch_is_installed():
    install_torch_hook()
