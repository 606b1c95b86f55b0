"""A seeded mutation fuzzer over the table readers and ``dpstudio protect`` (issue 15).

Each case mutates one of a few seed files (bytes flipped, inserted, deleted, duplicated;
quotes, line breaks, separators, NULs, byte-order marks and 140,000-character fields spliced
in; re-encoded), then runs in-process either ``read_table`` or ``dpstudio protect`` (MDAV on
one column).  A case is

* ``ok``: read / protected; for ``protect`` every unprotected cell of the release must hold
  the text of the input cell (rows compared as a multiset: the release is in random order;
  else it counts as ``altered``);
* ``clean``: refused with a :class:`DPStudioError` of one line (or an OSError naming a file);
* ``uncaught``: any other exception, or a message of several lines;
* ``slow``: took more than :data:`SLOW_SECONDS`.

``run(cases, seed)`` returns the figures; ``tests/fuzz/test_fuzz.py`` runs it in CI and
``scripts/fuzz_campaign.py`` runs the full campaign.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
import time
import traceback
from dataclasses import dataclass, field

import numpy as np

SLOW_SECONDS = 20.0


def _seeds() -> list[bytes]:
    rng = np.random.default_rng(0)
    n = 24
    xs = rng.normal(50, 10, n).round(2)
    ids = [f"{i:05d}" for i in range(1, n + 1)]
    flags = ["TRUE" if v else "FALSE" for v in rng.integers(0, 2, n)]
    cities = ["Zürich", "Genève", "Bern", 'Saint "X"', "Lu, cerne", "Chur"]
    s1 = "id,x,flag,city,price\n" + "".join(
        f'{ids[i]},{xs[i]},{flags[i]},"{cities[i % 6].replace(chr(34), chr(34) * 2)}",{i * 1.5:.2f}\n'
        for i in range(n)
    )
    s2 = "id;x;amount;note\r\n" + "".join(
        f"{ids[i]};{str(xs[i]).replace('.', ',')};{i * 1000 + 234},5;{'NA' if i % 5 == 0 else 'ok'}\r\n"
        for i in range(n)
    )
    s3 = "x\tcode\tw\n" + "".join(f"{xs[i]}\t{i % 7:03d}\t{i}.{i % 10}0\n" for i in range(n))
    s4 = "x|text\n" + "".join(
        f'{xs[i]}|"multi\nline {i}"\n' if i % 4 == 0 else f"{xs[i]}|t{i}\n" for i in range(n)
    )
    return [s1.encode("utf-8"), s2.encode("cp1252"), s3.encode("utf-8"), s4.encode("utf-8")]


SEEDS = _seeds()
TOKENS = [
    b'"',
    b"\r",
    b"\n",
    b"\r\n",
    b",",
    b";",
    b"\t",
    b"|",
    b"\x00",
    b"\xff\xfe",
    b"\xef\xbb\xbf",
    b"NA",
    b"00",
    b"1e308",
    b"-",
    b".",
    b",5",
    b"\xe9",
    b"\x81",
    b'""',
    b'"\n"',
    b"x" * 140_000,
    b";" * 3000,
    b"\t" * 25_000,
]


def mutate(data: bytes, rng: np.random.Generator) -> bytes:
    b = bytearray(data)
    for _ in range(int(rng.integers(1, 5))):
        op = int(rng.integers(0, 9))
        pos = int(rng.integers(0, len(b) + 1)) if b else 0
        if op == 0 and b:  # flip a byte
            b[min(pos, len(b) - 1)] = int(rng.integers(0, 256))
        elif op == 1:  # insert random bytes
            b[pos:pos] = bytes(rng.integers(0, 256, int(rng.integers(1, 8))).astype(np.uint8))
        elif op == 2 and b:  # delete a range
            b[pos : pos + int(rng.integers(1, 40))] = b""
        elif op == 3 and b:  # duplicate a range
            seg = bytes(b[pos : pos + int(rng.integers(1, 200))])
            b[pos:pos] = seg * int(rng.integers(1, 4))
        elif op in (4, 5, 6):  # splice a nasty token
            b[pos:pos] = TOKENS[int(rng.integers(0, len(TOKENS)))]
        elif op == 7:  # truncate
            del b[pos:]
        else:  # swap two lines
            lines = bytes(b).split(b"\n")
            if len(lines) > 2:
                i, j = rng.integers(0, len(lines), 2)
                lines[i], lines[j] = lines[j], lines[i]
                b = bytearray(b"\n".join(lines))
    out = bytes(b)
    if rng.random() < 0.03:  # re-encoded as UTF-16
        out = out.decode("latin-1").encode("utf-16")
    return out


@dataclass
class CaseFigures:
    """What every fuzzer counts: cases, how they ended, time, failures."""

    cases: int = 0
    ok: int = 0
    clean: int = 0
    uncaught: int = 0
    slow: int = 0
    seconds: float = 0.0
    max_case_seconds: float = 0.0
    failures: list = field(default_factory=list)


@dataclass
class Figures(CaseFigures):
    reader: int = 0
    protect: int = 0
    altered: int = 0
    slowest: tuple | None = field(default=None, repr=False)  # (case, kind, bytes)

    def line(self) -> str:
        return (
            f"{self.cases} cases ({self.reader} reader, {self.protect} protect): "
            f"{self.ok} ok, {self.clean} clean errors, {self.uncaught} uncaught, "
            f"{self.slow} over {SLOW_SECONDS:g} s, {self.altered} altered; "
            f"{self.seconds:.1f} s in all, slowest case {self.max_case_seconds:.2f} s"
        )


def _clean(exc: BaseException) -> bool:
    from dpstudio.engine.errors import DPStudioError

    if isinstance(exc, DPStudioError):
        return "\n" not in str(exc) and bool(str(exc).strip())
    return isinstance(exc, OSError) and bool(getattr(exc, "filename", None))


def _texts(path: str, meta) -> dict[str, list[str]] | None:
    from dpstudio.engine import io as dio
    from dpstudio.engine.io import reading

    enc = meta.encoding if meta.encoding not in dio.WIDE_ENCODINGS else meta.encoding
    raw = reading._raw_frame(path, sep=meta.sep, encoding=enc, header=0)
    return {str(c): raw[c].tolist() for c in raw.columns}


def _altered(inp: str, out: str, protected: str) -> int:
    from collections import Counter

    from dpstudio.engine import io as dio

    _, meta = dio.read_table(inp)
    a = _texts(inp, meta)
    b = _texts(out, meta)
    bad = 0
    cols = []
    for c, vals in a.items():
        if c == protected:
            continue
        if c not in b or len(b[c]) != len(vals):
            bad += len(vals)
            continue
        cols.append(c)
    if not cols:
        return bad
    # the release is in random order (issue 21 §3): every input row's unprotected cells must
    # come out as read in some released row (rows compared as a multiset)
    rows_a = Counter(zip(*(map(repr, a[c]) for c in cols)))
    rows_b = Counter(zip(*(map(repr, b[c]) for c in cols)))
    return bad + sum((rows_a - rows_b).values()) * len(cols)


def run_case(i: int, data: bytes, kind: str, folder: str, fig: Figures) -> None:
    from dpstudio import cli
    from dpstudio.engine import io as dio

    path = os.path.join(folder, f"case{i}.csv")
    with open(path, "wb") as fh:
        fh.write(data)
    t0 = time.perf_counter()
    try:
        if kind == "reader":
            dio.read_table(path)
            fig.ok += 1
        else:
            out = os.path.join(folder, f"case{i}.out.csv")
            err = io.StringIO()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                rc = cli.main(
                    [
                        "protect",
                        path,
                        out,
                        "--method",
                        "mdav",
                        "--k",
                        "2",
                        "--role",
                        "x=k-quasi",
                        "--no-measures",
                        "--no-audit-trail",
                    ]
                )
            msg = err.getvalue().strip()
            if rc == 0:
                fig.ok += 1
                n = _altered(path, out, "x")
                if n:
                    fig.altered += n
                    fig.failures.append((i, kind, f"{n} altered cell(s)"))
            elif rc == 2 and msg.count("dpstudio: error:") == 1 and "Traceback" not in msg:
                fig.clean += 1
            else:
                fig.uncaught += 1
                fig.failures.append((i, kind, f"rc={rc}: {msg[:300]}"))
    except Exception as exc:  # noqa: BLE001 - the point is to catch everything
        if _clean(exc):
            fig.clean += 1
        else:
            fig.uncaught += 1
            fig.failures.append((i, kind, "".join(traceback.format_exception_only(exc)).strip()[:300]))
    dt = time.perf_counter() - t0
    if dt > fig.max_case_seconds:
        fig.slowest = (i, kind, data)
    fig.max_case_seconds = max(fig.max_case_seconds, dt)
    if dt > SLOW_SECONDS:
        fig.slow += 1
        fig.failures.append((i, kind, f"took {dt:.1f} s"))
    for name in os.listdir(folder):
        try:
            os.unlink(os.path.join(folder, name))
        except OSError:
            pass


def run(cases: int, seed: int = 15, protect_share: float = 0.2, progress=None) -> Figures:
    """Run ``cases`` fuzz cases (``protect_share`` of them through ``dpstudio protect``)."""
    import warnings

    rng = np.random.default_rng(seed)
    fig = Figures()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dpstudio-fuzz-") as folder, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(cases):
            data = mutate(SEEDS[int(rng.integers(0, len(SEEDS)))], rng)
            kind = "protect" if rng.random() < protect_share else "reader"
            setattr(fig, kind, getattr(fig, kind) + 1)
            fig.cases += 1
            run_case(i, data, kind, folder, fig)
            if progress and (i + 1) % 500 == 0:
                progress(fig)
    fig.seconds = time.perf_counter() - t0
    return fig
