"""The two HTML reports of a release: self-contained, printable, no external files, no scripts.

* :func:`render_release_note` -- **public** (``<stem>.release-note.html``): method, parameters,
  guarantee, what it does not cover, the schema as released, and statistics of the *release*
  only.  It is a function of the parameters and the released data: nothing in it is computed
  from the original data (the test suite checks that it is identical for neighbouring inputs
  with the same release).
* :func:`render_assessment` -- **private** (``<stem>.assessment.private.html``): measures
  against the original data (SSE, record linkage, Δ mean, Δ variance), original vs protected
  statistics and histograms, trade-off curves.  From such figures and the release an intruder
  recovers records (Δ mean + released mean gives the original mean), so it is marked
  "INTERNAL — do not publish" in its title, in a banner and in a header and footer that
  repeat on every printed page.

Neither ever contains the seed.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import math
import re
from collections.abc import Iterable
from typing import Any

from dpstudio.engine.guarantee import sentence_parts

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
.guarantee .clause { margin: 0.25em 0; }
.guarantee details.exact { font-size: 0.75em; color: #555; margin-top: 0.6em; }
.warnings { border-left: 5px solid #c0392b; background: #fdf0ee; padding: 0.5em 1em; }
.warnings li { margin: 0.3em 0; }
table { border-collapse: collapse; margin: 0.6em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.warn { color: #b00020; font-weight: bold; }
figure { margin: 1em 0; page-break-inside: avoid; }
figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { color: #555; font-size: 0.9em; }
footer { margin-top: 2em; color: #777; font-size: 0.85em; }
.internal-banner { border: 3px solid #b00020; background: #fde8ea; color: #b00020;
                   font-weight: bold; padding: 0.6em 1em; margin: 1em 0; }
.internal-fixed { display: none; }
@media print {
  body { margin: 0; max-width: none; font-size: 10.5pt; }
  body.internal { padding: 1.8em 0; }
  .internal-fixed { display: block; position: fixed; left: 0; right: 0; text-align: center;
                    color: #b00020; font-weight: bold; font-size: 9pt; background: white; }
  .internal-fixed.top { top: 0; }
  .internal-fixed.bottom { bottom: 0; }
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


#: The mark of every private report (title, banner, every printed page).
INTERNAL_MARK = "INTERNAL — do not publish"


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _params(result) -> dict:
    """The parameters as shown in a report: a parameter that is not set reads "—", never
    "None"; ε not set is the noise-free baseline (issue 11).
    """
    out = {}
    shown = (
        result.public_params() if hasattr(result, "public_params") else (getattr(result, "params", {}) or {})
    )
    for k, v in shown.items():
        if k in _HIDDEN_PARAMS:
            continue
        if v is None:
            v = "no noise (baseline)" if k == "epsilon" else "— (not set)"
        out[k] = v
    return out


_SUP_PAREN = re.compile(r"(?<=[\w)])\^\(((?:[^()]|\([^()]*\))*)\)")
_SUP_WORD = re.compile(r"(?<=[\w)])\^([\wεδ′−-]+)")
_EXP = re.compile(r"\bexp\(ε\)")


def _formulas(text: str) -> str:
    """e^ε -> e<sup>ε</sup>, 10^(x − 6) -> 10<sup>x − 6</sup>, exp(ε) -> e<sup>ε</sup>
    (on escaped text).
    """
    text = _EXP.sub("e<sup>ε</sup>", text)
    text = _SUP_PAREN.sub(lambda m: f"<sup>{m.group(1)}</sup>", text)
    return _SUP_WORD.sub(lambda m: f"<sup>{m.group(1)}</sup>", text)


def guarantee_clauses(sentence: str) -> list[str]:
    """The sentence cut into its clauses (sentences; the scope lead of a scoped guarantee
    is its own clause), the text unchanged: ``"".join`` with single spaces gives it back.
    """
    return [text for text, _ in sentence_parts(sentence)]


def guarantee_html(sentence: str) -> str:
    """A guarantee sentence rendered readably (HTML fragment, pure function): one clause per
    line, its scope in bold (the claim that leads it, "Per-attribute only — not … for the
    records", "Not covered:", "Changed:", …), powers as formulas (e^ε as e<sup>ε</sup>).
    The words are the sentence's own: nothing is added or dropped.  The cutting and the
    labels are the guarantee module's (:func:`dpstudio.engine.guarantee.sentence_parts`).

    >>> guarantee_html("t-closeness with t = e^ε (ε = 1). Not covered: the 1 column(s) (o).")
    "<div class='clause'><strong>t-closeness with t = e<sup>ε</sup></strong> (ε = 1).</div><div class='clause'><strong>Not covered:</strong> the 1 column(s) (o).</div>"
    """
    parts: list[str] = []
    items = sentence_parts(sentence)
    for i, (clause, kind) in enumerate(items):
        if kind.startswith("label:"):
            label = kind[len("label:") :]
            body = f"<strong>{_formulas(_e(label))}</strong>{_formulas(_e(clause[len(label) :]))}"
        elif kind == "scope-lead":
            body = f"<strong>{_formulas(_e(clause))}</strong>"
        elif i == 0 or (i == 1 and items[0][1] == "scope-lead"):
            m = re.search(r"\s\(|[;:,]", clause)  # the claim that leads the clause
            cut = m.start() if m else len(clause)
            body = f"<strong>{_formulas(_e(clause[:cut]))}</strong>{_formulas(_e(clause[cut:]))}"
        else:
            body = _formulas(_e(clause))
        body = re.sub(r"\b(NOT|ONLY)\b", r"<strong>\1</strong>", body)
        parts.append(f"<div class='clause'>{body}</div>")
    return "".join(parts)


def _guarantee_box(result) -> str:
    is_dp = bool(getattr(result, "is_dp", False))
    return (
        f"<div class='guarantee{'' if is_dp else ' notdp'}'><span class='label'>Guarantee"
        f"{' — differential privacy' if is_dp else ''}</span>{guarantee_html(result.guarantee)}"
        "<details class='exact'><summary>The sentence as published in the metadata"
        f"</summary>{_e(result.guarantee)}</details></div>"
    )


def _warning_list(title: str, warns: list[str], note: str = "") -> str:
    if not warns:
        return ""
    return (
        f"<h2>{_e(title)}</h2>"
        + (f"<p class='sub'>{note}</p>" if note else "")
        + "<ul class='warnings'>"
        + "".join(f"<li>{_e(w)}</li>" for w in warns)
        + "</ul>"
    )


def _released_how(result, col: str, role: str) -> str:
    protected = set(getattr(result, "protected_attributes", []) or [])
    if role == "identifier":
        return "removed"
    if col in ((getattr(result, "info", None) or {}).get("released_exactly") or ()):
        return "exact values (only the link to the confidential values is hidden)"
    # every quasi-identifier is protected (the engine refuses methods that would not)
    return "protected" if (col in protected or role in ("k-quasi", "eps-quasi")) else "as is (unprotected)"


def _page(title: str, parts: list[str], internal: bool = False) -> str:
    fixed = ""
    if internal:
        fixed = (
            f"<div class='internal-fixed top'>{_e(INTERNAL_MARK)}</div>"
            f"<div class='internal-fixed bottom'>{_e(INTERNAL_MARK)} — private assessment, "
            "keep with the project file</div>"
        )
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{title}</title><style>{_CSS}</style></head>"
        + ("<body class='internal'>" if internal else "<body>")
        + fixed
        + "\n".join(parts)
        + "</body></html>\n"
    )


def _num_stats(s) -> list[Any] | None:
    import numpy as np
    import pandas as pd

    if not pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s):
        return None
    v = s.to_numpy(dtype=np.float64, na_value=np.nan)
    ok = v[np.isfinite(v)]
    if ok.size == 0:
        return [0, float("nan"), float("nan"), float("nan"), float("nan")]
    sd = float(ok.std(ddof=1)) if ok.size > 1 else float("nan")
    return [int(ok.size), float(ok.mean()), sd, float(ok.min()), float(ok.max())]


def render_release_note(result, *, now: str | None = None) -> str:
    """The PUBLIC release note of ``result`` (HTML): publish it next to the release.

    Built from the parameters and ``result.data`` only -- never from ``result.original``,
    the measures or the data-dependent notes.  ``now``: the date line (default: current UTC).
    """
    from dpstudio import __version__

    data = result.data
    title = f"Release note — {_e(getattr(result, 'method_name', result.method))}"
    parts = [
        f"<h1>{title}</h1>",
        f"<p class='sub'>method <code>{_e(result.method)}</code> · dpstudio {_e(__version__)}"
        f" · {_e(now or _now())} · public: may be published with the release</p>",
        _guarantee_box(result),
        _warning_list("Warnings", [str(w) for w in getattr(result, "public_warnings", []) or []]),
        "<h2>Parameters</h2><table>" + _rows(_params(result).items()) + "</table>",
    ]

    roles = {c: getattr(r, "value", r) for c, r in (getattr(result, "roles", {}) or {}).items()}
    domains = dict(getattr(result, "domains", {}) or {})
    unchanged = [
        c for c in data.columns if _released_how(result, c, roles.get(c, "other")).startswith("as is")
    ]
    not_cov = []
    if unchanged:
        not_cov.append(
            "Columns released unchanged, not protected: " + ", ".join(_e(c) for c in unchanged) + "."
        )
    not_cov += [
        "The schema (column names, types and order), the number of released records and any "
        "extra released tables are published as they are.",
        "Declared domains are set by the data holder from knowledge of the population, not from "
        "the file; the guarantee holds only if every possible value lies within them.",
        "The parameters above were set by the data holder; if they were tuned on utility "
        "measured against the original data, that tuning is not accounted for in the guarantee.",
        "Measures of utility and risk against the original data are deliberately not in this "
        "note: they are computed from the original data and would undo the protection.",
    ]
    parts.append(
        "<h2>What the guarantee does not cover</h2><ul>" + "".join(f"<li>{t}</li>" for t in not_cov) + "</ul>"
    )

    rows = []
    for col in data.columns:
        role = roles.get(col, "other")
        dom = domains.get(col)
        dom_s = f"[{_fmt(float(dom[0]))}, {_fmt(float(dom[1]))}]" if dom is not None else "—"
        rows.append(
            f"<tr><td>{_e(col)}</td><td>{_e(data[col].dtype)}</td><td>{_e(role)}</td>"
            f"<td class='num'>{dom_s}</td><td>{_released_how(result, col, role)}</td></tr>"
        )
    removed = [
        c for c, r in roles.items() if r == "identifier" or (r == "household" and c not in data.columns)
    ]  # issue 10: not released
    parts.append(
        "<h2>Schema of the release</h2><table><tr><th>column</th><th>type</th><th>role</th>"
        "<th>declared domain</th><th>in the release</th></tr>"
        + "".join(rows)
        + "</table>"
        + (
            f"<p class='sub'>Identifier / household-id column(s) removed: {_e(', '.join(removed))}.</p>"
            if removed
            else ""
        )
    )

    from dpstudio.engine.transformation import release_transformation_rows

    trans = release_transformation_rows(result)
    if trans:
        # issue 24 §1: the transformation chosen for every k-quasi (as ARX shows it); read off
        # the release (and the declared hierarchies), never from the original data
        parts.append(
            "<h2>Generalisation of the k-quasi-identifiers</h2><table><tr><th>column</th>"
            "<th>hierarchy</th><th>in the release</th></tr>"
            + "".join(
                f"<tr><td>{_e(c)}</td><td>{_e(h)}</td>"
                + (f"<td class='warn'>{_e(t)}</td>" if t.startswith("fully") else f"<td>{_e(t)}</td>")
                + "</tr>"
                for c, h, t in trans
            )
            + "</table>"
        )

    stats_rows, cat_rows = [], []
    for col in data.columns:
        st = _num_stats(data[col])
        if st is None:
            cat_rows.append((col, int(data[col].nunique(dropna=True)), int(data[col].isna().sum())))
        else:
            stats_rows.append(
                f"<tr><td>{_e(col)}</td>" + "".join(f"<td class='num'>{_fmt(v)}</td>" for v in st) + "</tr>"
            )
    parts.append(
        "<h2>Statistics of the release</h2><p class='sub'>Computed from the released "
        "file only (post-processing of the release).</p><table>"
        + _rows(
            [("records released", int(len(data)))]
            + [
                (f"records in table {name}", int(len(t)))
                for name, t in (getattr(result, "tables", {}) or {}).items()
            ]
        )
        + "</table>"
    )
    if stats_rows:
        parts.append(
            "<table><tr><th>numeric column</th><th>values</th><th>mean</th><th>std. dev."
            "</th><th>min</th><th>max</th></tr>" + "".join(stats_rows) + "</table>"
        )
    if cat_rows:
        parts.append(
            "<table><tr><th>other column</th><th>distinct values</th><th>missing</th></tr>"
            + "".join(
                f"<tr><td>{_e(c)}</td><td class='num'>{d}</td><td class='num'>{m}</td></tr>"
                for c, d, m in cat_rows
            )
            + "</table>"
        )
    parts.append(
        "<footer>Generated by dpstudio from the parameters and the released file only. "
        "The random seed is deliberately not recorded: with it, the noise could be "
        "regenerated and removed.</footer>"
    )
    return _page(title, parts)


def _svg_histogram(orig, prot, label: str, bins: int = 20) -> str:
    """Inline SVG: histogram of the original (grey) and the protected (blue) values."""
    import numpy as np

    a = np.asarray(orig, dtype=np.float64)
    b = np.asarray(prot, dtype=np.float64)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if a.size == 0 or b.size == 0:
        return ""
    lo, hi = float(min(a.min(), b.min())), float(max(a.max(), b.max()))
    if hi <= lo:
        hi = lo + 1.0
    edges = np.linspace(lo, hi, bins + 1)
    ca, _ = np.histogram(a, edges)
    cb, _ = np.histogram(b, edges)
    top = max(int(ca.max()), int(cb.max()), 1)
    w, h, pad = 560, 170, 20
    bw = (w - 2 * pad) / bins
    bars = []
    for i in range(bins):
        x = pad + i * bw
        for j, (c, color) in enumerate(((ca[i], "#9e9e9e"), (cb[i], "#1f5fa8"))):
            bh = (h - 2 * pad) * c / top
            bars.append(
                f"<rect x='{x + j * bw / 2:.1f}' y='{h - pad - bh:.1f}' width='{bw / 2:.1f}'"
                f" height='{bh:.1f}' fill='{color}'/>"
            )
    axis = (
        f"<text x='{pad}' y='{h - 4}' font-size='10'>{_fmt(lo)}</text>"
        f"<text x='{w - pad}' y='{h - 4}' font-size='10' text-anchor='end'>{_fmt(hi)}</text>"
        f"<text x='{pad}' y='12' font-size='10'>max count {top} · grey: original · blue: "
        "protected</text>"
    )
    return (
        f"<figure><svg width='{w}' height='{h}' "
        f"role='img' aria-label='{_e(label)}'>"
        + "".join(bars)
        + axis
        + f"</svg><figcaption>{_e(label)}</figcaption></figure>"
    )


def _bounds_section(result) -> str:
    """Private: the share of each noisy attribute's released values on its domain bounds
    (clamping pile-up, issue 11), with what to do when it is large.
    """
    from dpstudio.engine.pileup import NOTE_THRESHOLD, REMEDY, bound_shares

    params = getattr(result, "params", {}) or {}
    if params.get("epsilon") is None or not getattr(result, "domains", None):
        return ""
    shares = bound_shares(
        result.data,
        getattr(result, "protected_attributes", []) or [],
        result.domains,
        getattr(result, "precision", None),
    )
    if not shares:
        return ""
    rows = "".join(
        f"<tr><td>{_e(c)}</td><td class='num'>{_fmt(s['lb'])}</td>"
        f"<td class='num'>{100 * s['lower']:.1f} %</td><td class='num'>{_fmt(s['ub'])}</td>"
        f"<td class='num'>{100 * s['upper']:.1f} %</td><td>"
        + ("<strong>pile-up</strong>" if s["total"] >= NOTE_THRESHOLD else "ok")
        + "</td></tr>"
        for c, s in shares.items()
    )
    bad = any(s["total"] >= NOTE_THRESHOLD for s in shares.values())
    return (
        "<h2>Values at the domain bounds (clamping)</h2><p class='sub'>Share of the released "
        "values of each noisy attribute that lie on a bound of its declared domain; noise "
        "clamped to the domain piles values there. "
        + (_e(REMEDY) if bad else f"Below {100 * NOTE_THRESHOLD:.0f} % everywhere.")
        + "</p><table><tr><th>attribute</th><th>lower bound</th><th>share at it</th>"
        "<th>upper bound</th><th>share at it</th><th></th></tr>" + rows + "</table>"
    )


def render_assessment(
    result,
    measures: dict | None = None,
    *,
    curves: Iterable[tuple[str, bytes]] = (),
    input_name: str | None = None,
    chosen: dict | None = None,
    histograms: bool = True,
) -> str:
    """The PRIVATE assessment report of ``result`` (HTML): keep it internal, never publish it.

    ``measures``: the dict of :func:`dpstudio.engine.measures.evaluate` (against the original).
    ``curves``: (caption, PNG bytes) pairs.  ``chosen``: the point picked on a trade-off
    sweep (e.g. ``{"k": 10, "epsilon": 1.0}``).  ``histograms``: original vs protected
    histograms of the numeric protected attributes (needs ``result.original``).
    """
    from dpstudio import __version__

    title = f"{INTERNAL_MARK} — Assessment — {_e(getattr(result, 'method_name', result.method))}"
    parts: list[str] = [f"<h1>{title}</h1>"]
    sub = [f"method <code>{_e(result.method)}</code>", f"dpstudio {_e(__version__)}", _now()]
    if input_name:
        sub.insert(0, f"input <strong>{_e(input_name)}</strong>")
    parts.append(f"<p class='sub'>{' · '.join(sub)}</p>")
    parts.append(
        f"<div class='internal-banner'>{_e(INTERNAL_MARK)}. This assessment measures the "
        "release against the original data. Its figures are not protected: together "
        "with the release they can reveal individual records (e.g. Δ mean and the "
        "released mean give the original mean). Keep it with the project file; publish "
        "the release note instead.</div>"
    )
    parts.append(_guarantee_box(result))
    pub = set(getattr(result, "public_warnings", []) or [])
    warns = list(getattr(result, "warnings", []) or [])
    if measures and measures.get("warnings"):
        warns += [w for w in measures["warnings"] if w not in warns]
    parts.append(
        _warning_list(
            "Warnings",
            [w for w in warns if w in pub],
            "Functions of the parameters only (also in the release note).",
        )
    )
    parts.append(_warning_list("Notes about the original data (private)", [w for w in warns if w not in pub]))
    parts.append("<h2>Parameters</h2><table>" + _rows(_params(result).items()) + "</table>")
    if chosen:
        parts.append("<h2>Chosen trade-off point</h2><table>" + _rows(chosen.items()) + "</table>")

    orig = getattr(result, "original", None)
    parts.append(_records_section(result, orig))
    if measures:
        parts += _measures_sections(result, measures)
    parts += _original_vs_protected(result, orig, histograms)
    parts.append(_bounds_section(result))
    parts += _curves_section(curves)
    parts.append(
        f"<footer>{_e(INTERNAL_MARK)}. Generated by dpstudio. The random seed is "
        "deliberately not recorded here either.</footer>"
    )
    return _page(title, parts, internal=True)


def _records_section(result, orig) -> str:
    """The assessment's record counts: input, dropped for missing values, suppressed, released."""
    dropped = len(getattr(result, "dropped_rows", []) or [])
    counts = []
    if orig is not None:
        counts += [
            ("records in the input", len(orig) + dropped),
            ("records dropped for missing values", dropped),
            ("records not released by the method (suppressed)", len(orig) - len(result.data)),
        ]
    else:
        counts += [("records dropped for missing values", dropped)]
    counts.append(("records released", len(result.data)))
    return "<h2>Records</h2><table>" + _rows(counts) + "</table>"


def _measures_sections(result, measures: dict) -> list[str]:
    """The assessment's measures: each scalar measure with its reading, and the relative
    change of every attribute's mean and variance.
    """
    parts: list[str] = []
    scal = [
        (_MEASURE_LABELS.get(k, k), v)
        for k, v in measures.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    ]
    if scal:
        from dpstudio.engine.measures.readings import reading, reading_context

        ctx = reading_context(result, measures)
        body = "".join(
            f"<tr><th>{_e(_MEASURE_LABELS.get(k, k))}</th><td class='num'>{_fmt(v)}</td>"
            f"<td>{_e(reading(k, v, ctx))}</td></tr>"
            for k, v in measures.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)
        )
        parts.append(
            "<h2>Utility and risk (against the original)</h2><table><tr><th>measure"
            "</th><th>value</th><th>reading</th></tr>" + body + "</table>"
        )
    dm, dv = measures.get("delta_mean") or {}, measures.get("delta_var") or {}
    attrs = list(dict.fromkeys(list(dm) + list(dv)))
    if attrs:
        parts.append(
            "<h3>Relative change of the mean and the variance (|Θ′ − Θ| / |Θ|)</h3>"
            "<table><tr><th>attribute</th><th>Δ mean</th><th>Δ variance</th></tr>"
            + "".join(
                f"<tr><td>{_e(a)}</td><td class='num'>{_fmt(dm.get(a, float('nan')))}</td>"
                f"<td class='num'>{_fmt(dv.get(a, float('nan')))}</td></tr>"
                for a in attrs
            )
            + "</table>"
        )
    return parts


def _original_vs_protected(result, orig, histograms: bool) -> list[str]:
    """The assessment's means and standard deviations of the numeric protected attributes,
    original vs protected, and (``histograms``) their histograms; nothing without the original.
    """
    import numpy as np
    import pandas as pd

    parts: list[str] = []
    prot_cols = [
        c
        for c in (getattr(result, "protected_attributes", []) or [])
        if orig is not None and c in orig.columns and c in result.data.columns
    ]
    num_cols = [
        c
        for c in prot_cols
        if orig is not None and _num_stats(orig[c]) is not None and _num_stats(result.data[c]) is not None
    ]
    if num_cols and orig is not None:  # prot_cols (and so num_cols) is empty without the original
        rows = []
        for c in num_cols:
            so, sp = _num_stats(orig[c]), _num_stats(result.data[c])
            assert so is not None and sp is not None  # num_cols keeps only columns with stats
            rows.append(
                f"<tr><td>{_e(c)}</td>"
                + "".join(f"<td class='num'>{_fmt(v)}</td>" for v in (so[1], sp[1], so[2], sp[2]))
                + "</tr>"
            )
        parts.append(
            "<h2>Original vs protected</h2><table><tr><th>attribute</th><th>mean "
            "(original)</th><th>mean (protected)</th><th>std. dev. (original)</th>"
            "<th>std. dev. (protected)</th></tr>" + "".join(rows) + "</table>"
        )
        if histograms:
            figs = [
                _svg_histogram(
                    orig[c].to_numpy(dtype=np.float64, na_value=np.nan),
                    pd.to_numeric(result.data[c], errors="coerce").to_numpy(
                        dtype=np.float64, na_value=np.nan
                    ),
                    f"{c}: original (grey) vs protected (blue)",
                )
                for c in num_cols[:12]
            ]
            parts.append("<h2>Histograms</h2>" + "".join(figs))
    return parts


def _curves_section(curves: Iterable[tuple[str, bytes]]) -> list[str]:
    """The assessment's trade-off curves: (caption, PNG bytes) pairs as inline images."""
    parts: list[str] = []
    curves = list(curves or ())
    if curves:
        parts.append("<h2>Trade-off curves</h2>")
        for caption, png in curves:
            b64 = base64.b64encode(bytes(png)).decode("ascii")
            parts.append(
                f"<figure><img alt='{_e(caption)}' src='data:image/png;base64,{b64}'>"
                f"<figcaption>{_e(caption)}</figcaption></figure>"
            )
    return parts


__all__ = ["render_release_note", "render_assessment", "INTERNAL_MARK", "guarantee_html", "guarantee_clauses"]
