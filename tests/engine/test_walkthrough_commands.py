"""The walk-through's documented commands (docs/walkthrough.md, §8c, issue 23): the pipeline
JSON and the command line are read from the page, run through the CLI in-process, and what
the page quotes as their output -- the figures after every step, the weighted estimates, the
private notes and the composed guarantee sentence -- must be what the command prints, so that
the page cannot silently go stale.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil

import pytest

from dpstudio import cli
from tests.conftest import ROOT, shared_path

PAGE = ROOT / "docs" / "walkthrough.md"
FOLDER = "/home/me/survey"  # the folder the page says the command runs in


def block(text: str, name: str) -> str:
    """The fenced code block (or the blockquote) right after ``<!-- walkthrough-test: name -->``."""
    m = re.search(rf"<!-- walkthrough-test: {name} -->\n(```[a-z]*\n(.*?)\n```|> (.*?)\n\n)", text, re.S)
    assert m, f"docs/walkthrough.md has no '{name}' block after its marker"
    return m.group(2) if m.group(2) is not None else m.group(3)


@pytest.fixture(scope="module")
def documented(tmp_path_factory) -> dict:
    page = PAGE.read_text(encoding="utf-8")
    folder = tmp_path_factory.mktemp("survey").resolve()
    shutil.copy(shared_path("free1", "free1.csv"), folder / "free1.csv")
    (folder / "steps.json").write_text(block(page, "steps"))
    return {"page": page, "folder": folder}


def test_the_survey_chain_prints_what_the_walkthrough_quotes(documented, capsys, monkeypatch):
    page, folder = documented["page"], documented["folder"]
    steps = json.loads(block(page, "steps"))["steps"]
    assert [s["method"] for s in steps] == ["recode", "top-bottom-coding", "local-suppression", "pram"]
    argv = shlex.split(block(page, "command").replace("\\\n", " "))
    assert argv[:2] == ["dpstudio", "protect"]
    monkeypatch.chdir(folder)
    code = cli.main(argv[1:])
    out, err = capsys.readouterr()
    assert code == 0, err
    out = out.replace(str(folder), FOLDER)
    first, _, rest = out.partition("\n")
    # the composed guarantee, word for word, as printed and as written to the public metadata
    guarantee = block(page, "guarantee")
    assert first == f"Guarantee: {guarantee}"
    assert json.loads((folder / "release.metadata.json").read_text())["guarantee"] == guarantee
    # every line quoted as the output (after every step, weighted estimates) and as the notes
    assert rest.rstrip("\n") == block(page, "output")
    assert err.rstrip("\n") == block(page, "notes")
    # the files the page's export table lists, public and private
    names = sorted(p.name for p in folder.iterdir())
    assert names == sorted(
        [
            "free1.csv",
            "steps.json",
            "release.csv",
            "release.metadata.json",
            "release.transition_matrix.csv",
            "release.private.json",
        ]
    )
    assert (folder / "release.private.json").stat().st_mode & 0o077 == 0
    header = (folder / "release.transition_matrix.csv").read_text().splitlines()[0]
    assert header == "variable,stratum,from,to,probability"


def test_the_prose_figures_are_in_the_quoted_output(documented):
    """The figures the page's prose cites are among the quoted (and tested) output lines."""
    page = documented["page"]
    quoted = block(page, "output") + "\n" + block(page, "notes")
    for fig in [
        "records with f_k < 3: 103; expected re-identifications 1.74235",
        "values replaced: 433 top",
        "relative error -0.0100488",
        "140 key value(s) to missing in 135 record(s)",
        "records with f_k < 3: 0; expected re-identifications 0.696981",
        "PRAM changed 102 of 3995 values",
        "records with f_k < 3: 52; expected re-identifications 1.55308",
    ]:
        assert fig in quoted, fig
