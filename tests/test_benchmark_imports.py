"""The benchmark scripts stay current: every ``dpstudio`` name they import exists (a script
importing a module from before the restructuring failed every case for a while, unnoticed:
benchmarks are not run by the tests).  Imports inside ``try: … except ImportError`` are
fallbacks for older commits (the asv history) and are skipped."""

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted((ROOT / "benchmarks").glob("*.py")) + sorted((ROOT / "benchmarks" / "asv").glob("*.py"))


def _fallbacks(tree: ast.AST) -> set[int]:
    """ids of the import nodes inside a try whose handlers catch ImportError."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
            isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError")
            for h in node.handlers
        ):
            for stmt in node.body + [s for h in node.handlers for s in h.body]:
                out.update(id(n) for n in ast.walk(stmt))
    return out


def _imports(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _fallbacks(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "dpstudio":
            for alias in node.names:
                yield node.module, alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "dpstudio":
                    yield alias.name, None


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_benchmark_imports_resolve(script):
    names = list(_imports(script))
    for module, name in names:
        mod = importlib.import_module(module)
        if name is not None and not hasattr(mod, name):
            importlib.import_module(f"{module}.{name}")  # a submodule; raises if missing


def test_the_check_sees_a_stale_import(tmp_path):
    stale = tmp_path / "bench_x.py"
    stale.write_text("def f():\n    from dpstudio.engine import microaggregation as MA\n")
    fallback = tmp_path / "bench_y.py"
    fallback.write_text(
        "try:\n    from dpstudio.engine.algorithms.microaggregation import mdav\n"
        "except ImportError:\n    from dpstudio.engine.microaggregation import mdav\n"
    )
    with pytest.raises(ImportError):
        test_benchmark_imports_resolve(stale)
    test_benchmark_imports_resolve(fallback)
