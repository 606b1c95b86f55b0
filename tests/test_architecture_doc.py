"""The contributor docs stay true (issue 22 §8): ARCHITECTURE.md's package map names every
module of ``dpstudio``, and CONTRIBUTING.md's checks table lists exactly the checks that
``.ci/run`` runs (marked "yes"), with the same paths."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _package_map() -> str:
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    start = text.index("## Package map")
    return text[start : text.index("\n## ", start + 1)]


def test_package_map_names_every_module():
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", _package_map()))
    missing = []
    for path in sorted((ROOT / "dpstudio").rglob("*.py")):
        name = path.parent.name if path.stem == "__init__" else path.stem
        if name not in words:
            missing.append(path.relative_to(ROOT).as_posix())
    assert not missing, "not in docs/ARCHITECTURE.md's package map: " + ", ".join(missing)


def _ci_commands() -> set[str]:
    """The check commands of .ci/run (comments and set-up lines left out)."""
    out = set()
    for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines():
        cmd = line.split("#", 1)[0].strip()
        if cmd.split(" ")[0] in ("lint-imports", "ruff", "mypy"):
            out.add(" ".join(cmd.split()))
    return out


def _table_commands(in_ci: str) -> set[str]:
    """The commands of CONTRIBUTING.md's checks table whose row says ``in_ci`` (yes / not yet)."""
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    out = set()
    for row in text.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[2] != in_ci:
            continue
        for cmd in re.findall(r"`([^`]+)`", cells[1]):
            if cmd.split(" ")[0] in ("lint-imports", "ruff", "mypy"):
                out.add(" ".join(cmd.split()))
    return out


def test_checks_table_matches_ci():
    ci = _ci_commands()
    assert ci, "no checks found in .ci/run"
    assert _table_commands("yes") == ci
    assert not (_table_commands("not yet") & ci), "a check marked 'not yet' runs in .ci/run"


def test_pre_commit_checks_the_paths_ci_checks():
    """The ruff hooks of .pre-commit-config.yaml look at the folders .ci/run gives ruff."""
    ci_paths = {
        p
        for cmd in _ci_commands()
        if cmd.startswith("ruff")
        for p in cmd.split()[2:]
        if not p.startswith("-")
    }
    text = (ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8")
    for pattern in re.findall(r"files: \^\(([^)]*)\)/", text):
        assert set(pattern.split("|")) == ci_paths, (pattern, ci_paths)
