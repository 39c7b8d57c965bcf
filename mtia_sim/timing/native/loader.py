"""Builds and loads the native timing replay (C, next to this file) at first use.

The C sources are compiled with the system C compiler (`$CC`, else `cc`) into a shared library in a
per-user cache directory keyed by a hash of the sources, the compiler and the Python headers
(`$KEGEN_CACHE_DIR/mtia_sim-native/<hash>/`, else `$KEGEN_HOME/cache/...`, else
`~/.kegen/cache/...`; a temporary directory when that is not writable), as Triton builds its driver
stubs, and loaded with ctypes (the trace converter reads the `mtia_sim.events` records through the
Python C API with the GIL held; the replay itself runs with the GIL released). `KEGEN_SIM_NATIVE=0`
turns the native replay off; without a compiler or Python headers it is off too, with one warning
per process.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import warnings
from pathlib import Path

SOURCES = ("vec.c", "cache.c", "costs.c", "fluid.c", "replay.c", "setup.c", "convert.c", "api.c")
HEADERS = ("ktiming.h", "replay.h")
# Python's own symbols come from the running interpreter (as for extension modules)
FLAGS = ("-O2", "-shared", "-fPIC", "-std=c11", "-fno-strict-aliasing", "-ffp-contract=off") + (
    ("-undefined", "dynamic_lookup") if sys.platform == "darwin" else ())
_HERE = Path(__file__).resolve().parent


class NativeUnavailable(RuntimeError):
    """The native replay cannot be built or loaded here (the message says why)."""


def enabled() -> bool:
    """False when `KEGEN_SIM_NATIVE` is 0/false/no/off (the Python replay is used)."""
    return os.environ.get("KEGEN_SIM_NATIVE", "1").strip().lower() not in ("0", "false", "no", "off")


def _cache_root() -> Path:
    if os.environ.get("KEGEN_CACHE_DIR"):
        return Path(os.environ["KEGEN_CACHE_DIR"])
    home = Path(os.environ.get("KEGEN_HOME") or Path.home() / ".kegen")
    return home / "cache"


def _compiler() -> str:
    cc = os.environ.get("CC") or "cc"
    path = shutil.which(cc)
    if path is None:
        raise NativeUnavailable(f"no C compiler ({cc!r} not on PATH); install one or set CC")
    return path


def _digest(cc: str, include: str) -> str:
    h = hashlib.sha256()
    for name in SOURCES + HEADERS:
        h.update(name.encode())
        h.update((_HERE / name).read_bytes())
    h.update(" ".join((cc, include, *FLAGS)).encode())
    return h.hexdigest()[:20]


def _build(out: Path, cc: str, include: str) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")
    cmd = [cc, *FLAGS, f"-I{include}", *(str(_HERE / s) for s in SOURCES), "-o", str(tmp), "-lm"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NativeUnavailable(f"compiling the native timing replay failed: {exc}") from exc
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise NativeUnavailable(f"compiling the native timing replay failed ({' '.join(cmd)}):\n"
                                f"{proc.stderr.strip()[-2000:]}")
    os.replace(tmp, out)  # atomic: concurrent builders each write their own tmp


def library_path() -> Path:
    """The built library (compiled now if it is not in the cache yet)."""
    cc = _compiler()
    include = sysconfig.get_paths()["include"]
    if not (Path(include) / "Python.h").exists():
        raise NativeUnavailable(f"Python headers not found under {include} (install the python3-dev package)")
    key = _digest(cc, include)
    for root in (_cache_root(), Path(tempfile.gettempdir()) / f"kegen-{os.getuid()}"):
        lib = root / "mtia_sim-native" / key / "libktiming.so"
        if lib.exists():
            return lib
        try:
            _build(lib, cc, include)
            return lib
        except OSError:
            continue  # not writable: try the next place
    raise NativeUnavailable("no writable cache directory for the native timing replay")


class NativeLib:
    """The library's entry points: the converter through `PyDLL` (it reads Python objects, GIL held),
    the replay and its getters through `CDLL` (plain C: the GIL is released while they run)."""

    def __init__(self, path: Path) -> None:
        vp, dp, ip = ctypes.c_void_p, ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_int)
        py, c = ctypes.PyDLL(str(path)), ctypes.CDLL(str(path))
        self.kt_convert = py.kt_convert
        self.kt_convert.argtypes = [ctypes.py_object, ctypes.py_object, ctypes.c_int, ctypes.c_int]
        self.kt_convert.restype = vp
        self.kt_error = py.kt_error
        self.kt_error.argtypes = []
        self.kt_error.restype = ctypes.c_char_p
        self.kt_trace_free = c.kt_trace_free
        self.kt_trace_free.argtypes = [vp]
        self.kt_trace_free.restype = None
        self.kt_run = c.kt_run
        self.kt_run.argtypes = [vp, dp, ip]
        self.kt_run.restype = vp
        self.kt_free = c.kt_free
        self.kt_free.argtypes = [vp]
        self.kt_free.restype = None
        self.kt_info = c.kt_info
        self.kt_commands = c.kt_commands
        self.kt_programs = c.kt_programs
        self.kt_unit_counters = c.kt_unit_counters
        self.kt_core_counters = c.kt_core_counters
        self.kt_timeline = c.kt_timeline
        for fn in (self.kt_info, self.kt_commands, self.kt_programs, self.kt_unit_counters,
                   self.kt_core_counters, self.kt_timeline):
            fn.argtypes = [vp, dp]
            fn.restype = None


@functools.cache
def _load() -> NativeLib:
    return NativeLib(library_path())


_warned = False


def load() -> NativeLib | None:
    """The native library, or None (disabled, or it cannot be built here: warns once per process)."""
    global _warned
    if not enabled():
        return None
    try:
        return _load()
    except (NativeUnavailable, OSError) as exc:
        if not _warned:
            _warned = True
            warnings.warn(f"mtia_sim: native timing replay unavailable, using the Python replay "
                          f"(slower, same results): {exc}", RuntimeWarning, stacklevel=2)
        return None
