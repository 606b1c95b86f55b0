"""Files that are not tables: the checks and limits of every settings file read (a recipe,
project, ledger, release metadata or hierarchy file: a regular file only, never blocking on
a FIFO, size and nesting limits, one-line errors) and the SHA-256 of a file.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

import numpy as np

from dpstudio.engine.errors import InputError

#: Largest recipe / project file, query ledger or release metadata read (a real one is a few
#: kB; a ledger of 100,000 answers about 50 MB).
MAX_SETTINGS_BYTES = 64 * 2**20
#: Largest hierarchy file read (ARX hierarchies of every 5-digit ZIP code are a few MB).
MAX_HIERARCHY_BYTES = 256 * 2**20
#: Deepest nesting of arrays/objects accepted in a JSON settings file (ours nest at most 5).
MAX_JSON_DEPTH = 100
#: Most digits of an integer in a JSON file (Python's own limit for int <-> text conversion).
MAX_JSON_INT_DIGITS = 4300

_FILE_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind_of(mode: int) -> str:
    return next((name for test, name in _FILE_KINDS if test(mode)), "not a regular file")


def check_regular_file(path: str | os.PathLike, *, what: str) -> os.stat_result:
    """``os.stat`` of ``path`` when it is a regular file (symbolic links followed); else a
    one-line :class:`InputError` naming ``what`` and the path.  Never opens the file, so a
    FIFO or a device never blocks and /dev/zero is never read.

    >>> try:
    ...     check_regular_file("/dev/null", what="recipe")
    ... except InputError as e:
    ...     print(e)
    recipe /dev/null: this is a character device, not a regular file; give the path of a file.
    """
    p = os.fspath(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise InputError(f"{what} {p}: no such file.") from None
    except OSError as exc:
        raise InputError(f"{what} {p}: cannot be read ({exc.strerror or exc}).") from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(
            f"{what} {p}: this is {_kind_of(st.st_mode)}, not a regular file; give the path of a file."
        )
    return st


def _size_text(n: float) -> str:
    for unit in ("bytes", "kB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} GB"  # pragma: no cover


def read_small_file(path: str | os.PathLike, *, what: str, max_bytes: int = MAX_SETTINGS_BYTES) -> bytes:
    """The bytes of a small file (a recipe, project, ledger, metadata or hierarchy file).

    Only a regular file is read (``os.stat`` first; the file is then opened with
    ``O_NONBLOCK`` and checked again with ``fstat``, so a FIFO or device swapped in between
    is refused, never waited on), and at most ``max_bytes`` (a file that grows past it while
    being read is refused too).

    Parameters
    ----------
    path : path
        The file.
    what : str
        What the file is, for the message ("recipe", "hierarchy file of column 'age'", ...).
    max_bytes : int
        The size limit.

    Raises
    ------
    InputError
        One line naming ``what`` and the path: no such file, not a regular file (a folder,
        a FIFO, a device, a socket), larger than ``max_bytes``, or unreadable.

    Examples
    --------
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "r.json")
    >>> _ = open(p, "w").write("{}")
    >>> read_small_file(p, what="recipe")
    b'{}'
    """
    p = os.fspath(path)
    name = Path(p).name or p
    st = check_regular_file(p, what=what)

    def too_big(size: float) -> InputError:
        return InputError(
            f"{what} {name}: the file is {_size_text(size)}, more than the {_size_text(max_bytes)} "
            f"such a file may have; check that this is the right file."
        )

    if st.st_size > max_bytes:
        raise too_big(st.st_size)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    flags |= getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(p, flags)
    except OSError as exc:
        raise InputError(f"{what} {p}: cannot be read ({exc.strerror or exc}).") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # replaced between the stat and the open
            raise InputError(
                f"{what} {p}: this is {_kind_of(st.st_mode)}, not a regular file; give the path of a file."
            )
        chunks, total = [], 0
        while total <= max_bytes:
            b = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not b:
                break
            chunks.append(b)
            total += len(b)
        if total > max_bytes:
            raise too_big(total)
    except OSError as exc:
        raise InputError(f"{what} {p}: cannot be read ({exc.strerror or exc}).") from None
    finally:
        os.close(fd)
    return b"".join(chunks)


_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def json_depth(raw: bytes | str) -> int:
    """The deepest nesting of arrays and objects in JSON text (brackets inside strings are
    not counted), found without recursion.

    >>> json_depth('{"a": [1, [2, "]]]"]]}')
    3
    """
    b = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if b.count(b"[") + b.count(b"{") == 0:
        return 0
    if b'"' in b:
        b = _JSON_STRING.sub(b'""', b)
    a = np.frombuffer(b, dtype=np.uint8)
    step = ((a == 0x5B) | (a == 0x7B)).astype(np.int64) - ((a == 0x5D) | (a == 0x7D))
    return int(np.cumsum(step).max(initial=0))


def _json_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_JSON_INT_DIGITS:
        raise _HugeInt(digits)
    return int(text)


class _HugeInt(Exception):
    def __init__(self, digits: int) -> None:
        self.digits = digits


def loads_json(
    text: str | bytes, *, what: str, max_depth: int = MAX_JSON_DEPTH, name: str | None = None
) -> Any:
    """``json.loads`` that fails with one line naming ``what`` (and ``name``): malformed JSON
    (with its line and column), nesting deeper than ``max_depth`` (checked before parsing, so
    100,000 nested brackets never reach the parser's recursion), integers longer than
    :data:`MAX_JSON_INT_DIGITS` digits, text that is not UTF-8.

    >>> loads_json('{"k": 5}', what="recipe")
    {'k': 5}
    >>> try:
    ...     loads_json("[" * 1000 + "]" * 1000, what="recipe")
    ... except InputError as e:
    ...     print(e)
    recipe: nested 1000 levels deep (at most 100); this is not a dpstudio file.
    """
    import json

    label = f"{what} {name}" if name else what
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise InputError(
                f"{label}: not UTF-8 text (byte {exc.start + 1}); this is not a dpstudio file."
            ) from None
    depth = json_depth(text)
    if depth > max_depth:
        raise InputError(
            f"{label}: nested {depth} levels deep (at most {max_depth}); this is not a dpstudio file."
        )
    try:
        return json.loads(text, parse_int=_json_int)
    except _HugeInt as exc:
        raise InputError(
            f"{label}: a number with {exc.digits:,} digits (at most {MAX_JSON_INT_DIGITS:,}); correct the file."
        ) from None
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{label}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})."
        ) from None
    except (ValueError, RecursionError) as exc:  # e.g. a float literal json cannot convert
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"{label}: not valid JSON ({msg}).") from None


def read_json_file(
    path: str | os.PathLike,
    *,
    what: str,
    max_bytes: int = MAX_SETTINGS_BYTES,
    max_depth: int = MAX_JSON_DEPTH,
) -> Any:
    """The JSON value of a small settings file: :func:`read_small_file` then
    :func:`loads_json` (one-line :class:`InputError` for every problem).
    """
    raw = read_small_file(path, what=what, max_bytes=max_bytes)
    return loads_json(raw, what=what, max_depth=max_depth, name=Path(os.fspath(path)).name)


def file_sha256(path: str | os.PathLike) -> str:
    """SHA-256 of a file's bytes (streamed).  A digest started by :func:`sha256_in_background`
    for the same file, unchanged since (same device, inode, size and modification time), is
    waited for instead of reading the file again.
    """
    pending = _take_background(path)
    if pending is not None:
        return pending
    return _sha256_now(path)


def _sha256_now(path: str | os.PathLike) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)  # (hashlib releases the GIL on large blocks)
    return h.hexdigest()


#: digests being computed in the background: {file identity: Future of the hex digest}
_BACKGROUND: dict[tuple, Any] = {}
#: at most this many files hashed ahead (a long-running app opens many files)
_BACKGROUND_MAX = 4


def _identity(path: str | os.PathLike) -> tuple | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def sha256_in_background(path: str | os.PathLike) -> None:
    """Start the SHA-256 of the regular file ``path`` in a background thread (issue 27: a
    large input's digest for the audit trail, read while the table is parsed and protected
    instead of after); :func:`file_sha256` of the unchanged file then waits for it.
    """
    key = _identity(path)
    if key is None or key in _BACKGROUND:
        return
    from concurrent.futures import Future
    from threading import Thread

    fut: Future = Future()

    def work() -> None:
        try:
            fut.set_result(_sha256_now(path))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
            fut.set_exception(exc)

    while len(_BACKGROUND) >= _BACKGROUND_MAX:
        _BACKGROUND.pop(next(iter(_BACKGROUND)))
    from dpstudio.engine.parallel import start_thread

    if start_thread(Thread(target=work, name="dpstudio-sha256", daemon=True)):
        _BACKGROUND[key] = fut
    # else no thread to be had: file_sha256 computes the digest in the caller's thread


def _take_background(path: str | os.PathLike) -> str | None:
    """The background digest of ``path`` if one was started for the file as it is now (and
    is still the same file once done), else None.
    """
    key = _identity(path)
    fut = _BACKGROUND.pop(key, None) if key is not None else None
    if fut is None:
        return None
    try:
        digest = fut.result()
    except Exception:  # noqa: BLE001 - computed again, with the error in the caller's thread
        return None
    return digest if _identity(path) == key else None
