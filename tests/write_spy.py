"""A spy on the low-level file primitives (issue 21: "one writer").

While installed it records every write-like operation on a path below ``root`` -- opening a
file to write, ``os.open`` with a write flag, renames, removals, permission changes, folder
creation, and the pandas / pyreadstat writers that open files in C -- with whether the calling
thread was inside the one guarded writer (:func:`dpstudio.engine.safe_write.writing`).
:meth:`WriteSpy.violations` lists the operations that did not go through it:

* a rename, removal or permission change outside the writer;
* content written to a final name (only our temporary names ``.<stem>.XXXXXXXX.tmp<suffix>``,
  or files inside such a temporary folder, are ever written; final names only appear by the
  writer's rename);
* content written outside the writer;
* an empty file or a folder created outside the writer (lock files, the config folder);
  anything inside a temporary folder the writer made is its staging (Dask's worker threads
  write the parts there).
"""

from __future__ import annotations

import builtins
import io
import os
import re
import shutil
import threading
from pathlib import Path

from dpstudio.engine import safe_write as sw

TEMP = re.compile(r"^\..+\.[A-Za-z0-9_]{8}\.tmp[^/]*$")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
#: operations that put content into a file (only ever into our temporary names)
CONTENT = {"open", "os.open", "to_csv", "to_parquet", "to_excel", "write_dta", "write_sav", "truncate"}
#: everything else (create an empty file or a folder, rename, remove, chmod) must happen inside
#: the writer; anything inside a temporary folder of the writer is its staging (Dask's workers)


class WriteSpy:
    def __init__(self, root: str | os.PathLike) -> None:
        self.root = os.path.realpath(os.fspath(root))
        self.ops: list[tuple[str, str, bool, bool]] = []  # (op, path, inside the writer, main thread)
        self._lock = threading.Lock()

    def note(self, op: str, path) -> None:
        try:
            p = os.fspath(path)
        except TypeError:
            return  # a buffer (to_csv(None), BytesIO)
        if isinstance(p, bytes):
            p = os.fsdecode(p)
        full = os.path.abspath(p)
        real = os.path.join(os.path.realpath(os.path.dirname(full)), os.path.basename(full))
        if not (real + os.sep).startswith(self.root + os.sep):
            return
        with self._lock:
            self.ops.append((op, real, sw.writing(), threading.current_thread() is threading.main_thread()))

    # ---- the verdict
    @staticmethod
    def _temp_name(path: str) -> bool:
        return any(TEMP.match(part) for part in Path(path).parts)

    def violations(self) -> list[tuple]:
        bad = []
        for op, path, inside, _main in self.ops:
            if any(TEMP.match(part) for part in Path(path).parts[:-1]):
                continue  # inside a temporary folder the writer made (it is renamed as a whole)
            if op in CONTENT:
                if not self._temp_name(path):
                    bad.append(("content written to a final name", op, path))
                elif not inside:
                    bad.append(("content written outside the writer", op, path))
            elif not inside:
                bad.append(("outside the writer", op, path))
        return bad

    def finals(self) -> set[str]:
        """Final names the writer renamed into place."""
        return {
            os.path.basename(p) for op, p, inside, _ in self.ops if op in ("replace", "rename") and inside
        }

    # ---- installing
    def install(self, monkeypatch) -> WriteSpy:
        spy = self
        real_open = builtins.open

        def open_(file, mode="r", *a, **kw):
            if isinstance(file, (str, bytes, os.PathLike)) and any(c in str(mode) for c in "wax+"):
                spy.note("open", file)
            return real_open(file, mode, *a, **kw)

        monkeypatch.setattr(builtins, "open", open_)
        monkeypatch.setattr(io, "open", open_)

        real_os_open = os.open

        def os_open(path, flags, mode=0o777, *a, **kw):
            if flags & _WRITE_FLAGS and kw.get("dir_fd") is None:
                writes = flags & (os.O_WRONLY | os.O_TRUNC | os.O_APPEND)
                spy.note("os.open" if writes else "create", path)  # O_RDWR|O_CREAT: made, not written
            return real_os_open(path, flags, mode, *a, **kw)

        monkeypatch.setattr(os, "open", os_open)

        def wrap2(mod, name, op, which=1):
            real = getattr(mod, name)

            def f(*a, **kw):
                if len(a) > which:
                    spy.note(op, a[which])
                return real(*a, **kw)

            monkeypatch.setattr(mod, name, f)

        for name in ("replace", "rename"):
            wrap2(os, name, name, which=1)
        for name in ("unlink", "remove", "rmdir", "chmod", "truncate"):
            wrap2(os, name, name, which=0)
        real_mkdir = os.mkdir

        def mkdir(path, *a, **kw):
            if not os.path.isdir(path):  # an existing folder (mkdir(exist_ok=True)) changes nothing
                spy.note("mkdir", path)
            return real_mkdir(path, *a, **kw)

        monkeypatch.setattr(os, "mkdir", mkdir)
        wrap2(shutil, "rmtree", "rmtree", which=0)
        wrap2(shutil, "move", "move", which=1)
        wrap2(shutil, "copyfile", "copyfile", which=1)

        import pandas as pd

        for name in ("to_csv", "to_parquet", "to_excel"):
            real = getattr(pd.DataFrame, name)

            def method(self_, *a, _real=real, _name=name, **kw):
                target = a[0] if a else kw.get("path_or_buf", kw.get("path", kw.get("excel_writer")))
                if target is not None:
                    spy.note(_name, target)
                return _real(self_, *a, **kw)

            monkeypatch.setattr(pd.DataFrame, name, method)
        try:
            import pyreadstat
        except ImportError:  # pragma: no cover
            pyreadstat = None
        if pyreadstat is not None:
            for name in ("write_dta", "write_sav"):
                wrap2(pyreadstat, name, name, which=1)
        return self
