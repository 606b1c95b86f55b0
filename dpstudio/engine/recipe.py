"""The recipe: everything that defines a release, as versioned JSON (style.md §10).

A recipe names the input file (and how it was read), the columns' roles, types, declared
domains, output precisions and hierarchies, the method and its parameters, the seed (and
whether the user pinned it) and the trade-off sweep settings.  The app's private project file
(``.dpsproj``) is a recipe; the command line may read one.

The seed is a secret (with it anyone regenerates and subtracts the noise): a recipe is a
*private* file, written owner-only (0600) by whoever saves it.  :meth:`Recipe.public_dict`
is the part that may go next to a release (no seed, no input path).

Keys this version does not know (e.g. ``query_ledger``, written by ``dpstudio query``) are
kept on a load/save round trip.

Schema history (:func:`migrate` upgrades step by step):

1. the seed as a JSON int (31 bits at most, often the old default 0);
2. the seed as hex text ``"0x…"`` (JSON readers that map numbers to doubles lose the low bits
   of a 128-bit int);
3. ``precision`` (column -> output grid γ) and ``seed_pinned``.  Earlier files reproduced
   their release with their seed, so a migrated seed counts as pinned; ``seed_releases``
   (digests of the releases exported with the pinned seed).

>>> r = Recipe(method="mdav", params={"k": 3}, roles={"x": "k-quasi"}, seed=5, seed_pinned=True)
>>> d = r.to_dict()
>>> d["schema_version"], d["seed"]
(3, '0x5')
>>> Recipe.from_dict({**d, "query_ledger": {"spent": 1.0}}).extra
{'query_ledger': {'spent': 1.0}}
>>> migrate({"schema_version": 1, "seed": 7})["seed"]
'0x7'
"""

from __future__ import annotations

import copy
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dpstudio.engine.errors import InputError
from dpstudio.engine.random import format_seed, parse_seed

SCHEMA_VERSION = 3

#: The keys a schema-3 recipe knows; every other top-level key is kept as it is.
KNOWN_KEYS = (
    "schema_version",
    "software_version",
    "input",
    "roles",
    "types",
    "domains",
    "precision",
    "hierarchies",
    "method",
    "params",
    "seed",
    "seed_pinned",
    "seed_releases",
    "sweep",
    "steps",
)


@dataclass
class Recipe:
    """A release's settings (see the module docstring); ``seed`` is ``None`` when not set."""

    input_path: str | None = None
    read_options: dict[str, Any] = field(default_factory=dict)
    roles: dict[str, str] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)
    domains: dict[str, tuple[float, float]] = field(default_factory=dict)
    precision: dict[str, float] = field(default_factory=dict)
    hierarchies: dict[str, dict[str, Any]] = field(default_factory=dict)
    method: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    seed: int | None = None
    seed_pinned: bool = False
    seed_releases: list[str] = field(default_factory=list)
    sweep: dict[str, Any] = field(default_factory=dict)
    steps: list[dict[str, Any]] = field(default_factory=list)
    """A release made of steps (issue 23 §2): ``[{"method": id, "params": {...}}, ...]`` in
    order, instead of ``method``/``params`` (the pipeline file's steps; checked by
    :func:`dpstudio.engine.chain.parse_steps` when run).  Written only when not empty."""
    software_version: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    """Top-level keys this version does not know, written back unchanged."""

    # --- Public API
    def pipeline(self) -> dict[str, Any]:
        """The pipeline file of a release made of steps: ``{"steps": [...]}`` (what
        ``dpstudio protect --pipeline`` reads; the method's parameters only, nothing about the
        data).
        """
        return {"steps": jsonable(self.steps)}

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready dict (schema :data:`SCHEMA_VERSION`; the seed as hex text)."""
        from dpstudio import __version__

        d: dict[str, Any] = copy.deepcopy(self.extra)
        d.update(
            {
                "schema_version": SCHEMA_VERSION,
                "software_version": self.software_version or __version__,
                "input": {"path": self.input_path, "read_options": jsonable(self.read_options)},
                "roles": {str(c): str(r) for c, r in self.roles.items() if r != "other"},
                "types": dict(self.types),
                "domains": {str(c): [float(a), float(b)] for c, (a, b) in self.domains.items()},
                "precision": {str(c): float(g) for c, g in self.precision.items()},
                "hierarchies": jsonable(self.hierarchies),
                "method": self.method,
                "params": jsonable(self.params),
                "seed": None if self.seed is None else format_seed(self.seed),
                "seed_pinned": bool(self.seed_pinned),
                "seed_releases": list(self.seed_releases),
                "sweep": jsonable(self.sweep),
            }
        )
        if self.steps:
            d["steps"] = jsonable(self.steps)
        return d

    def public_dict(self) -> dict[str, Any]:
        """What may be published with a release: method, parameters, roles, domains,
        precision (all public choices).  Never the seed, the input path or unknown keys.
        """
        d = self.to_dict()
        return {
            k: d[k]
            for k in (
                "schema_version",
                "software_version",
                "roles",
                "types",
                "domains",
                "precision",
                "method",
                "params",
                *(("steps",) if self.steps else ()),
            )
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Recipe:
        """A recipe from a dict of any schema up to :data:`SCHEMA_VERSION` (migrated first).
        Every known field's type is checked; raises
        :class:`~dpstudio.engine.errors.InputError` (one line) naming the bad field.
        """
        d = migrate(data)
        inp = d.get("input") or {}
        if not isinstance(inp, dict):
            raise InputError(
                "The recipe's 'input' must be an object with 'path' and 'read_options'. "
                f"Got {_show(inp)} instead."
            )
        seed = d.get("seed")
        return cls(
            input_path=_text_or_none(inp.get("path"), "input.path"),
            read_options=_read_options(inp.get("read_options")),
            roles={str(c): _text(r, f"role of column {c!r}") for c, r in _mapping(d, "roles").items()},
            types={str(c): _text(t, f"type of column {c!r}") for c, t in _mapping(d, "types").items()},
            domains={str(c): _bounds(c, b) for c, b in _mapping(d, "domains").items()},
            precision={str(c): _positive(c, g) for c, g in _mapping(d, "precision").items()},
            hierarchies={str(c): _hierarchy(c, h) for c, h in _mapping(d, "hierarchies").items()},
            method=_text_or_none(d.get("method"), "method"),
            params=dict(_mapping(d, "params")),
            seed=None if seed is None else _seed(seed),
            seed_pinned=_flag(d.get("seed_pinned", False), "seed_pinned") and seed is not None,
            seed_releases=_texts(d.get("seed_releases"), "seed_releases"),
            sweep=_sweep(_mapping(d, "sweep")),
            steps=_steps(d.get("steps")),
            software_version=_text_or_none(d.get("software_version"), "software_version"),
            extra={k: copy.deepcopy(v) for k, v in d.items() if k not in KNOWN_KEYS},
        )


def protect_command(
    recipe: Recipe,
    *,
    output: str = "release.csv",
    pipeline: str = "steps.json",
    app_types: Mapping[str, str] | None = None,
) -> tuple[list[str], list[str]]:
    """The ``dpstudio protect`` command line that makes ``recipe``'s release: its arguments
    and what it cannot carry (a hierarchy generated in the app, not a file).  A recipe with
    steps runs ``--pipeline PIPELINE`` (the file of :meth:`Recipe.pipeline`); the seed only
    when pinned (a recipe's seed is secret: the command line is as private as the recipe).
    ``app_types`` maps the app's column types to the command line's (its ``text`` is
    ``categorical``).  :func:`dpstudio.cli._settings.settings` reads the arguments back
    into the same settings (tests/engine/test_cli_pipeline.py).

    >>> r = Recipe(steps=[{"method": "mdav", "params": {"k": 3}}], roles={"x": "k-quasi"})
    >>> " ".join(protect_command(r)[0][-4:])
    '--pipeline steps.json --role x=k-quasi'
    """
    tmap = {"text": "categorical", **dict(app_types or {})}
    argv = ["dpstudio", "protect", recipe.input_path or "INPUT.csv", output]
    left_out: list[str] = []
    for k in ("sep", "decimal", "encoding", "sheet"):
        v = recipe.read_options.get(k)
        if v not in (None, ""):
            argv += [f"--{k}", str(v)]
    if recipe.steps:
        argv += ["--pipeline", pipeline]
    elif recipe.method:
        argv += ["--method", recipe.method]
        for name, v in recipe.params.items():
            if v is None or name == "precision":
                continue
            if isinstance(v, bool):
                if name == "drop_missing" and v:
                    argv.append("--drop-missing")
                elif name != "drop_missing":
                    argv += ["--param", f"{name}={'true' if v else 'false'}"]
                continue
            argv += ["--param", f"{name}={_option_value(v)}"]
    for c, r in recipe.roles.items():
        if r != "other":
            argv += ["--role", f"{c}={r}"]
    for c, t in recipe.types.items():
        argv += ["--type", f"{c}={tmap.get(t, t)}"]
    for c, (lo, hi) in recipe.domains.items():
        argv += ["--domain", f"{c}={float(lo)!r}:{float(hi)!r}"]
    for c, g in recipe.precision.items():
        argv += ["--precision", f"{c}={float(g)!r}"]
    for c, h in recipe.hierarchies.items():
        if isinstance(h, dict) and h.get("path"):
            argv += ["--hierarchy", f"{c}={h['path']}"]
        else:
            left_out.append(
                f"the hierarchy of {c!r} was built in the app: save it as a file and add --hierarchy {c}=FILE"
            )
    if recipe.seed_pinned and recipe.seed is not None:
        argv += ["--seed", format_seed(recipe.seed)]
    return argv, left_out


def _option_value(v: Any) -> str:
    import json

    if isinstance(v, (dict, list, tuple)):
        return json.dumps(jsonable(v), ensure_ascii=False)
    if isinstance(v, float):
        return repr(v)
    return str(v)


# --- migrations: one step per schema version --------------------------------------------------
def _v1_to_v2(d: dict[str, Any]) -> dict[str, Any]:
    """Schema 1 -> 2: the int seed becomes hex text (exact at any width)."""
    if d.get("seed") is not None:
        d["seed"] = format_seed(_seed(d["seed"]))
    return d


def _v2_to_v3(d: dict[str, Any]) -> dict[str, Any]:
    """Schema 2 -> 3: precision and seed_pinned; an old file's seed made its release, so it
    counts as pinned (it reproduces that release).
    """
    d.setdefault("precision", {})
    d.setdefault("seed_pinned", d.get("seed") is not None)
    d.setdefault("seed_releases", [])
    return d


_STEPS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _v1_to_v2, 2: _v2_to_v3}


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` (not changed) upgraded step by step to :data:`SCHEMA_VERSION`, with every
    known key present.  A file without ``schema_version`` is read as schema 1; a newer
    schema is refused with a message saying to update.
    """
    if not isinstance(data, dict):
        raise InputError(f"A recipe must be a JSON object. Got {type(data).__name__} instead.")
    d = copy.deepcopy(data)
    v = d.get("schema_version", 1)
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise InputError(
            f"The recipe's 'schema_version' must be a whole number from 1 to {SCHEMA_VERSION}. "
            f"Got {_show(v)} instead."
        )
    if v > SCHEMA_VERSION:
        raise InputError(
            f"This recipe was saved by a newer dpstudio (schema {_show(v)}); update dpstudio to open it."
        )
    while v < SCHEMA_VERSION:
        d = _STEPS[v](d)
        v += 1
    d["schema_version"] = SCHEMA_VERSION
    d.setdefault("input", {"path": None, "read_options": {}})
    for key, default in (
        ("roles", {}),
        ("types", {}),
        ("domains", {}),
        ("precision", {}),
        ("hierarchies", {}),
        ("params", {}),
        ("sweep", {}),
        ("method", None),
        ("seed", None),
        ("seed_pinned", False),
        ("seed_releases", []),
    ):
        if d.get(key) is None:
            d[key] = copy.deepcopy(default)
    if d["seed"] is not None:
        _seed(d["seed"])  # refuse a bad seed here, with the key named
    return d


def load_recipe(path: str | os.PathLike, *, what: str = "recipe") -> Recipe:
    """Read a recipe JSON or project file (``.dpsproj``) and migrate it.

    The file is read with :func:`dpstudio.engine.io.read_json_file`: a regular file only (a
    FIFO, a device such as /dev/zero, a folder are refused without being opened for long),
    at most :data:`~dpstudio.engine.io.MAX_SETTINGS_BYTES`, nested at most
    :data:`~dpstudio.engine.io.MAX_JSON_DEPTH` levels.

    Raises
    ------
    InputError
        One line naming ``what``, the file and the field at fault.

    Examples
    --------
    >>> import json, os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "r.json")
    >>> _ = open(p, "w").write(json.dumps({"schema_version": 3, "method": "mdav"}))
    >>> load_recipe(p).method
    'mdav'
    """
    from dpstudio.engine.io import read_json_file

    name = Path(os.fspath(path)).name
    data = read_json_file(path, what=what)
    try:
        return Recipe.from_dict(data)
    except InputError as exc:
        raise InputError(f"{what} {name}: {exc}") from None


# --- helpers ----------------------------------------------------------------------------------
#: Most repeats a recipe's sweep may ask for (the engine's limit, dpstudio.engine.sweeps).
def _max_repeats() -> int:
    from dpstudio.engine.sweeps import MAX_REPEATS

    return MAX_REPEATS


def _show(v: Any, limit: int = 60) -> str:
    """``repr(v)`` cut to ``limit`` characters (a 4,000-digit number or a long list)."""
    try:
        r = repr(v)
    except ValueError:  # an int beyond the int -> text conversion limit
        return f"a number of about {int(v.bit_length() * 0.30103):,} digits"
    return r if len(r) <= limit else r[: limit - 1] + "…"


def _text(v: Any, what: str) -> str:
    if not isinstance(v, str):
        raise InputError(f"The recipe's {what} must be text. Got {_show(v)} instead.")
    return v


def _text_or_none(v: Any, what: str) -> str | None:
    return None if v is None else _text(v, repr(what) if " " not in what else what)


def _flag(v: Any, what: str) -> bool:
    if not isinstance(v, bool):
        raise InputError(f"The recipe's {what!r} must be true or false. Got {_show(v)} instead.")
    return v


def _texts(v: Any, what: str) -> list[str]:
    if v is None:
        return []
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise InputError(f"The recipe's {what!r} must be a list of texts. Got {_show(v)} instead.")
    return list(v)


#: read options a recipe may carry, and the types of their values
_READ_OPTIONS: dict[str, tuple[type, ...]] = {
    "sep": (str,),
    "encoding": (str,),
    "decimal": (str,),
    "sheet": (str, int),
}


def _read_options(v: Any) -> dict[str, Any]:
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise InputError(
            'The recipe\'s \'input.read_options\' must be an object (e.g. {"sep": ";"}). '
            f"Got {_show(v)} instead."
        )
    out = {}
    for k, x in v.items():
        types = _READ_OPTIONS.get(k)
        if types is None:
            raise InputError(
                f"The recipe's read option {k!r} is unknown; the options are {', '.join(_READ_OPTIONS)}."
            )
        if x is not None and (isinstance(x, bool) or not isinstance(x, types)):
            raise InputError(f"The recipe's read option {k!r} must be text. Got {_show(x)} instead.")
        out[k] = x
    return out


def _hierarchy(column: str, h: Any) -> dict[str, Any]:
    if isinstance(h, str):
        return {"path": h}
    if not isinstance(h, dict):
        raise InputError(
            f"The recipe's hierarchy of column {column!r} must be a file path or an object "
            f"with 'path'. Got {_show(h)} instead."
        )
    if h.get("path") is not None and not isinstance(h.get("path"), str):
        raise InputError(
            f"The recipe's hierarchy path of column {column!r} must be text. Got {_show(h.get('path'))} instead."
        )
    return dict(h)


def _sweep(sw: dict[str, Any]) -> dict[str, Any]:
    """The sweep settings with their types checked: grids as text or lists of numbers,
    ``repeats`` a whole number from 1 to the engine's maximum.
    """
    for key in ("ks", "epsilons"):
        g = sw.get(key)
        ok = (
            g is None
            or isinstance(g, str)
            or (
                isinstance(g, list)
                and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in g)
            )
        )
        if not ok:
            raise InputError(
                f"The recipe's sweep {key!r} must be a grid text such as '2:100' or a list of numbers. "
                f"Got {_show(g)} instead."
            )
    r = sw.get("repeats")
    if r is not None:
        top = _max_repeats()
        if isinstance(r, bool) or not isinstance(r, int) or not 1 <= r <= top:
            raise InputError(
                f"The recipe's sweep 'repeats' must be a whole number from 1 to {top:,}. Got {_show(r)} instead."
            )
    return dict(sw)


def _steps(v: Any) -> list[dict[str, Any]]:
    """The steps of a chain: a list of objects ``{"method": text, "params": object}`` (the
    methods and their parameters are checked when the chain runs, by
    :func:`dpstudio.engine.chain.parse_steps`: a recipe stays readable by a version that
    lacks one of its methods).
    """
    if v is None:
        return []
    if not isinstance(v, list):
        raise InputError(
            'The recipe\'s \'steps\' must be a list of {"method": ..., "params": {...}}. '
            f"Got {_show(v)} instead."
        )
    out = []
    for i, st in enumerate(v, 1):
        if not isinstance(st, dict) or not isinstance(st.get("method"), str):
            raise InputError(
                f'Step {i} of the recipe\'s \'steps\' must be an object {{"method": text, "params": '
                f"{{...}}}}. Got {_show(st)} instead."
            )
        if st.get("params") is not None and not isinstance(st.get("params"), dict):
            raise InputError(
                f"Step {i} of the recipe's 'steps' ({st['method']}): 'params' must be an object. "
                f"Got {_show(st.get('params'))} instead."
            )
        out.append(copy.deepcopy(st))
    return out


def jsonable(v: Any) -> Any:
    """``v`` with numpy scalars turned into Python ones and tuples into lists."""
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        return v.item()
    return v


def _mapping(d: dict[str, Any], key: str) -> dict[str, Any]:
    v = d.get(key)
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise InputError(f"The recipe's {key!r} must be an object (column -> value). Got {_show(v)} instead.")
    return v


def _seed(v: Any) -> int:
    try:
        return parse_seed(v, "seed of the recipe")
    except (ValueError, TypeError) as exc:
        raise InputError(f"{exc} Correct the file or remove its seed.") from None


def _bounds(column: str, b: Any) -> tuple[float, float]:
    try:
        if not isinstance(b, (list, tuple)) or len(b) != 2 or any(isinstance(x, (bool, str)) for x in b):
            raise ValueError
        lo, hi = (float(b[0]), float(b[1]))
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise ValueError
    except (TypeError, ValueError, OverflowError):
        raise InputError(
            f"The recipe's domain of column {column!r} must be [lower, upper] "
            f"with two finite numbers. Got {_show(b)} instead."
        ) from None
    return lo, hi


def _positive(column: str, g: Any) -> float:
    try:
        v = float("nan") if isinstance(g, (bool, str)) else float(g)
    except (TypeError, ValueError, OverflowError):
        v = float("nan")
    if not (math.isfinite(v) and v > 0):
        raise InputError(
            f"The recipe's precision of column {column!r} must be a number > 0. Got {_show(g)} instead."
        )
    return v
