"""Taxonomies of categorical attributes and the semantic distance of thesis §6.3.4–6.3.6.

A :class:`Taxonomy` is a tree of *concepts*: the leaves are the values an attribute takes,
inner nodes are generalisations (they are valid released values too).  It is built from the
same object that serves generalisation hierarchies, :class:`~dpstudio.engine.hierarchies.hierarchy.Hierarchy`
(an ARX hierarchy file, or a parent–child CSV with the header ``child,parent``), so that
``hierarchies={"occupation": "path.csv"}`` reaches both (k, ε)-anonymity and categorical DP.

Everything that depends only on the taxonomy is precomputed once (taxonomies are small,
records many):

* ``dist`` — the (n_concepts × n_concepts) matrix of the semantic distance (eq. 6.6),
  with φ(a) = ancestors of a including a::

      δ(a, b) = log2(1 + (|φ(a) ∪ φ(b)| − |φ(a) ∩ φ(b)|) / |φ(a) ∪ φ(b)|)

* marginality of every concept towards the domain (eq. 6.1), the domain boundaries a_b
  (most marginal value, eq. 6.2) and a_t (farthest value from a_b, eq. 6.3); ties are broken
  alphabetically;
* ``sensitivity`` — the sensitivity of the marginality quality function used by the
  exponential mechanism (see :attr:`Taxonomy.sensitivity`).

The domain Dom(A) is the set of leaves: record values must be leaves.

>>> t = Taxonomy.from_parent_map({"a": "X", "b": "X", "c": "Y", "X": "*", "Y": "*", "*": None})
>>> round(t.distance("a", "b"), 4), round(t.distance("a", "c"), 4), t.distance("a", "a")
(0.585, 0.848, 0.0)
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from dpstudio.engine.errors import InputError, ParameterError, format_rows
from dpstudio.engine.hierarchies.hierarchy import Hierarchy, ancestor_paths, load_hierarchy

__all__ = ["Taxonomy", "load_taxonomy", "semantic_distance_matrix", "mixed_distance_to", "boundaries"]


def semantic_distance_matrix(anc: np.ndarray) -> np.ndarray:
    """Eq. 6.6 for every pair of concepts from the ancestor-or-self indicator matrix.

    ``anc[a, b]`` is True when b is an ancestor of a or a itself.
    """
    a = anc.astype(np.float64)
    inter = a @ a.T
    size = a.sum(axis=1)
    union = size[:, None] + size[None, :] - inter
    return np.log2(1.0 + (union - inter) / union)


@dataclass
class Taxonomy:
    """A tree of concepts with the precomputed semantic distance.

    Build it with :meth:`from_hierarchy`, :meth:`from_parent_map` or :func:`load_taxonomy`.
    ``concepts[c]`` is the label of concept code c; leaves come first (codes
    0..n_leaves−1, in the order of the source file), then inner nodes (deepest first,
    alphabetical within a depth), the root last.  ``parent[c]`` is the parent code (−1 for
    the root).
    """

    concepts: list[str]
    parent: np.ndarray
    n_leaves: int
    name: str = ""
    source: str = ""
    _index: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.concepts = [str(c) for c in self.concepts]
        self.parent = np.asarray(self.parent, dtype=np.int64)
        nc = len(self.concepts)
        self._index = {c: i for i, c in enumerate(self.concepts)}
        if len(self._index) != nc:
            raise InputError(f"Taxonomy {self.name!r}: concept labels must be unique.")
        # ancestors-or-self indicator (nc x nc); also validates the tree (cycles, roots)
        anc = np.zeros((nc, nc), dtype=bool)
        depth = np.zeros(nc, dtype=np.int64)
        roots = [self.concepts[i] for i in range(nc) if self.parent[i] < 0]
        if len(roots) != 1:
            raise InputError(
                f"Taxonomy {self.name!r} must have exactly one root; it has {len(roots)}"
                + (f": {', '.join(map(repr, roots[:10]))}" if roots else "")
                + ". Add a common top concept (e.g. '*') above them."
            )
        for i in range(nc):  # loop over concepts (taxonomies are small), never over records
            j, steps = i, 0
            while j >= 0:
                anc[i, j] = True
                j = int(self.parent[j])
                steps += 1
                if steps > nc:
                    raise InputError(
                        f"Taxonomy {self.name!r} has a cycle through "
                        f"{self.concepts[i]!r}. A taxonomy must be a tree."
                    )
            depth[i] = steps - 1
        self.anc = anc
        self.depth = depth
        self.dist = semantic_distance_matrix(anc)
        self.rank = np.argsort(
            np.argsort(np.array(self.concepts, dtype=object), kind="stable"), kind="stable"
        ).astype(np.int64)  # alphabetical rank
        leaves = np.arange(self.n_leaves)
        # marginality of every concept towards the domain (the leaves), eq. 6.1
        self.domain_marginality = self.dist[leaves].sum(axis=0)
        m = self.domain_marginality[leaves]
        self.a_b = int(_argbest(m, self.rank[leaves]))
        self.a_t = int(_argbest(self.dist[self.a_b, leaves], self.rank[leaves]))
        self.boundary_distance = float(self.dist[self.a_b, self.a_t])
        # exact sensitivity of q(S, a) = -m(S, a) when one value of S changes within Dom:
        # max over candidates a of (max_b δ(b, a) - min_b δ(b, a)), b over the leaves
        dl = self.dist[leaves]
        self.exact_sensitivity = float((dl.max(axis=0) - dl.min(axis=0)).max()) if nc else 0.0

    # ---- construction ------------------------------------------------------
    @classmethod
    def from_parent_map(
        cls, parent_of: dict, leaf_order: list | None = None, name: str = "", source: str = ""
    ) -> Taxonomy:
        """From ``{concept: parent or None}`` (nodes that appear only as a parent are added)."""
        par = {str(c): (None if p is None or str(p) == "" else str(p)) for c, p in parent_of.items()}
        for p in list(par.values()):
            if p is not None and p not in par:
                par[p] = None
        inner = {p for p in par.values() if p is not None}
        leaves = (
            [str(x) for x in leaf_order] if leaf_order is not None else [c for c in par if c not in inner]
        )
        bad = [x for x in leaves if x in inner or x not in par]
        if bad:
            raise InputError(f"Taxonomy {name!r}: {bad[0]!r} is listed as a value but is not a leaf.")
        # depth via walking up (with cycle detection)
        depth = {c: len(path) - 1 for c, path in ancestor_paths(par, name).items()}
        inner_sorted = sorted(inner, key=lambda c: (-depth[c], c))
        concepts = leaves + inner_sorted
        idx = {c: i for i, c in enumerate(concepts)}
        parent = np.array([-1 if (p := par[c]) is None else idx[p] for c in concepts], dtype=np.int64)
        return cls(concepts, parent, len(leaves), name=name, source=source)

    @classmethod
    def from_hierarchy(cls, h: Hierarchy, name: str = "") -> Taxonomy:
        """From an ARX hierarchy: rows are leaf → … → top.  A label that repeats its child
        (``x;x;group;*``) is the same concept (the chain is collapsed).  A label that appears
        at two different places of the tree is refused (it would be ambiguous).
        """
        name = name or h.name
        par: dict[str, str | None] = {}
        leaf_order: list[str] = []
        for row in h.table:
            labels = [str(x) for x in row]
            dedup = [labels[0]]
            for x in labels[1:]:
                if x != dedup[-1]:
                    dedup.append(x)
            leaf_order.append(dedup[0])
            for child, p in zip(dedup, dedup[1:] + [None]):
                if child in par and par[child] != p:
                    raise InputError(
                        f"Taxonomy {name!r}: label {child!r} appears at two places of the hierarchy "
                        f"(under {par[child]!r} and under {p!r}). Give the concepts distinct labels."
                    )
                par[child] = p
        # leaves that are also generalisations of other leaves (x;x;... with siblings under x)
        inner = {p for p in par.values() if p is not None}
        clash = [x for x in leaf_order if x in inner]
        if clash:
            raise InputError(
                f"Taxonomy {name!r}: value {clash[0]!r} is both a leaf and a "
                "generalisation of other values. Rename one of them."
            )
        return cls.from_parent_map(par, leaf_order, name=name, source=h.source)

    # ---- basic queries -------------------------------------------------------
    @property
    def n_concepts(self) -> int:
        return len(self.concepts)

    @property
    def leaves(self) -> list[str]:
        return self.concepts[: self.n_leaves]

    @property
    def sensitivity(self) -> float:
        """Δq of the quality q(S, a) = −m(S, a) of the exponential mechanism.

        Thesis §6.3.4 and docs/methods.md take δ(a_b, a_t).  Changing one value of S changes
        q(S, a) by δ(b', a) − δ(b, a); the exact worst case over values b, b' and candidates
        a (``exact_sensitivity``) can exceed δ(a_b, a_t) in unbalanced trees, so the larger
        of the two is used: never below the published calibration, never below the truth.
        """
        return max(self.boundary_distance, self.exact_sensitivity)

    def code(self, label: str) -> int:
        try:
            return self._index[str(label)]
        except KeyError:
            raise InputError(f"{label!r} is not a concept of taxonomy {self.name!r}.") from None

    def distance(self, a, b):
        """δ(a, b) for two labels, or elementwise for two arrays of labels (any concepts);
        usable as ``categorical_distance={col: taxonomy}`` in :func:`dpstudio.engine.evaluate`.
        """
        if np.ndim(a) == 0 and np.ndim(b) == 0:
            return float(self.dist[self.code(a), self.code(b)])
        ca = self.codes(np.asarray(a, dtype=object).ravel(), leaves_only=False)
        cb = self.codes(np.asarray(b, dtype=object).ravel(), leaves_only=False)
        return self.dist[ca, cb].reshape(np.shape(a))

    def codes(self, values, column: str = "", leaves_only: bool = True) -> np.ndarray:
        """Concept codes of ``values`` (vectorised); raises naming the column, row and value
        for a value absent from the taxonomy (or an inner concept when ``leaves_only``).
        """
        s = pd.Series(values).reset_index(drop=True)
        allowed = self._index if not leaves_only else {c: i for i, c in enumerate(self.leaves)}
        if pd.api.types.is_float_dtype(s) and np.all(np.mod(s.dropna(), 1) == 0):
            s = s.astype("Int64")  # numeric codes 1.0 -> "1", as written in the taxonomy file
        mapped = s.astype(str).map(allowed)
        bad = np.flatnonzero(mapped.isna().to_numpy())
        if bad.size:
            v = str(s.iloc[bad[0]])
            what = "a value (leaf) of" if (leaves_only and v in self._index) else "in"
            nbad = pd.unique(s.iloc[bad].astype(str)).size
            raise InputError(
                f"Column {column or self.name!r}: value {v!r} (row(s) {format_rows(bad, 5)}) is not "
                f"{what} its taxonomy{(' ' + repr(self.source)) if self.source else ''}"
                + (f" ({nbad} distinct values are missing)" if nbad > 1 else "")
                + ". Add it to the taxonomy/hierarchy file or correct the data."
            )
        return mapped.to_numpy(dtype=np.int64)

    def labels(self, codes) -> np.ndarray:
        return np.asarray(self.concepts, dtype=object)[np.asarray(codes, dtype=np.int64)]

    def marginality(self, counts: np.ndarray) -> np.ndarray:
        """m(S, a) for every concept a, from concept counts of the multiset S (…, n_concepts)."""
        return np.asarray(counts, dtype=np.float64) @ self.dist

    def to_dict(self) -> dict:
        """JSON-friendly description (enough to rebuild it with :meth:`from_dict`)."""
        return {
            "name": self.name,
            "source": self.source,
            "concepts": list(self.concepts),
            "parent": [int(p) for p in self.parent],
            "n_leaves": int(self.n_leaves),
            "a_b": self.concepts[self.a_b],
            "a_t": self.concepts[self.a_t],
            "boundary_distance": self.boundary_distance,
            "sensitivity": self.sensitivity,
        }

    @classmethod
    def from_dict(cls, d: dict) -> Taxonomy:
        return cls(
            d["concepts"],
            np.asarray(d["parent"]),
            int(d["n_leaves"]),
            name=d.get("name", ""),
            source=d.get("source", ""),
        )


def _argbest(values: np.ndarray, rank: np.ndarray) -> int:
    """Index of the maximum of ``values``; ties broken by alphabetical ``rank``."""
    v = np.asarray(values, dtype=np.float64)
    cand = np.flatnonzero(np.isclose(v, v.max(), rtol=1e-12, atol=1e-15))
    return int(cand[np.argmin(rank[cand])])


def load_taxonomy(obj, column: str = "") -> Taxonomy:
    """A :class:`Taxonomy` from a Taxonomy, a Hierarchy, an ARX file, a parent–child CSV
    (header ``child,parent``), rows, or a ``{child: parent}`` dict.
    """
    if isinstance(obj, Taxonomy):
        return obj
    if isinstance(obj, dict):
        return Taxonomy.from_parent_map(obj, name=column)
    if isinstance(obj, (str, os.PathLike)) and not os.path.exists(str(obj)) and "\n" not in str(obj):
        raise ParameterError(f"Taxonomy file for column {column!r} not found: {obj}")
    return Taxonomy.from_hierarchy(load_hierarchy(obj, column), name=column)


def boundaries(taxonomies: list[Taxonomy | None], lb: np.ndarray, ub: np.ndarray):
    """Per-attribute (b, t) corner values: concept codes for taxonomies, bounds for numbers."""
    b = [t.a_b if t is not None else lb[i] for i, t in enumerate(taxonomies)]
    tt = [t.a_t if t is not None else ub[i] for i, t in enumerate(taxonomies)]
    return b, tt


def mixed_distance_to(values: np.ndarray, taxonomies: list[Taxonomy | None], point, scale) -> np.ndarray:
    """Squared eq. 6.7 distance of every record (rows of ``values``: codes for categorical
    columns, numbers otherwise) to one ``point``; ``scale[i]`` = dist_i(b_i, t_i).
    """
    n, m = values.shape
    out = np.zeros(n)
    for i, t in enumerate(taxonomies):  # loop over attributes
        if t is not None:
            d = t.dist[values[:, i].astype(np.int64), int(point[i])]
        else:
            d = np.abs(values[:, i] - float(point[i]))
        out += (d / scale[i]) ** 2
    return out
