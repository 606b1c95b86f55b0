"""The ragged-line check of unquoted CSV files (``io.ragged._check_ragged_bytes``, issue 12's
whole-process time: separators located between line ends, blank lines looked at only when
suspect) refuses exactly the files, with exactly the message, of its previous version (a
running sum over every byte), kept here as the reference.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpstudio.engine.errors import InputError
from dpstudio.engine.io import ragged


def _reference(chunks, sep: str, name: str) -> None:
    """Refuse lines whose number of fields differs from the first line's, for files without
    quotes (vectorised, streamed over ``chunks`` of bytes; a bare CR ends a line as it does
    for the parser).
    """
    qsep = ord(sep)
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
        end = (a == 10) | ((a == 13) & (nxt != 10))
        ws = np.isin(a, (9, 10, 13, 32)) if sep != "\t" else np.isin(a, (10, 13, 32))
        ends = np.flatnonzero(end)
        # int32 running counts (a chunk is < 2**31 bytes): half the memory traffic of int64
        cs = np.cumsum(a == qsep, dtype=np.int32)
        cw = np.cumsum(~ws, dtype=np.int32)
        if ends.size:
            cs_e, cw_e = cs[ends], cw[ends]
            counts = cs_e - np.concatenate([[0], cs_e[:-1]])
            counts[0] += carry_seps
            real = (cw_e - np.concatenate([[0], cw_e[:-1]])) > 0
            real[0] = real[0] or carry_nonblank
            if expected is None and real.any():
                expected = int(counts[np.flatnonzero(real)[0]])
            if expected is not None:
                badm = real & (counts != expected)
                if badm.any():
                    i = int(np.flatnonzero(badm)[0])
                    if bad_first is None:
                        bad_first = (lines_before + i + 1, int(counts[i]))
                    n_bad += int(badm.sum())
            last = int(ends[-1])
            carry_seps = int(cs[-1] - cs[last])
            carry_nonblank = bool(cw[-1] - cw[last] > 0)
        else:
            carry_seps += int(cs[-1])
            carry_nonblank = carry_nonblank or bool(cw[-1] > 0)
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
        raise ragged._ragged_error(name, bad_first[0], bad_first[1] + 1, expected + 1, n_bad)


def _outcome(fn, data: bytes, sep: str, size: int) -> str | None:
    chunks = [data[i : i + size] for i in range(0, len(data), size)]
    # as _byte_chunks does: a CR LF is never split between two chunks
    for i in range(len(chunks) - 1):
        if chunks[i][-1:] == b"\r" and chunks[i + 1][:1] == b"\n":
            chunks[i] += b"\n"
            chunks[i + 1] = chunks[i + 1][1:]
    try:
        fn(iter(chunks), sep, "f.csv")
    except InputError as exc:
        return str(exc)
    return None


def _file(rng: np.random.Generator, sep: str, n_lines: int, bad_rate: float) -> bytes:
    width = int(rng.integers(1, 6))
    out = []
    for _ in range(n_lines):
        u = rng.random()
        if u < 0.05:
            line = str(rng.choice(["", " ", "\t", "  \t "]))  # blank lines
        elif u < 0.05 + bad_rate:
            line = sep.join(["v"] * int(rng.integers(1, 8)))  # maybe ragged
        else:
            line = sep.join(str(int(v)) for v in rng.integers(0, 99, width + 1))
        if rng.random() < 0.03:
            line = " " + line
        out.append(line + str(rng.choice(["\n", "\r\n", "\r"], p=[0.8, 0.15, 0.05])))
    text = "".join(out)
    if rng.random() < 0.5:
        text = text.rstrip("\r\n")  # no line break at the end
    return text.encode()


@pytest.mark.parametrize("seed", range(12))
def test_ragged_check_equals_the_reference(seed):
    rng = np.random.default_rng(seed)
    seen = set()
    for case in range(25):
        sep = str(rng.choice([";", ",", "\t"]))
        bad_rate = float(rng.choice([0.0, 0.001, 0.02, 0.6]))
        data = _file(rng, sep, int(rng.integers(1, 1500)), bad_rate)
        for size in (29, 500, len(data) + 1):
            got = _outcome(ragged._check_ragged_bytes, data, sep, size)
            ref = _outcome(_reference, data, sep, size)
            assert got == ref, (seed, case, size)
            seen.add(got is None)
    assert seen == {True, False}  # both clean and refused files were compared


def test_many_suspect_lines_and_leading_blank_lines():
    """More suspects than are looked at one by one, and more leading blank lines than that."""
    body = b"\n" * 600 + b"a;b\n" + b"1;2\n" * 50 + b"1\n" * 700 + b"  \n" * 400 + b"1;2;3\n"
    for size in (10, 333, 1000, 1001, len(body)):  # 1000/1001: a chunk starts inside a line
        got = _outcome(ragged._check_ragged_bytes, body, ";", size)
        assert got == _outcome(_reference, body, ";", size)
        assert got is not None and "line 652" in got and "701 such line" in got
