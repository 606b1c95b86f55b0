"""guarantee_html (issue 11): guarantee sentences rendered readably -- one clause per line,
the scope in bold, e^ε as a formula -- without adding or dropping a word."""

import html
import re

import numpy as np
import pandas as pd
import pytest

from dpstudio import engine
from dpstudio.engine.report import guarantee_clauses, guarantee_html, render_assessment, render_release_note


def _text(fragment: str) -> str:
    """The visible text of a fragment, clauses joined by one space; sup written back as ^."""
    t = re.sub(r"<sup>(\w+|ε)</sup>", r"^\1", fragment)
    t = re.sub(r"<sup>(.*?)</sup>", r"^(\1)", t)
    t = t.replace("</div><div class='clause'>", " ")
    return html.unescape(re.sub(r"<[^>]+>", "", t))


def _releases():
    rng = np.random.default_rng(0)
    n = 300
    df = pd.DataFrame(
        {
            "x": rng.uniform(0, 100, n),
            "y": rng.uniform(0, 100, n),
            "g": rng.choice(["a", "b"], n),
            "o": rng.normal(size=n),
            "C": rng.lognormal(8, 1, n).round(),
        }
    )
    D = {"x": (0, 100), "y": (0, 100)}
    yield engine.protect(
        df[["x", "y", "o"]], "laplace", {"x": "eps-quasi", "y": "eps-quasi"}, D, epsilon=1.0, seed=1
    )
    yield engine.protect(
        df, "insensitive-dp", {"x": "eps-quasi", "y": "eps-quasi"}, D, k=5, epsilon=1.0, seed=1
    )
    yield engine.protect(df, "mdav", {"x": "k-quasi"}, k=5, seed=1)
    yield engine.protect(df, "t-close-dp", {"x": "k-quasi", "C": "confidential"}, epsilon=1.0, seed=1)


@pytest.mark.parametrize("res", list(_releases()), ids=lambda r: r.method)
def test_every_word_kept_one_clause_per_line_scope_bold(res):
    frag = guarantee_html(res.guarantee)
    assert _text(frag) == res.guarantee  # nothing added, nothing dropped
    clauses = guarantee_clauses(res.guarantee)
    assert frag.count("<div class='clause'>") == len(clauses) >= 2
    first = re.match(r"<div class='clause'><strong>(.*?)</strong>", frag)
    assert first and first.group(1).strip()  # the leading claim in bold
    if "Not covered:" in res.guarantee:
        assert "<strong>Not covered:</strong>" in frag
    if res.guarantee.startswith("Per-attribute only"):
        assert frag.startswith("<div class='clause'><strong>Per-attribute only — not")
        assert "<strong>What holds for each protected attribute&#x27;s column on its own:</strong>" in frag
    if "e^ε" in res.guarantee:
        assert "e<sup>ε</sup>" in frag and "e^ε" not in frag
    # used by both reports, which still carry the exact sentence for checking
    for page in (render_release_note(res), render_assessment(res, None)):
        assert frag in page and html.escape(res.guarantee, quote=True) in page


def test_formulas():
    assert guarantee_html("t = e^ε.") == "<div class='clause'><strong>t = e<sup>ε</sup>.</strong></div>"
    assert "10<sup>⌊log10(ub − lb)⌋ − 6</sup>" in guarantee_html("A. x is 10^(⌊log10(ub − lb)⌋ − 6) here.")
    assert "e<sup>ε</sup>-closeness" in guarantee_html("A. exp(ε)-closeness.")
    assert "<script>" not in guarantee_html("<script>alert(1)</script>")
