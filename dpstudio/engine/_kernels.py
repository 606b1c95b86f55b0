"""Loading the compiled (numba) kernels: each is imported lazily, once per process, and only
where its load time pays (the callers' tiers); results are identical with or without it.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
from pathlib import Path
from types import ModuleType


def load_kernel(slot: list, module: str, env_var: str) -> ModuleType | None:
    """The kernel module ``module``, imported on first use into ``slot`` (a one-element list
    the caller keeps: [module, or None when numba is missing or unusable]), or None when
    ``env_var=1`` asks for the numpy path.
    """
    if os.environ.get(env_var, "") not in ("", "0"):
        return None
    if not slot:
        try:
            mod: ModuleType | None = importlib.import_module(module)
        except Exception:  # numba missing or unusable with this numpy
            mod = None
        slot.append(mod)
    return slot[0]


def _cache_subpath(src: Path) -> str:
    """Numba's sub-folder for the functions of ``src`` in a cache folder outside the source
    tree (``_CacheLocator.get_suitable_cache_subpath``): the source folder's name and the SHA-1
    of its path.
    """
    import hashlib

    folder = os.path.dirname(str(src))
    return "_".join([os.path.split(folder)[-1], hashlib.sha1(folder.encode()).hexdigest()])


def _user_cache_dir() -> Path:
    """Numba's user-wide cache folder (its ``appdirs.user_cache_dir("numba")``)."""
    import sys

    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA", os.path.expanduser("~"))) / "numba" / "Cache"
    if sys.platform == "darwin":
        return Path(os.path.expanduser("~/Library/Caches")) / "numba"
    return Path(os.getenv("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))) / "numba"


def _writable(folder: Path) -> bool:
    """Whether numba could use ``folder`` as a cache (it exists and is writable, or its nearest
    existing parent is, so that numba can create it).
    """
    p = folder
    while not p.exists():
        if p.parent == p:
            return False
        p = p.parent
    return p.is_dir() and os.access(p, os.W_OK | os.X_OK)


def numba_cache_dir(src: str | os.PathLike) -> Path | None:
    """The folder numba caches the compiled functions of the module file ``src`` in, found
    without importing numba (0.4 s): the first of numba's cache locators that can write there
    -- ``NUMBA_CACHE_DIR`` (a sub-folder per source folder), ``__pycache__`` next to the source,
    the user-wide cache (``~/.cache/numba/...``; a read-only install caches there) -- or None
    (no writable place, or ``NUMBA_CACHE_LOCATOR_CLASSES`` chooses locators we do not model).
    """
    if os.environ.get("NUMBA_CACHE_LOCATOR_CLASSES"):
        return None
    path = Path(os.path.abspath(src))
    sub = _cache_subpath(path)
    candidates = []
    if os.environ.get("NUMBA_CACHE_DIR"):
        candidates.append(Path(os.environ["NUMBA_CACHE_DIR"]) / sub)
    candidates += [path.parent / "__pycache__", _user_cache_dir() / sub]
    for folder in candidates:
        if _writable(folder):
            return folder
    return None


def has_numba_cache(src: str | os.PathLike, function: str) -> bool:
    """Whether numba has an index of ``function`` (``<module>.<function>-*.nbi``) of the module
    file ``src`` where it would look (:func:`numba_cache_dir`), not older than the source (a
    cost estimate for the kernels' tiers; numba itself checks the index's source stamp).
    """
    folder = numba_cache_dir(src)
    if folder is None or not folder.is_dir():
        return False
    try:
        t = os.stat(src).st_mtime
        return any(p.stat().st_mtime >= t for p in folder.glob(f"{Path(src).stem}.{function}-*.nbi"))
    except OSError:
        return False


class Tiered:
    """A kernel module loaded once a call's work pays its load time (issue 27: the keyed
    noise, the CSV writer's texts): ``get(work)`` gives the module when it is loaded already,
    or when ``work`` (what the caller is about to do in all, in the kernel's units) is at least
    ``min_work`` (a sixteenth of it once numba is imported: then only the cached code is
    loaded) -- ``min_work_compile`` while numba has no cache of the module's ``function``
    (:func:`has_numba_cache`: compiling takes seconds, once per install)
    -- else None (the numpy path, with the same results).  ``env_var=1`` asks for numpy.
    Thread-safe: the module is imported once.
    """

    def __init__(
        self,
        module: str,
        env_var: str,
        function: str,
        min_work: int = 1 << 23,
        min_work_compile: int = 1 << 26,
    ):
        self.module, self.env_var, self.function = module, env_var, function
        # the module's file (dpstudio.x.y -> <package folder>/x/y.py), found without importing it
        self.src = Path(__file__).parent.parent.joinpath(*module.split(".")[1:]).with_suffix(".py")
        self.min_work, self.min_work_compile = min_work, min_work_compile
        self.slot: list = []  # [module or None] once loaded
        self.cached: list[bool] = []  # whether numba has a cache of it (found once)
        self._lock = threading.Lock()

    def get(self, work: int) -> ModuleType | None:
        if os.environ.get(self.env_var, "") not in ("", "0"):
            return None
        if not self.slot:
            if not self.cached:
                self.cached.append(has_numba_cache(self.src, self.function))
            need = self.min_work if self.cached[0] else self.min_work_compile
            if self.cached[0] and "numba" in sys.modules:
                need //= 16  # numba imported already (another kernel): only the code to load
            if work < need:
                return None
        with self._lock:
            return load_kernel(self.slot, self.module, self.env_var)
