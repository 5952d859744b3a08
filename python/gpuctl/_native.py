"""ctypes binding to the C API of libgpuctl (client_lib/include/gpuctl/gpuctl.h).

The library is normally in the process already, attached by
LD_PRELOAD=libgpuctl.so; GPUCTL_LIBRARY names a file to load when it is not.
Loading never raises: without the library, `load()` returns None and the
package's functions do nothing.
"""

import ctypes
import os

# Every symbol the package calls, with its C signature (argtypes, restype).
_SIGNATURES = {
    "gpuctl_range_push": ([ctypes.c_char_p], None),
    "gpuctl_range_pop": ([], None),
    "gpuctl_step": ([], None),
    "gpuctl_step_n": ([ctypes.c_uint64], None),
    "gpuctl_version": ([], ctypes.c_char_p),
    "gpuctl_connected": ([], ctypes.c_int),
}


class Library:
    """The bound C functions of one loaded libgpuctl."""

    def __init__(self, functions, origin):
        self.range_push = functions["gpuctl_range_push"]
        self.range_pop = functions["gpuctl_range_pop"]
        self.step = functions["gpuctl_step"]
        self.step_n = functions["gpuctl_step_n"]
        self.version = functions["gpuctl_version"]
        self.connected = functions["gpuctl_connected"]
        # "preload" (found in the process) or the path loaded from GPUCTL_LIBRARY.
        self.origin = origin


def _bind(cdll, origin):
    """Library with every symbol of cdll bound, or None if one is missing."""
    functions = {}
    for name, (argtypes, restype) in _SIGNATURES.items():
        try:
            function = getattr(cdll, name)
        except AttributeError:
            return None
        function.argtypes = argtypes
        function.restype = restype
        functions[name] = function
    return Library(functions, origin)


def load(environ=None):
    """Returns (Library or None, reason): reason says why there is none."""
    environ = os.environ if environ is None else environ
    try:
        # dlopen(NULL): the global scope, which holds an LD_PRELOADed library.
        library = _bind(ctypes.CDLL(None), "preload")
    except OSError:
        library = None
    if library is not None:
        return library, ""
    path = environ.get("GPUCTL_LIBRARY", "")
    if not path:
        return None, "libgpuctl is not loaded (no LD_PRELOAD, GPUCTL_LIBRARY unset)"
    try:
        cdll = ctypes.CDLL(path)
    except OSError as error:
        return None, f"GPUCTL_LIBRARY={path}: {error}"
    library = _bind(cdll, path)
    if library is None:
        return None, f"GPUCTL_LIBRARY={path}: not a libgpuctl (its C API is missing)"
    return library, ""
