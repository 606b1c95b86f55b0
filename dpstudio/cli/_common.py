"""Parsing helpers shared by the commands: ``COLUMN=VALUE`` options, parameter values, sweep
grids, comma lists, the seed, reading the input with the read options.

Every error is a :class:`~dpstudio.engine.errors.ParameterError` (one line, exit code 2).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from dpstudio.engine.assessment import Assessment
    from dpstudio.engine.io import TableMeta
    from dpstudio.engine.registry import MethodSpec
    from dpstudio.engine.types import ProtectionResult

#: Most values one sweep grid option (--k, --epsilon) may expand to.
MAX_GRID_POINTS = 10_000


def split_assign(text: str, what: str, example: str, *, last: bool = False) -> tuple[str, str]:
    """``KEY=VALUE`` split at the first (``last``: the last) ``=``, both stripped."""
    key, sep, value = text.rpartition("=") if last else text.partition("=")
    if not sep or not key.strip():
        from dpstudio.engine.errors import ParameterError

        raise ParameterError(f"{what} must look like {example}. Got {text!r}.")
    return key.strip(), value.strip()


def parse_roles(items: Sequence[str] | None) -> dict[str, str]:
    """``--role COL=ROLE`` (repeatable; a later one of the same column wins)."""
    out = {}
    for it in items or []:
        col, role = split_assign(it, "--role", "COLUMN=ROLE (e.g. FICA=eps-quasi)", last=True)
        out[col] = role
    return out


def parse_domains(items: Sequence[str] | None) -> dict[str, tuple[float, float]]:
    """``--domain COL=LOWER:UPPER`` (repeatable)."""
    from dpstudio.engine.errors import ParameterError

    out = {}
    for it in items or []:
        col, rng = split_assign(it, "--domain", "COLUMN=LOWER:UPPER (e.g. FICA=0:7500)", last=True)
        parts = rng.split(":")
        try:
            if len(parts) != 2:
                raise ValueError
            lb, ub = float(parts[0]), float(parts[1])
        except ValueError:
            raise ParameterError(
                f"--domain {it!r}: write the range as LOWER:UPPER with two numbers, e.g. {col}=0:150000."
            ) from None
        out[col] = (lb, ub)
    return out


def parse_precision(items: Sequence[str] | None) -> dict[str, float]:
    """``--precision COL=GAMMA`` (repeatable): the output grid of a noisy numeric attribute."""
    from dpstudio.engine.errors import ParameterError

    out = {}
    for it in items or []:
        col, val = split_assign(it, "--precision", "COLUMN=GAMMA (e.g. FICA=1 or INCOME=0.01)", last=True)
        try:
            out[col] = float(val)
        except ValueError:
            raise ParameterError(
                f"--precision {it!r}: the precision must be a number > 0, e.g. {col}=0.01."
            ) from None
    return out


def parse_types(items: Sequence[str] | None) -> dict[str, str]:
    """``--type COL=TYPE`` (repeatable): numeric, integer, categorical, ordinal or date (the
    engine checks the type and the column).
    """
    out = {}
    for it in items or []:
        col, typ = split_assign(it, "--type", "COLUMN=TYPE (e.g. SEX=categorical)", last=True)
        out[col] = typ
    return out


def parse_hierarchies(items: Sequence[str] | None) -> dict[str, str]:
    """``--hierarchy COL=FILE`` (repeatable); the file must exist."""
    out = {}
    for it in items or []:
        col, path = split_assign(it, "--hierarchy", "COLUMN=FILE (an ARX hierarchy CSV)")
        check_hierarchy_exists(col, path)
        out[col] = path
    return out


def check_hierarchy_exists(column: str, path: str) -> None:
    """One line when the hierarchy file of ``column`` does not exist."""
    if not os.path.exists(path):
        from dpstudio.engine.errors import ParameterError

        raise ParameterError(f"Hierarchy file for column {column!r} not found: {path}")


def parse_list(text: str | None) -> list[str] | None:
    """A comma-separated option (``--attributes a,b``): its stripped items, None when empty."""
    return [a.strip() for a in (text or "").split(",") if a.strip()] or None


def _parse_mapping(text: str) -> dict[str, Any]:
    text = text.strip()
    if text.startswith("{"):
        try:
            v = json.loads(text)
        except json.JSONDecodeError:
            v = None
        if isinstance(v, dict):
            return v
    out: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, val = part.rpartition(":")
        if not sep:
            raise ValueError(part)
        try:
            out[key.strip()] = float(val)
        except ValueError:
            out[key.strip()] = val.strip()
    return out


def parse_param_value(spec: MethodSpec, name: str, raw: str) -> Any:
    """Turn the text of ``--param name=raw`` into a value of the right kind for ``spec``."""
    from dpstudio.engine.errors import ParameterError

    try:
        p = spec.param(name)
    except KeyError:
        return raw  # check_params names the unknown parameter and lists the known ones
    if raw.strip().lower() in ("none", "null") and p.kind != "str":
        return None  # an empty value is NOT "not given": Param.check refuses it, naming it
    if p.kind == "choice":
        for c in p.choices or ():
            if raw == c or str(c) == raw:
                return c
        return raw
    if p.kind == "per-column":
        # --param top=INCOME=p99 (one column), or a JSON object of them
        text = raw.strip()
        if text.startswith("{"):
            import json

            try:
                return json.loads(text)
            except ValueError:
                pass
        col, sep, value = text.partition("=")
        if not sep or not col.strip():
            raise ParameterError(
                f"--param {name}: write COLUMN=TEXT (e.g. --param {name}=AGE=...) or a JSON "
                f"object; better, use the option --{p.option or name} COLUMN=TEXT. Got {raw!r}."
            )
        return {col.strip(): value.strip()}
    if p.kind == "mapping":
        if not raw.strip():
            return raw  # refused by Param.check (not a dict)
        try:
            return _parse_mapping(raw)
        except ValueError:
            raise ParameterError(
                f"--param {name}: write a mapping as COL:VALUE,COL:VALUE (or JSON). Got {raw!r}."
            ) from None
    return raw  # int / float / bool / str: Param.check coerces and validates text


def parse_ints(text: str, what: str = "--k") -> list[int]:
    """``2:100`` (inclusive), ``2:100:5``, ``2,5,10``, ``2-10`` or a mix: the engine's grid
    grammar (:func:`dpstudio.engine.sweeps.parse_grid`, shared with the app).
    """
    return _grid(text, True, what)


def parse_floats(text: str, what: str = "--epsilon") -> list[float]:
    """A grid of numbers (``0.01,0.1,1,10``), as :func:`parse_ints`."""
    return _grid(text, False, what)


def _grid(text: str, integer: bool, what: str) -> list[Any]:
    from dpstudio.engine.errors import ParameterError
    from dpstudio.engine.sweeps import parse_grid

    for part in str(text).replace(";", ",").replace(" ", ",").split(","):
        bits = part.split(":")
        try:  # a range a:b[:step] with more points than any sweep can run: refuse before building
            a, b = float(bits[0]), float(bits[1])
            step = float(bits[2]) if len(bits) == 3 else 1.0
            too_many = len(bits) in (2, 3) and step > 0 and (b - a) / step > MAX_GRID_POINTS
        except (ValueError, IndexError, ZeroDivisionError, OverflowError):
            too_many = False  # parse_grid explains malformed items
        if too_many:
            raise ParameterError(
                f"{what} {part!r}: more than {MAX_GRID_POINTS:,} grid values; "
                "give a shorter range or a larger step."
            )
    out = parse_grid(text, integer=integer, what=what)
    if not out:
        raise ParameterError(f"{what} is empty.")
    return out


#: The read options of a text or Excel input (--sep, --encoding, --decimal, --sheet).
READ_OPTIONS = ("sep", "encoding", "decimal", "sheet")


def read_options(args: argparse.Namespace) -> dict[str, Any]:
    """The read options given on the command line (None where not given)."""
    return {k: getattr(args, k, None) for k in READ_OPTIONS}


def read_input(path: str, options: Mapping[str, Any] | None = None) -> tuple[pd.DataFrame, TableMeta]:
    """Read a data file with the read ``options`` (``--sep`` written as backslash-t
    means a tab).
    """
    from dpstudio.engine.io import read_table
    from dpstudio.engine.memory import return_freed_memory

    return_freed_memory()  # (large tables: freed arrays go back to the system, issue 27)
    kw = {k: (options or {}).get(k) for k in READ_OPTIONS} if options is not None else {}
    if kw.get("sep") == "\\t":
        kw["sep"] = "\t"
    return read_table(path, **kw)


def apply_declared_types(
    types: dict[str, str], roles: Mapping[str, str], meta: Any, name: str
) -> dict[str, str]:
    """The command's column types with the input file's declared ones (SPSS measure level
    and format, Stata storage type: :attr:`~dpstudio.engine.io.TableMeta.declared_types`) as
    defaults for the columns that have a role; ``--type`` and the recipe win.  The types
    taken from the file are said on one line (stderr), so the user sees where they came from.
    """
    import sys

    declared = dict(getattr(meta, "declared_types", None) or {})
    used = {
        c: t
        for c, t in declared.items()
        if c not in types and roles.get(c) not in (None, "other", "identifier")
    }
    if not used:
        return types
    print(
        f"dpstudio: column types declared in {name}: "
        + ", ".join(f"{c}={t}" for c, t in used.items())
        + " (give --type COL=TYPE to change one)",
        file=sys.stderr,
    )
    return {**used, **types}


def seed_arg(text: str) -> int:
    """``--seed``: a whole number of any width, decimal or 0x-hex (argparse type)."""
    from dpstudio.engine.errors import DPStudioError
    from dpstudio.engine.random import parse_seed

    try:
        return parse_seed(text, "--seed")
    except DPStudioError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--seed: ")) from None


SEED_HELP = (
    "secret random seed, decimal or 0x-hex, any width (default: 128 bits of fresh OS "
    "entropy); only to reproduce a run. Never written to any file; keep it secret"
)


def assess_result(
    res: ProtectionResult,
    *,
    level: str = "summary",
    weighted: Mapping[str, Sequence[str]] | bool = False,
) -> Assessment | None:
    """The measures of a fresh result through the one assess path
    (:func:`dpstudio.engine.assess`, the app's and the sweeps' too); its notices (record
    linkage left out of a large summary, notes of the weighted estimates) printed on stderr.
    None (with a warning) when the measures do not apply.
    """
    from dpstudio import engine
    from dpstudio.cli._output import note, warn
    from dpstudio.engine.errors import DPStudioError

    try:
        a = engine.assess(res, level=level, weighted=weighted)
    except (DPStudioError, KeyError, ValueError, TypeError) as exc:
        warn(f"utility/risk measures not computed for this release: {exc}")
        return None
    for n in a.notices:
        (warn if getattr(n, "code", "") == "rl-not-computed" else note)(n)
    return a
