"""The ranked methods' distributed sorts through a private scratch folder (issue 25).

When every worker of the run runs on this machine and sees the same folder, a sort of
:func:`dask_backend._sorted_release` is done in four phases of independent tasks that
exchange their records through files instead of Dask's p2p shuffle; each phase's results are
kept on disk rather than in the workers' memory, and every file is read and written in
contiguous slices (no memory map, no random access):

1. **bucket**: each input partition computes its records' ranges (the splitters of the
   counting pass), orders its records by range (stable) and writes them at its own place in
   the sort's bucket file (records of a fixed-width numpy type: the order's values, the record
   id, the released column's own values when the method releases them); it returns its
   counts per range;
2. **sort**: each range reads its slice of every partition's place (one ``pread`` each),
   sorts it exactly as the p2p path does (the order's keys, the record id last) and writes it
   at its first global rank in the sort's sorted file (the whole attribute in the in-memory
   engine's order);
3. **release**: each span of whole clusters (the ranges' first ranks moved up to cluster
   boundaries, as the p2p path cuts them) reads its ranks, releases them by the plan, and
   writes (record id, released values) ordered by the input partition they belong to, at its
   first rank of the sort's back file;
4. **collect**: each input partition reads its slice of every span's place, orders it by
   record id and writes each released column at its place in the column's value file.

The release's final phase reads each input partition's released values as one contiguous
slice of every value file.  The release's random order (every method unless
``order='input'``) goes the same way when every column of the release is a fixed-width number
(:func:`shuffled`, below): each column written in record-id order (the released ones already
are), then every record (its keyed sort words and its columns) bucketed by output partition,
and each output partition sorts its records by their keys.  A row-wise release (laplace) uses
it too; a release with a text column keeps Dask's p2p shuffle for that phase.  What this
changes against the p2p path (measured in results/bench_dask_issue25.md):

* a p2p shuffle moves (partitions × ranges) shards; at small memory limits both grow as
  N / L, so the shards grow as their square (1.67 million per sort at 100,000,000 records on
  500 MB workers, twice per sort with the shuffle back, and more in the final shuffle); here a
  range (or a partition, an output partition) reads one slice per sender with one system call;
* a worker restarted by its nanny loses nothing of the earlier sorts (they are files): a
  restart costs at most the current phase's tasks it ran (a task run again writes the same
  bytes at the same place);
* no sort's results are stored in the workers' memory.

Privacy: the files hold original values of the sorted attribute and released values with
their record ids (the aligned release, which the final shuffle hides): the folder is the
owner's only (0700), every file in it is created by this process (0600) and only written by
the workers (same user); the bucket, sorted and back files are deleted at the end of their
sort, the folder with the value, column and record files when the release is collected or
the process ends.  The release itself is written by the one guarded writer, as on the p2p
path.

Nothing here tests a method's id: the plan releases, as in the p2p path.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import tempfile
import weakref
from typing import Any

import numpy as np
import pandas as pd

from dpstudio.engine.errors import InputError

#: The scratch folder's name prefix (in Dask's temporary-directory, else the system's).
PREFIX = "dpstudio-sort-"
_TOKEN = "token"


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            return fh.read().strip()
    except OSError:  # pragma: no cover - not Linux: the host name alone
        return ""


def _sees(path: str) -> tuple[str, str, str]:
    """What a worker sees: the token of the scratch folder ``path``, its host and boot id."""
    try:
        with open(os.path.join(path, _TOKEN), encoding="ascii") as fh:
            token = fh.read()
    except OSError:
        token = ""
    return token, socket.gethostname(), _boot_id()


def scratch_root() -> str:
    """Where scratch folders go by default: Dask's temporary-directory, else the system's."""
    import dask

    return os.fspath(dask.config.get("temporary-directory", None) or tempfile.gettempdir())


class Scratch:
    """A private folder (0700) for the sorts' files of one run; removed (with what is in it)
    when :meth:`close` is called, when the object is collected or when the process ends.
    """

    def __init__(self, root: str | None = None):
        root = root or scratch_root()
        os.makedirs(root, exist_ok=True)
        self.path = tempfile.mkdtemp(prefix=PREFIX, dir=root)  # created 0700
        os.chmod(self.path, 0o700)
        self._close = weakref.finalize(self, shutil.rmtree, self.path, ignore_errors=True)
        #: the released columns the sorts wrote, in record-id order: column -> (file, dtype)
        self.values: dict[str, tuple[str, np.dtype]] = {}
        self.token = secrets.token_hex(16)
        fd = os.open(os.path.join(self.path, _TOKEN), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(self.token)

    def file(self, name: str, nbytes: int) -> str:
        """A new private file of ``nbytes`` (sparse, zeros) in the folder."""
        path = os.path.join(self.path, name)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(fd, int(nbytes))
        finally:
            os.close(fd)
        return path

    def remove(self, path: str) -> None:
        try:
            os.unlink(path)
        except FileNotFoundError:  # pragma: no cover
            pass

    def free_bytes(self) -> int:
        return int(shutil.disk_usage(self.path).free)

    def close(self) -> None:
        self._close()

    def shared_with(self, client: Any) -> bool:
        """Whether every worker of ``client`` runs on this machine (same host and boot id)
        and reads this folder (its token): the condition of this module's sorts.  No client
        (Dask's local schedulers): this process's threads, always.
        """
        if client is None:
            return True
        mine = (self.token, socket.gethostname(), _boot_id())
        try:
            seen = client.run(_sees, self.path)
        except Exception:  # a scheduler refusing run, a closed client
            return False
        return bool(seen) and all(tuple(v) == mine for v in seen.values())


def fixed_width(dtype) -> bool:
    """Whether values of ``dtype`` go into this module's files (numpy bool, integers, floats)."""
    if not isinstance(dtype, (np.dtype, str)):  # a pandas extension dtype (nullable, text, ...)
        return False
    try:
        return np.dtype(dtype).kind in "biuf"
    except TypeError:
        return False


def record_type(m: int, keep: list) -> np.dtype:
    """The record type of a sort: the order's ``m`` values (float64), the record id, and the
    kept columns in their own dtypes.
    """
    fields = [(f"x{j}", "<f8") for j in range(m)] + [("row", "<i8")]
    fields += [(f"o{j}", np.dtype(t).newbyteorder("<")) for j, t in enumerate(keep)]
    return np.dtype(fields)


def _as_bytes(a: np.ndarray) -> memoryview:
    return memoryview(np.ascontiguousarray(a).view(np.uint8).reshape(-1))  # type: ignore[arg-type]


def _widths(rtype: np.dtype) -> tuple[int, int]:
    """(the order's values, the kept columns) of a record type of :func:`record_type`."""
    names = rtype.names or ()
    m = sum(1 for name in names if name.startswith("x"))
    return m, len(names) - m - 1


def _pwrite(path: str, a: np.ndarray, offset: int) -> None:
    buf = _as_bytes(a)
    try:
        fd = os.open(path, os.O_WRONLY)
        try:
            done = 0
            while done < len(buf):
                done += os.pwrite(fd, buf[done:], int(offset) + done)
        finally:
            os.close(fd)
    except OSError as e:  # a full disk: the message names the scratch file (the command line prints it)
        raise OSError(e.errno, e.strerror, path) from None


def _pread_into(fd: int, out: np.ndarray, offset: int) -> None:
    buf = _as_bytes(out)
    done = 0
    while done < len(buf):
        got = os.preadv(fd, [buf[done:]], int(offset) + done)
        if got <= 0:  # pragma: no cover - a file shorter than planned
            raise OSError(f"the scratch file ended {len(buf) - done:,} bytes early")
        done += got


def read_slice(path: str, dtype: np.dtype, first: int, count: int) -> np.ndarray:
    """``count`` items of ``dtype`` from item ``first`` of the file ``path``."""
    return _read_slices(path, dtype, np.array([first]), np.array([count]))


def save_slices(scratch: Scratch, name: str, starts: np.ndarray, counts: np.ndarray) -> str:
    """The slices a bucketing phase wrote, as one private table file: ``counts[i, j]`` records
    of partition i (written from record ``starts[i]`` of the bucket file, in destination
    order) go to destination j.  Each destination's task reads its own row
    (:func:`load_slices`): the table is not in the task graph (at 100,000,000 records on
    500 MB workers it holds 11 million slices).
    """
    where = starts[:, None] + np.cumsum(counts, axis=1) - counts
    path = os.path.join(scratch.path, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        np.save(fh, np.stack([where.T, counts.T]).astype(np.int64))
    return path


def load_slices(path: str, j: int) -> tuple[np.ndarray, np.ndarray]:
    """Destination ``j``'s slices of :func:`save_slices`'s table: (first record, records) of
    every partition that sends it some.
    """
    table = np.load(path, mmap_mode="r")
    where, counts = np.array(table[0, j]), np.array(table[1, j])
    del table
    nz = np.flatnonzero(counts)
    return where[nz], counts[nz]


def _read_slices(path: str, rtype: np.dtype, where: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The records of the slices (``counts[i]`` from record ``where[i]``) of a bucket file, in
    order, one ``pread`` each.
    """
    rec = np.empty(int(counts.sum()), dtype=rtype)
    fd = os.open(path, os.O_RDONLY)
    try:
        at = 0
        for w, c in zip(where.tolist(), counts.tolist()):
            _pread_into(fd, rec[at : at + c], w * rtype.itemsize)
            at += c
    finally:
        os.close(fd)
    return rec


def bucket_part(
    part: pd.DataFrame, order, keep: list[str], path: str, rtype: np.dtype, first: int
) -> np.ndarray:
    """Phase 1 for one input partition (records ``first, first + 1, ...``): its records in
    range order written at record ``first`` of the bucket file; returns its counts per range.
    """
    from dpstudio.engine.backends import dask_backend as DB

    rows = part[DB._ROW].to_numpy(dtype=np.int64)
    if rows.size and (int(rows[0]) != first or int(rows[-1]) != first + rows.size - 1):
        raise RuntimeError(  # pragma: no cover - the record ids are positions
            f"internal: records {int(rows[0]):,}.. where {first:,}.. were expected."
        )
    X = DB._values(part, order.columns)
    r = DB._range_of(order.keys(X, rows), order.splitters)
    idx = np.argsort(r, kind="stable")
    rec = np.empty(rows.size, dtype=rtype)
    for j in range(X.shape[1]):
        rec[f"x{j}"] = X[idx, j]
    rec["row"] = rows[idx]
    for j, c in enumerate(keep):
        rec[f"o{j}"] = part[c].to_numpy()[idx]
    _pwrite(path, rec, first * rtype.itemsize)
    DB._release_arrow_memory()
    return np.bincount(r, minlength=order.nranges).astype(np.int64)


def sort_range(table: str, j: int, order, path: str, out: str, rtype: np.dtype, rank: int) -> int:
    """Phase 2 for range ``j``: its records (its slices of every input partition in the bucket
    file ``path``, :func:`load_slices` of ``table``) sorted by the order's keys (record id
    last) and written at record ``rank`` (the range's first global rank) of the sorted file.
    """
    rec = _read_slices(path, rtype, *load_slices(table, j))
    total = rec.size
    m, _ = _widths(rtype)
    X = np.column_stack([rec[f"x{c}"] for c in range(m)]) if total else np.zeros((0, m))
    idx = np.lexsort(order.keys(X, rec["row"])[::-1]) if total else np.zeros(0, np.int64)
    _pwrite(out, rec[idx], rank * rtype.itemsize)
    return total


def back_type(dtypes: list) -> np.dtype:
    """The record type of a sort's released values on their way back to record-id order:
    the record id and each released column in its dtype.
    """
    return np.dtype(
        [("row", "<i8")] + [(f"v{j}", np.dtype(t).newbyteorder("<")) for j, t in enumerate(dtypes)]
    )


def release_span(
    lo: int, hi: int, path: str, rtype: np.dtype, *, n, k, plan, attrs, back: str, btype: np.dtype, starts
) -> np.ndarray:
    """Phase 3 for the ranks [lo, hi) (whole clusters): released by the plan, the records (id,
    released values) ordered by the input partition they belong to (``starts``: the
    partitions' first ids) and written at record ``lo`` of the file ``back``; returns the
    counts per partition.
    """
    from dpstudio.engine.backends import dask_backend as DB

    rec = read_slice(path, rtype, lo, hi - lo)
    m, nkeep = _widths(rtype)
    rng = {
        "X": np.column_stack([rec[f"x{j}"] for j in range(m)]) if rec.size else np.zeros((0, m)),
        "rows": rec["row"],
        "keep": [rec[f"o{j}"] for j in range(nkeep)],
    }
    cols = [a.column for a in attrs]
    frame = DB._release_piece(
        rng,
        cuts=[(0, rec.size)],
        first_rank=lo,
        n=n,
        k=k,
        plan=plan,
        attrs=attrs,
        piece_starts=starts,
        cols=cols,
    )
    dest = frame["__piece"].to_numpy(dtype=np.int64)
    idx = np.argsort(dest, kind="stable")
    out = np.empty(idx.size, dtype=btype)
    out["row"] = frame[DB._ROW].to_numpy(dtype=np.int64)[idx]
    for j, c in enumerate(cols):
        out[f"v{j}"] = frame[c].to_numpy()[idx]
    _pwrite(back, out, lo * btype.itemsize)
    return np.bincount(dest, minlength=len(starts)).astype(np.int64)


def collect(
    table: str, i: int, back: str, btype: np.dtype, first: int, outputs: list[tuple[str, Any]]
) -> int:
    """Phase 4 for input partition ``i`` (records ``first, first + 1, ...``): its released
    values (its slices of ``back``, :func:`load_slices` of ``table``) in record-id order,
    written at record ``first`` of each column's value file (``outputs``: (file, dtype)).
    """
    rec = _read_slices(back, btype, *load_slices(table, i))
    rec = rec[np.argsort(rec["row"])]
    if not np.array_equal(rec["row"], np.arange(first, first + rec.size)):
        raise RuntimeError(
            "internal: a partition's released values do not match its records."
        )  # pragma: no cover
    for j, (path, dtype) in enumerate(outputs):
        _pwrite(
            path,
            np.ascontiguousarray(rec[f"v{j}"]).astype(dtype, copy=False),
            first * np.dtype(dtype).itemsize,
        )
    return int(rec.size)


def scratch_for(choice, client, dtypes: list, need: int, say) -> Scratch | None:
    """The run's :class:`Scratch` folder when its sorts and its final shuffle go through files
    (this module), else None (Dask's p2p shuffles, results kept on the workers).  ``dtypes``:
    the types of every value that goes into the files (all fixed-width, or None); ``need``:
    the bytes the files take at most.  ``choice``: None (automatic: when every worker runs on
    this machine and sees the folder and the disk has room), False (never), or a folder in
    which to make it (its conditions still checked).
    """
    from dpstudio.engine.backends import dask_backend as DB

    if choice is False or not all(fixed_width(t) for t in dtypes):
        return None
    if choice is None or choice is True:
        try:
            scratch = Scratch()
        except OSError as e:  # Dask spills and shuffles there too: no run can go on
            raise InputError(
                f"Dask's temporary folder {scratch_root()!r} cannot be used ({e.strerror or e}); "
                "set DASK_TEMPORARY_DIRECTORY to a writable folder with room for the data."
            ) from None
    else:
        where = os.fspath(choice)
        if not os.path.isdir(where) or not os.access(where, os.W_OK | os.X_OK):
            raise InputError(
                f"The scratch folder {where!r} is not a folder this process can write into; "
                "give an existing, writable folder."
            )
        scratch = Scratch(where)
    live = DB._client_for(client)
    free = scratch.free_bytes()
    if not scratch.shared_with(live) or free < need + 2**30:
        if free < need + 2**30:
            say(
                f"shuffling through Dask's workers, not files: the scratch files need {DB._human(need)} and "
                f"{os.path.dirname(scratch.path)} has {DB._human(free)} free"
            )
        scratch.close()
        return None
    return scratch


def sort(
    src,
    order,
    plan,
    attrs: list,
    keep: list[str],
    *,
    n,
    k,
    scratch,
    dtypes,
    say,
    tag,
) -> list[tuple[str, str, Any]]:
    """The released columns of ``attrs`` under one distributed sort through the scratch
    folder (this module's three phases): (column, value file, dtype) per attribute, each file the
    column's released values in record-id order.
    """
    import dask
    from dask import delayed

    from dpstudio.engine.backends import dask_backend as DB

    rtype = record_type(len(order.columns), [src.meta[c].dtype for c in keep])
    P = order.nranges
    starts = src.starts
    bucket = scratch.file(f"{tag}.bucket", n * rtype.itemsize)
    read = list(dict.fromkeys([*order.columns, *keep]))
    say(f"sorting {n:,} values in {P:,} range{'s' if P != 1 else ''}: by range")
    tasks = [
        delayed(bucket_part)(x, order, keep, bucket, rtype, int(starts[i]))
        for i, x in enumerate(src.frame(read).to_delayed())
    ]
    counts = np.asarray(dask.compute(*tasks), dtype=np.int64).reshape(len(tasks), P)
    if not np.array_equal(counts.sum(axis=0), order.totals):  # pragma: no cover - the data changed
        raise InputError("The input changed while it was read (record counts differ); run again.")
    # where each range's records of partition i are in the bucket file: the partition's place
    # plus the records of the ranges before it
    table = save_slices(scratch, f"{tag}.slices.npy", starts, counts)
    first = np.r_[0, np.cumsum(order.totals)].astype(np.int64)
    ordered = scratch.file(f"{tag}.sorted", n * rtype.itemsize)
    say(f"sorting {n:,} values in {P:,} range{'s' if P != 1 else ''}: each range")
    tasks = [delayed(sort_range)(table, j, order, bucket, ordered, rtype, int(first[j])) for j in range(P)]
    dask.compute(*tasks)
    scratch.remove(bucket)
    scratch.remove(table)
    outputs = [
        (
            scratch.file(f"{tag}.{i}.values", n * np.dtype(dtypes[a.column]).itemsize),
            np.dtype(dtypes[a.column]),
        )
        for i, a in enumerate(attrs)
    ]
    bounds = DB._release_bounds(order, n, k)
    spans = [(lo, hi) for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()) if hi > lo]
    btype = back_type([dtypes[a.column] for a in attrs])
    back = scratch.file(f"{tag}.back", n * btype.itemsize)
    say(f"releasing {n:,} values")
    tasks = [
        delayed(release_span)(
            int(lo),
            int(hi),
            ordered,
            rtype,
            n=n,
            k=k,
            plan=plan,
            attrs=attrs,
            back=back,
            btype=btype,
            starts=starts,
        )
        for lo, hi in spans
    ]
    counts = np.asarray(dask.compute(*tasks), dtype=np.int64).reshape(len(spans), len(starts))
    scratch.remove(ordered)
    lens = np.diff(np.r_[starts, n])
    if not np.array_equal(counts.sum(axis=0), lens):  # pragma: no cover - every rank is released once
        raise InputError(f"internal: {int(counts.sum()):,} values released for {n:,} records; run again.")
    table = save_slices(scratch, f"{tag}.back.npy", np.array([lo for lo, _ in spans], dtype=np.int64), counts)
    tasks = [delayed(collect)(table, i, back, btype, int(starts[i]), outputs) for i in range(len(starts))]
    dask.compute(*tasks)
    scratch.remove(back)
    scratch.remove(table)
    for a, out in zip(attrs, outputs):
        scratch.values[a.column] = out
    return [(a.column, path, dtype) for a, (path, dtype) in zip(attrs, outputs)]


def assemble(
    part: pd.DataFrame,
    files: list[tuple[str, str, Any]],
    *,
    dtypes,
    first: int,
    lo: int = 0,
    hi: int | None = None,
) -> pd.DataFrame:
    """:func:`dask_backend._assemble` with the released columns read from the scratch folder's value files
    (records ``first + lo`` to ``first + hi`` of each).
    """
    from dpstudio.engine.backends import dask_backend as DB

    hi = len(part) if hi is None else hi
    part = part.iloc[lo:hi]
    ids = np.arange(first + lo, first + hi, dtype=np.int64)
    frame = pd.DataFrame(
        {DB._ROW: ids, **{c: read_slice(path, np.dtype(t), first + lo, hi - lo) for c, path, t in files}}
    )
    return DB._assemble(part, frame, dtypes=dtypes)


# --------------------------------------------------------------------------- the final shuffle
#
# The in-memory engine's random order (records ordered by their keyed 128-bit sort keys,
# dask_backend._shuffled) through files: every column of the release written in record-id
# order (the ranked methods' released columns are already there), every record (its keys and
# its columns) bucketed by output partition (the top bits of the first word, as the p2p path),
# then each output partition reads its records and sorts them as dask_backend._by_sort_keys
# does.  A p2p shuffle moves (partitions × partitions) shards, which at small memory limits
# grow as the square of N / L.


def final_type(dtypes: list) -> np.dtype:
    """The final shuffle's record type: the two keyed sort words, then every column of the
    release in its dtype.
    """
    fields = [("k0", "<u8"), ("k1", "<u8")]
    return np.dtype(fields + [(f"c{j}", np.dtype(t).newbyteorder("<")) for j, t in enumerate(dtypes)])


def shuffle_bytes(n: int, dtypes) -> int:
    """Bytes the final shuffle's files take at most: one file per column and the records."""
    width = sum(np.dtype(t).itemsize if fixed_width(t) else 8 for t in dtypes)
    return int(n) * (2 * width + 16)


def write_columns(part: pd.DataFrame, files: list[tuple[str, str, Any]]) -> tuple[int, int]:
    """One partition's columns written at its records' ids in the column files (its ids are
    consecutive); returns (first id, records).
    """
    from dpstudio.engine.backends import dask_backend as DB

    rows = part[DB._ROW].to_numpy(dtype=np.int64)
    if not rows.size:
        return 0, 0
    first = int(rows[0])
    if not np.array_equal(rows, np.arange(first, first + rows.size)):
        raise RuntimeError("internal: a partition's record ids are not consecutive.")  # pragma: no cover
    for c, path, dtype in files:
        _pwrite(path, part[c].to_numpy().astype(dtype, copy=False), first * np.dtype(dtype).itemsize)
    DB._release_arrow_memory()
    return first, int(rows.size)


def bucket_records(lo: int, hi: int, root, bits: int, path: str, files: list, ftype: np.dtype) -> np.ndarray:
    """The records ``lo`` to ``hi`` -- their sort keys (the run's keyed shuffle stream) and
    their columns (read from the column files ``files``) -- in output partition order (the top
    ``bits`` of the first word, as the p2p path), written at record ``lo`` of the file
    ``path``; returns the counts per output partition.
    """
    from dpstudio.engine.algorithms import keyed as K

    rows = np.arange(lo, hi, dtype=np.int64)
    k0, k1 = K.sort_keys(K.KeyedStream(root, K.PURPOSE_SHUFFLE, 0), rows)
    b = (k0 >> np.uint64(64 - bits)).astype(np.int64)
    idx = np.argsort(b, kind="stable")
    rec = np.empty(rows.size, dtype=ftype)
    rec["k0"], rec["k1"] = k0[idx], k1[idx]
    for j, (_c, f, t) in enumerate(files):
        rec[f"c{j}"] = read_slice(f, np.dtype(t), lo, hi - lo)[idx]
    _pwrite(path, rec, lo * ftype.itemsize)
    return np.bincount(b, minlength=1 << bits).astype(np.int64)


def output_part(table: str, b: int, path: str, ftype: np.dtype, meta: pd.DataFrame) -> pd.DataFrame:
    """Output partition ``b`` of the release: its records (its slices of ``path``,
    :func:`load_slices` of ``table``) sorted by their keys as :func:`dask_backend._by_sort_keys`
    sorts them; ``meta``: the release's columns and dtypes.
    """
    rec = _read_slices(path, ftype, *load_slices(table, b))
    k0 = rec["k0"]
    order = np.argsort(k0)
    s0 = k0[order]
    if s0.size > 1 and bool(np.any(s0[1:] == s0[:-1])):  # equal first words: both
        order = np.lexsort((rec["k1"], k0))
    data = {c: rec[f"c{j}"][order] for j, c in enumerate(meta.columns)}
    return pd.DataFrame(data, columns=list(meta.columns)).astype(dict(meta.dtypes))


def shuffled(
    frame, write: list[str], meta: pd.DataFrame, *, root, scratch: Scratch, n: int, nparts: int, say
):
    """The release in the in-memory engine's shuffled order, through the scratch folder: the
    columns ``write`` taken from ``frame`` (with record ids), the others from the sorts' value
    files (:attr:`Scratch.values`); ``meta``: the release's columns and dtypes; ``nparts``:
    the partitions of the release before the shuffle (as many output partitions, rounded up to
    a power of two, as the p2p path).
    """
    import dask
    from dask import delayed

    from dpstudio.engine.backends import dask_backend as DB

    files = []
    for j, c in enumerate(meta.columns):
        if c in scratch.values:
            path, dtype = scratch.values[c]
        else:
            dtype = np.dtype(str(meta[c].dtype))
            path = scratch.file(f"release.{j}.values", n * dtype.itemsize)
        files.append((c, path, dtype))
    todo = [f for f in files if f[0] in write]
    if todo:
        say("writing the release's columns in record order")
        got = dask.compute(*[delayed(write_columns)(x, todo) for x in frame.to_delayed()])
        spans = sorted((a, b) for a, b in got if b)
        ends = np.cumsum([b for _, b in spans])
        if not spans or int(ends[-1]) != n or any(a != int(e) - b for (a, b), e in zip(spans, ends)):
            raise InputError("The input changed while it was read (record counts differ); run again.")
    bits = max(1, int(np.ceil(np.log2(max(2, nparts)))))
    m = 1 << bits
    chunks = DB._cuts(n, -(-n // max(1, nparts)))
    ftype = final_type([t for _c, _f, t in files])
    records = scratch.file("release.records", n * ftype.itemsize)
    say("shuffling the release into its random order")
    counts = np.asarray(
        dask.compute(
            *[delayed(bucket_records)(lo, hi, root, bits, records, files, ftype) for lo, hi in chunks]
        ),
        dtype=np.int64,
    ).reshape(len(chunks), m)
    firsts = np.array([lo for lo, _ in chunks], dtype=np.int64)
    table = save_slices(scratch, "release.slices.npy", firsts, counts)
    parts = [delayed(output_part)(table, b, records, ftype, meta) for b in range(m)]
    return DB._dd().from_delayed(parts, meta=meta, verify_meta=False)
