"""Issue 13, the compiled OLA search for discernibility and AECS (``_ola_kernel``): it must be
the numpy search step for step — the same nodes evaluated, the same optimum, the same loss to
the last bit, the same release — on random tables with random hierarchies, with an arena
large enough to keep every table and with one so small that tables are overwritten all the
time; its class counts (rolled up from stored tables of nodes below) must equal the plain
counts at every node in any order; and the brute-force optimum must hold with it too."""

import contextlib
import math
import os
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpstudio.engine.algorithms import ola as OLA
from dpstudio.engine.algorithms.generalization import encode_quasis
from dpstudio.engine.algorithms.generalization_metrics import _make_loss
from dpstudio.engine.algorithms.ola import ola
from tests.engine import test_ola_speed_bounds as speed_bounds
from tests.engine.test_ola_speed_bounds import _case

KERNEL_METRICS = ["discernibility", "aecs"]


def numpy_search(*args, **kwargs):
    with mock.patch.dict(os.environ, {"DPSTUDIO_OLA_NUMPY": "1"}):
        return ola(*args, **kwargs)


@contextlib.contextmanager
def kernel_asked():
    """The compiled search asked for; yields the list of whether it really ran, per ``ola``."""
    assert OLA._ola_kernel() is not None, "numba is a dependency: the compiled search must load"
    before = OLA._Lattice._kernel_inputs
    used: list[bool] = []

    def spy(self, kmod):
        out = before(self, kmod)
        used.append(out is not None)
        return out

    with (
        mock.patch.dict(os.environ, {"DPSTUDIO_OLA_KERNEL": "1"}),
        mock.patch.object(OLA._Lattice, "_kernel_inputs", spy),
    ):
        yield used


def kernel_search(*args, **kwargs):
    """``ola`` with the compiled search asked for; also whether it really ran."""
    with kernel_asked() as used:
        res = ola(*args, **kwargs)
    return res, used


def _wide_case(seed, n):
    """4-6 attributes with 2-5 levels: lattices of up to a few hundred nodes, so that nodes
    are rolled up from predecessors, recent nodes and group-A tables."""
    return _case(seed, n, d=(4, 7), leaves=(2, 9), heights=(2, 6), alpha=0.8)


def _same(a, b):
    assert a.node == b.node
    assert a.loss == b.loss or (math.isnan(a.loss) and math.isnan(b.loss))  # bit for bit
    assert a.info["nodes_evaluated"] == b.info["nodes_evaluated"]
    assert np.array_equal(a.class_id, b.class_id)
    for c in a.labels:
        assert list(a.labels[c]) == list(b.labels[c])


@pytest.mark.parametrize("metric", KERNEL_METRICS)
@pytest.mark.parametrize("arena", [0, 1])
@settings(max_examples=20, deadline=None)
@given(
    seed=st.integers(0, 100_000),
    n=st.integers(20, 400),
    k=st.integers(1, 6),
    suppression=st.sampled_from([0.0, 0.02, 0.05, 0.1, 0.3]),
)
def test_kernel_search_is_the_numpy_search(metric, arena, seed, n, k, suppression):
    df, hs = _wide_case(seed, n)
    cols = list(hs)
    try:
        ref = numpy_search(df, cols, k, hierarchies=hs, suppression=suppression, loss=metric)
    except ValueError as e:  # k out of reach: the compiled search must say the same
        with pytest.raises(ValueError) as again:
            kernel_search(df, cols, k, hierarchies=hs, suppression=suppression, loss=metric)
        assert str(again.value) == str(e)
        return
    # arena 1: the smallest arena allowed (two bottom tables), overwritten all the time
    with mock.patch.object(OLA, "_ARENA_ROWS", [arena]):
        res, used = kernel_search(df, cols, k, hierarchies=hs, suppression=suppression, loss=metric)
    assert used == [True]
    _same(ref, res)


@pytest.mark.parametrize("metric", KERNEL_METRICS)
def test_kernel_optimum_equals_brute_force(metric):
    """test_ola_speed_bounds' brute-force test (every example of it) with the compiled search."""
    with kernel_asked() as used:
        speed_bounds.test_optimum_and_value_equal_brute_force_on_random_hierarchies(metric=metric)
    assert used and all(used)


@pytest.mark.parametrize("arena", [0, 1])
@pytest.mark.parametrize("seed", range(8))
def test_kernel_class_counts_equal_plain_counts_at_every_node(monkeypatch, arena, seed):
    """Every node, in a random order, counted by the kernel (from whatever stored table is
    below it) gives the plain counts' suppressed records, classes, small classes and Σ c²."""
    monkeypatch.setattr(OLA, "_ARENA_ROWS", [arena])
    kmod = OLA._ola_kernel()
    df, hs = _wide_case(seed, 300)
    qs = encode_quasis(df, list(hs), hs)
    k = 3
    lat = OLA._Lattice(qs, k, 10, _make_loss("discernibility", [q.height for q in qs]))
    C, S, W = lat._kernel_inputs(kmod)
    order = np.random.default_rng(seed).permutation(lat.size)
    for node in order.tolist():
        sup, ncls, nsmall, sq = kmod._classes(node, C, W)
        c = np.asarray(lat._split_counts(node)).astype(np.int64)
        assert (sup, ncls, nsmall, sq) == (
            int(c[c < k].sum()),
            len(c),
            int((c < k).sum()),
            int((c[c >= k] ** 2).sum()),
        ), node
    assert not W[0].any()  # the bins are left all zero for the next search
    OLA._give_buffers(W)


@pytest.mark.parametrize("seed", range(6))
def test_kernel_group_ids_partition_like_the_lattice(seed):
    """The kernel's dense group ids at every group level vector split the group's
    combinations exactly as the lattice's own ``_group_map`` does."""
    kmod = OLA._ola_kernel()
    df, hs = _wide_case(seed, 200)
    qs = encode_quasis(df, list(hs), hs)
    lat = OLA._Lattice(qs, 2, 0, _make_loss("aecs", [q.height for q in qs]))
    for gi, g in enumerate(lat._split):
        dense, counts = lat._kernel_dense(kmod, gi)
        vec_of = np.asarray(g["vec_of"])
        for v in range(len(dense)):
            node = int(np.flatnonzero(vec_of == v)[0])
            ref, nref = lat._group_map(gi, node)
            assert counts[v] == nref
            pairs = set(zip(dense[v].tolist(), ref.tolist()))
            assert len(pairs) == nref  # a bijection between the two numberings


def test_tiers_numpy_first_then_kernel(monkeypatch):
    """Without the environment switches, the numpy search runs until the process has spent
    the kernel's load time in it; DPSTUDIO_OLA_NUMPY wins over everything."""
    monkeypatch.delenv("DPSTUDIO_OLA_KERNEL", raising=False)
    monkeypatch.delenv("DPSTUDIO_OLA_NUMPY", raising=False)
    monkeypatch.setattr(OLA, "_KERNEL", [])
    monkeypatch.setattr(OLA, "_NUMPY_SECONDS", [0.0])
    monkeypatch.setattr(OLA, "_LOAD_COST", [OLA._KERNEL_LOAD_S])  # numba's cache of it is there
    assert not OLA._kernel_pays()
    assert not OLA._kernel_pays(4320, 12458)  # Adult, 8 QIs: 0.13 s in numpy, less than the load
    assert OLA._kernel_pays(100_000, 12458)  # a lattice 23 times larger: the kernel at once
    OLA._NUMPY_SECONDS[0] = OLA._KERNEL_LOAD_S
    assert OLA._kernel_pays()
    monkeypatch.setenv("DPSTUDIO_OLA_NUMPY", "1")
    assert OLA._ola_kernel() is None
    monkeypatch.delenv("DPSTUDIO_OLA_NUMPY")
    assert OLA._ola_kernel() is not None and OLA._kernel_pays()


def test_no_cache_means_compile_time(monkeypatch, tmp_path):
    """Without numba's cache of the compiled search (a fresh install), switching costs its
    compile time, not its load time: the numpy search goes on for longer first."""
    monkeypatch.delenv("DPSTUDIO_OLA_KERNEL", raising=False)
    monkeypatch.setattr(OLA, "_KERNEL", [])
    monkeypatch.setattr(OLA, "_LOAD_COST", [])
    fake = tmp_path / "ola.py"
    (tmp_path / "_ola_kernel.py").write_text("# source\n")
    monkeypatch.setattr(OLA, "__file__", str(fake))
    assert OLA._kernel_load_seconds() == OLA._KERNEL_COMPILE_S
    monkeypatch.setattr(OLA, "_NUMPY_SECONDS", [OLA._KERNEL_LOAD_S])
    assert not OLA._kernel_pays()
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "_ola_kernel.search-400.py311.nbi").write_bytes(b"")
    monkeypatch.setattr(OLA, "_LOAD_COST", [])
    assert OLA._kernel_load_seconds() == OLA._KERNEL_LOAD_S
    assert OLA._kernel_pays()


def test_numpy_search_time_is_counted(monkeypatch):
    """A discernibility search on the numpy path adds its time to the tier's account; a
    precision search (no compiled search exists for it) does not."""
    monkeypatch.delenv("DPSTUDIO_OLA_KERNEL", raising=False)
    monkeypatch.setenv("DPSTUDIO_OLA_NUMPY", "1")
    monkeypatch.setattr(OLA, "_NUMPY_SECONDS", [0.0])
    df, hs = _wide_case(1, 200)
    ola(df, list(hs), 2, hierarchies=hs, suppression=0.1, loss="precision")
    assert OLA._NUMPY_SECONDS[0] == 0.0
    ola(df, list(hs), 2, hierarchies=hs, suppression=0.1, loss="discernibility")
    assert OLA._NUMPY_SECONDS[0] > 0.0


@pytest.mark.parametrize("seed", range(5))
def test_a_usable_table_survives_the_next_store(seed):
    """The arena bookkeeping on its own: a table ``_usable`` calls usable is not touched by
    the next table stored, whatever its length (≤ the bottom's size) and wherever it wraps —
    a source is read while the new table is written.  Simulated on physical rows."""
    kmod = OLA._ola_kernel()
    df, hs = _wide_case(seed, 300)
    qs = encode_quasis(df, list(hs), hs)
    lat = OLA._Lattice(qs, 3, 10, _make_loss("discernibility", [q.height for q in qs]))
    with mock.patch.object(OLA, "_ARENA_ROWS", [1]):
        C, S, W = lat._kernel_inputs(kmod)
    m0 = len(C[12])
    cap = len(W[5])
    rng = np.random.default_rng(seed)
    stored = []
    for step in range(400):
        length = int(rng.integers(1, m0 + 1))
        usable = [t for t in stored if kmod._usable(W, t, m0)]
        row, pos = kmod._store_begin(W, length)
        assert pos % cap == row and row + length <= cap
        for t in usable:
            r0 = int(W[7][t]) % cap
            assert row + length <= r0 or r0 + int(W[8][t]) <= row, (step, t)
        node = step % lat.size
        W[7][node], W[8][node] = pos, length
        stored = [t for t in stored if t != node] + [node]
    OLA._give_buffers(W)


@pytest.mark.parametrize("metric", KERNEL_METRICS)
@pytest.mark.parametrize("seed", range(4))
def test_kernel_on_a_frequency_set_is_the_numpy_search(metric, seed):
    """The Dask backend's OLA runs on a frequency set (one row per combination with its
    record count, ``weights``): the compiled search gives the same node, loss and evaluations
    there, and the same as on the records themselves."""
    df, hs = _wide_case(seed, 400)
    cols = list(hs)
    freq = df.value_counts(cols, sort=False).reset_index(name="__n")
    weights = freq["__n"].to_numpy(np.int64)

    def on_freq(search):
        qs = encode_quasis(freq, cols, hs)
        return search(
            None, cols, 3, hierarchies=hs, suppression=0.05, loss=metric, quasis=qs, weights=weights
        )

    ref = on_freq(numpy_search)
    res, used = on_freq(kernel_search)
    assert used == [True]
    assert (res.node, res.loss, res.info["nodes_evaluated"]) == (
        ref.node,
        ref.loss,
        ref.info["nodes_evaluated"],
    )
    rec, _ = kernel_search(df, cols, 3, hierarchies=hs, suppression=0.05, loss=metric)
    assert (rec.node, rec.loss) == (res.node, res.loss)


def test_compiled_entry_points_release_the_gil():
    """A compiled search holds no Python object: it must let the app's window thread run
    while it works in a worker thread (a slice of 256 nodes can take seconds on a large
    lattice)."""
    kmod = OLA._ola_kernel()
    for f in (kmod.search, kmod.is_anon, kmod.path_bound, kmod.node_loss, kmod.group_dense):
        assert f.targetoptions.get("nogil") is True, f


def test_reused_work_arrays_are_bounded_and_clean(monkeypatch):
    """After compiled searches the process keeps at most one set of work arrays, of at most
    64 MB, with its bins all zero (the next search relies on it), and reuses it."""
    monkeypatch.setattr(OLA, "_BUFFERS", [])
    df, hs = _wide_case(3, 300)
    for metric in KERNEL_METRICS * 2:
        kernel_search(df, list(hs), 2, hierarchies=hs, suppression=0.05, loss=metric)
        assert len(OLA._BUFFERS) == 1
        kept = OLA._BUFFERS[0]
        assert sum(a.nbytes for a in kept) <= 64 * 2**20
        assert not kept[0].any()
    first = kept[0]
    kernel_search(df, list(hs), 3, hierarchies=hs, suppression=0.05, loss="aecs")
    assert OLA._BUFFERS[0][0] is first  # the same bins again, not a fresh allocation


def test_large_work_arrays_are_not_kept(monkeypatch):
    """A set larger than 64 MB (here a 2**23-row arena, 96 MB) is dropped after the search."""
    monkeypatch.setattr(OLA, "_BUFFERS", [])
    monkeypatch.setattr(OLA, "_ARENA_ROWS", [2**23])
    df, hs = _wide_case(3, 300)
    res, used = kernel_search(df, list(hs), 2, hierarchies=hs, suppression=0.05, loss="discernibility")
    assert used == [True] and OLA._BUFFERS == []
