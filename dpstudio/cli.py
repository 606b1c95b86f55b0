r"""Command line: ``dpstudio methods | protect | evaluate | sweep | demo``.  Engine only, no Qt.

Every error caused by the input (a bad file, value, role, domain or parameter) is
printed as one line ``dpstudio: error: ...`` on stderr with exit code 2, never a
traceback.  The input file is never modified.

Examples::

    dpstudio methods
    dpstudio protect census.csv out.csv --method ir-dp --k 10 --epsilon 1 \
        --role FICA=eps-quasi --domain FICA=0:7500 --report out.html
    dpstudio evaluate census.csv out.csv --attributes FICA --json
    dpstudio sweep census.csv --method ir-dp --role FICA=eps-quasi --domain FICA=0:7500 \
        --k 2:20 --epsilon 0.1,1,10 --repeats 10 --out sweep.csv
    dpstudio protect census.csv out.csv --recipe study.dpsproj --epsilon 2 \
        --save-recipe out.recipe.json   # the app's settings; options override them
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import sys
import warnings
from pathlib import Path
from typing import Any

COMMANDS = ("methods", "protect", "evaluate", "sweep", "demo", "query", "risk", "verify")

#: Options that set a method parameter directly (option dest -> parameter name).
#: Above this many records ``protect`` leaves record linkage out of its summary.
RL_SUMMARY_MAX = 300_000

#: Most values one sweep grid option (--k, --epsilon) may expand to.
MAX_GRID_POINTS = 10_000

COMMON_PARAMS = (
    "k",
    "epsilon",
    "algorithm",
    "suppression",
    "confidence",
    "noise",
    "calibration",
    "budget",
    "layout",
    "order",
)


class _UsageError(Exception):
    """Bad command-line syntax (reported on one line, exit code 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # noqa: D401 - argparse API
        raise _UsageError(f"{message} (see '{self.prog} --help')")


# ----------------------------------------------------------------------- helpers


def _err(msg: str) -> None:
    print("dpstudio: error: " + " ".join(str(msg).split()), file=sys.stderr)


def _warn(msg: str) -> None:
    print("dpstudio: warning: " + " ".join(str(msg).split()), file=sys.stderr)


def _note(note) -> None:
    """A PRIVATE note about the data (stderr only, never a file): ``[code]`` names its kind."""
    from dpstudio.engine.validation import note_code

    print(f"dpstudio: private note [{note_code(note)}]: " + " ".join(str(note).split()), file=sys.stderr)


def _report_warnings(public, private, skip_codes=()) -> None:
    """Public warnings (also in the metadata) as warnings, then the private notes (facts about
    the original data: shown here, never written to a public file).
    """
    for w in public:
        _warn(w)
    for w in private:
        from dpstudio.engine.validation import note_code

        if note_code(w) not in skip_codes:
            _note(w)


def _step(msg: str) -> None:
    """A step of a long run (the Dask ranked methods), on a terminal's stderr."""
    print("dpstudio: " + msg, file=sys.stderr, flush=True)


def _split_assign(text: str, what: str, example: str, *, last: bool = False) -> tuple[str, str]:
    key, sep, value = text.rpartition("=") if last else text.partition("=")
    if not sep or not key.strip():
        from dpstudio.engine.errors import ParameterError

        raise ParameterError(f"{what} must look like {example}. Got {text!r}.")
    return key.strip(), value.strip()


def parse_roles(items: list[str] | None) -> dict[str, str]:
    out = {}
    for it in items or []:
        col, role = _split_assign(it, "--role", "COLUMN=ROLE (e.g. FICA=eps-quasi)", last=True)
        out[col] = role
    return out


def parse_domains(items: list[str] | None) -> dict[str, tuple[float, float]]:
    from dpstudio.engine.errors import ParameterError

    out = {}
    for it in items or []:
        col, rng = _split_assign(it, "--domain", "COLUMN=LOWER:UPPER (e.g. FICA=0:7500)", last=True)
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


def parse_precision(items: list[str] | None) -> dict[str, float]:
    """--precision COL=GAMMA (repeatable): the output grid of a noisy numeric attribute."""
    from dpstudio.engine.errors import ParameterError

    out = {}
    for it in items or []:
        col, val = _split_assign(it, "--precision", "COLUMN=GAMMA (e.g. FICA=1 or INCOME=0.01)", last=True)
        try:
            out[col] = float(val)
        except ValueError:
            raise ParameterError(
                f"--precision {it!r}: the precision must be a number > 0, e.g. {col}=0.01."
            ) from None
    return out


def parse_types(items: list[str] | None) -> dict[str, str]:
    """--type COL=TYPE (repeatable): numeric, integer, categorical, ordinal or date (the engine
    checks the type and the column).
    """
    out = {}
    for it in items or []:
        col, typ = _split_assign(it, "--type", "COLUMN=TYPE (e.g. SEX=categorical)", last=True)
        out[col] = typ
    return out


def parse_hierarchies(items: list[str] | None) -> dict[str, str]:
    from dpstudio.engine.errors import ParameterError

    out = {}
    for it in items or []:
        col, path = _split_assign(it, "--hierarchy", "COLUMN=FILE (an ARX hierarchy CSV)")
        if not os.path.exists(path):
            raise ParameterError(f"Hierarchy file for column {col!r} not found: {path}")
        out[col] = path
    return out


def _parse_mapping(text: str) -> dict:
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


def parse_param_value(spec, name: str, raw: str) -> Any:
    """Turn the text of ``--param name=raw`` into a value of the right kind for ``spec``."""
    from dpstudio.engine.errors import ParameterError

    try:
        p = spec.param(name)
    except KeyError:
        return raw  # check_params names the unknown parameter and lists the known ones
    if raw.strip().lower() in ("none", "null") and p.kind != "str":
        return None  # an empty value is NOT "not given": Param.check refuses it, naming it
    if p.kind == "choice":
        for c in p.choices:
            if raw == c or str(c) == raw:
                return c
        return raw
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


def collect_params(spec, args) -> dict[str, Any]:
    from dpstudio.engine.registry import legacy_params

    # --recipe's, overridden below (an old recipe's 'shuffle' read as 'order' first, so that
    # --order overrides it like any other option)
    params: dict[str, Any] = legacy_params(_recipe_params(args, spec), spec.id)
    for name in COMMON_PARAMS:
        v = getattr(args, name, None)
        if v is not None:
            params[name] = parse_param_value(spec, name, str(v))
    for it in getattr(args, "param", None) or []:
        name, raw = _split_assign(it, "--param", "NAME=VALUE (e.g. budget=per-attribute)")
        params[name] = parse_param_value(spec, name, raw)
    if getattr(args, "drop_missing", False):
        params["drop_missing"] = True
    return params


def parse_ints(text: str, what: str = "--k") -> list[int]:
    """``2:100`` (inclusive), ``2:100:5``, ``2,5,10``, ``2-10`` or a mix: the engine's grid
    grammar (:func:`dpstudio.engine.sweeps.parse_grid`, shared with the app).
    """
    return _grid(text, True, what)


def parse_floats(text: str, what: str = "--epsilon") -> list[float]:
    return _grid(text, False, what)


def _grid(text: str, integer: bool, what: str) -> list:
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


def _read(path: str, args=None):
    from dpstudio.engine.io import read_table

    kw = {}
    if args is not None:
        kw = {
            "sep": getattr(args, "sep", None),
            "encoding": getattr(args, "encoding", None),
            "decimal": getattr(args, "decimal", None),
            "sheet": getattr(args, "sheet", None),
        }
        if kw["sep"] == "\\t":
            kw["sep"] = "\t"
    return read_table(path, **kw)


def _seed_arg(text: str) -> int:
    """``--seed``: a whole number of any width, decimal or 0x-hex (argparse type)."""
    from dpstudio.engine.errors import DPStudioError
    from dpstudio.engine.random import parse_seed

    try:
        return parse_seed(text, "--seed")
    except DPStudioError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--seed: ")) from None


_SEED_HELP = (
    "secret random seed, decimal or 0x-hex, any width (default: 128 bits of fresh OS "
    "entropy); only to reproduce a run. Never written to any file; keep it secret"
)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "n/a"
        return f"{v:.6g}"
    if isinstance(v, dict):
        return ", ".join(f"{k}={_fmt(x)}" for k, x in v.items())
    return str(v)


def _jsonable(v: Any) -> Any:
    from dpstudio.engine.types import jsonable

    return jsonable(v)


def _evaluate_result(
    res, measures=("sse", "rl", "delta", "corr", "kanon"), hierarchies: dict | None = None
) -> dict | None:
    """Measures of a fresh result by the engine's measurement policy (the same as the app's);
    None (with a warning) when they do not apply.
    """
    from dpstudio import engine
    from dpstudio.engine.errors import DPStudioError

    try:
        return engine.evaluate(
            res.aligned_original(),
            res.data,
            res.protected_attributes,
            measures=measures,
            result=res,
            hierarchies=hierarchies or None,
        )
    except (DPStudioError, KeyError, ValueError, TypeError) as exc:
        _warn(f"utility/risk measures not computed for this release: {exc}")
        return None


def _write_plan(args, *inputs):
    """The command's plan for the one guarded writer: every file it reads (``inputs``, the
    --recipe file, the --hierarchy files) and, with --save-recipe, the recipe; the command adds
    its other targets and calls ``check()`` before any work (a refusal writes nothing).
    """
    from dpstudio.engine.safe_write import WritePlan

    hier = [p for it in getattr(args, "hierarchy", None) or [] for p in [it.partition("=")[2].strip()] if p]
    # settings files count as inputs when they are files (a folder or FIFO given as one is
    # refused by its reader, with its own message)
    settings = [p for p in (getattr(args, "recipe", None), *hier) if p and os.path.isfile(p)]
    plan = WritePlan(inputs=[*inputs, *settings])
    if getattr(args, "save_recipe", None):
        plan.file(args.save_recipe, what="recipe (--save-recipe)", private=True)
    return plan


# ----------------------------------------------------------------------- recipes (issue 9)

#: The app's column types -> the engine's (the app's "text" is a category).
_RECIPE_TYPES = {"numeric": "numeric", "text": "categorical"}


def _load_recipe(path: str):
    """``--recipe FILE``: a recipe JSON file or an app project file (.dpsproj), migrated."""
    from dpstudio.engine.recipe import load_recipe

    return load_recipe(path, what="--recipe")


def _apply_recipe(args, command: str) -> None:
    """Merge ``--recipe`` into ``args``: the recipe's values first, every option given on the
    command line over them (a later --role/--domain/... of the same column wins).  Only a seed
    the user pinned in the recipe is used (else fresh OS entropy, as in the app).
    """
    from dpstudio.engine.errors import ParameterError

    rec = _load_recipe(args.recipe) if getattr(args, "recipe", None) else None
    args.recipe_obj = rec
    if getattr(args, "save_recipe", None) and not (args.method or (rec and rec.method)):
        raise ParameterError("--save-recipe needs a method: give --method (or a --recipe that names one).")
    if rec is None:
        if command != "evaluate" and not args.method:
            raise ParameterError("--method is required (or give --recipe FILE).")
        return
    from dpstudio.engine.io import same_file

    inp = getattr(args, "input", None) or getattr(args, "original", None)
    if rec.input_path and inp and not same_file(rec.input_path, inp):
        _warn(f"the recipe was made for {rec.input_path}; applying it to {inp}.")
    if not args.method:
        args.method = rec.method
    if command != "evaluate" and not args.method:
        raise ParameterError(f"--recipe {Path(args.recipe).name} names no method: give --method.")
    given_roles = parse_roles(args.role)
    roles = {**rec.roles, **given_roles}
    active = {c for c, r in roles.items() if r not in ("other", "identifier")}
    args.role = [f"{c}={r}" for c, r in rec.roles.items()] + list(args.role or [])
    types = [f"{c}={_RECIPE_TYPES.get(t, t)}" for c, t in rec.types.items()]
    args.type = types + list(args.type or [])
    given_hier = parse_hierarchies(getattr(args, "hierarchy", None))
    hier = []
    for c, src in rec.hierarchies.items():
        if c not in active or c in given_hier:
            continue
        if not src.get("path"):
            raise ParameterError(
                f"--recipe {Path(args.recipe).name}: the hierarchy of column {c!r} was generated in "
                f"the app; give it as a file: --hierarchy {c}=FILE."
            )
        hier.append(f"{c}={src['path']}")
    args.hierarchy = hier + list(getattr(args, "hierarchy", None) or [])
    if command == "evaluate":
        return
    # what the app passes: domains and precisions of the protected columns only
    args.domain = [f"{c}={lo!r}:{hi!r}" for c, (lo, hi) in rec.domains.items() if c in active] + list(
        args.domain or []
    )
    args.precision = [f"{c}={g!r}" for c, g in rec.precision.items() if c in active] + list(
        args.precision or []
    )
    for key in ("sep", "encoding", "decimal", "sheet"):
        if getattr(args, key, None) is None and rec.read_options.get(key) is not None:
            setattr(args, key, rec.read_options[key])
    if args.seed is None and rec.seed_pinned and rec.seed is not None:
        args.seed = rec.seed
    if command == "sweep":
        if args.k is None and rec.sweep.get("ks"):
            args.k = str(rec.sweep["ks"])
        if args.epsilon is None and rec.sweep.get("epsilons"):
            args.epsilon = str(rec.sweep["epsilons"])
        if args.repeats is None and rec.sweep.get("repeats"):
            args.repeats = int(rec.sweep["repeats"])


def _recipe_params(args, spec) -> dict:
    """The recipe's parameters of ``spec`` (those of another method are not carried over)."""
    rec = getattr(args, "recipe_obj", None)
    if rec is None or rec.method != spec.id:
        return {}
    return dict(rec.params)


def _save_recipe(args, command: str, params: dict, plan) -> None:
    """``--save-recipe FILE``: the effective recipe, PRIVATE (0600); the seed only if pinned
    (given with --seed or pinned in the --recipe), never a fresh one.  Written through the
    command's ``plan`` (:func:`_write_plan`, checked before any work).
    """
    if not getattr(args, "save_recipe", None):
        return
    from dpstudio.engine.recipe import Recipe
    from dpstudio.engine.registry import get_method

    spec = get_method(args.method)
    typed = {}
    for name, v in params.items():  # as the engine reads them (the text of an option coerced)
        try:
            typed[name] = spec.param(name).check(v, spec.id)
        except KeyError:
            typed[name] = v
    old = getattr(args, "recipe_obj", None)
    inp = getattr(args, "input", None) or getattr(args, "original", None)
    types = {c: t for c, t in parse_types(getattr(args, "type", None)).items()}
    rec = Recipe(
        input_path=os.path.abspath(inp) if inp else None,
        read_options={
            k: getattr(args, k) for k in ("sep", "encoding", "decimal", "sheet") if getattr(args, k, None)
        },
        roles=parse_roles(args.role),
        types=types,
        domains=parse_domains(getattr(args, "domain", None)),
        precision=parse_precision(getattr(args, "precision", None)),
        hierarchies={c: {"path": os.path.abspath(p)} for c, p in parse_hierarchies(args.hierarchy).items()},
        method=args.method,
        params={k: v for k, v in typed.items() if k != "precision"},
        seed=getattr(args, "seed", None),
        seed_pinned=getattr(args, "seed", None) is not None,
        sweep=(
            {"ks": args.k or "", "epsilons": args.epsilon or "", "repeats": args.repeats}
            if command == "sweep"
            else dict(old.sweep if old else {})
        ),
        extra=dict(old.extra if old else {}),
    )
    text = json.dumps(rec.to_dict(), indent=2, ensure_ascii=False)
    plan.write_text(args.save_recipe, text)
    print(f"Recipe: {args.save_recipe} (private: keep internal)", file=sys.stderr)


# ----------------------------------------------------------------------- commands


def cmd_methods(args) -> int:
    from dpstudio.engine.api import methods as list_methods

    ms = list_methods()
    if args.json:
        print(json.dumps(_jsonable(ms), indent=2, ensure_ascii=False, default=str))
        return 0
    for m in ms:
        params = ", ".join(
            f"{p['name']}={p['default']}" + (f" [{'|'.join(map(str, p['choices']))}]" if p["choices"] else "")
            for p in m["params"]
        )
        print(f"{m['id']:<16} {m['name']}")
        print(
            f"{'':<16} protects: {', '.join(m['protects'])}"
            f"{'; needs declared domains' if m['needs_domain'] else ''}; params: {params}"
        )
    return 0


def _prepare_and_run(df, args, method: str):
    from dpstudio import engine
    from dpstudio.engine.random import as_rng
    from dpstudio.engine.registry import get_method

    spec = get_method(method)
    params = collect_params(spec, args)
    roles = parse_roles(args.role)
    domains = parse_domains(args.domain)
    hier = parse_hierarchies(args.hierarchy)
    prep = engine.prepare(
        df,
        method,
        roles,
        domains,
        hier or None,
        precision=parse_precision(getattr(args, "precision", None)) or None,
        types=parse_types(getattr(args, "type", None)) or None,
        keep_household=bool(getattr(args, "keep_household", False)),
        **params,
    )
    if prep.dropped_rows:
        _warn(
            f"{len(prep.dropped_rows)} record(s) with missing values in protected attributes "
            "were dropped (--drop-missing) and are not in the release."
        )
    res = engine.run_prepared(prep, rng=as_rng(args.seed))
    return spec, res


#: Smallest --memory-limit of a local Dask worker.  Measured (issue 21): a worker holds about
#: 130 MB once dpstudio's modules are imported and about 200 MB protecting even a 3,000-record
#: input; Dask pauses a worker at 80 % of its limit, so at 256 MB it paused for good (the run
#: hung) and at 1 kB it was restarted forever; 320 MB was the least that finished.  512 MB
#: leaves room for the partitions themselves.
MIN_WORKER_MEMORY = 512 * 2**20
#: Most local Dask workers (--workers).
MAX_WORKERS = 1024
#: Seconds to wait for the --scheduler before giving up with one line.
SCHEDULER_TIMEOUT = 10


def _workers_arg(text: str) -> int:
    """``--workers``: a whole number from 1 to :data:`MAX_WORKERS` (argparse type)."""
    try:
        n = int(str(text).strip())
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_WORKERS:
        raise argparse.ArgumentTypeError(
            f"the number of local workers must be a whole number from 1 to {MAX_WORKERS:,}; got {text!r}"
        )
    return n


def _memory_limit_arg(text: str):
    """``--memory-limit``: 'auto' or a size dask reads (2GB, 512MiB) of at least
    :data:`MIN_WORKER_MEMORY` (argparse type).
    """
    t = str(text).strip()
    if t.lower() == "auto":
        return "auto"
    try:
        from dask.utils import parse_bytes
    except ImportError:  # the --engine dask check says what to install
        return t
    try:
        n = parse_bytes(t)
    except (ValueError, TypeError, OverflowError):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a memory size; write e.g. 2GB, 512MB or auto"
        ) from None
    if n < MIN_WORKER_MEMORY:
        raise argparse.ArgumentTypeError(
            f"{text} is less than the {MIN_WORKER_MEMORY // 2**20} MB a Dask worker needs (it "
            "holds about 200 MB before any data; below that it is paused or restarted forever)"
        )
    return int(n)


_SCHEDULER = re.compile(r"^(?:(?:tcp|tls|ucx|ws|wss)://)?(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(\d{1,5})/?$")


def _scheduler_arg(text: str) -> str:
    """``--scheduler``: the address of a running Dask scheduler, tcp://HOST:PORT (argparse type)."""
    t = str(text).strip()
    m = _SCHEDULER.match(t)
    if not m or not 1 <= int(m.group(1)) <= 65535:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a scheduler address; write tcp://HOST:PORT (e.g. tcp://10.0.0.5:8786)"
        )
    return t


@contextlib.contextmanager
def _dask_client(args):
    """A Dask client: on ``--scheduler`` if given, else on a LocalCluster started and stopped
    here (its workers' logs silenced: a worker's traceback is never printed; the error
    itself reaches this process and is reported in one line).
    """
    import logging

    from dpstudio.engine.backends import dask_backend as DB
    from dpstudio.engine.errors import InputError

    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise DB.NotOnDask(
            "--engine dask needs the optional extra: pip install 'dpstudio[scale]' (or use --engine memory)."
        ) from None
    cluster = None
    if args.scheduler:
        try:
            client = Client(args.scheduler, timeout=SCHEDULER_TIMEOUT)
        except (OSError, TimeoutError) as exc:
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InputError(
                f"--scheduler {args.scheduler}: cannot connect within {SCHEDULER_TIMEOUT} s ({msg}); "
                "check the address, or leave --scheduler out to start a local cluster."
            ) from None
    else:
        cluster = LocalCluster(
            n_workers=args.workers or 2,
            threads_per_worker=1,
            memory_limit=args.memory_limit or "auto",
            dashboard_address=None,
            silence_logs=logging.CRITICAL,
        )
        client = Client(cluster)
    try:
        yield client
    except Exception as exc:
        if type(exc).__name__ == "KilledWorker":  # distributed.KilledWorker (optional dependency)
            raise InputError(
                "the Dask workers died repeatedly on this task (most often: out of memory); "
                "give them more memory (--memory-limit), more workers, or smaller input parts."
            ) from None
        raise
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _protect_dask(args) -> int:
    """``protect --engine dask``: the Dask backend (issue 12); a LocalCluster started and stopped
    here unless --scheduler names one; Ctrl-C cancels the computation and removes the
    temporary folder.
    """
    from dpstudio.engine.backends import dask_backend as DB
    from dpstudio.engine.registry import get_method

    spec = get_method(args.method)
    if args.method not in DB.DASK_METHODS:
        raise DB.NotOnDask(f"Method {args.method!r} does not run on Dask; use --engine memory.")
    params = collect_params(spec, args)
    plan = _write_plan(args, args.input)
    DB.release_plan(args.output, plan=plan)  # every file, checked before any work
    DB.check_input(args.input)  # an unreadable input: one line before any cluster starts
    try:
        with _dask_client(args) as client:
            rel = DB.protect_dask(
                args.input,
                args.method,
                parse_roles(args.role),
                parse_domains(args.domain),
                seed=args.seed,
                precision=parse_precision(getattr(args, "precision", None)) or None,
                types=parse_types(getattr(args, "type", None)) or None,
                client=client,
                hierarchies=parse_hierarchies(getattr(args, "hierarchy", None)) or None,
                progress=_step if sys.stderr.isatty() else None,
                **params,
            )
            fmt = "csv" if (args.format or "").lower() == "csv" else "parquet"
            written = DB.write_release(
                rel, args.output, input_path=args.input, fmt=fmt, progress=sys.stderr.isatty(), plan=plan
            )
        _save_recipe(args, "protect", params, plan)
    except KeyboardInterrupt:
        _warn("cancelled: nothing was written.")
        return 130
    pub = set(rel.public_warnings)
    _report_warnings(rel.public_warnings, [w for w in rel.warnings if w not in pub])
    print(f"Guarantee: {rel.guarantee}")
    print(f"Release: {written['release']} ({rel.n:,} records, Dask)")
    print(f"Private audit trail: {written['private']} (do not publish)")
    return 0


#: Input files smaller than this always fit in memory: no psutil import for them (start-up, issue 13).
ALWAYS_FITS_BYTES = 2**24


def _too_big_for_memory(path: str) -> str | None:
    """A refusal when the input obviously does not fit in memory (issue 12): the file's size
    (Parquet expands about 3× when loaded, text about 2×) against the memory this process may
    still use: the least of the free physical memory, its RLIMIT_AS / RLIMIT_DATA and its
    control group's limit (:func:`dpstudio.engine.memory.available_memory`).
    """
    p = Path(path)
    if not (p.is_file() or p.is_dir()):
        return None  # a FIFO or a device: never opened here (the reader refuses it in one line)
    if p.is_file() and p.stat().st_size < ALWAYS_FITS_BYTES:
        return None  # under 16 MB always fits: no psutil import (start-up, issue 13)
    from dpstudio.engine.memory import available_memory

    avail, what = available_memory()
    size = sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.is_dir() else p.stat().st_size
    if str(path).lower().endswith((".parquet", ".pq")) or p.is_dir():
        need = 3 * size
    elif p.suffix.lower() in (".csv", ".tsv", ".txt", ".dat", ".tab"):
        need = 2 * size + _text_fields(p, size) * BYTES_PER_TEXT_FIELD
    else:
        need = 2 * size
    if need > avail:
        return (
            f"{p.name} ({_gb(size)} on disk) needs about {_gb(need)} in memory; "
            f"{_gb(avail)} are available ({what}). Use --engine dask (pip install 'dpstudio[scale]')."
        )
    return None


#: Peak memory per field of a text table while it is read (every field is first a Python
#: text): measured 101 bytes (a 27 MB CSV of 4.5 million short fields peaked 435 MB above
#: the interpreter's own 107 MB).
BYTES_PER_TEXT_FIELD = 100


def _text_fields(p: Path, size: int) -> int:
    """About how many fields a text table holds: separators and line breaks per byte of its
    first MB, times its size (an upper bound: a separator inside quotes counts too).
    """
    try:
        with open(p, "rb") as fh:
            head = fh.read(1 << 20)
    except OSError:
        return 0
    if not head:
        return 0
    marks = sum(head.count(c) for c in (b",", b";", b"\t", b"|", b"\n"))
    return int(marks / len(head) * size)


def _gb(n: float) -> str:
    return f"{n / 2**30:.1f} GB" if n >= 2**29 else f"{n / 2**20:.0f} MB"


#: The line for a MemoryError anywhere in a command.
OUT_OF_MEMORY = (
    "out of memory: the input is too big for memory (or for this process's memory limit). "
    "Use --engine dask (pip install 'dpstudio[scale]'), or run with more memory."
)


def cmd_protect(args) -> int:
    from dpstudio.engine.export import export_release

    _apply_recipe(args, "protect")
    if getattr(args, "engine", "memory") == "dask":
        return _protect_dask(args)
    refusal = _too_big_for_memory(args.input) if os.path.exists(args.input) else None
    if refusal:
        from dpstudio.engine.errors import InputError

        raise InputError(refusal)
    if args.assessment:
        from dpstudio.engine.errors import ParameterError
        from dpstudio.engine.export import marked_private

        if not marked_private(args.assessment):
            raise ParameterError(
                f"--assessment {Path(args.assessment).name}: the assessment is private, so its "
                "file name must say so (contain 'private' or 'internal'), e.g. "
                "out.assessment.private.html."
            )
    from dpstudio.engine.export import release_plan

    plan = _write_plan(args, args.input)
    release_plan(  # every file the command writes, checked before any work
        args.output,
        plan=plan,
        fmt=args.format,
        release_note=args.report or False,
        assessment=bool(args.assessment),
        assessment_path=args.assessment,
        audit=not args.no_audit_trail,
        what={"release_note": "release note (--report)", "assessment": "assessment (--assessment)"},
    )
    df, meta = _read(args.input, args)
    spec, res = _prepare_and_run(df, args, args.method)
    hier = parse_hierarchies(args.hierarchy)
    measures = None
    if not args.no_measures:
        # the summary prints SSE and RL (and, for suppressing methods, the suppression measures
        # the engine adds): only those are computed; the assessment report shows every measure
        # (the set the app shows), so with --assessment all are computed (issue 12: whole time)
        wanted = ("sse", "rl", "delta", "corr", "kanon") if args.assessment else ("sse", "rl")
        if len(res.data) > RL_SUMMARY_MAX:
            _warn(
                f"record linkage is not computed in the summary for more than "
                f"{RL_SUMMARY_MAX:,} records; run 'dpstudio evaluate' for it."
            )
            wanted = tuple(m for m in wanted if m != "rl")
        measures = _evaluate_result(res, wanted, hier)
    assessment = None
    if args.assessment:  # PRIVATE: measured against the original data
        from dpstudio.engine.report import render_assessment  # only when asked (start-up, issue 13)

        assessment = render_assessment(res, measures, input_name=Path(args.input).name)
    written = export_release(
        res,
        args.output,
        input_path=args.input,
        input_meta=meta,
        fmt=args.format,
        release_note=args.report or False,
        assessment_html=assessment,
        assessment_path=args.assessment,
        audit=not args.no_audit_trail,
        plan=plan,
    )
    _save_recipe(args, "protect", collect_params(spec, args), plan)
    _report_warnings(res.public_warnings, res.private_notes, skip_codes=("records-dropped",))
    print(f"Guarantee: {res.guarantee}")
    if (
        not res.is_dp
        and res.guarantee.startswith("Per-attribute only")
        and res.params.get("layout") == "records"
    ):
        _warn(
            "the records are not ε-DP (see the guarantee). Remedies: drop the other columns "
            "(e.g. --role COL=identifier) or protect them too, or release each protected "
            "attribute as its own shuffled table with --layout separate-tables."
        )
    shown = {k: v for k, v in res.params.items() if v is not None and k not in ("drop_missing",)}
    public = [Path(written[k]).name for k in written if k != "data" and k not in ("private", "assessment")]
    private = [Path(written[k]).name for k in ("private", "assessment") if k in written]
    summ = (
        f"{spec.id}: {len(res.data)} records"
        + (f" ({len(res.dropped_rows)} dropped)" if res.dropped_rows else "")
        + f", {', '.join(f'{k}={_fmt(v)}' for k, v in shown.items())}"
        + (
            f" -> {written['data']} (public: {', '.join(public)}"
            if "data" in written
            else " -> "
            + ", ".join(v for k, v in written.items() if k.startswith("table:"))
            + f" (one table per attribute; public: {', '.join(public)}"
        )
        + (f"; private, keep internal: {', '.join(private)}" if private else "")
        + ")"
    )
    if measures:
        summ += f"; SSE normalized {_fmt(measures.get('sse_normalized', float('nan')))}"
        if "rl" in measures:
            summ += f", RL {measures['rl']:.3g} %"
        if "suppressed_cells" in measures:
            summ += (
                f"; suppressed cells {measures['suppressed_cells']} "
                f"({100 * measures['suppressed_share']:.3g} %), expected "
                f"re-identifications {_fmt(measures.get('expected_reidentifications'))}"
            )
    print(summ)
    if measures:  # plain readings of the two headline measures (issue 11)
        from dpstudio.engine.measures.readings import reading

        ctx = {"n": len(res.data), "k": res.params.get("k")}
        for key, name in (("sse_normalized", "SSE normalized"), ("rl", "RL")):
            text = reading(key, measures.get(key), ctx)
            if text:
                print(f"  {name}: {text}")
    return 0


def _evaluate_dask(args) -> int:
    """``evaluate --engine dask`` (issue 12): the measures of evaluate_dask, records paired by
    position as in memory; record linkage on a uniform sample of --rl-sample records.
    """
    from dpstudio.engine.backends import dask_backend as DB
    from dpstudio.engine.backends.dask_measures import DASK_MEASURES, evaluate_dask

    measures = tuple(m.strip() for m in (args.measures or "").split(",") if m.strip()) or (
        "sse",
        "rl",
        "delta",
        "corr",
    )
    unsupported = [
        o
        for o, v in (
            ("--method", args.method),
            ("--hierarchy", args.hierarchy),
            ("--type", args.type),
            ("--class-attribute", args.class_attribute),
        )
        if v
    ]
    bad = [m for m in measures if m not in DASK_MEASURES or m == "kanon"]
    if bad or unsupported:
        raise DB.NotOnDask(
            f"{', '.join(bad + unsupported)}: not on Dask; use --engine memory "
            f"(Dask measures: sse, rl, delta, corr, reid)."
        )
    attrs = [a.strip() for a in (args.attributes or "").split(",") if a.strip()] or None
    conf = [a.strip() for a in (args.confidential or "").split(",") if a.strip()] or None
    keys = [a.strip() for a in (args.keys or "").split(",") if a.strip()] or None
    for inp in (args.original, args.protected):  # one line before any cluster starts
        DB.check_input(inp)
    try:
        with _dask_client(args):  # the default client for dask.compute
            out = evaluate_dask(
                args.original,
                args.protected,
                attrs,
                measures=measures,
                confidential=conf,
                rl_distance=args.rl_distance,
                rl_sample=args.rl_sample,
                rl_seed=args.rl_seed,
                keys=keys,
                weight=args.weight,
            )
    except KeyboardInterrupt:
        _warn("cancelled.")
        return 130
    if args.json:
        print(json.dumps(_jsonable(out), indent=2, ensure_ascii=False))
        return 0
    for w in out.get("warnings", []):
        _warn(w)
    for k, v in out.items():
        if k not in ("warnings", "rl_label"):
            print(f"{k}: {_fmt(v)}")
    if "rl_label" in out:
        print(out["rl_label"])
    return 0


def cmd_evaluate(args) -> int:
    from dpstudio import engine
    from dpstudio.engine.errors import ParameterError

    _apply_recipe(args, "evaluate")
    plan = _write_plan(args, args.original, args.protected).check()  # --save-recipe: before any work
    if getattr(args, "engine", "memory") == "dask":
        return _evaluate_dask(args)

    orig, _ = _read(args.original)
    prot, _ = _read(args.protected)
    attrs = [a.strip() for a in (args.attributes or "").split(",") if a.strip()] or None
    if args.attributes is not None and not attrs:
        raise ParameterError("--attributes: name at least one column (comma-separated).")
    measures = tuple(m.strip() for m in (args.measures or "").split(",") if m.strip()) or (
        "sse",
        "rl",
        "delta",
        "corr",
    )
    keys = [a.strip() for a in (args.keys or "").split(",") if a.strip()] or None
    binarise: Any = args.binarise
    if binarise not in (None, "median", "mean"):
        try:
            binarise = float(binarise)
        except ValueError:
            raise ParameterError(
                f"--binarise must be median, mean or a number (the threshold). Got {args.binarise!r}."
            ) from None
    conf = [a.strip() for a in (args.confidential or "").split(",") if a.strip()] or None
    if args.method:
        from dpstudio.engine.registry import get_method

        get_method(args.method)  # a clear error for an unknown id
    # the engine's measurement policy: the method (a generalising one measures its numeric
    # k-quasis 0/1), the roles and the hierarchies the release was made with
    out = engine.evaluate(
        orig,
        prot,
        attrs,
        confidential=conf,
        rl_distance=args.rl_distance,
        method=args.method or None,
        roles=parse_roles(args.role) or None,
        hierarchies=parse_hierarchies(args.hierarchy) or None,
        measures=measures,
        keys=keys,
        weight=args.weight,
        class_attribute=args.class_attribute,
        binarise=binarise or "median",
        classification_seed=args.classification_seed,
        types=parse_types(args.type) or None,
    )
    if args.method:
        from dpstudio.engine.registry import get_method

        _save_recipe(args, "evaluate", collect_params(get_method(args.method), args), plan)
    if args.json:
        print(json.dumps(_jsonable(out), indent=2, ensure_ascii=False))
        return 0
    for w in out.get("warnings", []):
        _warn(w)
    for k, v in out.items():
        if k != "warnings":
            print(f"{k}: {_fmt(v)}")
    return 0


def cmd_sweep(args) -> int:
    import pandas as pd

    from dpstudio import engine
    from dpstudio.engine.errors import ParameterError
    from dpstudio.engine.io import write_table
    from dpstudio.engine.registry import get_method

    _apply_recipe(args, "sweep")
    if args.repeats is None:
        args.repeats = 10
    plan = _write_plan(args, args.input)
    out = plan.file(args.out, what="sweep CSV (--out)", private=True)  # measured against the original
    plan.check()  # before any work
    spec = get_method(args.method)
    if spec.uses_k and args.k is None:
        raise ParameterError(f"Method {spec.id!r} uses k: give --k (e.g. --k 2:100 or --k 2,5,10).")
    if spec.uses_epsilon and args.epsilon is None:
        raise ParameterError(f"Method {spec.id!r} uses ε: give --epsilon (e.g. --epsilon 0.01,0.1,1,10).")
    ks = parse_ints(args.k) if (spec.uses_k and args.k is not None) else []
    eps = parse_floats(args.epsilon) if (spec.uses_epsilon and args.epsilon is not None) else []
    from dpstudio.engine.sweeps import check_repeats

    check_repeats(args.repeats, "--repeats")
    df, meta = _read(args.input, args)
    saved_k, saved_eps = args.k, args.epsilon
    args.k = args.epsilon = None  # the grid sets them
    params = collect_params(spec, args)
    for grid_param in ("k", "epsilon"):  # a --recipe's single values: the grid sets them
        params.pop(grid_param, None)
    args.k, args.epsilon = saved_k, saved_eps
    from dpstudio.engine.measures import default_measures

    measures = tuple(m.strip() for m in (args.measures or "").split(",") if m.strip()) or default_measures(
        spec.id
    )
    gen = engine.sweep(
        df,
        spec.id,
        parse_roles(args.role),
        parse_domains(args.domain),
        ks=ks,
        epsilons=eps,
        repeats=args.repeats,
        seed=args.seed,
        measures=measures,
        baselines=not args.no_baselines,
        hierarchies=parse_hierarchies(args.hierarchy) or None,
        precision=parse_precision(getattr(args, "precision", None)) or None,
        types=parse_types(args.type) or None,
        keep_household=bool(args.keep_household),
        **params,
    )
    rows = []
    for pt in gen:
        rows.append(pt.as_row())
        if pt.skipped:
            print(
                f"[{pt.index + 1}/{pt.total}] k={pt.k} epsilon={pt.epsilon}: skipped, the "
                f"method cannot run there: {pt.skipped}",
                file=sys.stderr,
                flush=True,
            )
            continue
        vals = ", ".join(
            f"{n}={m:.4g}"
            for n, (m, s) in pt.values.items()
            if n in ("sse_normalized", "sse_raw", "rl", "suppressed_cells", "expected_reidentifications")
        )
        eps_s = "none (baseline)" if pt.epsilon is None else f"{pt.epsilon:g}"
        print(
            f"[{pt.index + 1}/{pt.total}] k={pt.k} epsilon={eps_s} repeats={pt.repeats}: {vals} "
            f"({pt.elapsed:.1f} s)",
            file=sys.stderr,
            flush=True,
        )
        # rewrite after every point (atomically): an interrupted sweep keeps what it computed
        write_table(pd.DataFrame(rows), out, "csv", plan=plan)
    print(f"{len(rows)} point(s) written to {out}")
    _save_recipe(args, "sweep", params, plan)
    return 0


def demo_path() -> Path:
    import dpstudio

    return Path(dpstudio.__file__).resolve().parent.parent / "resources" / "census.csv"


def cmd_demo(args) -> int:
    from dpstudio import engine
    from dpstudio.engine.errors import InputError

    path = demo_path()
    if not path.exists():
        raise InputError(f"The bundled sample {path} is missing; reinstall dpstudio.")
    df, _ = _read(str(path))
    cols = ["FICA", "FEDTAX", "INTVAL", "POTHVAL"]
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise InputError(f"The bundled sample lacks column(s) {', '.join(missing)}.")
    # The papers' convention for the demo only: [0, 1.5 × max]. For a real release
    # declare domains from knowledge of the population, not from the file.
    domains = {c: (0.0, 1.5 * float(df[c].max())) for c in cols}
    k, eps = args.k, args.epsilon
    res = engine.protect(
        df, "ir-dp", {c: "eps-quasi" for c in cols}, domains, seed=args.seed, k=k, epsilon=eps
    )
    m = _evaluate_result(res, ("sse", "rl"))
    print(
        f"dpstudio demo: individual ranking + Laplace (ir-dp) on the bundled Census sample "
        f"({len(df)} records), attributes {', '.join(cols)}, k={k}, ε={eps:g}."
    )
    print(
        "(Demo only: domains are [0, 1.5 × max of the file], the papers' convention; "
        "declare real domains for a release.)"
    )
    print(f"Guarantee: {res.guarantee}")
    if m:
        print(f"SSE raw {m['sse_raw']:.4g}; SSE normalized {m['sse_normalized']:.4g}; RL {m['rl']:.3g} %")
    return 0


_RISK_KEY_ROLES = {"k-quasi", "eps-quasi", "key", "quasi", "quasi-identifier"}
_RISK_ROLES = _RISK_KEY_ROLES | {"confidential", "sensitive", "weight", "household", "identifier", "other"}


def cmd_verify(args) -> int:
    """Check a release and its tables against the digests its metadata names (0 OK, 1 MISMATCH)."""
    from dpstudio.engine.export import verify_release

    ok, line = verify_release(args.release)
    print(line)
    return 0 if ok else 1


def cmd_risk(args) -> int:
    """Re-identification risk of a file with categorical keys (sdcMicro's measures)."""
    from dpstudio.engine.errors import ParameterError
    from dpstudio.engine.measures.reid_models import ARX_DEFAULT_THRESHOLD
    from dpstudio.engine.measures.survey_risk import assess_risk

    plan = None
    if args.per_record:  # checked before any work
        from dpstudio.engine.safe_write import WritePlan

        plan = WritePlan(inputs=[args.input])
        plan.file(args.per_record, what="per-record risk file (--per-record)", private=True)
        plan.check()
    df, _ = _read(args.input, args)
    roles = parse_roles(args.role)
    for col, role in roles.items():
        if role not in _RISK_ROLES:
            raise ParameterError(
                f"--role {col}={role}: unknown role; use one of {', '.join(sorted(_RISK_ROLES))}"
            )
    from dpstudio.engine.roles import normalize_types

    normalize_types(df.columns, parse_types(args.type))  # names the column / type
    weight = args.weight or next((c for c, r in roles.items() if r == "weight"), None)
    household = args.household or next((c for c, r in roles.items() if r == "household"), None)
    keys = [c for c, r in roles.items() if r in _RISK_KEY_ROLES]
    sens = [c for c, r in roles.items() if r in ("confidential", "sensitive")]
    if not keys:
        raise ParameterError("name the key variables: --role COL=k-quasi (repeatable)")
    if args.threshold is not None and not 0.0 <= args.threshold <= 1.0:  # also refuses nan
        raise ParameterError(
            f"--threshold must be a risk in the range [0, 1]. Got {args.threshold!r} instead."
        )
    suda = args.suda or args.suda_dis_fraction is not None or args.suda_max_size is not None
    rep = assess_risk(
        df,
        keys,
        weight=weight,
        household=household,
        sensitive=sens,
        missing=args.missing,
        reid_threshold=ARX_DEFAULT_THRESHOLD if args.threshold is None else args.threshold,
        suda=suda,
        suda_dis_fraction=0.01 if args.suda_dis_fraction is None else args.suda_dis_fraction,
        suda_max_size=args.suda_max_size,
    )
    out = rep.to_dict()
    if args.threshold is not None:
        out["records_risk_above_threshold"] = {
            "threshold": args.threshold,
            "records": rep.records_above(args.threshold),
        }
    if args.per_record:  # private (0600): computed from the original records; the app's export too
        from dpstudio.engine.measures.survey_risk import write_per_record_risk

        write_per_record_risk(rep, args.per_record, protect=(args.input,), plan=plan)
    if args.json:
        print(json.dumps(_jsonable(out), indent=2, ensure_ascii=False))
        return 0
    for k, v in out.items():
        print(f"{k}: {_fmt(v)}")
    return 0


def cmd_query(args) -> int:
    """Answer one statistic by knowledge refinement (thesis ch. 5) and spend its ε in the ledger."""
    from dpstudio.engine import query as qd
    from dpstudio.engine.errors import ParameterError

    q = qd.parse_any(args.query)
    eps = []  # in the order typed: one per component in --mode split (not a sorted sweep grid)
    for part in str(args.epsilon).split(","):
        try:
            eps.append(float(part))
        except ValueError:
            raise ParameterError(
                f"--epsilon: {part.strip()!r} is not a number (e.g. 0.5, or 0.3,0.2)."
            ) from None
    multi = isinstance(q, qd.MultiQuery)
    if len(eps) != 1 and not (multi and args.mode == "split"):
        raise ParameterError(
            "--epsilon: give one ε for the query (one per component only with --mode split)."
        )
    if not multi and (args.mode or args.distance):
        raise ParameterError("--mode/--distance: only for a multicomponent query (e.g. 'mean(x), mean(y)').")
    _query_plan(args)  # the ledger and the audit export: checked before any work
    if multi:
        return _cmd_query_multi(args, q, eps)
    roles = parse_roles(args.role)
    if q.column and roles.get(q.column) == "identifier":
        raise ParameterError(
            f"Column {q.column!r} is an identifier: use it in the filter "
            f"(value(COL) where {q.column} == …), not as the answer."
        )
    df, _ = _read(args.input, args)
    ranges = dict(
        _split_assign(it, "--range", "COLUMN=LOWER:UPPER[:STEP] or COLUMN=a,b,c", last=True)
        for it in args.range or []
    )
    from dpstudio.engine.validation import check_domain_pair

    for col, text in ranges.items():  # numeric bounds: the domains' rule (finite width, ±10¹⁵)
        bits = text.split(":")
        try:
            pair = (float(bits[0]), float(bits[1])) if len(bits) in (2, 3) else None
        except ValueError:
            pair = None  # parse_range explains the syntax
        if pair is not None:
            check_domain_pair(col, pair)
    priors_txt = args.prior or ["uniform"]
    if len(priors_txt) != 1:
        raise ParameterError("--prior: give one prior (several only for a multicomponent query).")
    prior = qd.parse_prior(priors_txt[0], qd.resolve_range(q, ranges, df, args.ordered))
    groups = None
    if args.groups:
        gcol, gvals = _split_assign(args.groups, "--groups", "COLUMN=a,b,c (e.g. region=1,2,3)", last=True)
        if gcol != q.by:
            raise ParameterError(
                f"--groups {gcol}=…: the query groups by {q.by!r}; write "
                f"'… by {gcol}' in the query or --groups {q.by}=…."
            )
        groups = list(qd.parse_range(gvals).categories if "," in gvals else [qd._literal(gvals)])
    with _query_ledger(args) as ledger:  # locked from the budget check to the ledger write
        ans = qd.refine_query(
            df,
            q,
            prior,
            eps[0],
            args.kind,
            args.seed,
            ledger=ledger,
            groups=groups,
            split=args.split,
            requester=args.requester,
        )  # the ledger file holds this answer's ε before the answer is printed
        _query_audit(args, ledger)
    return _query_output(args, ans, ledger)


def _query_plan(args):
    """--ledger and --audit checked by the one guarded writer before the data are read (never
    the input, never each other, never a FIFO/device/folder/link or read-only file).
    """
    from dpstudio.engine.errors import ParameterError
    from dpstudio.engine.safe_write import WritePlan

    if args.audit and (not args.ledger or Path(args.audit).suffix.lower() not in (".csv", ".json")):
        raise ParameterError(
            "--audit FILE.csv|FILE.json exports the ledger: give --ledger and "
            "a .csv or .json name in an existing folder."
        )
    from dpstudio.engine import query as qd

    plan = WritePlan(inputs=[args.input])
    if args.ledger:  # the ledger file itself (a project file names its ledger file)
        plan.file(qd.resolve_ledger_path(args.ledger), what="query ledger (--ledger)", private=True)
    if args.audit:
        plan.file(args.audit, what="ledger audit (--audit)", private=True)
    return plan.check()


def _query_ledger(args):
    """The ledger of ``--ledger`` held under its lock for the whole answer (a context manager
    yielding the bound ledger, or None without ``--ledger``).  The ledger is bound to the
    input's SHA-256; a new one needs ``--budget``; a ``--budget`` that differs from an existing
    ledger's total is refused (``--set-budget`` changes it, recorded in the ledger).
    """
    from dpstudio.engine import query as qd
    from dpstudio.engine.errors import ParameterError
    from dpstudio.engine.io import file_sha256

    if args.audit and (
        not args.ledger
        or Path(args.audit).suffix.lower() not in (".csv", ".json")
        or not os.path.isdir(os.path.dirname(os.path.abspath(args.audit)))
    ):
        raise ParameterError(
            "--audit FILE.csv|FILE.json exports the ledger: give --ledger and "
            "a .csv or .json name in an existing folder."
        )
    for opt, v in (("--budget", args.budget), ("--set-budget", args.set_budget)):
        if v is not None and not (math.isfinite(v) and v > 0):
            raise ParameterError(f"{opt} must be a finite total ε > 0, got {v!r}.")
    wait = qd.DEFAULT_WAIT if args.wait is None else args.wait
    if not (math.isfinite(wait) and 0 <= wait <= 3600):
        raise ParameterError(f"--wait must be a number of seconds in [0, 3600], got {wait!r}.")
    if not args.ledger:
        if args.budget is not None or args.set_budget is not None:
            raise ParameterError(
                "--budget/--set-budget: the total budget belongs to a ledger; give --ledger FILE.json."
            )
        return contextlib.nullcontext(None)
    if args.budget is not None and args.set_budget is not None:
        raise ParameterError(
            "--budget and --set-budget: give one (--set-budget changes an existing ledger's)."
        )
    path = qd.resolve_ledger_path(args.ledger)
    digest = file_sha256(args.input)
    new_total = args.set_budget if args.set_budget is not None else args.budget

    @contextlib.contextmanager
    def held():
        with qd.locked_ledger(
            path, total=new_total, dataset=os.path.basename(args.input), digest=digest, timeout=wait
        ) as ledger:
            if ledger.on_file:  # an existing ledger: its total is the data set's budget
                if args.budget is not None and qd.eps_fraction(args.budget) != ledger.total_exact:
                    raise ParameterError(
                        f"--budget {args.budget:g} differs from the total budget {ledger.total:g} of "
                        f"ledger {args.ledger}: leave --budget out to use the ledger's, or change it "
                        f"with --set-budget {args.budget:g} (recorded in the ledger)."
                    )
                if args.set_budget is not None:
                    ledger.set_total(args.set_budget, requester=args.requester)
            yield ledger

    return held()


def _cmd_query_multi(args, mq, eps) -> int:
    """A multicomponent query (thesis §5.3): one --range per answered column, one --prior per
    component in order (or one 'uniform' for all), --mode joint|split, --distance.
    """
    from dpstudio.engine import query as qd
    from dpstudio.engine.errors import ParameterError
    from dpstudio.engine.validation import check_domain_pair

    comps = mq.components
    roles = parse_roles(args.role)
    for c in comps:
        if c.column and roles.get(c.column) == "identifier":
            raise ParameterError(
                f"Column {c.column!r} is an identifier: use it in the filter, not as the answer."
            )
    if args.groups:
        raise ParameterError("--groups: a multicomponent query has no groups; ask '… by COL' separately.")
    df, _ = _read(args.input, args)
    ranges = dict(
        _split_assign(it, "--range", "COLUMN=LOWER:UPPER[:STEP] or COLUMN=a,b,c", last=True)
        for it in args.range or []
    )
    for col, text in ranges.items():
        bits = text.split(":")
        try:
            pair = (float(bits[0]), float(bits[1])) if len(bits) in (2, 3) else None
        except ValueError:
            pair = None
        if pair is not None:
            check_domain_pair(col, pair)
    used = set()
    sups = []
    for c in comps:
        keys = [k for k in (c.column, c.agg if c.agg in ("count", "proportion") else None) if k]
        mine = {k: ranges[k] for k in keys if k in ranges}
        used |= set(mine)
        sups.append(qd.resolve_range(c, mine, df, args.ordered))
    unused = [k for k in ranges if k not in used]
    if unused:
        raise ParameterError(
            f"--range {unused[0]}=…: no component answers {unused[0]!r}; the keys are the components' "
            "columns, or count / proportion."
        )
    ptxt = args.prior or ["uniform"]
    if len(ptxt) == 1 and ptxt[0].strip().lower() == "uniform":
        ptxt = ptxt * len(comps)
    if len(ptxt) != len(comps):
        raise ParameterError(
            f"--prior: give one prior per component, in order ({len(comps)}), or none for uniform priors."
        )
    priors = [qd.parse_prior(t, s) for t, s in zip(ptxt, sups)]
    with _query_ledger(args) as ledger:  # locked from the budget check to the ledger write
        ans = qd.refine_multicomponent(
            df,
            mq,
            priors,
            eps[0] if len(eps) == 1 else list(eps),
            mode=args.mode or "joint",
            distance=args.distance or "max",
            kind=args.kind,
            rng=args.seed,
            ledger=ledger,
            split=args.split,
            requester=args.requester,
        )
        _query_audit(args, ledger)
    return _query_output(args, ans, ledger)


def _query_audit(args, ledger) -> None:
    if ledger is not None and args.audit:  # through the one writer, never over the data file
        ledger.export(args.audit, protect=(args.input,))


def _query_output(args, ans, ledger) -> int:
    if ledger is None:
        _warn("no --ledger: this answer's ε is not recorded in any budget.")
    for note in ans.notes:
        print("dpstudio: note (office only, do not forward): " + note, file=sys.stderr)
    pub = ans.public()
    if args.json:
        print(json.dumps(_jsonable(pub), indent=2, ensure_ascii=False))
        return 0
    print(f"query: {pub['query']}")
    print(f"response: {_fmt(pub['response'])}")
    print(f"prior: {pub['prior']}")
    rem = (
        "not tracked (no --ledger)" if ledger is None else f"{_fmt(ledger.remaining)} of {_fmt(ledger.total)}"
    )
    print(f"epsilon spent: {_fmt(pub['epsilon'])}; remaining budget: {rem}")
    print(f"guarantee: {pub['guarantee']}")
    return 0


# ----------------------------------------------------------------------- parser


def _add_io_opts(p) -> None:
    p.add_argument("--sep", help="CSV separator (default: detected among , ; tab |)")
    p.add_argument("--decimal", choices=(".", ","), help="decimal mark of a CSV (default: detected)")
    p.add_argument("--encoding", help="text encoding of a CSV (default: detected)")
    p.add_argument("--sheet", help="Excel sheet name (default: the first)")


_RECIPE_HELP = (
    "read the settings from a recipe JSON file or an app project file (.dpsproj): method, "
    "parameters, roles, types, domains, precision, hierarchies, read options, sweep grid and a "
    "seed only if it was pinned. Options given on the command line override the recipe's values"
)
_SAVE_RECIPE_HELP = (
    "write the effective recipe (recipe and command-line options merged) to FILE.json: PRIVATE "
    "(0600), it can hold domains you computed; the seed only if you pinned one (--seed)"
)


def _add_recipe_opts(p) -> None:
    p.add_argument("--recipe", metavar="FILE", help=_RECIPE_HELP)
    p.add_argument("--save-recipe", metavar="FILE.json", help=_SAVE_RECIPE_HELP)


def _add_method_opts(p, sweep: bool = False) -> None:
    p.add_argument("--method", help="method id (see 'dpstudio methods'); required unless --recipe names one")
    _add_recipe_opts(p)
    if sweep:
        p.add_argument("--k", help="k values: 2:100, 2:100:5 or 2,5,10")
        p.add_argument("--epsilon", help="ε values: 0.01,0.1,1,10")
    else:
        p.add_argument("--k", help="k: minimum cluster / class size")
        p.add_argument("--epsilon", help="ε: total privacy budget (> 0)")
    p.add_argument(
        "--role",
        action="append",
        metavar="COL=ROLE",
        help="attribute role: identifier, k-quasi, eps-quasi, confidential, other, "
        "weight (sampling weight, released unchanged), household (household id, "
        "not released unless --keep-household) (repeatable)",
    )
    p.add_argument(
        "--type",
        action="append",
        metavar="COL=TYPE",
        help="column type: numeric, integer, categorical, ordinal, date (repeatable); "
        "numeric-only methods refuse categorical/ordinal quasi-identifiers; integer: whole "
        "numbers, noisy values on the grid of whole numbers (default precision 1)",
    )
    p.add_argument(
        "--keep-household",
        action="store_true",
        help="release the household-id column unchanged (default: not released)",
    )
    p.add_argument(
        "--domain",
        action="append",
        metavar="COL=LB:UB",
        help="declared domain of a numeric attribute (repeatable)",
    )
    p.add_argument(
        "--precision",
        action="append",
        metavar="COL=GAMMA",
        help="output precision (grid) of a noisy numeric attribute, e.g. FICA=1 or "
        "INCOME=0.01; noise is drawn exactly on that grid (repeatable; default 1 "
        "for columns declared --type COL=integer, else about a millionth of the declared "
        "domain; never taken from the data)",
    )
    p.add_argument("--seed", type=_seed_arg, help=_SEED_HELP)
    p.add_argument(
        "--param",
        action="append",
        metavar="NAME=VALUE",
        help="any method parameter, e.g. budget=per-attribute (repeatable)",
    )
    p.add_argument(
        "--hierarchy",
        action="append",
        metavar="COL=FILE",
        help="ARX generalisation hierarchy / taxonomy CSV for a column (repeatable)",
    )
    for name in ("algorithm", "suppression", "confidence", "noise", "calibration", "budget"):
        p.add_argument(f"--{name}", help=f"method parameter '{name}' (see 'dpstudio methods')")
    p.add_argument(
        "--order",
        choices=("random", "input"),
        help="order of the released records: random (default: a keyed random permutation, "
        "every method) or input (keep the input order: WEAKENS the guarantee, stated in it; "
        "for internal comparisons only)",
    )
    p.add_argument(
        "--drop-missing",
        action="store_true",
        help="drop records with missing values in protected attributes (reported)",
    )
    _add_io_opts(p)


def _add_dask_opts(p, engine_help: str) -> None:
    """--engine, --scheduler, --workers, --memory-limit (protect and evaluate)."""
    p.add_argument("--engine", choices=("memory", "dask"), default="memory", help=engine_help)
    p.add_argument(
        "--scheduler",
        metavar="tcp://HOST:8786",
        type=_scheduler_arg,
        help="with --engine dask: an existing Dask scheduler (default: a local cluster)",
    )
    p.add_argument(
        "--workers", type=_workers_arg, help="with --engine dask: local workers, 1 or more (default 2)"
    )
    p.add_argument(
        "--memory-limit",
        metavar="2GB",
        type=_memory_limit_arg,
        help="with --engine dask: per local worker, at least 512MB (default auto)",
    )


def build_parser() -> argparse.ArgumentParser:
    from dpstudio import __version__

    parser = _Parser(prog="dpstudio", description="Protect microdata files before release.")
    parser.add_argument("--version", action="version", version=f"dpstudio {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    p = sub.add_parser("methods", help="list the protection methods and their parameters")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_methods)

    p = sub.add_parser("protect", help="protect a file and write the release")
    p.add_argument("input", metavar="IN")
    p.add_argument("output", metavar="OUT")
    _add_method_opts(p)
    p.add_argument("--format", help="output format: csv, xlsx, parquet, dta, sav (default: from OUT)")
    p.add_argument(
        "--report",
        metavar="FILE.html",
        help="also write the PUBLIC release note (method, parameters, guarantee, what "
        "it does not cover, schema, statistics of the release only): publish it "
        "with the release",
    )
    p.add_argument(
        "--assessment",
        metavar="FILE.private.html",
        help="also write the PRIVATE assessment report (measures against the original "
        "data, histograms; owner-only 0600, marked 'INTERNAL - do not publish'; "
        "the name must contain 'private' or 'internal'): never publish it",
    )
    p.add_argument(
        "--no-audit-trail",
        action="store_true",
        help="do not write the PRIVATE audit trail OUT-stem.private.json (input name "
        "and SHA-256, record counts; 0600)",
    )
    p.add_argument(
        "--layout",
        choices=("records", "separate-tables"),
        help="records (default): one table; separate-tables: one independently "
        "shuffled table per protected attribute, other columns not released "
        "(ε-DP for clustered methods where the records are not)",
    )
    p.add_argument(
        "--no-measures",
        action="store_true",
        help="do not compute SSE / record linkage for the summary and the assessment",
    )
    _add_dask_opts(
        p,
        "memory (default) or dask: Parquet/CSV larger than memory, OUT a new "
        "folder of Parquet parts (sort-based methods and k-eps/OLA; pip install "
        "'dpstudio[scale]')",
    )
    p.set_defaults(func=cmd_protect)

    p = sub.add_parser(
        "evaluate",
        help="utility and risk measures of a protected file",
        description="Compares record j of PROTECTED with record j of ORIGINAL. Releases are in "
        "random order by default (every method) and some methods suppress records: such a "
        "release is not aligned with its input; its measures are in the summary and the "
        "private assessment of 'protect', or protect with --order input for a comparison.",
    )
    p.add_argument("original", metavar="ORIGINAL")
    p.add_argument("protected", metavar="PROTECTED")
    p.add_argument(
        "--attributes", help="comma-separated columns to compare (default: the numeric columns in both files)"
    )
    p.add_argument(
        "--measures",
        help="comma-separated: sse, rl, delta, corr (default), il1s, "
        "eigen, freq, suppressed, reid, classification",
    )
    p.add_argument(
        "--keys",
        help="comma-separated categorical key variables (freq, suppressed, "
        "reid; default: k-quasis typed categorical or holding text)",
    )
    p.add_argument("--weight", metavar="COL", help="sampling weight column (reid)")
    p.add_argument(
        "--type",
        action="append",
        metavar="COL=TYPE",
        help="column type: numeric, categorical, ordinal, date (repeatable)",
    )
    p.add_argument(
        "--class-attribute",
        metavar="COL",
        help="classification: the attribute to predict (random forest, paper 001 §4.2)",
    )
    p.add_argument(
        "--binarise",
        metavar="median|mean|NUMBER",
        help="classification: how a numeric class attribute is made binary (default median)",
    )
    p.add_argument(
        "--classification-seed", type=int, default=0, help="classification: the forests' seed (default 0)"
    )
    p.add_argument("--confidential", help="comma-separated confidential columns (correlation loss)")
    p.add_argument("--rl-distance", choices=("standardized", "raw"), default="standardized")
    p.add_argument(
        "--method",
        help="method id the release was made with (its measurement "
        "policy: k-eps measures generalised numeric k-quasis 0/1)",
    )
    _add_recipe_opts(p)
    p.add_argument(
        "--role", action="append", metavar="COL=ROLE", help="role of a column in the release (repeatable)"
    )
    p.add_argument(
        "--hierarchy",
        action="append",
        metavar="COL=FILE",
        help="hierarchy of a column: its semantic distance is used (repeatable)",
    )
    p.add_argument("--json", action="store_true")
    _add_dask_opts(
        p,
        "memory (default) or dask: Parquet/CSV larger than memory (sse, rl, "
        "delta, corr, reid; pip install 'dpstudio[scale]')",
    )
    p.add_argument(
        "--rl-sample",
        type=int,
        default=100_000,
        metavar="N",
        help="with --engine dask: record linkage on a uniform sample of N records, "
        "reported with its 95 %% confidence interval (default 100000)",
    )
    p.add_argument(
        "--rl-seed",
        type=int,
        default=0,
        help="with --engine dask: the record-linkage sample's seed (default 0)",
    )
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("sweep", help="trade-off sweep over k and ε")
    p.add_argument("input", metavar="IN")
    _add_method_opts(p, sweep=True)
    p.add_argument("--repeats", type=int, default=None, help="repetitions per point (default 10)")
    p.add_argument(
        "--measures", help="measures (default: sse,rl; for local-suppression suppressed,reid,freq,kanon)"
    )
    p.add_argument("--no-baselines", action="store_true", help="skip the noise-free baselines")
    p.add_argument("--out", required=True, metavar="FILE.csv")
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser(
        "risk",
        help="re-identification risk of a file with categorical keys "
        "(sdcMicro's f_k, F_k, individual/global/household risk, l-diversity)",
    )
    p.add_argument("input", metavar="IN")
    p.add_argument(
        "--role",
        action="append",
        metavar="COL=ROLE",
        help="k-quasi (key), confidential, weight, household, identifier, other (repeatable)",
    )
    p.add_argument(
        "--type",
        action="append",
        metavar="COL=TYPE",
        help="column type: categorical, ordinal, numeric, date (keys are always compared as categories here)",
    )
    p.add_argument("--weight", metavar="COL", help="sampling weight column")
    p.add_argument("--household", metavar="COL", help="household (cluster) id column")
    p.add_argument(
        "--missing",
        choices=("any", "category"),
        default="any",
        help="a missing key value matches any value (sdcMicro, default) or is a category",
    )
    p.add_argument(
        "--threshold",
        type=float,
        help="also count records with individual risk above this (and the threshold of ARX's models, default 0.2)",
    )
    p.add_argument(
        "--suda", action="store_true", help="also SUDA2 special-uniques and DIS scores (sdcMicro's suda2)"
    )
    p.add_argument(
        "--suda-dis-fraction", metavar="F", help="sampling fraction of the DIS score, in (0, 1) (0.01)"
    )
    p.add_argument("--suda-max-size", metavar="K", help="largest MSU size searched (default: all keys)")
    p.add_argument(
        "--per-record",
        metavar="FILE.csv",
        help="write f_k, F_k and risks (with --suda: suda_score, suda_dis) per record to a private file (mode 0600)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    _add_io_opts(p)
    p.set_defaults(func=cmd_risk)

    p = sub.add_parser(
        "query",
        help="answer one statistic under ε-DP by knowledge refinement "
        "(thesis ch. 5), spending ε from a private budget ledger",
    )
    p.add_argument("input", metavar="FILE")
    p.add_argument(
        "query",
        metavar="QUERY",
        help='e.g. "mean(income) where region == 3"; aggregates count, proportion, '
        "mean, sum, median, mode, value (one record); filters use ==, !=, <, <=, "
        ">, >=, in (…), and, or, not; '… by COL' with --groups",
    )
    p.add_argument("--epsilon", required=True, help="ε spent by this answer (> 0)")
    p.add_argument(
        "--prior",
        action="append",
        help="the researcher's prior: uniform (default), normal:MEAN:SD, "
        "histogram:E0,…,Ek:W1,…,Wk, categorical:VALUE=P,…; a multicomponent query takes "
        "one --prior per component, in order (their product is the joint prior)",
    )
    p.add_argument(
        "--mode",
        choices=("joint", "split"),
        help="multicomponent query (thesis §5.3): joint = one refinement over the product "
        "range, one ε for the vector (default); split = each component with its own εi "
        "(--epsilon total or one per component), ε = Σεi (max εi for disjoint filters)",
    )
    p.add_argument(
        "--distance",
        choices=("max", "sum", "euclidean", "priority"),
        help="--mode joint: distance over the product range, each component as a fraction "
        "of its declared range (default max; priority = the first component decides)",
    )
    p.add_argument(
        "--range",
        action="append",
        metavar="COL=LB:UB[:STEP] | COL=a,b,c",
        help="DECLARED range of the answer (never taken from the data); the key is "
        "the query's column, or count/proportion",
    )
    p.add_argument("--ordered", action="store_true", help="declared categories are ordinal")
    p.add_argument("--groups", metavar="COL=a,b,c", help="declared groups of a '… by COL' query")
    p.add_argument(
        "--kind",
        choices=("statistical", "individual"),
        help="default: individual for value(…), else statistical",
    )
    p.add_argument(
        "--split",
        type=float,
        default=0.5,
        help="statistical queries: αu = e^(tε), αd = e^(−(1−t)ε) (default t = 0.5)",
    )
    p.add_argument(
        "--ledger",
        metavar="FILE.json|PROJECT",
        help="PRIVATE budget ledger of the data set (a ledger JSON, 0600, shared with the app and "
        "other queries; or a project file that names it); locked for the whole answer",
    )
    p.add_argument(
        "--budget",
        type=float,
        help="total ε of a new ledger (an existing ledger's total must not differ: see --set-budget)",
    )
    p.add_argument(
        "--set-budget",
        type=float,
        metavar="TOTAL",
        help="change the ledger's total ε (never below what was spent); recorded in the ledger",
    )
    p.add_argument(
        "--wait",
        type=float,
        metavar="SECONDS",
        help="how long to wait for a ledger in use by another query (default 30)",
    )
    p.add_argument("--requester", help="who asked (recorded in the ledger)")
    p.add_argument(
        "--audit", metavar="FILE.csv|FILE.json", help="also export the ledger's audit trail (private, 0600)"
    )
    p.add_argument(
        "--role",
        action="append",
        metavar="COL=ROLE",
        help="attribute roles (identifiers may only be used in filters)",
    )
    p.add_argument("--seed", type=_seed_arg, help="random seed (testing only; default OS entropy)")
    p.add_argument("--json", action="store_true", help="machine-readable public answer")
    _add_io_opts(p)
    p.set_defaults(func=cmd_query)

    p = sub.add_parser("verify", help="check a release against its metadata (exit 0 OK, 1 MISMATCH)")
    p.add_argument("release", metavar="RELEASE", help="the released file or its .metadata.json")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("demo", help="run ir-dp on the bundled Census sample")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--seed", type=_seed_arg, default=None, help=_SEED_HELP)
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    from dpstudio.engine.errors import Cancelled, DPStudioError, PrivacyLeakWarning

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "command", None):
            parser.print_usage(sys.stderr)
            return 2
        if getattr(args, "seed", None) is not None:
            from dpstudio.engine.random import seed_warning

            if seed_warning(args.seed):  # never echo the seed itself
                _warn("--seed: " + seed_warning(args.seed))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                return int(args.func(args) or 0)
            finally:
                seen = set()
                for w in caught:
                    msg = str(w.message)
                    if msg not in seen and issubclass(w.category, (UserWarning, PrivacyLeakWarning)):
                        seen.add(msg)
                        _warn(msg)
    except SystemExit as exc:  # --help / --version
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    except _UsageError as exc:
        _err(str(exc))
        return 2
    except DPStudioError as exc:
        _err(str(exc))
        return 2
    except BrokenPipeError:  # e.g. 'dpstudio methods | head'
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except OSError as exc:
        if exc.filename and exc.strerror:
            _err(f"{exc.filename}: {exc.strerror}")
        else:
            _err(str(exc) or type(exc).__name__)
        return 2
    except MemoryError:
        _err(OUT_OF_MEMORY)
        return 2
    except Cancelled:
        _err("cancelled")
        return 130
    except KeyboardInterrupt:
        _err("interrupted")
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
