"""Kill-during-export drill (issue 15): a subprocess exporting a big release is SIGKILLed at
random moments; afterwards the folder holds the old pair, the new pair, or a state that
``dpstudio verify`` reports as a mismatch -- never a metadata silently describing another
release.  The next clean run removes the temporary files of the killed ones."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from dpstudio import cli
from dpstudio.engine.export import verify_release
from dpstudio.engine.io import file_sha256

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = r"""
import sys, numpy as np, pandas as pd
from dpstudio.engine.types import ProtectionResult
from dpstudio.engine.export import export_release
n, marker, out, slow = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], float(sys.argv[4])
if slow:  # a slow disk: each rename takes a while, so that kills also land between renames
    import time
    import dpstudio.engine.safe_write as sw  # the one writer's rename of each file
    _commit = sw._commit
    def slow_commit(*a, **kw):
        time.sleep(slow)
        return _commit(*a, **kw)
    sw._commit = slow_commit
rng = np.random.default_rng(int(marker))
df = pd.DataFrame({"id": np.arange(n), "income": rng.normal(3e4, 8e3, n).round(2),
                   "x": np.full(n, marker)})
res = ProtectionResult(data=df, method="test", method_name="Test", params={"k": 3},
    guarantee="test", is_dp=False, roles={"income": "k-quasi"}, domains={},
    protected_attributes=["income"], info={}, warnings=[], row_map=None, dropped_rows=[],
    tables={"groups": df[["x"]].head(1000)}, original=None)
print("ready", flush=True)
export_release(res, out, audit=True)
print("done", flush=True)
"""

N_ROWS = 100_000
SLOW = 0.12  # seconds per rename in the drill (5 renames: a wide window between them)


def _run_child(out, marker, slow=0.0):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(N_ROWS), str(marker), str(out), str(slow)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )


def _pair(folder):
    d, m = folder / "out.csv", folder / "out.metadata.json"
    return (file_sha256(d) if d.exists() else None, file_sha256(m) if m.exists() else None)


def _temps(folder):
    return sorted(n for n in os.listdir(folder) if ".tmp" in n)


def test_kill_during_export_never_leaves_an_undetected_mismatch(tmp_path):
    out = tmp_path / "out.csv"
    # the old release (a clean run), and how long a clean export takes
    p = _run_child(out, 1, SLOW)
    assert p.stdout.readline().strip() == "ready"
    t0 = time.monotonic()
    assert p.stdout.readline().strip() == "done"
    span = time.monotonic() - t0  # how long the export itself takes
    p.wait(timeout=60)
    old = _pair(tmp_path)
    assert verify_release(out)[0]
    rng = np.random.default_rng(15)
    outcomes = {"old": 0, "new": 0, "detected": 0}
    kills = 0
    for trial in range(8):
        marker = 100 + trial
        p = _run_child(out, marker, SLOW)
        assert p.stdout.readline().strip() == "ready"
        time.sleep(float(rng.uniform(0.0, 1.05 * span)))
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            kills += 1
        p.wait(timeout=60)
        ok, line = verify_release(out) if out.exists() else (False, "no release")
        now = _pair(tmp_path)
        if ok:
            assert now == old or now != old  # a consistent pair
            outcomes["old" if now == old else "new"] += 1
            old = now  # the pair in place for the next trial
        else:
            # the old metadata is removed before anything is renamed and the new one comes
            # last: a kill in between leaves a release WITHOUT metadata, never one whose
            # metadata describes another release
            assert "has no metadata" in line or line == "no release", line
            outcomes["detected"] += 1
            old = now
    assert kills >= 5, (kills, span)
    # a clean run removes the temporary files the killed runs left, and the pair is consistent
    p = _run_child(out, 999)
    assert p.communicate(timeout=60)[0].strip().endswith("done")
    assert _temps(tmp_path) == []
    assert verify_release(out)[0]
    assert cli.main(["verify", str(out)]) == 0
    print("kill drill:", kills, "kills,", outcomes)


def test_metadata_names_the_release_digest_and_verify_detects_a_swap(tmp_path, capsys):
    out = tmp_path / "out.csv"
    p = _run_child(out, 1)
    p.communicate(timeout=60)
    first = out.read_bytes()
    meta_first = (tmp_path / "out.metadata.json").read_bytes()
    groups_first = (tmp_path / "out.groups.csv").read_bytes()
    p = _run_child(out, 2)
    p.communicate(timeout=60)
    assert cli.main(["verify", str(out)]) == 0
    assert cli.main(["verify", str(tmp_path / "out.metadata.json")]) == 0
    (tmp_path / "out.metadata.json").write_bytes(meta_first)  # old metadata, new release
    assert cli.main(["verify", str(out)]) == 1
    assert "MISMATCH" in capsys.readouterr().out
    out.write_bytes(first)  # the old release ...
    assert cli.main(["verify", str(out)]) == 1  # ... but the new table
    (tmp_path / "out.groups.csv").write_bytes(groups_first)  # the old set again: fine
    assert cli.main(["verify", str(out)]) == 0
    (tmp_path / "out.groups.csv").write_text("x\n1\n")  # a table altered
    assert cli.main(["verify", str(out)]) == 1
    (tmp_path / "out.metadata.json").unlink()  # no metadata at all
    assert cli.main(["verify", str(out)]) == 1
    assert cli.main(["verify", str(tmp_path / "nothing.csv")]) == 2


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_replaced_release_keeps_umask_permissions(tmp_path):
    out = tmp_path / "out.csv"
    out.write_text("old\n")
    os.chmod(out, 0o600)
    old = os.umask(0o022)
    try:
        p = _run_child(out, 3)
        p.communicate(timeout=60)
    finally:
        os.umask(old)
    assert (os.stat(out).st_mode & 0o777) == 0o644
    assert (os.stat(tmp_path / "out.metadata.json").st_mode & 0o777) == 0o644
    assert (os.stat(tmp_path / "out.private.json").st_mode & 0o777) == 0o600


def test_stale_temp_files_of_others_are_left_alone(tmp_path):
    (tmp_path / ".out.abcd1234.tmp.csv").write_text("ours, stale\n")
    (tmp_path / ".other.abcd1234.tmp.csv").write_text("not ours\n")
    (tmp_path / "out.tmp.csv").write_text("a user file\n")
    p = _run_child(tmp_path / "out.csv", 4)
    p.communicate(timeout=60)
    assert sorted(os.listdir(tmp_path)) == [
        ".other.abcd1234.tmp.csv",
        "out.csv",
        "out.groups.csv",
        "out.metadata.json",
        "out.private.json",
        "out.tmp.csv",
    ]
