"""A seeded fuzzer over the small inputs (issue 21): recipes, query expressions, query ledgers
and release metadata, in the style of :mod:`tests.fuzz.fuzzer` (the readers').

Kinds of case:

* ``recipe``: a valid recipe mutated (a value anywhere in its JSON tree replaced by a hostile
  one -- Infinity, NaN, 5,000-digit numbers, lists for texts, 1e9, nesting 100,000 deep -- a
  key dropped or added, or the bytes mutated as the reader fuzzer does; sometimes the path is a
  FIFO, a folder or /dev/zero), read with :func:`dpstudio.engine.recipe.load_recipe`, and a
  share of them run through ``dpstudio protect --recipe`` in-process;
* ``query``: a query generated from the grammar (aggregates, filters of nested and/or/not,
  in-lists, huge, infinite and 2^53 + 1 literals, quoted text, multicomponent queries, ``by``)
  or a soup of random tokens, answered by knowledge refinement on a small frame holding ±inf,
  NaN and integers above 2^53.  Oracles: every filter on numeric columns is also evaluated by a
  plain per-record reference in exact Python arithmetic and the masks must agree; whenever
  :func:`~dpstudio.engine.query.disjoint_components` says a vector query's components are
  disjoint, no record of the frame may match two of them (else ε would be under-charged);
* ``ledger``: a valid ledger mutated, loaded, checked and spent on;
* ``metadata``: a release's metadata mutated and verified (:func:`verify_release`).  Oracle: a
  mutation that changes the digests, the file name or the record count must never verify OK.

A case is ``ok`` (a result), ``clean`` (one line: a :class:`DPStudioError` without a line
break, or exit code 2 with one ``dpstudio: error:`` line), ``uncaught`` (anything else),
``slow`` (over :data:`SLOW_SECONDS`: each case runs under a timer, so a hang ends the case) or
``wrong`` (an oracle failed).  ``run(cases, seed)`` returns the figures;
``tests/fuzz/test_settings_fuzz.py`` runs it in CI.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import signal
import tempfile
import time
import traceback
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tests.fuzz.fuzzer import CaseFigures
from tests.fuzz.fuzzer import mutate as mutate_bytes

SLOW_SECONDS = 10.0
KINDS = ("recipe", "query", "ledger", "metadata")


class _Timeout(Exception):
    """A case ran over SLOW_SECONDS (raised by the interval timer)."""


@contextlib.contextmanager
def _time_limit(seconds: float):
    if not hasattr(signal, "setitimer"):  # pragma: no cover - Windows: no timer
        yield
        return

    def on_alarm(signum, frame):
        raise _Timeout()

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


# --------------------------------------------------------------------------- hostile values

HUGE_INT_TEXT = "9" * 5000
HOSTILE_TEXTS = [
    "Infinity",
    "-Infinity",
    "NaN",
    "1e9",
    "1e999",
    "-1",
    "0",
    "1.5",
    "true",
    "null",
    '""',
    '"x"',
    '"' + "x" * 100_000 + '"',
    "[]",
    "{}",
    '["a"]',
    '{"a": 1}',
    "[" * 100_000 + "]" * 100_000,
    HUGE_INT_TEXT,
    "-" + HUGE_INT_TEXT,
    "4" * 4300,
    str(2**53 + 1),
    str(2**64),
    '"0x"',
    '"../../../etc/passwd"',
    '"/dev/zero"',
    '"\\u0000"',
    "1e308",
    "-0",
    "[[[[[[1]]]]]]",
]


def _set_json(text: str, path: list, rng: np.random.Generator) -> str:
    """``text`` (JSON of a dict) with the value at ``path`` replaced by a hostile JSON text."""
    marker = "__FUZZ_MARKER_7f3a__"
    obj = json.loads(text)
    cur = obj
    for k in path[:-1]:
        cur = cur[k]
    cur[path[-1]] = marker
    out = json.dumps(obj)
    return out.replace(json.dumps(marker), HOSTILE_TEXTS[int(rng.integers(0, len(HOSTILE_TEXTS)))], 1)


def _paths(obj, prefix=()) -> list[list]:
    out = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.append([*prefix, k])
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.append([*prefix, i])
            out += _paths(v, (*prefix, i))
    return out


def mutate_json(seed_text: str, rng: np.random.Generator) -> bytes:
    """One hostile variant of a JSON document (structured or byte-level mutation)."""
    op = int(rng.integers(0, 10))
    obj = json.loads(seed_text)
    if op <= 4:  # a value replaced
        paths = _paths(obj)
        return _set_json(seed_text, paths[int(rng.integers(0, len(paths)))], rng).encode()
    if op == 5:  # a key dropped or an unknown one added
        paths = [p for p in _paths(obj) if isinstance(p[-1], str)]
        p = paths[int(rng.integers(0, len(paths)))]
        cur = obj
        for k in p[:-1]:
            cur = cur[k]
        if rng.random() < 0.5:
            del cur[p[-1]]
        else:
            cur["fuzz_" + str(int(rng.integers(0, 99)))] = [1, {"x": None}]
        return json.dumps(obj).encode()
    if op == 6:  # the whole document replaced
        return HOSTILE_TEXTS[int(rng.integers(0, len(HOSTILE_TEXTS)))].encode()
    if op == 7:  # wrapped
        return json.dumps([obj] if rng.random() < 0.5 else {"wrapped": obj}).encode()
    return mutate_bytes(seed_text.encode(), rng)  # bytes flipped, spliced, truncated


# --------------------------------------------------------------------------- figures


@dataclass
class Figures(CaseFigures):
    per_kind: dict = field(default_factory=lambda: {k: 0 for k in KINDS})
    wrong: int = 0
    special_paths: int = 0
    differential_checks: int = 0
    disjoint_checks: int = 0

    def line(self) -> str:
        kinds = ", ".join(f"{self.per_kind[k]} {k}" for k in KINDS)
        return (
            f"{self.cases} cases ({kinds}): {self.ok} ok, {self.clean} clean errors, "
            f"{self.uncaught} uncaught, {self.slow} over {SLOW_SECONDS:g} s, {self.wrong} wrong "
            f"({self.differential_checks} filter masks and {self.disjoint_checks} disjoint "
            f"vector queries checked, {self.special_paths} FIFO/device/folder paths); "
            f"{self.seconds:.1f} s in all, slowest case {self.max_case_seconds:.2f} s"
        )


def _one_line(exc: BaseException) -> bool:
    from dpstudio.engine.errors import DPStudioError

    msg = str(exc)
    if isinstance(exc, DPStudioError):
        return "\n" not in msg and bool(msg.strip())
    return isinstance(exc, OSError) and bool(getattr(exc, "filename", None)) and "\n" not in msg


class _Wrong(Exception):
    """An oracle failed: the case returned a wrong result."""


# --------------------------------------------------------------------------- the frame

N_ROWS = 24


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    ids = np.arange(N_ROWS, dtype=np.int64)
    ids[0], ids[1] = 2**53, 2**53 + 1  # a double cannot tell them apart
    f = rng.normal(50, 20, N_ROWS).round(2)
    f[2], f[3], f[4], f[5] = np.inf, -np.inf, np.nan, float(2**53)
    return pd.DataFrame(
        {
            "id": ids,
            "x": rng.integers(0, 100, N_ROWS).astype(np.int64),
            "f": f,
            "g": rng.choice(["a", "b", "Zürich", "it's", "3"], N_ROWS),
            "n": rng.integers(1, 4, N_ROWS).astype(np.int64),
        }
    )


FRAME = _frame()
NUMERIC = ("id", "x", "f", "n")
LITERALS = [
    "0",
    "1",
    "-1",
    "3",
    "2.5",
    "-2.5",
    "50",
    "99.99",
    "1e999",
    "-1e999",
    str(2**53),
    str(2**53 + 1),
    "9007199254740992.0",
    str(2**63),
    str(2**64),
    "1" + "0" * 30,
    "1e308",
    "0.1",
    "true",
    "false",
]
EDGE_LITERALS = [
    "1e999",
    "-1e999",
    "5",
    str(2**53),
    str(2**53 + 1),
    "9007199254740992.0",
    "9007199254740993.5",
]
TEXT_LITS = ["'a'", "'b'", "'Zürich'", "'it\\'s'", "'3'", '"a"', "''", "'\\\\'"]
OPS = ("==", "!=", "<", "<=", ">", ">=")


def gen_filter(rng: np.random.Generator, depth: int, numeric_only: bool) -> str:
    r = rng.random()
    if depth <= 0 or r < 0.35:
        cols = NUMERIC if numeric_only else (*NUMERIC, "g")
        col = cols[int(rng.integers(0, len(cols)))]
        if col == "g":
            lits = TEXT_LITS + ["3"]
        else:
            lits = LITERALS
        if rng.random() < 0.2:
            vals = ", ".join(lits[int(rng.integers(0, len(lits)))] for _ in range(int(rng.integers(1, 4))))
            neg = "not " if rng.random() < 0.3 else ""
            return f"{col} {neg}in ({vals})"
        return f"{col} {OPS[int(rng.integers(0, 6))]} {lits[int(rng.integers(0, len(lits)))]}"
    if r < 0.5:
        return "not " + gen_filter(rng, depth - 1, numeric_only)
    if r < 0.65:
        return "(" + gen_filter(rng, depth - 1, numeric_only) + ")"
    op = " and " if rng.random() < 0.5 else " or "
    return gen_filter(rng, depth - 1, numeric_only) + op + gen_filter(rng, depth - 1, numeric_only)


AGGS = ("count", "proportion", "mean(x)", "sum(x)", "median(f)", "mode(n)", "value(x)", "mean(f)")


def gen_query(rng: np.random.Generator) -> tuple[str, bool]:
    """(query text, whether its filters use numeric columns only)."""
    numeric_only = rng.random() < 0.6
    r = rng.random()
    if r < 0.08:  # the sizes
        big = [
            "count where " + "(" * 10_000 + "x > 1" + ")" * 10_000,
            "count where " + "not " * 10_000 + "x > 1",
            "count where " + " and ".join(["x > 1"] * 8000),
            "count where " + " or ".join(["x > 1"] * 8000),
            "count where x > " + HUGE_INT_TEXT,
            "count where " + "(" * 150 + "x > 1" + ")" * 150,
            "count where " + " and ".join(["x > 1"] * 900),
        ]
        return big[int(rng.integers(0, len(big)))], True
    if r < 0.18:  # token soup
        vocab = [
            "count",
            "mean",
            "(",
            ")",
            "x",
            "f",
            "g",
            "and",
            "or",
            "not",
            "in",
            "where",
            "by",
            "==",
            "<",
            ",",
            ";",
            "'",
            '"',
            "`",
            "1e999",
            HUGE_INT_TEXT[:500],
            "*",
            "[",
            "]",
            "\x00",
            "é",
            "\\",
            "value",
            "proportion",
            "mode",
            "-",
            ".",
            "1",
            "2.5",
            "true",
        ]
        toks = [vocab[int(rng.integers(0, len(vocab)))] for _ in range(int(rng.integers(1, 25)))]
        return " ".join(toks), False
    if r < 0.3:  # two constraints on one numeric column: often disjoint (the ε charged)
        edges = rng.random() < 0.5  # around the values a double gets wrong: ±inf, 2^53 + 1
        col = ("f", "id")[int(rng.integers(0, 2))] if edges else NUMERIC[int(rng.integers(0, len(NUMERIC)))]
        lits = EDGE_LITERALS if edges else LITERALS
        atoms = []
        for _ in range(int(rng.integers(2, 4))):
            lit = lits[int(rng.integers(0, len(lits)))]
            if rng.random() < 0.2:
                atoms.append(f"{col} in ({lit}, {lits[int(rng.integers(0, len(lits)))]})")
            else:
                atoms.append(f"{col} {OPS[int(rng.integers(0, 6))]} {lit}")
        return "; ".join(f"count where {a}" for a in atoms), True
    comps = int(rng.integers(1, 4)) if rng.random() < 0.35 else 1
    parts = []
    for _ in range(comps):
        agg = AGGS[int(rng.integers(0, len(AGGS)))]
        where = gen_filter(rng, int(rng.integers(0, 4)), numeric_only) if rng.random() < 0.85 else ""
        parts.append(agg + (f" where {where}" if where else ""))
    if comps == 1 and rng.random() < 0.1 and not parts[0].startswith(("value", "proportion")):
        parts[0] += " by n"
    return "; ".join(parts), numeric_only


def reference_mask(df: pd.DataFrame, node) -> np.ndarray:
    """The filter evaluated record by record in exact Python arithmetic (numeric columns)."""

    cols = {
        c: [
            None if pd.isna(v) else (int(v) if df[c].dtype.kind in "iu" else float(v)) for v in df[c].tolist()
        ]
        for c in NUMERIC
    }

    def value(col: str, i: int):
        return cols[col][i]

    def atom(n, i: int) -> bool:
        if n[0] == "in":
            return any(atom(("cmp", "==", n[1], lit), i) for lit in n[2])
        _, op, col, lit = n
        v = value(col, i)
        if isinstance(lit, bool):
            lit = int(lit)
        if v is None or (isinstance(lit, float) and math.isnan(lit)):
            return op == "!="
        return {
            "==": v == lit,
            "!=": v != lit,
            "<": v < lit,
            "<=": v <= lit,
            ">": v > lit,
            ">=": v >= lit,
        }[op]

    def ev(n, i: int) -> bool:
        stack = [(n, False)]
        out: list[bool] = []
        while stack:
            m, done = stack.pop()
            if m[0] in ("and", "or"):
                if done:
                    b, a = out.pop(), out.pop()
                    out.append((a and b) if m[0] == "and" else (a or b))
                else:
                    stack += [(m, True), (m[2], False), (m[1], False)]
            elif m[0] == "not":
                if done:
                    out.append(not out.pop())
                else:
                    stack += [(m, True), (m[1], False)]
            else:
                out.append(atom(m, i))
        return out[0]

    return np.array([ev(node, i) for i in range(len(df))], dtype=bool)


RANGES = {"x": "0:100:10", "f": "0:100:10", "n": "1,2,3", "count": "0:30:3", "proportion": "0:1:0.1"}


def run_query(text: str, numeric_only: bool, rng: np.random.Generator, fig: Figures) -> None:
    from dpstudio.engine import query as qd

    q = qd.parse_any(text)
    comps = list(q.components) if isinstance(q, qd.MultiQuery) else [q]
    if numeric_only:  # differential oracle on every filter
        for c in comps:
            node = qd.parse_filter(c.where)
            if node is None:
                continue
            got = qd.evaluate_filter(FRAME, node)
            want = reference_mask(FRAME, node)
            fig.differential_checks += 1
            if not np.array_equal(got, want):
                rows = np.flatnonzero(got != want).tolist()
                raise _Wrong(f"filter {c.where!r}: rows {rows} differ from the exact reference")
    if isinstance(q, qd.MultiQuery) and qd.disjoint_components(q.components):
        masks = [qd.evaluate_filter(FRAME, qd.parse_filter(c.where)) for c in q.components]
        fig.disjoint_checks += 1
        if (np.sum(masks, axis=0) > 1).any():
            raise _Wrong(f"{text!r}: declared disjoint, but a record matches two components")
    priors = []
    for c in comps:
        keys = [k for k in (c.column, c.agg if c.agg in ("count", "proportion") else None) if k]
        sup = qd.resolve_range(c, {k: RANGES[k] for k in keys if k in RANGES}, FRAME)
        priors.append(qd.Prior.uniform(sup))
    seed = int(rng.integers(0, 2**32))
    if isinstance(q, qd.MultiQuery):
        qd.refine_multicomponent(FRAME, q, priors, 0.5, rng=seed)
    else:
        qd.refine_query(FRAME, q, priors[0], 0.5, rng=seed, groups=[1, 2, 3] if q.by else None)


# --------------------------------------------------------------------------- seeds on disk


def _write_seeds(folder: str) -> dict:
    from dpstudio import cli
    from dpstudio.engine import query as qd
    from dpstudio.engine.io import file_sha256

    data = os.path.join(folder, "data.csv")
    FRAME[["x", "n", "g"]].to_csv(data, index=False)
    recipe = {
        "schema_version": 3,
        "software_version": "0.1.0",
        "input": {"path": data, "read_options": {"sep": ","}},
        "roles": {"x": "k-quasi"},
        "types": {"x": "numeric"},
        "domains": {"x": [0.0, 100.0]},
        "precision": {"x": 1.0},
        "hierarchies": {},
        "method": "mdav",
        "params": {"k": 3},
        "seed": "0x1f",
        "seed_pinned": True,
        "seed_releases": [],
        "sweep": {"ks": "2:5", "epsilons": "1", "repeats": 2},
    }
    led = qd.BudgetLedger(5.0, dataset="data.csv", digest=file_sha256(data))
    led.spend(0.5, query="count", kind="statistical", prior="uniform", response=3, requester="fuzz")
    rel = os.path.join(folder, "rel.csv")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        rc = cli.main(
            [
                "protect",
                data,
                rel,
                "--method",
                "mdav",
                "--k",
                "3",
                "--role",
                "x=k-quasi",
                "--no-measures",
                "--no-audit-trail",
                "--seed",
                "7",
            ]
        )
    assert rc == 0, "the seed release could not be made"
    with open(os.path.join(folder, "rel.metadata.json"), encoding="utf-8") as fh:
        meta = fh.read()
    return {"data": data, "recipe": json.dumps(recipe), "ledger": led.to_json(), "release": rel, "meta": meta}


def _special_path(folder: str, rng: np.random.Generator) -> str | None:
    """A FIFO, a folder or a device instead of a file (1 case in 12), else None."""
    if rng.random() >= 1 / 12:
        return None
    r = int(rng.integers(0, 3))
    if r == 0 and hasattr(os, "mkfifo"):
        p = os.path.join(folder, f"fifo{int(rng.integers(0, 1 << 30))}.json")
        os.mkfifo(p)
        return p
    if r == 1:
        p = os.path.join(folder, f"dir{int(rng.integers(0, 1 << 30))}.json")
        os.mkdir(p)
        return p
    return "/dev/zero" if os.path.exists("/dev/zero") else None


def _cli_one_line(argv: list[str]) -> None:
    """Run the CLI in-process: exit 0, or exit 2 with one 'dpstudio: error:' line."""
    from dpstudio import cli

    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        rc = cli.main(argv)
    msg = err.getvalue().strip()
    errors = [ln for ln in msg.splitlines() if not ln.startswith("dpstudio: warning:")]
    if rc == 0:
        return
    if rc == 2 and len(errors) == 1 and errors[0].startswith("dpstudio: error:") and "Traceback" not in msg:
        raise _CleanExit(errors[0])
    raise RuntimeError(f"rc={rc}: {msg[:300]}")


class _CleanExit(Exception):
    """The CLI refused with one line (exit 2)."""


META_KEYS = ("output_sha256", "records_released")


def _meta_facts(text: bytes) -> tuple | None:
    """The fields a verification must check, or None when the text is not a metadata dict."""
    try:
        m = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(m, dict):
        return None
    files = m.get("files") if isinstance(m.get("files"), dict) else {}
    out = files.get("output") if isinstance(files.get("output"), dict) else {}
    return (
        repr(m.get("output_sha256")),
        repr(m.get("records_released")),
        repr(out.get("name")),
        repr(out.get("sha256")),
        repr(files.get("tables") or {}) if files.get("tables") in (None, {}) else repr(files.get("tables")),
    )


def run_case(i: int, kind: str, seeds: dict, folder: str, rng: np.random.Generator, fig: Figures) -> None:
    from dpstudio.engine import query as qd
    from dpstudio.engine.export import verify_release
    from dpstudio.engine.recipe import load_recipe

    t0 = time.perf_counter()
    detail = ""
    try:
        with _time_limit(SLOW_SECONDS):
            if kind == "query":
                text, numeric_only = gen_query(rng)
                detail = text[:120]
                run_query(text, numeric_only, rng, fig)
            else:
                special = _special_path(folder, rng)
                if special is not None:
                    fig.special_paths += 1
                    path = special
                else:
                    seed_text = {
                        "recipe": seeds["recipe"],
                        "ledger": seeds["ledger"],
                        "metadata": seeds["meta"],
                    }[kind]
                    payload = mutate_json(seed_text, rng)
                    detail = payload[:120].decode("utf-8", "replace")
                    name = "rel.metadata.json" if kind == "metadata" else f"case{i}.json"
                    path = os.path.join(folder, name)
                    with open(path, "wb") as fh:
                        fh.write(payload)
                if kind == "recipe":
                    if rng.random() < 0.15:
                        out = os.path.join(folder, f"out{i}.csv")
                        _cli_one_line(
                            [
                                "protect",
                                seeds["data"],
                                out,
                                "--recipe",
                                path,
                                "--no-measures",
                                "--no-audit-trail",
                            ]
                        )
                    else:
                        load_recipe(path)
                elif kind == "ledger":
                    led = qd.load_ledger(path)
                    if led is not None:
                        _ = (led.remaining, led.spent, led.audit_csv(), led.to_json())
                        led.check(0.1)
                        led.spend(0.1, query="count", kind="statistical", prior="uniform", response=1)
                else:  # metadata
                    ok, line = verify_release(seeds["release"] if special is None else path)
                    if "\n" in line:
                        raise RuntimeError(f"verify gave several lines: {line[:200]}")
                    if ok and special is None:
                        with open(path, "rb") as fh:
                            facts = _meta_facts(fh.read())
                        if facts != _meta_facts(seeds["meta"].encode()):
                            raise _Wrong(f"verify said OK for an edited metadata: {detail!r}")
        fig.ok += 1
    except _Wrong as exc:
        fig.wrong += 1
        fig.failures.append((i, kind, str(exc)[:300]))
    except _Timeout:
        fig.slow += 1
        fig.failures.append((i, kind, f"over {SLOW_SECONDS:g} s: {detail!r}"))
    except _CleanExit:
        fig.clean += 1
    except Exception as exc:  # noqa: BLE001 - the point is to catch everything
        if _one_line(exc):
            fig.clean += 1
        else:
            fig.uncaught += 1
            tb = "".join(traceback.format_exception_only(exc)).strip()[:300]
            fig.failures.append((i, kind, f"{tb} <- {detail!r}"))
    finally:
        if kind == "metadata":  # the seed metadata back for the next case
            p = os.path.join(folder, "rel.metadata.json")
            if os.path.isdir(p):
                os.rmdir(p)
            with open(p, "w", encoding="utf-8") as fh:
                fh.write(seeds["meta"])
    dt = time.perf_counter() - t0
    fig.max_case_seconds = max(fig.max_case_seconds, dt)
    for name in os.listdir(folder):
        if name.startswith(("case", "fifo", "dir", "out")):
            p = os.path.join(folder, name)
            with contextlib.suppress(OSError):
                os.rmdir(p) if os.path.isdir(p) else os.unlink(p)


def check_edge_pairs(fig: Figures) -> None:
    """Every pair of comparisons on the columns holding ±inf and 2^53 + 1 with the edge
    literals: when the pair is declared disjoint, no record of the frame may match both
    (exhaustive: the random cases hit such pairs too rarely)."""
    from dpstudio.engine import query as qd

    for col in ("f", "id"):
        atoms = [f"{col} {op} {lit}" for op in OPS for lit in EDGE_LITERALS]
        atoms += [f"{col} in ({a}, {b})" for a in EDGE_LITERALS[:3] for b in EDGE_LITERALS[3:5]]
        masks = {a: qd.evaluate_filter(FRAME, qd.parse_filter(a)) for a in atoms}
        for i, a in enumerate(atoms):
            for b in atoms[i + 1 :]:
                comps = qd.parse_any(f"count where {a}; count where {b}").components
                if qd.disjoint_components(comps):
                    fig.disjoint_checks += 1
                    if (masks[a] & masks[b]).any():
                        fig.wrong += 1
                        fig.failures.append(
                            (-1, "query", f"'{a}' and '{b}' declared disjoint, a record matches both")
                        )


def run(cases: int, seed: int = 21, shares: dict | None = None, progress=None) -> Figures:
    """Run ``cases`` cases; ``shares`` {kind: weight} (default: half queries, the rest equal)."""
    import warnings

    shares = shares or {"recipe": 0.2, "query": 0.5, "ledger": 0.15, "metadata": 0.15}
    kinds = list(shares)
    p = np.array([shares[k] for k in kinds], dtype=float)
    p /= p.sum()
    rng = np.random.default_rng(seed)
    fig = Figures()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dpstudio-sfuzz-") as folder, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        seeds = _write_seeds(folder)
        if shares.get("query"):
            check_edge_pairs(fig)
        for i in range(cases):
            kind = kinds[int(rng.choice(len(kinds), p=p))]
            fig.cases += 1
            fig.per_kind[kind] += 1
            run_case(i, kind, seeds, folder, rng, fig)
            if progress and (i + 1) % 500 == 0:
                progress(fig)
    fig.seconds = time.perf_counter() - t0
    return fig


__all__ = ["Figures", "run", "run_case", "mutate_json", "gen_query", "reference_mask"]
