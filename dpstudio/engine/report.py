"""A self-contained, printable HTML report of a release (no external files, no scripts).

It states the guarantee in a prominent box, the parameters, the warnings, the
attribute roles and domains, the measures (with per-attribute Δ mean / Δ
variance) and the trade-off curves (PNG images embedded as base64).  It never
contains the seed nor original values.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import math
from typing import Any, Iterable

_MEASURE_LABELS = {
    "sse_raw": "SSE (raw: Σ squared errors)",
    "sse_normalized": "SSE (normalized: per record and attribute, in units of the variance)",
    "rl": "Record linkage RL (%)",
    "corr_loss_mean": "Correlation loss: mean |Δcorr| (pairs with a confidential attribute)",
    "corr_loss_std": "Correlation loss: std. dev. of |Δcorr|",
    "delta_mean_avg": "Δ mean, average over attributes (relative)",
    "delta_var_avg": "Δ variance, average over attributes (relative)",
    "k_min_class_size": "Smallest equivalence class on the k-quasi-identifiers",
    "k_share_below": "Share of records in classes smaller than k",
}

_HIDDEN_PARAMS = ("seed", "rng", "random_state")

_CSS = """
body { font-family: -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif;
       color: #1b1b1b; max-width: 60em; margin: 2em auto; padding: 0 1em; line-height: 1.4; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.2em; border-bottom: 1px solid #ccc; padding-bottom: 0.2em; margin-top: 1.6em; }
.sub { color: #555; margin-top: 0; }
.guarantee { border: 3px solid #1f5fa8; background: #eef4fb; padding: 0.8em 1.2em;
             border-radius: 6px; font-size: 1.15em; margin: 1.2em 0; }
.guarantee.notdp { border-color: #a86b1f; background: #fbf4ea; }
.guarantee .label { font-size: 0.75em; text-transform: uppercase; letter-spacing: 0.06em;
                    color: #555; display: block; margin-bottom: 0.3em; }
.warnings { border-left: 5px solid #c0392b; background: #fdf0ee; padding: 0.5em 1em; }
.warnings li { margin: 0.3em 0; }
table { border-collapse: collapse; margin: 0.6em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 1em 0; page-break-inside: avoid; }
figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { color: #555; font-size: 0.9em; }
footer { margin-top: 2em; color: #777; font-size: 0.85em; }
@media print {
  body { margin: 0; max-width: none; font-size: 10.5pt; }
  h2 { page-break-after: avoid; }
  table, .guarantee, .warnings { page-break-inside: avoid; }
  a { color: inherit; text-decoration: none; }
}
"""


def _e(v: Any) -> str:
    return html.escape(str(v), quote=True)


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if math.isnan(v):
            return "—"
        if math.isinf(v):
            return "∞" if v > 0 else "−∞"
        if v != 0 and (abs(v) >= 1e6 or abs(v) < 1e-3):
            return f"{v:.4g}"
        return f"{v:,.4f}".rstrip("0").rstrip(".") if abs(v) < 1e6 else f"{v:.4g}"
    if isinstance(v, dict):
        return ", ".join(f"{_e(k)}: {_fmt(x)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return ", ".join(_fmt(x) for x in v)
    try:  # numpy scalars
        import numpy as np

        if isinstance(v, np.generic):
            return _fmt(v.item())
    except Exception:  # pragma: no cover
        pass
    return _e(v)


def _rows(pairs: Iterable[tuple[str, Any]]) -> str:
    def cls(v: Any) -> str:
        return " class='num'" if isinstance(v, (int, float)) and not isinstance(v, bool) else ""

    return "".join(f"<tr><th>{_e(k)}</th><td{cls(v)}>{_fmt(v)}</td></tr>" for k, v in pairs)


def render_html(result, measures: dict | None = None, *, curves: Iterable[tuple[str, bytes]] = (),
                input_name: str | None = None, chosen: dict | None = None) -> str:
    """The report of ``result`` as one HTML string.

    ``measures``: the dict of :func:`dpstudio.engine.metrics.evaluate`.
    ``curves``: (caption, PNG bytes) pairs.  ``chosen``: the point picked on a
    trade-off sweep (e.g. ``{"k": 10, "epsilon": 1.0}``) and why.
    """
    from dpstudio import __version__

    meta = result.public_metadata() if hasattr(result, "public_metadata") else {}
    params = {k: v for k, v in (getattr(result, "params", {}) or {}).items()
              if k not in _HIDDEN_PARAMS}
    is_dp = bool(getattr(result, "is_dp", False))
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    parts: list[str] = []
    title = f"Protection report — {_e(getattr(result, 'method_name', result.method))}"
    parts.append(f"<h1>{title}</h1>")
    sub = [f"method <code>{_e(result.method)}</code>", f"dpstudio {_e(__version__)}", now]
    if input_name:
        sub.insert(0, f"input <strong>{_e(input_name)}</strong>")
    parts.append(f"<p class='sub'>{' · '.join(sub)}</p>")

    parts.append(
        f"<div class='guarantee{'' if is_dp else ' notdp'}'><span class='label'>Guarantee"
        f"{' — differential privacy' if is_dp else ''}</span>{_e(result.guarantee)}</div>"
    )
    warns = list(getattr(result, "warnings", []) or [])
    if measures and measures.get("warnings"):
        warns += [w for w in measures["warnings"] if w not in warns]
    if warns:
        parts.append("<h2>Warnings</h2><ul class='warnings'>"
                     + "".join(f"<li>{_e(w)}</li>" for w in warns) + "</ul>")

    parts.append("<h2>Parameters</h2><table>" + _rows(params.items()) + "</table>")
    if chosen:
        parts.append("<h2>Chosen trade-off point</h2><table>" + _rows(chosen.items()) + "</table>")

    roles = dict(getattr(result, "roles", {}) or {})
    domains = dict(getattr(result, "domains", {}) or {})
    protected = set(getattr(result, "protected_attributes", []) or [])
    rows = []
    for col, role in roles.items():
        role = getattr(role, "value", role)
        dom = domains.get(col)
        dom_s = f"[{_fmt(float(dom[0]))}, {_fmt(float(dom[1]))}]" if dom is not None else "—"
        # every quasi-identifier is protected (the engine refuses methods that would not)
        released = ("removed" if role == "identifier" else
                    "protected" if (col in protected or role in ("k-quasi", "eps-quasi")) else "as is")
        rows.append(f"<tr><td>{_e(col)}</td><td>{_e(role)}</td><td class='num'>{dom_s}</td>"
                    f"<td>{released}</td></tr>")
    parts.append("<h2>Attributes</h2><table><tr><th>column</th><th>role</th><th>declared domain</th>"
                 "<th>in the release</th></tr>" + "".join(rows) + "</table>")
    parts.append("<table>" + _rows([
        ("records released", meta.get("records_released", len(result.data))),
        ("records dropped for missing values", meta.get("records_dropped_for_missing_values", 0)),
    ]) + "</table>")

    if measures:
        scal = [(_MEASURE_LABELS.get(k, k), v) for k, v in measures.items()
                if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if scal:
            parts.append("<h2>Utility and risk</h2><p class='sub'>Measured against the original "
                         "data: these figures are not protected (not differentially private). "
                         "Keep them internal unless you have decided they may be published."
                         "</p><table><tr><th>measure</th><th>value</th></tr>"
                         + _rows(scal) + "</table>")
        dm, dv = measures.get("delta_mean") or {}, measures.get("delta_var") or {}
        attrs = list(dict.fromkeys(list(dm) + list(dv)))
        if attrs:
            parts.append(
                "<h3>Relative change of the mean and the variance (|Θ′ − Θ| / |Θ|)</h3>"
                "<table><tr><th>attribute</th><th>Δ mean</th><th>Δ variance</th></tr>"
                + "".join(f"<tr><td>{_e(a)}</td><td class='num'>{_fmt(dm.get(a, float('nan')))}</td>"
                          f"<td class='num'>{_fmt(dv.get(a, float('nan')))}</td></tr>" for a in attrs)
                + "</table>")
    curves = list(curves or ())
    if curves:
        parts.append("<h2>Trade-off curves</h2>")
        for caption, png in curves:
            b64 = base64.b64encode(bytes(png)).decode("ascii")
            parts.append(f"<figure><img alt='{_e(caption)}' src='data:image/png;base64,{b64}'>"
                         f"<figcaption>{_e(caption)}</figcaption></figure>")
    parts.append("<footer>Generated by dpstudio. The random seed is deliberately not recorded in "
                 "this report nor in the released metadata: with it, the noise could be "
                 "regenerated and removed.</footer>")
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<title>{title}</title><style>{_CSS}</style></head><body>"
            + "\n".join(parts) + "</body></html>\n")


__all__ = ["render_html"]
