"""Cases for the guarantee-equivalence test (issue 22 §1): every registered method over a
grid of the parameters its sentence depends on, on several role layouts, through each path
that states a guarantee (the registry's generic sentence, the method panel's sentence with
the attributes only, the API's release guarantee, whole protect runs).

``outcomes()`` gives, for each case in a fixed order, a short digest of the sentence and the
ε-DP flag (or of the error raised).  It runs on the code before the guarantee became an
object (then ``spec.guarantee(dict)``, ``spec.is_dp(dict)`` and underscore keys) and after
it, so that ``tests/engine/golden/guarantee_sentences.json``, written from the old code, pins
that nothing changed.  Changing the cases means regenerating that file from the commit
before issue 22 §1 (see test_guarantee_object.py).
"""

from __future__ import annotations

import hashlib
import importlib
import itertools
import json

import numpy as np
import pandas as pd

#: the values tried for the parameters a sentence depends on (the others stay at defaults)
GRID = {
    "epsilon": (None, 1.0, 0.25),
    "budget": ("equal", "weights", "per-attribute"),
    "layout": ("records", "separate-tables"),
    "order": ("random", "input"),
    "calibration": ("rigorous", "as-published"),
    "noise": ("laplace", "staircase"),
    "output": ("anatomy", "permuted"),
    "sensitive_values": ("exact", "bucket"),
    "algorithm": ("ola", "mondrian"),
    "confidence": (None, 0.9),
    "suppression": (0.05, 0.1),
    "l": (1, 2),
}

#: role layouts: name -> (columns per protected role, extra columns {name: role}, keep household)
LAYOUTS = {
    "one-each+other": (1, {"o": "other"}, False),
    "two-each": (2, {}, False),
    "two-each+survey": (2, {"o": "other", "w": "weight", "h": "household", "id": "identifier"}, False),
    "two-each+household-kept": (2, {"w": "weight", "h": "household"}, True),
}


def specs():
    from dpstudio.engine.registry import METHOD_MODULES, module_specs

    return [s for name in METHOD_MODULES for s in module_specs(importlib.import_module(name))]


def _k_values(spec) -> tuple:
    if spec.id == "t-close-dp":  # k optional (l is used without it)
        return (None, 5)
    if not spec.uses_k:
        return (None,)
    return tuple(dict.fromkeys((max(1, spec.min_k), max(2, spec.min_k), 5)))


def param_grid(spec):
    names = [p.name for p in spec.params]
    axes = {"k": _k_values(spec)} if "k" in names else {}
    for n, vals in GRID.items():
        if n in names:
            axes[n] = vals
    keys = list(axes)
    for combo in itertools.product(*(axes[k] for k in keys)):
        p = dict(zip(keys, combo))
        if p.get("k") is None:
            p.pop("k", None)
        yield p


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def _columns(spec, layout: str):
    per, extra, keep_hh = LAYOUTS[layout]
    roles = {}
    for r in spec.protects:
        for i in range(per):
            roles[f"{r.value}_{i}"] = r.value
    roles.update(extra)
    protected = [c for c, r in roles.items() if r in {x.value for x in spec.protects}]
    released = [c for c, r in roles.items() if r != "identifier" and (keep_hh or r != "household")]
    return roles, protected, released


def _with_weights(p: dict, protected: list[str]) -> dict:
    if p.get("budget") == "weights":
        return {**p, "weights": {c: float(i + 1) for i, c in enumerate(protected)}}
    return p


def _new_api() -> bool:
    import dpstudio.engine.api as api

    return hasattr(api, "release_guarantee")


def _attrs_only(spec, checked: dict, cols: list[str]) -> tuple[str, bool]:
    """The method panel's sentence: parameters and the protected columns, no roles."""
    if _new_api():
        from dpstudio.engine.guarantee import GuaranteeContext

        g = spec.describe(GuaranteeContext.of(checked, attributes=cols))
        return g.render(), g.is_dp
    p = {**checked, "_attributes": cols}
    return spec.guarantee(p), bool(spec.is_dp(p))


def _describe(spec, checked: dict, roles: dict, released: list[str], protected: list[str]):
    from dpstudio.engine import api

    return api.describe(spec, checked, roles, released, protected)


def _outcome(fn, html: bool = True) -> str:
    """The digest of a sentence and its HTML rendering (the reports'), and the ε-DP flag."""
    from dpstudio.engine.report import guarantee_html

    try:
        text, is_dp = fn()
    except Exception as exc:  # noqa: BLE001 - the same error must be raised before and after
        return f"ERR:{type(exc).__name__}:{_digest(str(exc))}"
    shown = text + "\x00" + guarantee_html(text) if html else text
    return f"{_digest(shown)}:{int(bool(is_dp))}"


def outcomes() -> dict[str, list[str]]:
    """Method id -> the digests of its cases, in a fixed order."""
    out: dict[str, list[str]] = {}
    for spec in specs():
        rows = []
        rows.append(_outcome(lambda spec=spec: (spec.to_dict()["guarantee"], False)))
        for raw in param_grid(spec):
            for layout in LAYOUTS:
                roles, protected, released = _columns(spec, layout)
                p = _with_weights(raw, protected)
                try:
                    checked = spec.check_params(dict(p))
                except Exception as exc:  # noqa: BLE001
                    rows.append(f"PARAM:{type(exc).__name__}:{_digest(str(exc))}")
                    continue
                if layout == "one-each+other":
                    rows.append(_outcome(lambda spec=spec, c=checked, p=protected: _attrs_only(spec, c, p)))
                rows.append(
                    _outcome(
                        lambda spec=spec, c=checked, r=roles, rel=released, p=protected: _describe(
                            spec, c, r, rel, p
                        )
                    )
                )
        rows += run_outcomes(spec)
        out[spec.id] = rows
    return out


#: whole runs: a few parameter sets per method on a small table
RUN_VARIANTS = (
    {},
    {"order": "input"},
    {"budget": "per-attribute"},
    {"layout": "separate-tables"},
    {"epsilon": None},
)


def _frame(spec) -> tuple[pd.DataFrame, dict, dict, dict]:
    rng = np.random.default_rng(7)
    n = 90
    df = pd.DataFrame({"o": rng.integers(0, 3, n), "w": rng.uniform(1, 2, n)})
    roles: dict = {"o": "other", "w": "weight"}
    domains: dict = {}
    hier: dict = {}
    for r in spec.protects:
        for i in range(2):
            c = f"{r.value}_{i}"
            if spec.id == "local-suppression":
                df[c] = rng.integers(0, 3, n)
            else:
                df[c] = rng.integers(0, 100, n).astype(float)
                domains[c] = (0.0, 100.0)
            roles[c] = r.value
    return df, roles, domains, hier


def run_outcomes(spec) -> list[str]:
    from dpstudio import engine

    df, roles, domains, hier = _frame(spec)
    names = {p.name for p in spec.params}
    rows = []
    for v in RUN_VARIANTS:
        if not set(v) <= names:
            continue
        p = {"k": 3 if spec.min_k <= 3 else spec.min_k} if "k" in names and spec.id != "t-close-dp" else {}
        p.update(v)

        def run(p=p):
            res = engine.protect(df, spec.id, roles, domains, seed=11, hierarchies=hier or None, **p)
            meta = res.public_metadata(software_version="x")
            return json.dumps(meta, sort_keys=True, ensure_ascii=False), res.is_dp

        rows.append(_outcome(run, html=False))
    return rows
