"""How much memory this process may still use: the smallest of the free physical memory, the
process's own limits (``RLIMIT_AS``, ``RLIMIT_DATA``) and its control group's limit (cgroup v2
``memory.max``, v1 ``memory.limit_in_bytes``).  The size check of ``dpstudio protect`` (and the
app's large-file threshold) read it, so that a container or ``ulimit -v`` limit gives the
"use --engine dask" line instead of a MemoryError half-way through.

>>> n, what = available_memory()
>>> n > 0 and isinstance(what, str)
True
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["available_memory", "memory_limits", "return_freed_memory"]

_CGROUP_ROOT = Path("/sys/fs/cgroup")


def _proc_status_kb(key: str) -> int | None:
    """A ``kB`` field of /proc/self/status in bytes (None where there is no /proc)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _physical() -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except ImportError:
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def _rlimits() -> dict[str, int]:
    """Bytes left under RLIMIT_AS (address space) and RLIMIT_DATA (data segment) when set."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return {}
    out = {}
    for name, used_key in (("RLIMIT_AS", "VmSize"), ("RLIMIT_DATA", "VmData")):
        res = getattr(resource, name, None)
        if res is None:  # pragma: no cover - platform without it
            continue
        try:
            soft, _hard = resource.getrlimit(res)
        except (OSError, ValueError):  # pragma: no cover
            continue
        if soft == resource.RLIM_INFINITY or soft < 0:
            continue
        used = _proc_status_kb(used_key)
        if used is None:
            try:
                import psutil

                used = int(psutil.Process().memory_info().vms)
            except ImportError:  # pragma: no cover
                used = 0
        out[f"the process limit {name}"] = max(int(soft) - used, 0)
    return out


def allocation_can_fail() -> bool:
    """Whether this process runs under RLIMIT_AS or RLIMIT_DATA: an allocation beyond it fails
    (instead of the kernel's out-of-memory killer stepping in later).  Python turns that into a
    MemoryError, but Arrow's C++ CSV reader aborts the whole process (``ValueOrDie called on an
    error: Out of memory``) or crashes, and its jemalloc floods stderr with ``background thread
    creation failed``: the readers then use pandas (measured at RLIMIT_AS 800-900 MB on a 20 MB
    CSV: about one run in four ended so with Arrow, none of 20 with pandas).
    """
    return bool(_rlimits())


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if text in ("max", ""):
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _stat_value(path: Path, keys: tuple[str, ...]) -> int:
    try:
        for line in path.read_text(encoding="ascii").splitlines():
            k, _, v = line.partition(" ")
            if k in keys:
                return int(v)
    except (OSError, UnicodeDecodeError, ValueError):
        pass
    return 0


def _mounts() -> list[tuple[str, str, str]]:
    """(mount point, file system type, super options) of every cgroup mount."""
    out = []
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                pre, _, post = line.partition(" - ")
                fields, tail = pre.split(), post.split()
                if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
                    out.append((fields[4], tail[0], tail[2]))
    except OSError:
        pass
    return out


def _cgroup_dirs(mount: str, rel: str) -> list[Path]:
    """The cgroup folder of this process under ``mount`` and its parents up to the mount
    (a container sees its own cgroup as the mount's root: that is checked too).
    """
    root = Path(mount)
    dirs = [root]
    p = root / rel.lstrip("/")
    while p != root and root in p.parents:
        if p.is_dir():
            dirs.append(p)
        p = p.parent
    return dirs


def _cgroups(
    cgroup_text: str | None = None, mounts: list[tuple[str, str, str]] | None = None
) -> dict[str, int]:
    """Bytes left under the control groups' memory limits (v2 and v1), when set: the limit
    minus the memory in use that cannot be reclaimed (usage less the inactive file cache).
    ``cgroup_text`` (/proc/self/cgroup) and ``mounts`` (:func:`_mounts`) are read when not given.
    """
    if cgroup_text is None:
        try:
            cgroup_text = Path("/proc/self/cgroup").read_text(encoding="utf-8")
        except OSError:
            return {}
    lines = cgroup_text.splitlines()
    v2_rel = v1_rel = None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            v2_rel = parts[2]
        elif "memory" in parts[1].split(","):
            v1_rel = parts[2]
    out: dict[str, int] = {}
    best: int | None = None
    for mount, fstype, opts in _mounts() if mounts is None else mounts:
        if fstype == "cgroup2" and v2_rel is not None:
            for d in _cgroup_dirs(mount, v2_rel):
                limit = _read_int(d / "memory.max")
                if limit is None:
                    continue
                used = (_read_int(d / "memory.current") or 0) - _stat_value(
                    d / "memory.stat", ("inactive_file",)
                )
                left = max(limit - max(used, 0), 0)
                best = left if best is None else min(best, left)
        elif fstype == "cgroup" and v1_rel is not None and "memory" in opts.split(","):
            for d in _cgroup_dirs(mount, v1_rel):
                limit = _read_int(d / "memory.limit_in_bytes")
                if limit is None or limit >= 2**62:  # "unlimited" is written as ~2^63
                    continue
                used = (_read_int(d / "memory.usage_in_bytes") or 0) - _stat_value(
                    d / "memory.stat", ("total_inactive_file", "inactive_file")
                )
                left = max(limit - max(used, 0), 0)
                best = left if best is None else min(best, left)
    if best is not None:
        out["the control group's memory limit"] = best
    return out


def memory_limits() -> dict[str, int]:
    """{what: bytes this process may still use under it}: free physical memory, the process
    limits, the control group limit (each only when it applies).
    """
    out: dict[str, int] = {}
    phys = _physical()
    if phys is not None:
        out["free physical memory"] = phys
    out.update(_rlimits())
    out.update(_cgroups())
    return out


def available_memory() -> tuple[int, str]:
    """(bytes, what limits them): the least memory this process may still use, and which
    limit that is ("free physical memory", "the process limit RLIMIT_AS", ...).  Unknown
    limits are left out; with none known, a very large number.
    """
    limits = memory_limits()
    if not limits:
        return 2**62, "no known limit"
    what = min(limits, key=lambda k: limits[k])
    return limits[what], what


_TUNED: list[bool] = []
#: allocations from this size on get their own pages, returned to the system when freed
_MMAP_THRESHOLD = 4 * 1024 * 1024


def return_freed_memory() -> None:
    """Let this process give the memory of large freed arrays back to the system (issue 27:
    the peak of ``dpstudio protect`` on 3,000,000 records fell from 1.6 to 1.35 GB).

    Two allocators keep freed memory by default: glibc's ``malloc`` (numpy's arrays) raises
    its mmap threshold to the size of the last large block freed, so that the next arrays of
    that size come from the heap and stay there when freed; and Arrow's default pool
    (mimalloc) keeps its freed segments.  This fixes glibc's threshold at 4 MiB (``mallopt``;
    only where the C library is glibc) and makes jemalloc Arrow's pool where the wheel has it
    (it returns freed pages after a second).  Results do not depend on it; call it once, early,
    in a process that reads large tables (the command line does).
    """
    if _TUNED:
        return
    _TUNED.append(True)
    import platform

    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        try:
            import ctypes

            ctypes.CDLL("libc.so.6").mallopt(-3, _MMAP_THRESHOLD)  # M_MMAP_THRESHOLD
        except (OSError, AttributeError):  # pragma: no cover - not glibc after all
            pass
    try:
        import pyarrow as pa

        pa.set_memory_pool(pa.jemalloc_memory_pool())
    except (ImportError, NotImplementedError, AttributeError):  # pragma: no cover - no jemalloc
        pass
