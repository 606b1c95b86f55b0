"""Taxonomies: semantic distance (eq. 6.6), boundaries, sensitivity, loaders and bad input."""

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpstudio.engine.errors import InputError
from dpstudio.engine.hierarchies.hierarchy import Hierarchy, load_hierarchy
from dpstudio.engine.hierarchies.taxonomy import Taxonomy, load_taxonomy
from tests.conftest import shared_path


def hand_tree() -> Taxonomy:
    #        *
    #      /   \
    #     X     c
    #    / \
    #   a   b
    return Taxonomy.from_parent_map({"a": "X", "b": "X", "c": "*", "X": "*", "*": None})


def random_tree(draw_parents) -> Taxonomy:
    """Node i > 0 gets a parent < i (a tree rooted at 0)."""
    par = {f"n{i}": (f"n{p}" if i else None) for i, p in enumerate(draw_parents)}
    return Taxonomy.from_parent_map(par)


trees = st.integers(2, 25).flatmap(
    lambda n: st.tuples(*[st.just(0)] + [st.integers(0, i - 1) for i in range(1, n)])
)


def test_eq_6_6_values_on_hand_tree():
    t = hand_tree()
    assert t.distance("a", "b") == pytest.approx(math.log2(1 + 2 / 4))  # φ: {a,X,*},{b,X,*}
    assert t.distance("a", "c") == pytest.approx(math.log2(1 + 3 / 4))  # {a,X,*},{c,*}
    assert t.distance("a", "X") == pytest.approx(math.log2(1 + 1 / 3))
    assert t.distance("a", "*") == pytest.approx(math.log2(1 + 2 / 3))
    assert t.distance("c", "c") == 0.0
    assert t.leaves == ["a", "b", "c"]
    assert t.concepts[-1] == "*"


def test_boundaries_hand_tree():
    t = hand_tree()
    # m(c) = 2 δ(a,c) > m(a) = δ(a,b) + δ(a,c): c is the most marginal value
    assert t.concepts[t.a_b] == "c"
    # a and b are equally far from c: alphabetical tie-break
    assert t.concepts[t.a_t] == "a"
    assert t.boundary_distance == pytest.approx(math.log2(1.75))
    assert t.sensitivity >= t.boundary_distance


@settings(max_examples=60, deadline=None)
@given(trees)
def test_distance_is_a_metric(parents):
    t = random_tree(parents)
    d = t.dist
    assert np.allclose(d, d.T)
    assert np.all(np.diag(d) == 0)
    off = d[~np.eye(len(d), dtype=bool)]
    assert np.all(off > 0) and np.all(off <= 1.0 + 1e-12)
    # triangle inequality
    assert np.all(d[:, None, :] <= d[:, :, None] + d[None, :, :] + 1e-12)


@settings(max_examples=60, deadline=None)
@given(trees, st.data())
def test_quality_sensitivity_bounds_one_value_change(parents, data):
    t = random_tree(parents)
    leaves = np.arange(t.n_leaves)
    S = np.array(data.draw(st.lists(st.sampled_from(list(leaves)), min_size=1, max_size=8)))
    j = data.draw(st.integers(0, len(S) - 1))
    S2 = S.copy()
    S2[j] = data.draw(st.sampled_from(list(leaves)))
    c1 = np.bincount(S, minlength=t.n_concepts)
    c2 = np.bincount(S2, minlength=t.n_concepts)
    diff = np.abs(t.marginality(c1) - t.marginality(c2))
    assert diff.max() <= t.sensitivity + 1e-12


def test_unbalanced_tree_uses_exact_sensitivity_when_larger():
    # deep chain on one side: the worst change is not necessarily between a_b and a_t
    par = {"a": "A", "A": "AA", "AA": "*", "b": "*", "c": "*", "d": "*"}
    t = Taxonomy.from_parent_map(par)
    assert t.sensitivity == pytest.approx(max(t.boundary_distance, t.exact_sensitivity))
    assert t.exact_sensitivity >= t.boundary_distance - 1e-12


def test_adult_occupation_from_arx():
    t = load_taxonomy(
        str(shared_path("adult", "hierarchies", "adult_hierarchy_occupation.csv")), "occupation"
    )
    assert t.n_leaves == 14 and t.n_concepts == 18  # 14 + 3 groups + '*'
    assert t.concepts[t.a_b] == "Exec-managerial"  # smallest branch (Nontechnical), alphabetical
    assert t.concepts[t.a_t] == "Adm-clerical"
    assert t.boundary_distance == pytest.approx(math.log2(1.8))


def test_arx_chain_where_label_repeats_child_is_collapsed():
    h = Hierarchy.from_rows([["x", "x", "G", "*"], ["y", "H", "G", "*"], ["z", "H", "G", "*"]])
    t = Taxonomy.from_hierarchy(h)
    assert t.concepts[t.parent[t.code("x")]] == "G"
    assert sorted(t.concepts) == ["*", "G", "H", "x", "y", "z"]


def test_arx_several_roots_refused():
    h = Hierarchy.from_rows([["a", "A"], ["b", "B"]])
    with pytest.raises(InputError, match="exactly one root"):
        Taxonomy.from_hierarchy(h)


def test_arx_label_at_two_places_refused():
    h = Hierarchy.from_rows([["a", "G", "*"], ["G", "H", "*"]])
    with pytest.raises(InputError, match="G"):
        Taxonomy.from_hierarchy(h)


def test_parent_child_csv_through_load_hierarchy(tmp_path):
    p = tmp_path / "tax.csv"
    p.write_text("child,parent\na,X\nb,X\nX,*\nc,*\n")
    h = load_hierarchy(str(p), "v")  # the one loader of hierarchies
    assert h.height == 3 and set(h.leaves) == {"a", "b", "c"}
    t = load_taxonomy(str(p), "v")
    ref = hand_tree()
    for u in ("a", "b", "c", "X", "*"):
        for v in ("a", "b", "c", "X", "*"):
            assert t.distance(u, v) == pytest.approx(ref.distance(u, v))


def test_parent_child_cycle_refused(tmp_path):
    p = tmp_path / "cyc.csv"
    p.write_text("child,parent\na,B\nB,C\nC,B\n")
    with pytest.raises(InputError, match="cycle"):
        load_taxonomy(str(p), "v")
    with pytest.raises(InputError, match="cycle"):
        Taxonomy.from_parent_map({"a": "b", "b": "c", "c": "a"})


def test_parent_child_several_roots_refused(tmp_path):
    p = tmp_path / "roots.csv"
    p.write_text("child;parent\na;X\nb;Y\n")
    with pytest.raises(InputError, match="root"):
        load_taxonomy(str(p), "v")


def test_values_absent_from_taxonomy_named():
    t = hand_tree()
    with pytest.raises(InputError, match=r"'zz'.*row\(s\) 2"):
        t.codes(pd.Series(["a", "zz", "b"]), column="v")
    with pytest.raises(InputError, match="'X'"):  # inner concepts are not input values
        t.codes(pd.Series(["X"]), column="v")
    assert t.codes(pd.Series(["X"]), leaves_only=False).tolist() == [t.code("X")]


def test_missing_file():
    from dpstudio.engine.errors import ParameterError

    with pytest.raises(ParameterError, match="not found"):
        load_taxonomy("/nonexistent/file.csv", "v")


def test_roundtrip_dict_and_vectorised_distance():
    t = hand_tree()
    t2 = Taxonomy.from_dict(t.to_dict())
    assert np.array_equal(t.dist, t2.dist) and t2.concepts == t.concepts
    got = t.distance(np.array(["a", "c"], dtype=object), np.array(["b", "X"], dtype=object))
    assert got == pytest.approx([t.distance("a", "b"), t.distance("c", "X")])
