"""Issue 21, part 4: one line, never a traceback or a hang, on every surface.

Each test reproduces one finding of the issue (every one of them failed on the code before
this change: a traceback, a hang, or a wrong success) and checks the one line -- exit code 2,
``dpstudio: error: …`` naming the thing and what to do -- or the right answer.  Paths that are
FIFOs or devices run under a timer, so a regression ends the test instead of hanging it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpstudio import cli
from dpstudio.cli import protect as cli_protect
from dpstudio.engine import io as dio
from dpstudio.engine import query as qd
from dpstudio.engine.errors import DPStudioError, InputError, ParameterError
from dpstudio.engine.export import UNSIGNED_NOTE, verify_release
from dpstudio.engine.recipe import Recipe, load_recipe

N = 40


@contextlib.contextmanager
def time_limit(seconds: float = 20.0):
    """Fail (instead of hanging) when the body blocks: a FIFO opened for reading waits forever."""

    def on_alarm(signum, frame):
        raise AssertionError(f"blocked for more than {seconds} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def run(argv, capsys) -> tuple[int, str]:
    code = cli.main([str(a) for a in argv])
    return code, capsys.readouterr().err


def one_line(code: int, err: str, *needles: str) -> str:
    assert code == 2, err
    lines = [ln for ln in err.strip().splitlines() if not ln.startswith("dpstudio: warning:")]
    assert len(lines) == 1 and lines[0].startswith("dpstudio: error: "), err
    assert "Traceback" not in err
    for n in needles:
        assert n.lower() in lines[0].lower(), lines[0]
    return lines[0]


@pytest.fixture
def data(tmp_path) -> Path:
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"id": np.arange(N), "x": rng.integers(0, 100, N), "g": rng.choice(list("ab"), N)})
    p = tmp_path / "d.csv"
    df.to_csv(p, index=False)
    return p


@pytest.fixture
def fifo(tmp_path) -> Path:
    p = tmp_path / "pipe.json"
    os.mkfifo(p)
    return p


# =========================================================================== the reading primitive


@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "/dev/urandom", "folder"])
def test_read_small_file_refuses_non_regular_files_without_blocking(special, fifo, tmp_path):
    path = {"fifo": fifo, "folder": tmp_path}.get(special, special)
    with time_limit(), pytest.raises(InputError) as e:
        dio.read_small_file(path, what="recipe")
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg and "not a regular file" in msg


def test_read_small_file_size_limit(tmp_path):
    p = tmp_path / "big.json"
    p.write_bytes(b" " * 2000)
    assert len(dio.read_small_file(p, what="ledger", max_bytes=2000)) == 2000
    with pytest.raises(InputError, match="more than the"):
        dio.read_small_file(p, what="ledger", max_bytes=1999)


def test_read_small_file_refuses_a_fifo_swapped_in_after_the_stat(tmp_path, monkeypatch):
    """The fstat after the non-blocking open catches a FIFO put in place of the checked file."""
    reg, pipe = tmp_path / "r.json", tmp_path / "p.json"
    reg.write_text("{}")
    os.mkfifo(pipe)
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda p, flags, *a: real_open(str(pipe), flags, *a))
    with time_limit(), pytest.raises(InputError, match="FIFO"):
        dio.read_small_file(reg, what="recipe")


def test_loads_json_depth_and_huge_numbers_are_one_line():
    for text, words in (
        ("[" * 100_000 + "]" * 100_000, "nested 100000 levels"),
        ('{"k": ' + "9" * 5000 + "}", "5,000 digits"),
        ('{"a": ', "not valid JSON"),
        (b"\xff\xfe{}", "not UTF-8"),
    ):
        with pytest.raises(InputError, match=words) as e:
            dio.loads_json(text, what="recipe")
        assert "\n" not in str(e.value)
    # brackets inside strings do not count; 100 levels are fine
    assert dio.loads_json('{"a": "[[[[[[[[[[[[[[[["}', what="x") == {"a": "[[[[[[[[[[[[[[[["}
    assert dio.json_depth("[" * 100 + "]" * 100) == 100


# =========================================================================== data files


def test_data_file_that_is_a_fifo_or_device_is_refused(fifo, tmp_path, capsys):
    csv_fifo = tmp_path / "pipe.csv"
    os.mkfifo(csv_fifo)
    for src in (csv_fifo, "/dev/zero"):
        with time_limit():
            with pytest.raises(InputError, match="not a regular file"):
                dio.read_table(src)
            code, err = run(
                ["protect", src, tmp_path / "o.csv", "--method", "mdav", "--k", "2", "--role", "x=k-quasi"],
                capsys,
            )
        one_line(code, err, str(src), "not a regular file")


@pytest.mark.parametrize("rows", [6, 700])  # the per-value path and the vectorised one
def test_csv_integer_beyond_4300_digits_reads_and_round_trips(rows, tmp_path, capsys):
    """Was: ValueError 'Exceeds the limit (4300 digits)' (reader, CLI, app)."""
    huge = "9" * 5000
    body = "".join(f"{i},{i}\n" for i in range(rows - 1)) + f"{rows},{huge}\n"
    src = tmp_path / "huge.csv"
    src.write_text("x,y\n" + body)
    df, meta = dio.read_table(src)
    assert df["y"].dtype == np.float64 and np.isposinf(df["y"].iloc[-1])
    assert "y" in meta.texts  # written back as read
    code, err = run(
        [
            "protect",
            src,
            tmp_path / "o.csv",
            "--method",
            "mdav",
            "--k",
            "2",
            "--role",
            "y=k-quasi",
            "--no-measures",
        ],
        capsys,
    )
    one_line(code, err, "'y'", "infinite")
    code, err = run(
        [
            "protect",
            src,
            tmp_path / "o.csv",
            "--method",
            "mdav",
            "--k",
            "2",
            "--role",
            "x=k-quasi",
            "--no-measures",
            "--no-audit-trail",
        ],
        capsys,
    )
    assert code == 0, err
    out = (tmp_path / "o.csv").read_text().splitlines()
    assert out[0].split(",")[1] == "y"  # records in random order: compared as a multiset
    assert sorted(ln.split(",")[1] for ln in out[1:]) == sorted(ln.split(",")[1] for ln in body.splitlines())
    assert huge in {ln.split(",")[1] for ln in out[1:]}  # the 5,000 digits written back as read


# =========================================================================== recipes


def _recipe(tmp_path: Path, obj, raw: str | None = None) -> Path:
    p = tmp_path / "r.json"
    p.write_text(raw if raw is not None else json.dumps(obj))
    return p


RECIPE_CASES = [
    # (what the file holds, words of the one line)
    ("[" * 100_000 + "]" * 100_000, ["nested", "levels"]),
    ('{"schema_version": Infinity, "method": "mdav"}', ["schema_version", "inf"]),
    ('{"schema_version": NaN, "method": "mdav"}', ["schema_version"]),
    ('{"schema_version": "3", "method": "mdav"}', ["schema_version"]),
    ('{"method": ["mdav"]}', ["'method'", "text"]),
    ('{"method": "mdav", "params": {"k": ' + "9" * 5000 + "}}", ["5,000 digits"]),
    ('{"method": "mdav", "input": {"read_options": ["a"]}}', ["read_options", "object"]),
    ('{"method": "mdav", "input": {"read_options": {"sep": 5}}}', ["'sep'", "text"]),
    ('{"method": "mdav", "sweep": {"repeats": "x"}}', ["repeats", "10,000"]),
    ('{"method": "mdav", "sweep": {"repeats": 1e9}}', ["repeats", "10,000"]),
    ('{"method": "mdav", "sweep": {"repeats": 1000000000}}', ["repeats", "10,000"]),
    ('{"method": "mdav", "roles": {"x": 3}}', ["role of column 'x'"]),
    ('{"method": "mdav", "domains": {"x": "12"}}', ["domain of column 'x'"]),
    ('{"method": "mdav", "domains": {"x": [0, 1' + "0" * 400 + "]}}", ["domain of column 'x'"]),
    ('{"method": "mdav", "precision": {"x": 1' + "0" * 400 + "}}", ["precision of column 'x'"]),
    ('{"method": "mdav", "seed_pinned": "yes"}', ["seed_pinned"]),
    ('{"method": "mdav", "hierarchies": {"x": 3}}', ["hierarchy of column 'x'"]),
]


@pytest.mark.parametrize("raw,words", RECIPE_CASES)
def test_recipe_fields_are_checked_with_one_line(raw, words, tmp_path, data, capsys):
    p = _recipe(tmp_path, None, raw)
    with pytest.raises(InputError) as e:
        load_recipe(p)
    assert "\n" not in str(e.value)
    cmd = "sweep" if "sweep" in raw else "protect"
    argv = [cmd, data, "--out", tmp_path / "s.csv"] if cmd == "sweep" else [cmd, data, tmp_path / "o.csv"]
    code, err = run([*argv, "--recipe", p, "--role", "x=k-quasi", "--k", "2"], capsys)
    one_line(code, err, "--recipe", *words)


@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "/dev/urandom"])
def test_recipe_path_that_is_a_fifo_or_device(special, fifo, tmp_path, data, capsys):
    path = fifo if special == "fifo" else special
    with time_limit():
        code, err = run(
            ["protect", data, tmp_path / "o.csv", "--recipe", path, "--role", "x=k-quasi", "--k", "2"], capsys
        )
    one_line(code, err, "--recipe", "not a regular file")


def test_a_valid_recipe_still_loads(tmp_path):
    rec = Recipe(
        method="mdav",
        params={"k": 3},
        roles={"x": "k-quasi"},
        domains={"x": (0.0, 9.0)},
        read_options={"sep": ";", "sheet": 0},
        sweep={"ks": "2:5", "epsilons": [1, 2.5], "repeats": 10_000},
        seed=5,
        seed_pinned=True,
    )
    p = _recipe(tmp_path, rec.to_dict())
    back = load_recipe(p)
    assert back.params == {"k": 3} and back.domains == {"x": (0.0, 9.0)} and back.sweep["repeats"] == 10_000


def test_sweep_repeats_limit_in_engine_and_cli(tmp_path, data, capsys):
    from dpstudio import engine
    from dpstudio.engine.sweeps import MAX_REPEATS

    df = pd.read_csv(data)
    for bad in (0, MAX_REPEATS + 1, 10**9, 2.0, "x", True):
        with pytest.raises(ParameterError, match="repeats"):
            next(iter(engine.sweep(df, "mdav", {"x": "k-quasi"}, ks=[2], repeats=bad)))
    code, err = run(
        [
            "sweep",
            data,
            "--out",
            tmp_path / "s.csv",
            "--method",
            "mdav",
            "--role",
            "x=k-quasi",
            "--k",
            "2",
            "--repeats",
            str(10**9),
        ],
        capsys,
    )
    one_line(code, err, "--repeats", "10,000")


# =========================================================================== hierarchies, ledgers


@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "folder"])
def test_hierarchy_path_that_is_not_a_file(special, fifo, tmp_path, data, capsys):
    path = {"fifo": fifo, "folder": tmp_path}.get(special, special)
    with time_limit():
        code, err = run(
            [
                "protect",
                data,
                tmp_path / "o.csv",
                "--method",
                "k-eps",
                "--k",
                "2",
                "--role",
                "g=k-quasi",
                "--hierarchy",
                f"g={path}",
                "--no-measures",
            ],
            capsys,
        )
    one_line(code, err, "hierarchy", "not a regular file")


@pytest.mark.parametrize("special", ["fifo", "/dev/urandom"])
def test_ledger_path_that_is_not_a_file(special, fifo, tmp_path, data, capsys):
    path = fifo if special == "fifo" else special
    with time_limit():
        code, err = run(
            [
                "query",
                data,
                "count",
                "--epsilon",
                "0.1",
                "--range",
                "count=0:50",
                "--ledger",
                path,
                "--budget",
                "1",
            ],
            capsys,
        )
    one_line(code, err, "ledger", "not a regular file")


# =========================================================================== query desk


def _q(data, text, *extra):
    return ["query", data, text, "--epsilon", "0.5", "--range", "count=0:50", *extra]


@pytest.mark.parametrize(
    "text,words",
    [
        ("count where " + "(" * 10_000 + "x > 1" + ")" * 10_000, ["nested more than 200"]),
        ("count where " + "not " * 10_000 + "x > 1", ["nested more than 200"]),
        ("count where " + " and ".join(["x > 1"] * 8000), ["more than 1,000 comparisons"]),
        ("count where " + " or ".join(["x > 1"] * 8000), ["more than 1,000 comparisons"]),
        ("count where x > " + "9" * 5000, ["5,000 characters"]),
        ("count where x in (" + ", ".join(["1"] * 1001) + ")", ["more than 1,000 comparisons"]),
        ("count where g == '\\x'", None),  # was UnicodeDecodeError (unicode_escape): now the text x
    ],
)
def test_query_sizes_give_one_line(text, words, data, capsys):
    code, err = run(_q(data, text), capsys)
    if words is None:
        assert code == 0, err
        return
    one_line(code, err, *words)


def test_query_filters_at_the_limits_are_answered(data):
    df = pd.read_csv(data)
    for where in (
        "(" * 199 + "x > 1" + ")" * 199,
        "not " * 200 + "x > 1",
        " and ".join(["x > 1"] * 1000),
        " or ".join(["x >= 0"] * 500 + ["x < 0"] * 500),
    ):
        node = qd.parse_filter(where)
        m = qd.evaluate_filter(df, node)
        assert m.shape == (N,)
        ans = qd.refine_query(
            df, f"count where {where}", qd.Prior.uniform(qd.NumericRange(0, 50, 1)), 0.5, rng=1
        )
        assert ans.true_value == int(m.sum())
    assert qd.evaluate_filter(df, qd.parse_filter("not " * 200 + "x > 1")).tolist() == (df.x > 1).tolist()


def test_prior_categorical_text_on_a_numeric_range(data, capsys):
    code, err = run(
        ["query", data, "mean(x)", "--epsilon", "1", "--range", "x=0:100", "--prior", "categorical:a=1"],
        capsys,
    )
    one_line(code, err, "prior value 'a'", "numeric")
    with pytest.raises(ParameterError, match="not a point"):
        qd.parse_prior("categorical:1e999=1", qd.NumericRange(0, 100, 1)).weights()


def test_integer_literals_above_2_53_are_exact():
    """Was: the literal went through a double, so `id == 2^53 + 1` matched the record 2^53."""
    ids = np.array([2**53, 2**53 + 1, 7], dtype=np.int64)
    df = pd.DataFrame(
        {"id": ids, "v": [10, 20, 30], "t": [str(i) for i in ids], "f": [float(2**53), 1.0, 2.0]}
    )
    assert qd.parse_filter(f"id == {2**53 + 1}") == ("cmp", "==", "id", 2**53 + 1)
    for col in ("id", "t"):
        assert qd.evaluate_filter(df, qd.parse_filter(f"{col} == {2**53 + 1}")).tolist() == [
            False,
            True,
            False,
        ]
        assert qd.evaluate_filter(df, qd.parse_filter(f"{col} == {2**53}")).tolist() == [True, False, False]
    # a double column compared with an integer no double holds: exact
    assert qd.evaluate_filter(df, qd.parse_filter(f"f == {2**53 + 1}")).tolist() == [False] * 3
    assert qd.evaluate_filter(df, qd.parse_filter(f"f < {2**53 + 1}")).tolist() == [True] * 3
    assert qd.evaluate_filter(df, qd.parse_filter(f"id > {2**64}")).tolist() == [False] * 3
    ans = qd.refine_query(
        df, f"value(v) where id == {2**53 + 1}", qd.Prior.uniform(qd.NumericRange(0, 40, 1)), 1.0, rng=3
    )
    assert ans.true_value == 20  # the record 2^53 + 1, not 2^53


def test_infinite_values_make_filters_overlap_and_are_charged():
    """Was: `x == 1e999` and `x > 5` counted as disjoint (max εi charged) although +inf
    satisfies both: charged 0.5 for a true loss of 0.9."""
    df = pd.DataFrame({"x": [1.0, np.inf, 7.0, -np.inf]})
    comps = qd.parse_any("count where x == 1e999; count where x > 5").components
    masks = [qd.evaluate_filter(df, qd.parse_filter(c.where)) for c in comps]
    assert (masks[0] & masks[1]).any()  # the record +inf is in both
    assert not qd.disjoint_components(comps)
    assert not qd.disjoint_components(qd.parse_any("count where x <= -1e999; count where x < 0").components)
    assert qd.disjoint_components(qd.parse_any("count where x < 1e999; count where x == 1e999").components)
    sup = qd.NumericRange(0, 4, 1)
    ans = qd.refine_multicomponent(
        df,
        "count where x == 1e999; count where x > 5",
        [qd.Prior.uniform(sup)] * 2,
        [0.5, 0.4],
        mode="split",
        rng=1,
    )
    assert ans.epsilon == pytest.approx(0.9)
    # a mean over +inf and -inf is undefined: answered from the prior (was fsum's ValueError)
    ans = qd.refine_query(df, "mean(x)", qd.Prior.uniform(qd.NumericRange(0, 10, 1)), 0.5, rng=1)
    assert any("not a number" in n for n in ans.notes)


def test_laplace_sensitivity_per_statistic():
    r = qd.NumericRange(0, 12000, 10)
    assert qd.laplace_sensitivity("count", qd.NumericRange(0, 1000, 1))[0] == 1.0
    assert qd.laplace_sensitivity("proportion", qd.NumericRange(0, 1, 0.01), n_total=500)[0] == pytest.approx(
        1 / 500
    )
    assert qd.laplace_sensitivity("mean", r, n=600)[0] == pytest.approx(20.0)
    assert qd.laplace_sensitivity("sum", qd.NumericRange(0, 1e6, 100), value_range=(0, 12000))[0] == 12000
    assert qd.laplace_sensitivity("sum", r)[0] == 12000
    assert qd.laplace_sensitivity("value", r)[0] == 12000 and qd.laplace_sensitivity("median", r)[0] == 12000
    assert qd.laplace_sensitivity("mode", qd.CategoricalRange((1, 2)))[0] is None
    assert qd.laplace_sensitivity("mean", r, n=0)[0] is None


# =========================================================================== verify


@pytest.fixture
def release(tmp_path, data, capsys) -> Path:
    out = tmp_path / "rel.csv"
    code, err = run(
        [
            "protect",
            data,
            out,
            "--method",
            "mdav",
            "--k",
            "3",
            "--role",
            "x=k-quasi",
            "--no-measures",
            "--no-audit-trail",
        ],
        capsys,
    )
    assert code == 0, err
    return out


def _edit(release: Path, fn) -> None:
    mp = release.with_suffix(".metadata.json")
    m = json.loads(mp.read_text())
    fn(m)
    mp.write_text(json.dumps(m))


def test_verify_ok_says_the_metadata_is_not_signed(release, capsys):
    ok, line = verify_release(release)
    assert ok and line.startswith("OK:") and UNSIGNED_NOTE in line and f"{N:,} records" in line
    code = cli.main(["verify", str(release)])
    assert code == 0 and "not signed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "edit",
    [
        lambda m: m.__setitem__("records_released", m["records_released"] - 1),
        lambda m: m.__setitem__("records_released", m["records_released"] + 1000),
        lambda m: m.__setitem__("output_sha256", "0" * 64),
        lambda m: m.pop("records_released"),
    ],
)
def test_verify_detects_edited_counts_and_digests(edit, release, capsys):
    """Was: OK after editing records_released or output_sha256 in the metadata."""
    _edit(release, edit)
    ok, line = verify_release(release)
    assert not ok and line.startswith("MISMATCH:") and "\n" not in line
    assert cli.main(["verify", str(release)]) == 1


@pytest.mark.parametrize(
    "edit,words",
    [
        (lambda m: m["files"].__setitem__("output", ["rel.csv"]), "files.output"),
        (lambda m: m["files"]["output"].__setitem__("name", 5), "name"),
        (lambda m: m.__setitem__("files", "x"), "files"),
        (lambda m: m.__setitem__("records_released", "40"), "records_released"),
        (lambda m: m["files"].__setitem__("tables", []), "files.tables"),
    ],
)
def test_verify_wrong_types_are_one_line(edit, words, release, capsys):
    _edit(release, edit)
    code, err = run(["verify", release], capsys)
    one_line(code, err, words)


@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
def test_verify_metadata_that_is_not_a_file(special, release, capsys):
    mp = release.with_suffix(".metadata.json")
    mp.unlink()
    if special == "fifo":
        os.mkfifo(mp)
    else:
        mp.symlink_to(special)
    with time_limit():
        code, err = run(["verify", release], capsys)
    one_line(code, err, "metadata file", "not a regular file")


# =========================================================================== memory


def test_memory_error_anywhere_is_the_dask_line(monkeypatch, data, tmp_path, capsys):
    def boom(*a, **k):
        raise MemoryError()

    monkeypatch.setattr(cli_protect, "_prepare_and_run", boom)
    code, err = run(
        ["protect", data, tmp_path / "o.csv", "--method", "mdav", "--k", "2", "--role", "x=k-quasi"], capsys
    )
    one_line(code, err, "out of memory", "--engine dask")


def test_cgroup_limits_are_read(tmp_path):
    """v2 memory.max and v1 memory.limit_in_bytes (with the reclaimable file cache not counted)."""
    from dpstudio.engine import memory as M

    v2 = tmp_path / "v2"
    (v2 / "user" / "app").mkdir(parents=True)
    (v2 / "user" / "memory.max").write_text("max\n")
    (v2 / "user" / "app" / "memory.max").write_text(str(1 << 30))
    (v2 / "user" / "app" / "memory.current").write_text(str(600 << 20))
    (v2 / "user" / "app" / "memory.stat").write_text(f"anon 1\ninactive_file {100 << 20}\n")
    got = M._cgroups("0::/user/app\n", [(str(v2), "cgroup2", "rw")])
    assert got == {"the control group's memory limit": (1 << 30) - (500 << 20)}
    v1 = tmp_path / "v1"
    v1.mkdir()
    (v1 / "memory.limit_in_bytes").write_text(str(512 << 20))
    (v1 / "memory.usage_in_bytes").write_text(str(12 << 20))
    got = M._cgroups("4:memory:/process/abc\n", [(str(v1), "cgroup", "rw,memory")])
    assert got == {"the control group's memory limit": 500 << 20}
    (v1 / "memory.limit_in_bytes").write_text("9223372036854771712")  # unlimited
    assert M._cgroups("4:memory:/\n", [(str(v1), "cgroup", "rw,memory")]) == {}


@pytest.mark.parametrize(
    "edit,words",
    [
        (lambda t: t.replace('"spent": 0.5', '"spent": 1' + "0" * 400), "spent total"),  # was OverflowError
        (
            lambda t: t.replace('"response": 3', '"response": Infinity'),
            "not a finite number",
        ),  # was ValueError at save
        (lambda t: "[" * 100_000 + "]" * 100_000, "nested"),
        (lambda t: t.replace('"total": 5.0', '"total": ' + "9" * 5000), "5,000 digits"),
    ],
)
def test_damaged_ledger_files_are_one_line(edit, words, tmp_path):
    """Found by the settings fuzzer (10,000 cases) in the ledger loading."""
    from dpstudio.engine.io import file_sha256

    led = qd.BudgetLedger(5.0, dataset="d.csv", digest=file_sha256(__file__))
    led.spend(0.5, query="count", kind="statistical", prior="uniform", response=3, requester="x")
    text = led.to_json()
    assert '"spent": 0.5' in text and '"response": 3' in text and '"total": 5.0' in text
    p = tmp_path / "ledger.json"
    p.write_text(edit(text))
    with pytest.raises(DPStudioError) as e:
        got = qd.load_ledger(p)
        got.to_json()
    assert "\n" not in str(e.value) and words in str(e.value)
