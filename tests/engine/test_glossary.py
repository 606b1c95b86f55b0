"""docs/glossary.md parses, and every measure key the engine emits has an entry (issue 11)."""

import re
from pathlib import Path

import numpy as np
import pandas as pd

from dpstudio import engine
from dpstudio.engine import glossary as G

NOT_MEASURES = {"warnings", "settings"}
REQUIRED_TERMS = {
    "sse-raw",
    "sse-normalised",
    "rl",
    "delta-statistics",
    "linking-risk",
    "confidence-c",
    "l",
    "t",
    "epsilon",
    "k",
    "precision",
    "fk",
    "Fk",
    "individual-risk",
    "global-risk",
    "expected-reidentifications",
    "l-diversity",
}


def _emitted_keys() -> set[str]:
    rng = np.random.default_rng(0)
    n = 300
    df = pd.DataFrame(
        {
            "x": rng.uniform(0, 100, n),
            "y": rng.uniform(0, 100, n),
            "g": rng.choice(["a", "b", "c"], n),
            "h": rng.choice(["u", "v"], n),
            "C": rng.lognormal(5, 1, n),
            "w": rng.uniform(1, 5, n),
        }
    )
    keys: set[str] = set()
    runs = [
        ("mdav", {"x": "k-quasi", "y": "k-quasi", "C": "confidential"}, {"k": 5}),
        ("k-eps", {"g": "k-quasi", "x": "eps-quasi"}, {"k": 5, "epsilon": 1.0, "confidence": 0.9}),
        ("laplace", {"x": "eps-quasi"}, {"epsilon": 1.0}),
    ]
    for m, roles, p in runs:
        res = engine.protect(df, m, roles, {"x": (0, 100), "y": (0, 100)}, seed=1, **p)
        out = engine.evaluate(
            res.aligned_original(), res.data, result=res, measures=("sse", "rl", "delta", "corr", "kanon")
        )
        keys |= set(out)
    from dpstudio.engine.measures.survey_risk import assess_risk

    rep = assess_risk(df, ["g", "h"], weight="w", sensitive=["C"], suda=True)
    keys |= set(rep.to_dict(per_record=True))
    return keys - NOT_MEASURES


def test_the_file_parses_with_stable_anchors():
    text = Path(G.glossary_path()).read_text(encoding="utf-8")
    heads = re.findall(r"(?m)^## ", text)
    g = G.load()
    assert len(g) == len(heads)  # every section has its anchor
    assert REQUIRED_TERMS <= set(g)
    assert all(len(v) > 40 for v in g.values())  # real explanations, not stubs


def test_every_measure_key_the_engine_emits_has_an_entry():
    keys = _emitted_keys()
    assert {"sse_normalized", "rl", "keps_linking_risk", "global_risk", "Fk"} <= keys
    missing = sorted(k for k in keys if G.term_for_measure(k) is None)
    assert not missing, missing
    assert "chance" in G.tooltip("rl") and G.tooltip("rl").startswith("Record linkage (RL) — ")
    assert G.tooltip("no-such-key") == ""


def test_parse_keeps_keys_and_strips_markup():
    e = G.parse(
        '## Title A\n<a id="a"></a>\n*Measure keys:* `x`, `y`\n\nText with '
        "[a link](#b) and e<sup>ε</sup>.\n\n## No anchor\ntext\n"
    )
    assert list(e) == ["a"]
    assert e["a"].measure_keys == ("x", "y") and e["a"].text == "Text with a link and e^ε."


def test_user_guide_covers_every_method_and_role():
    from dpstudio.engine.roles import Role

    text = (Path(G.glossary_path()).parent / "user_guide.md").read_text(encoding="utf-8")
    from tests.engine.test_guarantee_text import _shipped_methods

    for m in _shipped_methods():
        assert f"`{m['id']}`" in text, m["id"]
    for r in Role:
        assert f"**{r.value}**" in text, r
