"""The ragged-row check of a CSV file: a line with another number of fields than the first
is refused with one line naming it (streamed over the bytes for files without quotes, with
the csv module's own rules for files with quoted fields).
"""

from __future__ import annotations

import csv

import numpy as np

from dpstudio.engine.errors import InputError


def _ragged_error(name: str, line: int, got: int, expected: int, n_bad: int) -> InputError:
    return InputError(
        f"{name}, line {line}: {got} fields where the first row has {expected} "
        f"(ragged row; {n_bad} such line(s)). Fix those lines or check the separator."
    )


_WS_LUT = np.zeros(256, dtype=bool)
_WS_LUT[[9, 10, 13, 32]] = True  # blank-line bytes (a tab is a field when it is the separator)
_WS_LUT_TAB = _WS_LUT.copy()
_WS_LUT_TAB[9] = False
_FEW = 256  # at most this many suspect lines per chunk are looked at one by one


def _check_ragged_bytes(chunks, sep: str, name: str) -> None:
    """Refuse lines whose number of fields differs from the first line's, for files without
    quotes (vectorised, streamed over ``chunks`` of bytes; a bare CR ends a line as it does
    for the parser; a line of blanks only is skipped, as the parser skips it).

    Separators are counted per line by locating them between the line ends (no running sum
    over every byte); whether a line is blank is asked only of the lines whose count differs
    from the expected one (and of the first lines, until the first non-blank one).
    """
    qsep = ord(sep)
    lut = _WS_LUT_TAB if sep == "\t" else _WS_LUT
    blanks = bytes(np.flatnonzero(lut).astype(np.uint8).tolist())
    carry_seps, carry_nonblank = 0, False  # the unfinished line at the end of a chunk
    expected = None
    lines_before = 0
    bad_first, n_bad = None, 0
    for b in chunks:
        if not b:
            continue
        a = np.frombuffer(b, dtype=np.uint8)
        nxt = np.empty_like(a)
        nxt[:-1] = a[1:]
        nxt[-1] = 0
        ends = np.flatnonzero((a == 10) | ((a == 13) & (nxt != 10)))
        del nxt
        if ends.size:
            sp = np.flatnonzero(a == qsep)
            counts = np.diff(np.searchsorted(sp, ends), prepend=0)  # separators per line
            counts[0] += carry_seps
            starts = np.empty_like(ends)
            starts[0] = 0
            starts[1:] = ends[:-1] + 1
            first_nonblank = carry_nonblank

            def real_one(i: int, b=b, starts=starts, ends=ends, first_nonblank=first_nonblank) -> bool:
                if i == 0 and first_nonblank:
                    return True
                return bool(b[int(starts[i]) : int(ends[i])].translate(None, blanks))

            def real_many(idx: np.ndarray, a=a, ends=ends, first_nonblank=first_nonblank) -> np.ndarray:
                cw = np.cumsum(~lut[a], dtype=np.int32)[ends]
                real = np.diff(cw, prepend=0) > 0
                real[0] = real[0] or first_nonblank
                return real[idx]

            if expected is None:  # the first non-blank line gives the width
                head = min(int(ends.size), _FEW)
                firsts = [i for i in range(head) if real_one(i)][:1]
                if not firsts and ends.size > head:
                    rest = np.flatnonzero(real_many(np.arange(ends.size)))
                    firsts = [int(rest[0])] if rest.size else []
                if firsts:
                    expected = int(counts[firsts[0]])
            if expected is not None:
                cand = np.flatnonzero(counts != expected)
                if cand.size:
                    if cand.size <= _FEW:
                        badi = np.array([i for i in cand.tolist() if real_one(i)], dtype=np.int64)
                    else:
                        badi = cand[real_many(cand)]
                    if badi.size:
                        i = int(badi[0])
                        if bad_first is None:
                            bad_first = (lines_before + i + 1, int(counts[i]))
                        n_bad += int(badi.size)
            last = int(ends[-1])
            carry_seps = int(sp.size - np.searchsorted(sp, last, side="right"))
            carry_nonblank = bool((~lut[a[last + 1 :]]).any())
        else:
            carry_seps += int(np.count_nonzero(a == qsep))
            carry_nonblank = carry_nonblank or bool((~lut[a]).any())
        lines_before += int(ends.size)
    if carry_nonblank:  # the last line has no line break
        if expected is None:
            expected = carry_seps
        elif carry_seps != expected:
            n_bad += 1
            if bad_first is None:
                bad_first = (lines_before + 1, carry_seps)
    if bad_first is not None:
        assert expected is not None  # a line is only counted as bad against an expected width
        raise _ragged_error(name, bad_first[0], bad_first[1] + 1, expected + 1, n_bad)


def _check_ragged_quoted(path: str, sep: str, encoding: str, name: str) -> None:
    """The same check for files with quoted fields, with the csv module's own rules (a
    separator or line break inside quotes belongs to the field; a short row is never padded).
    """
    expected = None
    bad_first, n_bad = None, 0
    with open(path, encoding=encoding, newline="", errors="replace") as fh:
        reader = csv.reader(fh, delimiter=sep, strict=False)
        try:
            line = 1
            for row in reader:
                if row and any(f.strip() for f in row):
                    if expected is None:
                        expected = len(row)
                    elif len(row) != expected:
                        n_bad += 1
                        if bad_first is None:
                            bad_first = (line, len(row))
                line = reader.line_num + 1
        except csv.Error as exc:
            raise InputError(f"{name}, line {reader.line_num}: cannot be read as a table ({exc}).") from None
    if bad_first is not None:
        assert expected is not None  # a row is only counted as bad against an expected width
        raise _ragged_error(name, bad_first[0], bad_first[1], expected, n_bad)


def _byte_chunks(path: str, size: int = 16 * 1024 * 1024):
    """Chunks of a file, each extended by the following byte (to tell CR LF from a bare CR)."""
    with open(path, "rb") as fh:
        buf = fh.read(size)
        while buf:
            more = fh.read(size)
            if buf[-1:] == b"\r" and more[:1] == b"\n":
                buf += b"\n"
                more = more[1:]
            yield buf
            buf = more


def _has_quote(path: str) -> bool:
    return _scan(path)[0]


def _scan(path: str) -> tuple[bool, bool]:
    """(has a quote, has a NUL byte): one pass over the file, read block by block into one
    buffer (issue 27: a fresh 16 MiB object per block made the kernel fault in and zero
    every page of it again -- 250 MB scanned in 0.1-0.6 s, half of it that; a file that
    shrinks meanwhile is simply read to its new end, never mapped).
    """
    quote = nul = False
    buf = bytearray(_SCAN_BLOCK)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as fh:
        while not (quote and nul):
            got = fh.readinto(buf)
            if not got:
                break
            block = buf if got == len(buf) else view[:got].tobytes()
            quote = quote or b'"' in block
            nul = nul or b"\x00" in block
    view.release()
    return quote, nul


#: bytes :func:`_scan` reads at a time
_SCAN_BLOCK = 16 * 1024 * 1024


def _check_ragged(
    path: str, sep: str, name: str, encoding: str = "latin-1", quoted: bool | None = None
) -> None:
    if _has_quote(path) if quoted is None else quoted:
        _check_ragged_quoted(path, sep, encoding, name)
    else:
        _check_ragged_bytes(_byte_chunks(path), sep, name)
