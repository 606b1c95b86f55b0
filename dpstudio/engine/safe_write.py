r"""The one guarded writer of dpstudio: every file the tool writes goes through this module.

A command first builds a :class:`WritePlan` with every file (or folder) it will write and every
file it reads, and calls :meth:`WritePlan.check` **before any work starts**; a refusal writes
nothing.  Then each write goes through the plan, which writes atomically: a temporary file in
the target's folder (``.<stem>.<8 characters>.tmp<suffix>``), flushed and fsync'ed, with its
final permissions (0600 for a private file, else 0666 minus the umask), renamed onto the target
at the end.  The checks (no file is ever opened for them, so a FIFO cannot hang them):

(a) a target must not be an input, nor another name of an input (symbolic or hard link, another
    case), nor a folder that contains an input, nor lie inside an input folder; nor may two
    targets of the same command be the same file, or one lie inside the other (a folder target);
(b) an existing target must be a regular file the user may write: a FIFO, a device, a socket,
    a folder where a file is expected, a symbolic link or a read-only file is refused (its
    permissions are never changed), and the target's folder must exist and be writable.

Right before each rename the target is looked at again (a FIFO or a link made after the check
is never replaced).  While a plan renames its files into place it holds an advisory lock
(``flock``) on each target folder, so two commands writing the same files leave one command's
complete set, never a mix.  Each temporary file is locked by its writer until it is renamed:
the temporary files a killed run left are removed by the next run, a live writer's never.

>>> import os, tempfile
>>> d = tempfile.mkdtemp()
>>> src = os.path.join(d, "in.csv")
>>> _ = open(src, "w").write("a\n1\n")
>>> plan = WritePlan(inputs=[src])
>>> out = plan.file(os.path.join(d, "out.txt"), what="release")
>>> _ = plan.check().write_text(out, "hello\n")
>>> open(out).read()
'hello\n'
>>> bad = WritePlan(inputs=[src])
>>> _ = bad.file(src, what="release")
>>> try:
...     bad.check()
... except WriteRefused as exc:
...     print("refused")
refused
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import stat
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from dpstudio.engine.errors import InputError

#: Permissions of a private file (project, assessment report, audit trail, recipe, ledger...).
PRIVATE_MODE = 0o600


class WriteRefused(InputError):
    """A target that must not be written; the message is one line naming the path, what is
    wrong and what to do (the CLI prints it and exits with code 2).
    """


# --------------------------------------------------------------------- identity of files

PathLike = str | os.PathLike


def same_file(a: PathLike | None, b: PathLike | None) -> bool:
    """True when ``a`` and ``b`` name the same file (resolved paths, or the same inode)."""
    if not a or not b:
        return False
    try:
        if os.path.exists(a) and os.path.exists(b):
            return os.path.samefile(a, b)
    except OSError:
        pass
    return _key(a) == _key(b)


def _key(path: PathLike) -> str:
    return os.path.normcase(os.path.realpath(os.fspath(path)))


def _inside(path: PathLike, folder: PathLike) -> bool:
    """True when ``path`` lies below ``folder`` (resolved paths, case folded where the OS folds)."""
    return _key(path).startswith(_key(folder).rstrip(os.sep) + os.sep)


def check_output_not_input(
    output: PathLike | None,
    inputs: PathLike | None | tuple | list = (),
    *,
    what: str = "output",
) -> None:
    """Refuse to write ``output`` where it would overwrite (or contain) one of ``inputs``.

    Part (a) of :meth:`WritePlan.check`, also usable alone (the app's export dialog).

    Parameters
    ----------
    output : path
        The file (or folder, for a folder release) about to be written.
    inputs : path or sequence of paths
        The input file(s); ``None`` and empty entries are ignored.
    what : str
        What ``output`` is, for the message ("output", "release", "metadata file", ...).

    Raises
    ------
    WriteRefused
        One line naming both paths and what to do, when ``output`` is an input file: the
        same path, another name of the same file (symbolic link, hard link, another case
        on a case-insensitive file system: ``os.path.samefile`` compares device and inode),
        a folder that contains an input (a folder release would be written over it), or a
        path inside an input folder (a Parquet dataset read as a folder).

    Examples
    --------
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> src = os.path.join(d, "in.csv")
    >>> _ = open(src, "w").write("a,b")
    >>> check_output_not_input(os.path.join(d, "out.csv"), [src])      # fine: returns None
    >>> try:
    ...     check_output_not_input(os.path.join(d, ".", "in.csv"), [src])
    ... except InputError as e:
    ...     print("refused")
    refused
    """
    if not output:
        return
    if isinstance(inputs, (str, os.PathLike)):
        inputs = (inputs,)
    for inp in inputs or ():
        if not inp:
            continue
        if same_file(output, inp):
            raise WriteRefused(
                f"Refusing to write the {what} {output} over the input file {inp}: "
                "choose another output name (dpstudio never overwrites the input)."
            )
        if _inside(inp, output):
            raise WriteRefused(
                f"Refusing to write the {what} {output} over the folder of the input file {inp}: "
                "choose another output folder (dpstudio never overwrites the input)."
            )
        if os.path.isdir(os.fspath(inp)) and _inside(output, inp):
            raise WriteRefused(
                f"Refusing to write the {what} {output} inside the input folder {inp}: "
                "choose an output outside it (dpstudio never overwrites the input)."
            )


# --------------------------------------------------------------------- permissions


def _umask() -> int:
    """The process umask, read without changing it where the OS allows (thread-safe on Linux)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key == "Umask":
                    return int(value, 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o077)  # fallback: the classic set-and-restore
    os.umask(old)
    return old


def file_mode(private: bool = False) -> int:
    """Permissions a new file gets: 0600 if ``private``, else 0666 minus the umask (e.g. 0644)."""
    return PRIVATE_MODE if private else (0o666 & ~_umask())


def _kind_of(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "a special file"


# --------------------------------------------------------------------- temporary files


#: Our temporary files: ``.<stem>.<8 random characters>.tmp<suffix>`` next to the target.
def temp_pattern(path: PathLike) -> re.Pattern:
    p = Path(os.fspath(path))
    return re.compile(r"^\." + re.escape(p.stem) + r"\.[A-Za-z0-9_]{8}\.tmp" + re.escape(p.suffix) + "$")


try:
    import fcntl as _fcntl
except ImportError:  # pragma: no cover - Windows: no advisory locks
    _fcntl = None  # type: ignore[assignment]

#: temporary file or folder -> a descriptor holding an exclusive ``flock`` on it while it is
#: live (staged and not yet renamed or removed): no clean-up removes a live one, and the lock
#: goes with the process, so what a killed run left is free to remove.
_LIVE: dict[str, int] = {}
_LIVE_LOCK = threading.Lock()
_OPEN_QUIET = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


def _hold(tmp: str, fd: int | None = None) -> bool:
    """Lock the temporary ``tmp`` we just made (``fd`` open on it, else opened here) for as long
    as it is live; False when it is not ours any more (a clean-up removed it meanwhile).
    """
    if _fcntl is None:  # pragma: no cover - Windows
        if fd is not None:
            os.close(fd)
        return True
    try:
        if fd is None:
            fd = os.open(tmp, _OPEN_QUIET | getattr(os, "O_DIRECTORY", 0))
        _fcntl.flock(fd, _fcntl.LOCK_EX | _fcntl.LOCK_NB)
        if not os.path.samestat(os.fstat(fd), os.lstat(tmp)):
            raise FileNotFoundError(tmp)
    except OSError:
        if fd is not None:
            os.close(fd)
        return False
    with _LIVE_LOCK:
        _LIVE[tmp] = fd
    return True


def _release(tmp: str) -> None:
    with _LIVE_LOCK:
        fd = _LIVE.pop(tmp, None)
    if fd is not None:
        os.close(fd)  # drops the flock


def _is_free(full: str, st: os.stat_result) -> int | None:
    """A descriptor holding the lock of the temporary ``full`` when no live writer holds it
    (then it may be removed; close the descriptor after), else None.
    """
    if _fcntl is None:  # pragma: no cover - Windows: as before, removed
        return -1
    try:
        fd = os.open(full, _OPEN_QUIET | (getattr(os, "O_DIRECTORY", 0) if stat.S_ISDIR(st.st_mode) else 0))
    except OSError:
        return None
    try:
        _fcntl.flock(fd, _fcntl.LOCK_EX | _fcntl.LOCK_NB)
        if os.path.samestat(os.fstat(fd), st):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def remove_stale_temps(path: PathLike) -> list[str]:
    """Remove the temporary files (and folders) an interrupted run left for ``path`` (only
    names of our own pattern ``.<stem>.XXXXXXXX.tmp<suffix>`` in its folder, and only those no
    live writer holds: each writer keeps a lock on its temporary file until it renames it);
    return the removed names.
    """
    folder = os.path.dirname(os.path.abspath(os.fspath(path))) or "."
    pat = temp_pattern(path)
    gone: list[str] = []
    try:
        names = os.listdir(folder)
    except OSError:
        return gone
    for n in names:
        if not pat.match(n):
            continue
        full = os.path.join(folder, n)
        try:
            st = os.lstat(full)
        except OSError:
            continue
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
            continue  # not ours: never touch a FIFO, device or link
        fd = _is_free(full, st)
        if fd is None:
            continue  # a live writer's
        try:
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(full)
            else:
                os.unlink(full)
            gone.append(n)
        except OSError:
            pass
        finally:
            if fd >= 0:
                os.close(fd)
    return gone


def discard(tmp: str | None) -> None:
    """Remove a staged temporary file or folder (no error if it is gone)."""
    if not tmp:
        return
    try:
        if os.path.isdir(tmp) and not os.path.islink(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            os.unlink(tmp)
    except OSError:
        pass
    finally:
        _release(tmp)


def _fsync_dir(folder: str) -> None:
    try:  # make the rename durable too
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def _target_error(exc: OSError, path: str) -> OSError:
    """``exc`` re-worded to name the target file, not the hidden temporary file."""
    name = Path(path).name
    if exc.errno == errno.ENOSPC:
        return OSError(exc.errno, f"No space left on device while writing {name}", path)
    return type(exc)(exc.errno, exc.strerror or str(exc), path) if exc.errno else OSError(f"{path}: {exc}")


# --------------------------------------------------------------------- "inside the writer"

_STATE = threading.local()


def writing() -> bool:
    """True while the current thread is inside the one writer (staging or committing a file).
    Tests use it to prove that every write of dpstudio happens here.
    """
    return getattr(_STATE, "depth", 0) > 0


@contextlib.contextmanager
def _inside_writer() -> Iterator[None]:
    _STATE.depth = getattr(_STATE, "depth", 0) + 1
    try:
        yield
    finally:
        _STATE.depth -= 1


# --------------------------------------------------------------------- folder locks


@contextlib.contextmanager
def _folder_locks(folders: Iterable[str]) -> Iterator[None]:
    """Exclusive advisory locks on ``folders`` while a plan renames its files into place
    (sorted, so two plans never deadlock; re-entrant within a thread; held for the renames
    only, so a project saved from the app's window never waits for a long export).  Where a
    folder cannot be locked (no ``fcntl``, a file system without ``flock``) the plan goes on
    without.
    """
    fcntl = _fcntl
    if fcntl is None:  # pragma: no cover - Windows
        yield
        return
    held: dict[str, list] = getattr(_STATE, "locks", None) or {}
    _STATE.locks = held
    mine: list[str] = []
    try:
        for f in sorted({_key(x) for x in folders}):
            if f in held:
                held[f][1] += 1
            else:
                fd = None
                try:
                    fd = os.open(f, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
                    fcntl.flock(fd, fcntl.LOCK_EX)
                except OSError:
                    if fd is not None:
                        os.close(fd)
                    fd = None
                held[f] = [fd, 1]
            mine.append(f)
        yield
    finally:
        for f in reversed(mine):
            entry = held[f]
            entry[1] -= 1
            if entry[1] == 0:
                del held[f]
                if entry[0] is not None:
                    try:
                        fcntl.flock(entry[0], fcntl.LOCK_UN)
                    finally:
                        os.close(entry[0])


# --------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class Target:
    """One file (or folder) a command writes."""

    path: str  #: absolute, as given (links in the last component are not followed)
    what: str  #: for messages: "release", "recipe (--save-recipe)", ...
    private: bool = False  #: owner-only 0600
    folder: bool = False  #: a new folder (the Dask release), never an existing one
    role: str = ""  #: what the file is for (registering a path again for the same role is fine)


def _refuse(t: Target, problem: str, todo: str) -> WriteRefused:
    return WriteRefused(f"Refusing to write the {t.what} {t.path}: {problem}; {todo}.")


def _both(a: Target, b: Target) -> WriteRefused:
    where = a.path if a.path == b.path else f"{a.path} and {b.path} (the same file)"
    return WriteRefused(
        f"Refusing to write both the {a.what} and the {b.what} to {where}: choose different names."
    )


class WritePlan:
    """Every file a command writes and every file it reads; checked once before any work,
    then written through :meth:`write` / :meth:`stage` + :meth:`commit` only.

    Parameters
    ----------
    inputs : path or paths
        Files (or folders) the command reads: never written, never replaced.

    Examples
    --------
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> plan = WritePlan()
    >>> a = plan.file(os.path.join(d, "out.csv"), what="release")
    >>> b = plan.file(os.path.join(d, "out.csv"), what="recipe (--save-recipe)", private=True)
    >>> try:
    ...     plan.check()
    ... except WriteRefused:
    ...     print("refused: the recipe would replace the release")
    refused: the recipe would replace the release
    """

    def __init__(self, inputs: PathLike | Iterable[PathLike | None] | None = ()) -> None:
        self.inputs: list[str] = []
        self.targets: dict[str, Target] = {}
        self._checked = False
        self._clashes: list[tuple[Target, Target]] = []
        self._depth = 0  # nesting of transaction() (stale temporary files: at the outermost)
        self.add_input(inputs)

    # ---- building
    def add_input(self, *paths: PathLike | Iterable[PathLike | None] | None) -> WritePlan:
        """Files the command reads (None and empty entries ignored)."""
        for p in paths:
            if p is None:
                continue
            if isinstance(p, (str, os.PathLike)):
                if os.fspath(p) and os.fspath(p) not in self.inputs:
                    self.inputs.append(os.fspath(p))
            else:
                self.add_input(*p)
        self._checked = False
        return self

    def file(self, path: PathLike, *, what: str, private: bool = False, role: str = "") -> str:
        """Register a file the command writes; return its absolute path (the key to write it).

        ``what`` names it in messages; ``role`` (default ``what``) says what it is for: the
        same path registered again for the same role is one target, for another role a clash
        that :meth:`check` refuses (e.g. a recipe named like the release).
        """
        return self._add(path, what, private, folder=False, role=role)

    def folder(self, path: PathLike, *, what: str, private: bool = False, role: str = "") -> str:
        """Register a NEW folder the command writes (an existing path is refused)."""
        return self._add(path, what, private, folder=True, role=role)

    def _add(self, path: PathLike, what: str, private: bool, folder: bool, role: str) -> str:
        text = os.fspath(path)
        if not str(text).strip():
            raise WriteRefused(f"The {what} has no file name: give one.")
        ap = os.path.abspath(text)
        t = Target(ap, what, private, folder, role or what)
        old = self.targets.get(ap)
        if old is None:
            self.targets[ap] = t
        elif (old.role, old.private, old.folder) != (t.role, t.private, t.folder):
            self._clashes.append((old, t))  # the same path for two purposes: refused by check()
        self._checked = False
        return ap

    def target(self, path: PathLike) -> Target:
        """The registered target at ``path`` (a programming error if it is not one)."""
        ap = os.path.abspath(os.fspath(path))
        try:
            return self.targets[ap]
        except KeyError:
            raise ValueError(f"{ap} is not a target of this write plan") from None

    def __contains__(self, path: object) -> bool:
        return isinstance(path, (str, os.PathLike)) and os.path.abspath(os.fspath(path)) in self.targets

    # ---- checking
    def check(self) -> WritePlan:
        """Run every check on every target; raise :class:`WriteRefused` at the first problem.

        Nothing is opened (``os.lstat``/``os.stat`` only), so a FIFO never blocks the check.
        """
        ts = list(self.targets.values())
        for t in ts + [b for _, b in self._clashes]:
            check_output_not_input(t.path, self.inputs, what=t.what)
        for a, b in self._clashes:
            raise _both(a, b)
        for i, a in enumerate(ts):
            for b in ts[i + 1 :]:
                self._check_pair(a, b)
        for t in ts:
            self._check_fs(t)
        self._checked = True
        return self

    @staticmethod
    def _check_pair(a: Target, b: Target) -> None:
        if _key(a.path) == _key(b.path) or (
            os.path.exists(a.path) and os.path.exists(b.path) and same_file(a.path, b.path)
        ):
            raise _both(a, b)
        for outer, inner in ((a, b), (b, a)):
            if outer.folder and _inside(inner.path, outer.path):
                raise _refuse(inner, f"it lies inside the {outer.what} {outer.path}", "choose another name")

    @staticmethod
    def _check_fs(t: Target) -> None:
        folder = os.path.dirname(t.path) or "."
        try:
            fst = os.stat(folder)
        except FileNotFoundError:
            raise _refuse(
                t, f"no such folder: {folder} does not exist", "create it first or choose another folder"
            ) from None
        except OSError as exc:
            raise _refuse(
                t, f"its folder {folder} cannot be used ({exc.strerror})", "choose another folder"
            ) from None
        if not stat.S_ISDIR(fst.st_mode):
            raise _refuse(t, f"{folder} is not a folder", "choose another path")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise _refuse(t, f"the folder {folder} is not writable", "choose another folder")
        try:
            st = os.lstat(t.path)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise _refuse(t, f"it cannot be used ({exc.strerror})", "choose another name") from None
        _check_existing(t, st)

    # ---- writing
    def _ready(self, path: PathLike) -> Target:
        t = self.target(path)
        if not self._checked:
            self.check()
        return t

    @contextlib.contextmanager
    def transaction(self) -> Iterator[WritePlan]:
        """Write inside this block: on entering (the outermost one), the temporary files killed
        runs left for these targets are removed (never a live writer's).
        """
        if not self._checked:
            self.check()
        if self._depth == 0:
            with _inside_writer():
                for t in self.targets.values():
                    remove_stale_temps(t.path)
        self._depth += 1
        try:
            yield self
        finally:
            self._depth -= 1

    @contextlib.contextmanager
    def committing(self) -> Iterator[WritePlan]:
        """Hold the locks of every target folder while renaming files into place: the renames
        of two plans into one folder never interleave, so two commands writing the same set
        of files leave one command's complete set, never a mix.
        """
        folders = [os.path.dirname(t.path) or "." for t in self.targets.values()]
        with _folder_locks(folders):
            yield self

    def stage(self, path: PathLike, writer: Callable[[str], None]) -> str:
        """``writer(tmp)`` on a temporary file next to the target, fsync'ed, with the target's
        final permissions; return the temporary path (:meth:`commit` renames it).
        """
        t = self._ready(path)
        return _stage(t, writer)

    def commit(self, tmp: str, path: PathLike) -> str:
        """Rename the staged ``tmp`` onto the target, after looking at the target again."""
        t = self._ready(path)
        with self.committing():
            return _commit(tmp, t, self.inputs)

    def write(self, path: PathLike, writer: Callable[[str], None]) -> str:
        """Stage and commit one file atomically; return its path."""
        with self.transaction():
            return self.commit(self.stage(path, writer), path)

    def write_text(
        self, path: PathLike, text: str, *, encoding: str = "utf-8", newline: str | None = None
    ) -> str:
        """Write ``text`` atomically to the target ``path``."""

        def writer(tmp: str) -> None:
            with open(tmp, "w", encoding=encoding, newline=newline) as fh:
                fh.write(text)

        return self.write(path, writer)

    def write_bytes(self, path: PathLike, data: bytes) -> str:
        """Write ``data`` atomically to the target ``path``."""

        def writer(tmp: str) -> None:
            with open(tmp, "wb") as fh:
                fh.write(data)

        return self.write(path, writer)

    def remove(self, path: PathLike) -> None:
        """Remove the existing regular file at the target ``path`` (e.g. a stale metadata file
        before its release is replaced); anything else there is refused.
        """
        t = self._ready(path)
        with self.committing(), _inside_writer():
            try:
                st = os.lstat(t.path)
            except FileNotFoundError:
                return
            _check_existing(t, st)
            check_output_not_input(t.path, self.inputs, what=t.what)
            os.unlink(t.path)

    def stage_folder(self, path: PathLike) -> str:
        """A new temporary folder next to the folder target ``path`` (0700), to fill and then
        :meth:`commit_folder`.
        """
        t = self._ready(path)
        if not t.folder:
            raise ValueError(f"{t.path} is a file target")
        p = Path(t.path)
        with _inside_writer():
            for _ in range(8):  # (another name if a clean-up removed it before it was locked)
                try:
                    tmp = tempfile.mkdtemp(prefix=f".{p.stem}.", suffix=f".tmp{p.suffix}", dir=str(p.parent))
                except OSError as exc:
                    raise _target_error(exc, t.path) from None
                if _hold(tmp):
                    break
            else:  # pragma: no cover
                raise OSError(errno.EAGAIN, "cannot keep a temporary folder", t.path)
            if os.name == "posix" and not t.private:  # mkdtemp made it 0700
                os.chmod(tmp, 0o777 & ~_umask())
            return tmp

    def write_folder(self, path: PathLike, filler: Callable[[str], None]) -> str:
        """Create the folder target ``path`` atomically: ``filler(tmp_folder)`` fills a
        temporary folder next to it, which is then renamed onto ``path``.
        """
        with self.transaction():
            tmp = self.stage_folder(path)
            try:
                with _inside_writer():
                    filler(tmp)
            except BaseException:
                discard(tmp)
                raise
            return self.commit_folder(tmp, path)

    def commit_folder(self, tmp: str, path: PathLike) -> str:
        """Rename the filled temporary folder onto the folder target (which must not exist)."""
        t = self._ready(path)
        with self.committing(), _inside_writer():
            if os.path.lexists(t.path):
                discard(tmp)
                raise _refuse(t, "it exists now (made while dpstudio was working)", "choose a new folder")
            check_output_not_input(t.path, self.inputs, what=t.what)
            try:
                os.rename(tmp, t.path)
            except OSError as exc:
                discard(tmp)
                raise _target_error(exc, t.path) from None
            _release(tmp)
            _fsync_dir(os.path.dirname(t.path) or ".")
        return t.path


def _check_existing(t: Target, st: os.stat_result) -> None:
    """Part (b) for a target that exists (``st`` from ``os.lstat``)."""
    mode = st.st_mode
    if t.folder:
        raise _refuse(t, "it exists", "choose a new folder (nothing is overwritten)")
    if stat.S_ISLNK(mode):
        try:
            dest = os.readlink(t.path)
        except OSError:  # pragma: no cover
            dest = "?"
        raise _refuse(
            t,
            f"it is a symbolic link (to {dest}); dpstudio neither writes through links nor replaces them",
            "give the real path or another name",
        )
    if stat.S_ISDIR(mode):
        raise _refuse(t, "it is a folder", "give a file name")
    if not stat.S_ISREG(mode):
        raise _refuse(
            t,
            f"it is {_kind_of(mode)}, not a regular file, and dpstudio never replaces one",
            "choose another name",
        )
    if not (mode & 0o222) or not os.access(t.path, os.W_OK):
        raise _refuse(
            t,
            f"the existing file is read-only (mode {stat.S_IMODE(mode):04o}) and dpstudio never changes permissions",
            "make it writable or choose another name",
        )


def _stage(t: Target, writer: Callable[[str], None]) -> str:
    if t.folder:
        raise ValueError(f"{t.path} is a folder target")
    folder = os.path.dirname(t.path) or "."
    p = Path(t.path)
    with _inside_writer():
        for _ in range(8):  # (another name if a clean-up removed it before it was locked)
            try:
                fd, tmp = tempfile.mkstemp(prefix=f".{p.stem}.", suffix=f".tmp{p.suffix}", dir=folder)
            except OSError as exc:
                raise _target_error(exc, t.path) from None
            if _hold(tmp, fd):  # locked while live: no clean-up removes it
                break
        else:  # pragma: no cover
            raise OSError(errno.EAGAIN, "cannot keep a temporary file", t.path)
        try:
            writer(tmp)
            with open(tmp, "rb+") as fh:
                fh.flush()
                os.fsync(fh.fileno())
            if os.name == "posix":  # mkstemp made it 0600; a writer may have recreated it
                os.chmod(tmp, file_mode(t.private))
        except BaseException as exc:
            discard(tmp)
            if isinstance(exc, OSError):
                raise _target_error(exc, t.path) from None
            raise
    return tmp


def _commit(tmp: str, t: Target, inputs: list[str]) -> str:
    with _inside_writer():
        try:  # the target again: a FIFO, link, folder made since the check is never replaced
            try:
                st = os.lstat(t.path)
            except FileNotFoundError:
                st = None
            if st is not None:
                _check_existing(t, st)
            check_output_not_input(t.path, inputs, what=t.what)
        except BaseException:
            discard(tmp)
            raise
        try:
            os.replace(tmp, t.path)
        except OSError as exc:
            discard(tmp)
            raise _target_error(exc, t.path) from None
        _release(tmp)
        _fsync_dir(os.path.dirname(t.path) or ".")
    return t.path


# --------------------------------------------------------------------- folders and lock files


def make_folder(path: PathLike, *, mode: int = 0o700) -> Path:
    """Create the folder ``path`` (and missing parents) unless it exists: the one place
    dpstudio makes a folder of its own (the app's config folder and its ``ledgers/``); a file
    at ``path`` is an error (FileExistsError).  Output folders are never created silently.
    """
    p = Path(os.fspath(path))
    with _inside_writer():
        p.mkdir(parents=True, exist_ok=True, mode=mode)
    return p


def open_lock_file(path: PathLike, flags: int) -> int:
    """Open (creating it empty, 0600, if absent) the lock file ``path`` for an OS lock: the one
    place dpstudio makes a lock file (the query ledger's ``<ledger>.lock``).  A lock file is
    never truncated or written: ``flags`` may not hold O_TRUNC, O_APPEND or O_WRONLY.  The
    caller passes O_NOFOLLOW | O_NONBLOCK (no link followed, no FIFO waited on) and checks
    ``os.fstat`` is a regular file.
    """
    if flags & (os.O_TRUNC | os.O_APPEND | os.O_WRONLY):
        raise ValueError("a lock file is never written")
    with _inside_writer():
        return os.open(os.fspath(path), flags | os.O_CREAT, 0o600)


# --------------------------------------------------------------------- one-file shortcuts


def atomic_write(
    path: PathLike,
    writer: Callable[[str], None],
    *,
    protect: tuple | list = (),
    private: bool = False,
    what: str = "file",
) -> str:
    """Check ``path`` like a one-target :class:`WritePlan` (never one of ``protect``), then call
    ``writer(tmp_path)`` on a temporary file next to it, fsync it and rename it onto ``path``.

    On any failure the temporary file is removed and ``path`` is left as it was; an OSError
    names ``path`` (not the hidden temporary file).  ``private``: owner-only permissions
    (0600; the temporary file is 0600 from its creation); otherwise 0666 minus the umask, also
    when it replaces an existing file with other permissions.
    """
    plan = WritePlan(inputs=protect)
    key = plan.file(path, what=what, private=private)
    return plan.check().write(key, writer)


def stage_write(
    path: PathLike,
    writer: Callable[[str], None],
    *,
    protect: tuple | list = (),
    private: bool = False,
    what: str = "file",
) -> str:
    """First half of :func:`atomic_write` (checked like it): return the staged temporary path;
    :func:`commit_write` renames it, :func:`discard` removes it.
    """
    plan = WritePlan(inputs=protect)
    key = plan.file(path, what=what, private=private)
    return plan.check().stage(key, writer)


def commit_write(tmp: str, path: PathLike, *, protect: tuple | list = (), what: str = "file") -> str:
    """Second half of :func:`atomic_write`: rename the staged ``tmp`` onto ``path`` (looked at
    again first).
    """
    t = Target(os.path.abspath(os.fspath(path)), what, role=what)
    return _commit(tmp, t, [os.fspath(p) for p in protect if p])


__all__ = [
    "WritePlan",
    "WriteRefused",
    "Target",
    "atomic_write",
    "stage_write",
    "commit_write",
    "discard",
    "check_output_not_input",
    "same_file",
    "file_mode",
    "PRIVATE_MODE",
    "remove_stale_temps",
    "temp_pattern",
    "writing",
    "open_lock_file",
    "make_folder",
]
