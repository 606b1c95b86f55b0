"""One-off: capture the figures of the OLD protect → measure paths (before engine.assess) into
tests/engine/golden/assess.json.  Run at the commit that introduced it; later commits replace
those paths, so this script is removed with them (see tests/engine/_assess_cases.py).
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dpstudio import cli, engine  # noqa: E402
from dpstudio.app import compute  # noqa: E402
from tests.engine._assess_cases import PROTECT_CASES, SEED, SWEEP_CASES, plain  # noqa: E402

out = {"protect": {}, "sweep": {}}
for name, (data, method, roles, domains, hier, params) in PROTECT_CASES.items():
    df = data()
    res = engine.protect(df, method, roles, domains, seed=SEED, hierarchies=hier or None, **params)
    entry = {
        "cli_summary": plain(cli._evaluate_result(res, ("sse", "rl"), hier)),
        "cli_full": plain(cli._evaluate_result(res, ("sse", "rl", "delta", "corr", "kanon"), hier)),
    }
    res2, ev = compute.protect_and_evaluate(df, method, roles, domains, hier, SEED, dict(params))
    app = {k: v for k, v in ev.items() if k != "_app"}
    cols, mat = ev["_app"]["corr"]
    entry["app"] = plain(app)
    entry["app_corr"] = {"columns": list(cols), "matrix": plain(mat)}
    out["protect"][name] = entry
    print(name, "ok", flush=True)
for name, (data, method, roles, domains, hier, ks, eps, reps, params) in SWEEP_CASES.items():
    df = data()
    pts = list(
        engine.sweep(df, method, roles, domains, ks=ks, epsilons=eps, repeats=reps, seed=SEED,
                     hierarchies=hier or None, **params)
    )
    out["sweep"][name] = [
        {"k": p.k, "epsilon": p.epsilon, "values": plain(p.values), "runs": plain(p.runs), "skipped": p.skipped}
        for p in pts
    ]
    print(name, "ok", flush=True)
path = Path(__file__).resolve().parent.parent / "tests" / "engine" / "golden" / "assess.json"
path.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
print("written", path)
