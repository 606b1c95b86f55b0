"""OLA: optimal full-domain generalisation with record suppression (El Emam et al. 2009).

It works on the integer codes of :mod:`.generalization` (:func:`encode_quasis`: the leaf
index of each record in the column's hierarchy, and for every level an array leaf → code at
that level) and searches the lattice of level vectors (one level per attribute) for the
full-domain generalisation of least loss (:mod:`.generalization_metrics`) among those that are
k-anonymous after suppressing at most ``suppression × n`` records (the records in classes
smaller than k).  As in OLA it relies on *predictive tagging*: a k-anonymous node makes all
its generalisations k-anonymous, a node that is not makes all its specialisations not
k-anonymous.  The search itself differs from El Emam's recursive sub-lattice bisection (which
revisits sub-lattices far too often to be fast in Python): a binary search along one
generalisation path (bottom → top) gives a first k-anonymous node and loss bound; then every
node whose loss *lower bound* is below the best loss found is visited from the top of that
region downwards — a node found not k-anonymous there rules out everything below it — and
k-anonymous ones are scored.  The optimum is therefore exact (the tests compare it with brute
force), also for losses that are not monotone (the precision loss with suppressed records
counted as fully generalised is not).  A node is evaluated on integer codes only: the
attributes are split into two groups, each group's level vector gets dense ids for the
distinct records (cached and shared by many nodes), and class sizes are
``bincount(id_A · n_B + id_B)`` (or a sort of packed int64 keys when that range is large).
The discernibility and AECS searches have a compiled (numba) version, :mod:`._ola_kernel`,
used where its load time pays (:func:`_kernel_pays`).

The result is verified k-anonymous (:func:`.generalization.verify_k_anonymity`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any, TypedDict

import numpy as np
import pandas as pd

from dpstudio.engine.algorithms.generalization import (
    CodedLabels,
    EncodedQuasi,
    GeneralisationResult,
    encode_quasis,
    verify_k_anonymity,
)
from dpstudio.engine.algorithms.generalization_metrics import (
    AECSLoss,
    DiscernibilityLoss,
    PrecisionLoss,
    _make_loss,
)
from dpstudio.engine.errors import ParameterError

__all__ = [
    "ola",
    "lattice_table",
]

_MAX_LATTICE = 5_000_000


class _SplitGroup(TypedDict):
    """One attribute group of :meth:`_Lattice._setup_split`."""

    attrs: list[int]  # attribute indices, sorted
    row_id: np.ndarray  # group combo id of every bottom row
    n0: int  # number of distinct group combos (at level 0)
    distinct: list[np.ndarray]  # level-0 codes of the group's combos
    vec_of: list[int]  # node -> index of its group level vector
    maps: dict[int, tuple[np.ndarray, int]]  # vector index -> (dense id of each group combo, count)
    rows: dict[int, tuple[np.ndarray, int]]  # vector index -> (dense id of each bottom row, count)


# ---------------------------------------------------------------------------
# OLA
# ---------------------------------------------------------------------------


def _combine(cols: list[np.ndarray], cards: list[int]) -> tuple[np.ndarray, int, bool]:
    """Combined int64 key of code columns; (key, key range, exact mixed radix?)."""
    return _combine_lazy([_const(c) for c in cols], cards)


def _const(a: np.ndarray) -> Callable[[], np.ndarray]:
    """A getter of ``a`` (for :func:`_combine_lazy`)."""

    def get() -> np.ndarray:
        return a

    return get


def _leaf_codes(qq: Any) -> Callable[[], np.ndarray]:
    """A getter of ``qq``'s records' level-0 codes (for :func:`_combine_lazy`)."""
    lut = qq.codes[0]
    if lut.size and bool(np.array_equal(lut, np.arange(lut.size))):
        # level 0 numbers the leaves as they are (the usual hierarchy): the leaf indices
        # themselves, no gather into a fresh int64 array (issue 27)
        return _const(qq.leaf)

    def get() -> np.ndarray:
        return lut[qq.leaf]

    return get


def _combine_lazy(cols: list[Callable[[], np.ndarray]], cards: list[int]) -> tuple[np.ndarray, int, bool]:
    """:func:`_combine` of code columns made one at a time by ``cols`` (the same key)."""
    if not cols:
        return np.zeros(0, dtype=np.int64), 1, True
    key = np.array(cols[0](), dtype=np.int64)
    rng_ = int(cards[0])
    exact = True
    for c, m in zip(cols[1:], cards[1:]):
        if rng_ * m >= 2**62:
            _, key = np.unique(key, return_inverse=True)
            key = key.astype(np.int64)
            rng_ = int(key.max()) + 1 if key.size else 1
            exact = False
        key *= m
        key += c()
        rng_ *= m
    return key, rng_, exact


class _Lattice:
    """The generalisation lattice of level vectors, with predictive tagging and a cache of
    frequency tables (distinct code combinations at a node and their record counts).
    """

    _CACHE_CELLS = 2_000_000

    def __init__(self, quasis: list[EncodedQuasi], k: int, max_suppressed: int, loss):
        self.q = quasis
        self.d = len(quasis)
        self.k = k
        self.max_sup = max_suppressed
        self.heights = np.array([qq.height for qq in quasis], dtype=np.int64)
        size = int(np.prod(self.heights))
        if size > _MAX_LATTICE:
            raise ParameterError(
                f"The generalisation lattice has {size:,} nodes (hierarchy levels "
                f"{' × '.join(str(h) for h in self.heights)}); OLA handles at most "
                f"{_MAX_LATTICE:,}. Use fewer k-quasis, shorter hierarchies, or algorithm='mondrian'."
            )
        self.size = size
        self.L = np.stack(np.unravel_index(np.arange(size), tuple(self.heights)), axis=1).astype(np.int16)
        self.height_of = self.L.sum(axis=1).astype(np.int64)
        # ge[j][a] = nodes whose level of attribute j is >= a (tagging by AND of d masks)
        self._shape = tuple(int(h) for h in self.heights)
        self._strides = np.array([int(np.prod(self.heights[j + 1 :])) for j in range(self.d)])
        self.status = np.zeros(size, dtype=np.int8)  # 1 anonymous, -1 not, 0 unknown
        self.sup = np.full(size, -1, dtype=np.int64)
        self.loss = loss
        self.loss_val = np.full(size, np.nan)
        self.evaluated = 0
        self._last: tuple[int, np.ndarray] | None = None
        # bounds learnt during the search (issue 13): a loss with ``bound_from_counts`` gives,
        # from the class sizes of an evaluated node M, a lower bound of its loss at every node
        # N ≥ M (more generalised): it is raised on all of them at once
        self.dyn_lb = np.full(size, -np.inf) if hasattr(loss, "bound_from_counts") else None
        self._score_now = self.dyn_lb is not None and not getattr(loss, "uses_suppressed", False)
        self._fast: Callable | None = None  # set below, once n is known
        # n-dimensional views of the per-node arrays: the nodes >= / <= a node are a box
        self._dyn_nd = None if self.dyn_lb is None else self.dyn_lb.reshape(self._shape)
        self._status_nd = self.status.reshape(self._shape)
        self._nones = [None] * self.d
        self._zeros = [0] * self.d
        # level-a code -> level-b code maps per attribute
        self.up: list[dict[tuple[int, int], np.ndarray]] = []
        for qq in quasis:
            maps = {}
            for a in range(qq.height):
                rep = np.zeros(qq.card(a), dtype=np.int64)
                rep[qq.codes[a]] = np.arange(len(qq.codes[a]))
                for b in range(a, qq.height):
                    maps[(a, b)] = qq.codes[b][rep].astype(np.int64)
            self.up.append(maps)
        # the bottom table: distinct leaf combinations and their counts
        # (the frequency set: one group-by of the records; everything after works on it)
        # (the records' level-0 codes are combined one column at a time: never d columns of
        # n int64 at once, issue 27)
        cards0 = [qq.card(0) for qq in quasis]
        key, rng0, exact = _combine_lazy([_leaf_codes(qq) for qq in quasis], cards0)
        if exact and rng0 <= 4 * len(key) + 4096:
            present = np.bincount(key, minlength=rng0)
            nz = np.flatnonzero(present)
            counts = present[nz]
            dense = np.zeros(rng0, dtype=np.int64)
            dense[nz] = np.arange(len(nz))
            inv = dense[key]
            bottom = [c.astype(np.int64) for c in np.unravel_index(nz, tuple(cards0))]
        else:
            # np.unique's answer (keys ascending) by hashing and sorting the distinct keys
            # only: a sort of the n records' keys cost more than the search (issue 27)
            inv, uk = pd.factorize(key, sort=True)
            counts = np.bincount(inv, minlength=len(uk))
            first = np.zeros(len(uk), dtype=np.int64)
            first[inv[::-1]] = np.arange(len(inv))[::-1]
            bottom = [np.ascontiguousarray(qq.codes[0][qq.leaf[first]]) for qq in quasis]
        del key
        self.record_combo = inv.astype(np.int64)
        self.n = int(len(inv))
        self._n = self.n
        self.tables: dict[int, tuple[list[np.ndarray], np.ndarray]] = {0: (bottom, counts.astype(np.int64))}
        self._tab_nodes = np.zeros(64, dtype=np.int64)
        self._tab_sizes = np.zeros(64, dtype=np.int64)
        self._tab_sizes[0] = len(counts)
        self._n_tabs = 1
        self._cells = len(counts) * self.d
        self._counts_f = counts.astype(np.float64)  # bincount weights (exact below 2**53)
        self._set_fast()
        self._setup_split()
        if hasattr(loss, "prepare"):
            loss.prepare(quasis, self.up, bottom, counts.astype(np.int64))

    def _set_fast(self) -> None:
        """Use the loss's one-pass ``_from_counts`` (bound and value from the suppressed
        records and the kept classes' statistics) when its sums are exact in float64.
        """
        f = getattr(self.loss, "_from_counts", None)
        exact = self.n < 2**26 and self.k < 2**26
        self._fast = (
            f if f is not None and type(self.loss) in (DiscernibilityLoss, AECSLoss) and exact else None
        )

    # -- split evaluation: two groups of attributes, dense ids per group level vector ------

    def _setup_split(self) -> None:
        """Split the attributes into two groups of similar lattice size; a node's classes are
        then ``id_A · n_B + id_B`` with per-group dense ids cached by level vector (shared by
        many nodes), counted with ``bincount`` when the key range is small.
        """
        self._split: list[_SplitGroup] | None = None
        if self.d < 2:
            return
        order = np.argsort(-self.heights, kind="stable")
        groups: list[list[int]] = [[], []]
        prod = [1, 1]
        for j in order.tolist():
            i = 0 if prod[0] <= prod[1] else 1
            groups[i].append(j)
            prod[i] *= int(self.heights[j])
        bottom, _ = self.tables[0]
        self._split = []
        for grp in groups:
            grp = sorted(grp)
            key, _, _ = _combine([bottom[j] for j in grp], [self.q[j].card(0) for j in grp])
            uk, inv = np.unique(key, return_inverse=True)
            first = np.zeros(len(uk), dtype=np.int64)
            first[inv] = np.arange(len(inv))
            distinct = [bottom[j][first] for j in grp]  # level-0 codes of the group's combos
            vec_of = np.ravel_multi_index(
                tuple(self.L[:, j].astype(np.int64) for j in grp), tuple(int(self.heights[j]) for j in grp)
            )
            self._split.append(
                {
                    "attrs": grp,
                    "row_id": inv.astype(np.int64),
                    "n0": len(uk),
                    "distinct": distinct,
                    "vec_of": vec_of.tolist(),
                    "maps": {},
                    "rows": {},
                }
            )

    def _group_map(self, gi: int, node: int) -> tuple[np.ndarray, int]:
        """(dense id at the node's group-``gi`` level vector of every group combo, count)."""
        assert self._split is not None  # only called behind that check
        g = self._split[gi]
        vi = g["vec_of"][node]
        hit = g["maps"].get(vi)
        if hit is None:
            lv = self.L[node]
            vec = [int(lv[j]) for j in g["attrs"]]
            cols = [
                self.up[j][(0, lvl)][c] if lvl else c for j, lvl, c in zip(g["attrs"], vec, g["distinct"])
            ]
            key, _, _ = _combine(cols, [self.q[j].card(lvl) for j, lvl in zip(g["attrs"], vec)])
            _, dense = np.unique(key, return_inverse=True)
            nv = int(dense.max()) + 1 if dense.size else 1
            hit = (dense.astype(np.int64), nv)
            g["maps"][vi] = hit
        return hit

    def _group_ids(self, gi: int, node: int) -> tuple[np.ndarray, int]:
        """(dense id of every bottom combination at the node's group-``gi`` vector, count),
        cached per vector.
        """
        assert self._split is not None
        g = self._split[gi]
        vi = g["vec_of"][node]
        hit = g["rows"].get(vi)
        if hit is None:
            dense, nv = self._group_map(gi, node)
            hit = (dense[g["row_id"]], nv)
            g["rows"][vi] = hit
        return hit

    def _split_counts(self, node: int) -> np.ndarray:
        """Class sizes at ``node`` (float64 when counted by ``bincount``, else int64)."""
        ida, na = self._group_ids(0, node)
        idb, nb = self._group_ids(1, node)
        key = ida * nb
        key += idb
        R = na * nb
        if R <= 4 * len(key) + 4096:
            # float weights prepared once (exact integers); compress is much cheaper than a
            # boolean index on this sparse mask
            tot = np.bincount(key, weights=self._counts_f, minlength=R)
            return tot.compress(tot > 0)
        packed = np.sort((key << 32) | self.tables[0][1])
        sk = packed >> 32
        f = np.empty(len(sk), dtype=bool)
        f[0] = True
        np.not_equal(sk[1:], sk[:-1], out=f[1:])
        return np.add.reduceat(packed & 0xFFFFFFFF, np.flatnonzero(f))

    # -- evaluation -------------------------------------------------------
    def _table(self, node: int) -> tuple[list[np.ndarray], np.ndarray]:
        """(code columns, counts) of the distinct combinations at ``node``, rolled up from
        the smallest cached table of a specialisation of ``node``.
        """
        if node in self.tables:
            return self.tables[node]
        lv = self.L[node]
        cand = self._tab_nodes[: self._n_tabs]
        idx = np.flatnonzero(np.all(self.L[cand] <= lv, axis=1))
        src_i = idx[np.argmin(self._tab_sizes[: self._n_tabs][idx])]
        src = int(cand[src_i])
        cols_s, counts = self.tables[src]
        slv = self.L[src]
        cols = []
        cards = []
        for j in range(self.d):
            a, b = int(slv[j]), int(lv[j])
            cols.append(cols_s[j] if a == b else self.up[j][(a, b)][cols_s[j]])
            cards.append(self.q[j].card(b))
        key, rng_, exact = _combine(cols, cards)
        g = len(key)
        if exact and rng_ <= 8 * g + 4096:
            tot = np.bincount(key, weights=counts, minlength=rng_)
            nz = np.flatnonzero(tot)
            new_counts = tot[nz].astype(np.int64)
            first = None
        elif rng_ < 2**31 and self._n < 2**32:
            # counts only (such tables are not cached: roll-ups from them did not pay off):
            # sort (key << 32 | count) packed in one int64, cheaper than an argsort
            packed = np.sort((key << 32) | counts)
            sk = packed >> 32
            starts = np.flatnonzero(np.r_[True, sk[1:] != sk[:-1]])
            new_counts = np.add.reduceat(packed & 0xFFFFFFFF, starts)
            return [], new_counts
        else:
            order = np.argsort(key)
            sk = key[order]
            starts = np.flatnonzero(np.r_[True, sk[1:] != sk[:-1]])
            new_counts = np.add.reduceat(counts[order], starts)
            first = order[starts]
        # cache the table if it is a useful (much smaller) source for later roll-ups
        if len(new_counts) * 2 <= g and self._worth_caching(g):
            if first is None:
                new_cols = [c.astype(np.int64) for c in np.unravel_index(nz, tuple(cards))]
            else:
                new_cols = [c[first] for c in cols]
            self.tables[node] = (new_cols, new_counts)
            if self._n_tabs == len(self._tab_nodes):
                self._tab_nodes = np.resize(self._tab_nodes, 2 * self._n_tabs)
                self._tab_sizes = np.resize(self._tab_sizes, 2 * self._n_tabs)
            self._tab_nodes[self._n_tabs] = node
            self._tab_sizes[self._n_tabs] = len(new_counts)
            self._n_tabs += 1
            self._cells += len(new_counts) * self.d
        return [], new_counts

    def _worth_caching(self, g: int) -> bool:
        """Whether the roll-up cache has room for a table of (at most) ``g`` rows."""
        return self._cells + g * self.d <= self._CACHE_CELLS

    def _class_counts(self, node: int) -> np.ndarray:
        if self._split is not None and self.n < 2**31:
            return self._split_counts(node)
        return self._table(node)[1]

    def _combo_sizes(self, node: int) -> np.ndarray:
        """Class size at ``node`` of every bottom combination (distinct leaf combination)."""
        counts = self.tables[0][1]
        if self._split is not None and self.n < 2**31:
            ida, na = self._group_ids(0, node)
            idb, nb = self._group_ids(1, node)
            key = ida * nb + idb
            if na * nb <= 4 * len(key) + 4096:
                return np.bincount(key, weights=counts, minlength=na * nb).astype(np.int64)[key]
        else:
            lv = self.L[node]
            bottom = self.tables[0][0]
            cols = [self.up[j][(0, int(lv[j]))][bottom[j]] for j in range(self.d)]
            key, _, _ = _combine(cols, [self.q[j].card(int(lv[j])) for j in range(self.d)])
        _, inv = np.unique(key, return_inverse=True)
        return np.bincount(inv, weights=counts).astype(np.int64)[inv]

    def evaluate(self, node: int) -> bool:
        """Suppression needed at ``node`` (cached); tag the lattice; True if within the limit."""
        sup = int(self.sup[node])
        if sup >= 0:
            return sup <= self.max_sup
        counts = self._class_counts(node)
        self._last = (node, counts)  # node_loss of the node just evaluated reuses them
        small = counts < self.k
        sup = int(counts.compress(small).sum())
        self.sup[node] = sup
        self.evaluated += 1
        ok = sup <= self.max_sup
        lv = self.L[node].tolist()
        dyn = self.dyn_lb
        if dyn is not None:
            fast = self._fast
            if fast is not None:
                # bound and loss from the same two statistics (issue 13), equal to the plain ones
                b, v = fast(counts, small, sup, self.n, self.k)
            else:
                b, v = float(self.loss.bound_from_counts(counts, self.n, self.k)), None
            # learnt bounds are monotone (raised on up-sets only): when b does not exceed the
            # node's own bound, every node above already has at least b
            if b > dyn[node]:
                assert self._dyn_nd is not None  # set with dyn_lb
                box = self._dyn_nd[tuple(map(slice, lv, self._nones))]
                np.maximum(box, b, out=box)
            if ok and self._score_now:
                # a loss of the class sizes: score it now (cheap), the counts are at hand
                if v is None:
                    v = self.loss(self.L[node], counts.compress(~small).astype(np.int64), sup, self.n)
                self.loss_val[node] = v
        if ok:
            self._status_nd[tuple(map(slice, lv, self._nones))] = 1
        else:
            self._status_nd[tuple(map(slice, self._zeros, [x + 1 for x in lv]))] = -1
        return ok

    def is_anon(self, node: int) -> bool:
        st = self.status[node]
        if st == 0:
            return self.evaluate(node)
        return bool(st == 1)

    def node_loss(self, node: int) -> float:
        if np.isnan(self.loss_val[node]):
            self.evaluate(node)
            last = self._last
            counts = last[1] if last is not None and last[0] == node else self._class_counts(node)
            kept = counts.compress(counts >= self.k).astype(np.int64)
            if getattr(self.loss, "uses_suppressed", False):
                sup = self._combo_sizes(node) < self.k
                v = self.loss(self.L[node], kept, int(self.sup[node]), self.n, suppressed=sup)
            else:
                v = self.loss(self.L[node], kept, int(self.sup[node]), self.n)
            self.loss_val[node] = v
        return float(self.loss_val[node])

    # -- search -----------------------------------------------------------
    def tag_from_above(self, node: int) -> None:
        """Settle the status of ``node`` (unknown) from above, Flash-style, instead of
        evaluating it: binary search on a generalisation path from ``node`` to the top (raise
        the attribute of lowest relative level first) for the path's lowest k-anonymous node;
        if ``node`` is below it, climb from the highest non-anonymous node of the path through
        successors of unknown status that are not anonymous, until none is.  The node reached
        is non-anonymous and its successors of unknown status are anonymous: it tags a large
        down-set at once (``node`` among it) and, evaluated, raises the learnt bounds of all
        nodes above it.  Only evaluates nodes; tagging and bounds stay sound, so the optimum
        is unchanged (the brute-force tests).
        """
        top = self.heights - 1
        lv = self.L[node].astype(np.int64)
        # the path's steps: attribute j goes from level l to l + 1 in the order of (l / top_j, j)
        steps = np.repeat(np.arange(self.d), top - lv)
        levels = np.concatenate([np.arange(a, b) for a, b in zip(lv.tolist(), top.tolist())])
        order = np.lexsort((steps, levels / np.maximum(top, 1)[steps]))
        path = [node] + (node + np.cumsum(self._strides[steps[order]])).tolist()
        lo = self._first_anonymous(path, len(path) - 1)
        if lo == 0:
            return
        cur = path[lo - 1]
        while True:
            clv = self.L[cur]
            rel = clv / np.maximum(top, 1)
            for j in np.argsort(rel, kind="stable").tolist():
                if clv[j] < top[j]:
                    nxt = cur + int(self._strides[j])
                    if self.status[nxt] == 0 and not self.evaluate(nxt):
                        cur = nxt
                        break
            else:
                return

    def _kernel_eligible(self) -> bool:
        """Whether the compiled search applies (see :meth:`_kernel_inputs`); the bottom group
        vectors have the most ids, so their product bounds every node's key range.
        """
        return (
            self._fast is not None
            and self._split is not None
            and self._score_now
            and self.dyn_lb is not None
            and self.n < 2**31
            and self._split[0]["n0"] * self._split[1]["n0"] <= 2**23
        )

    def _kernel_dense(self, kmod, gi: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The kernel's dense ids of group ``gi`` at every group vector, computed by
        :func:`._ola_kernel.group_dense` (None when the group's level-0 key range exceeds
        2**22, then the lattice's own ``_group_map`` serves).
        """
        assert self._split is not None
        g = self._split[gi]
        attrs = g["attrs"]
        gh = np.array([int(self.heights[j]) for j in attrs], dtype=np.int64)
        card0 = [self.q[j].card(0) for j in attrs]
        if float(np.prod([float(c) for c in card0])) > 2**22:
            return None
        up = np.zeros((len(attrs), int(gh.max()), max(card0)), dtype=np.int64)
        cards = np.ones((len(attrs), int(gh.max())), dtype=np.int64)
        for t, j in enumerate(attrs):
            for lvl in range(int(gh[t])):
                up[t, lvl, : card0[t]] = self.up[j][(0, lvl)]
                cards[t, lvl] = self.q[j].card(lvl)
        distinct = np.stack([np.asarray(c, dtype=np.int64) for c in g["distinct"]])
        n0 = distinct.shape[1]
        nv = int(np.prod(gh))
        dense = np.empty((nv, n0), dtype=np.int32)
        counts = np.empty(nv, dtype=np.int64)
        seen = np.full(int(np.prod(card0)), -1, dtype=np.int32)
        kmod.group_dense(distinct, up, cards, gh, dense, counts, seen, np.empty(n0, dtype=np.int64))
        return dense, counts

    def _kernel_inputs(self, kmod) -> tuple[tuple, tuple, tuple] | None:
        """(constants, state, work space) of the compiled search (:mod:`._ola_kernel`), or
        None when it does not apply: only discernibility and AECS (the losses scored in one
        pass from the class sizes, n and k below 2**26) on a split lattice whose key range
        fits a bin array of at most 2**23 entries.  The state arrays are this lattice's own:
        the kernel updates them in place.
        """
        if not self._kernel_eligible():
            return None
        assert self._split is not None  # checked above
        dense, counts = [], []
        for gi, g in enumerate(self._split):
            dc = self._kernel_dense(kmod, gi)
            if dc is None:  # mixed-radix keys too wide: the lattice's own maps
                vec_of = np.asarray(g["vec_of"], dtype=np.int64)
                _, rep = np.unique(vec_of, return_index=True)  # one node per group vector
                maps = [self._group_map(gi, int(node)) for node in rep.tolist()]
                dc = (
                    np.stack([m[0] for m in maps]).astype(np.int32),
                    np.array([m[1] for m in maps], dtype=np.int64),
                )
            dense.append(dc[0])
            counts.append(dc[1])
        max_r = int(counts[0].max()) * int(counts[1].max())
        w = np.asarray(self.tables[0][1], dtype=np.int32)
        m = len(w)
        kind = 0 if type(self.loss) is DiscernibilityLoss else 1
        consts = (
            self.heights.astype(np.int64),
            self._strides.astype(np.int64),
            self.L,
            self.height_of,
            np.asarray(self._split[0]["vec_of"], dtype=np.int64),
            np.asarray(self._split[1]["vec_of"], dtype=np.int64),
            dense[0],
            dense[1],
            counts[0],
            counts[1],
            self._split[0]["row_id"].astype(np.int32),
            self._split[1]["row_id"].astype(np.int32),
            w,
            np.array([self.k, self.max_sup, self.n, kind], dtype=np.int64),
        )
        self._kernel_count = np.zeros(1, dtype=np.int64)
        assert self.dyn_lb is not None
        state = (self.status, self.sup, self.loss_val, self.dyn_lb, self._kernel_count)
        # class tables of evaluated nodes, the sources of roll-ups: an arena of 64 tables of
        # the bottom's size, within 2**21..2**23 rows (FIFO; an overwritten table is not used)
        cap = _ARENA_ROWS[0] or min(max(64 * m, 2**21), 2**23)
        cap = max(cap, 2 * m)
        bins, touched, first, arena_a, arena_b, arena_c = _take_buffers(max_r, m, cap)
        work = (
            bins,  # all zero, left so by the kernel
            touched,  # keys of the classes of the table being counted
            first,  # their first source row
            arena_a,  # arena: group-A combination of a class's representative
            arena_b,  # group-B combination
            arena_c,  # records
            np.zeros(4, dtype=np.int64),  # write row, absolute position, -, stores
            np.full(self.size, -1, dtype=np.int64),  # node -> absolute position of its table
            np.zeros(self.size, dtype=np.int64),  # node -> its number of classes
            np.full(16, -1, dtype=np.int64),  # the last evaluated nodes
            np.isin(np.arange(self.d), self._split[0]["attrs"]),  # attribute in group A
        )
        return consts, state, work

    def path_bound(self) -> int:
        """Binary search along one generalisation strategy path (bottom → top, raising the
        attribute with the lowest relative level first) for its lowest k-anonymous node.
        """
        lv = np.zeros(self.d, dtype=np.int64)
        path = [0]
        top = self.heights - 1
        while np.any(lv < top):
            rel = np.where(lv < top, lv / np.maximum(top, 1), np.inf)
            j = int(np.argmin(rel))
            lv[j] += 1
            path.append(int(np.ravel_multi_index(tuple(lv), tuple(self.heights))))
        if not self.is_anon(path[-1]):
            return -1
        return path[self._first_anonymous(path, len(path) - 1)]

    def _first_anonymous(self, path: list[int], hi: int) -> int:
        """Binary search of path[0..hi] (generalisations in order, path[hi] k-anonymous) for
        the index of its first k-anonymous node.
        """
        lo = 0
        while lo < hi:
            mid = (lo + hi) // 2
            if self.is_anon(path[mid]):
                hi = mid
            else:
                lo = mid + 1
        return lo


_ARENA_ROWS = [0]  # rows of the compiled search's table arena (0: by the bottom's size; tests)
_BUFFERS: list[tuple[np.ndarray, ...]] = []  # the compiled search's large work arrays, reused


def _take_buffers(bins: int, rows: int, cap: int) -> tuple[np.ndarray, ...]:
    """Work arrays of the compiled search, reused across searches (fresh ones cost page
    faults: ~5 ms of ~45 on Adult); a search gives them back with :func:`_give_buffers`.
    Thread-safe: ``list.pop`` hands an entry to one caller only.
    """
    for i in range(len(_BUFFERS)):
        try:
            b = _BUFFERS.pop(i)
        except IndexError:  # taken by another thread meanwhile
            break
        if len(b[0]) >= bins and len(b[1]) >= rows and len(b[3]) >= cap:
            return b[0][:bins], b[1][:rows], b[2][:rows], b[3][:cap], b[4][:cap], b[5][:cap]
        _BUFFERS.append(b)
    return (
        np.zeros(bins, dtype=np.int32),
        np.empty(rows, dtype=np.int64),
        np.empty(rows, dtype=np.int64),
        np.empty(cap, dtype=np.int32),
        np.empty(cap, dtype=np.int32),
        np.empty(cap, dtype=np.int32),
    )


def _give_buffers(work: tuple) -> None:
    """Return a search's work arrays (the bins are all zero again: every count clears the
    bins it used) to be reused; one set of at most 64 MB is kept (~30 MB on Adult), so a
    long-running app holds no more than that once its searches are done.
    """
    arrays = tuple(a.base if a.base is not None else a for a in work[:6])
    if not _BUFFERS and sum(a.nbytes for a in arrays) <= 64 * 2**20:
        _BUFFERS.append(arrays)


_KERNEL: list = []  # [module or None], filled on first use
_NUMPY_SECONDS = [0.0]  # time this process has spent in numpy searches the kernel could run
_KERNEL_LOAD_S = 0.4  # importing numba and loading the cached search (Adult, cold process: the
# first compiled search takes 0.53-0.64 s, the numpy one 0.16 s)
_KERNEL_COMPILE_S = 10.0  # compiling it when numba has no cache of it yet (8-9 s here)
_LOAD_COST: list[float] = []  # the applicable one of the two, found once


def _kernel_load_seconds() -> float:
    """What switching to the compiled search costs this process: its load time when numba's
    cache of it is where numba will look (``NUMBA_CACHE_DIR``, ``__pycache__`` next to the
    source, or the user-wide cache of a read-only install: :func:`_kernels.has_numba_cache`)
    and not older than the source, else its compile time -- so that the first searches after
    an install do not stall for seconds in the middle of a sweep.
    """
    if not _LOAD_COST:
        from pathlib import Path

        from dpstudio.engine._kernels import has_numba_cache

        hit = has_numba_cache(Path(__file__).with_name("_ola_kernel.py"), "search")
        _LOAD_COST.append(_KERNEL_LOAD_S if hit else _KERNEL_COMPILE_S)
    return _LOAD_COST[0]


def _kernel_pays(nodes: int = 0, rows: int = 0) -> bool:
    """Tiered choice, results identical either way (the tests compare both paths): once
    loaded, the compiled search runs every discernibility / AECS search; before that, the
    numpy search runs unless its rough cost on this lattice (``nodes`` nodes, ``rows``
    bottom combinations: 2.5 ns per node and row, fitted on Adult where it takes 0.13 s)
    exceeds the kernel's load time (:func:`_kernel_load_seconds`), or until this process
    has spent that time in numpy searches (an app, a sweep over k, a benchmark) -- so that
    a one-shot CLI run on a small lattice does not pay 0.4 s for numba.  ``DPSTUDIO_OLA_KERNEL=1`` asks for the
    kernel at once (tests, benchmarks).
    """
    import os

    if _KERNEL:
        return _KERNEL[0] is not None
    if os.environ.get("DPSTUDIO_OLA_KERNEL", "") not in ("", "0"):
        return True
    load = _kernel_load_seconds()
    return 2.5e-9 * nodes * rows >= load or _NUMPY_SECONDS[0] >= load


def _ola_kernel():
    """The compiled search module, or None when numba is unavailable or
    ``DPSTUDIO_OLA_NUMPY=1`` asks for the numpy search (imported lazily, as the MDAV kernel).
    """
    from dpstudio.engine._kernels import load_kernel

    return load_kernel(_KERNEL, "dpstudio.engine.algorithms._ola_kernel", "DPSTUDIO_OLA_NUMPY")


def ola(
    df: pd.DataFrame | None,
    columns: Sequence[str],
    k: int,
    *,
    hierarchies: dict | None = None,
    suppression: float = 0.05,
    loss=None,
    quasis: list[EncodedQuasi] | None = None,
    check_cancel: Callable[[], None] | None = None,
    weights: np.ndarray | None = None,
) -> GeneralisationResult:
    """Optimal full-domain generalisation (OLA) of ``columns`` with record suppression.

    The lattice search (see the module docstring) returns the node of least ``loss``
    among all nodes at which at most ``suppression × n`` records lie in classes smaller
    than k (those records are suppressed).  Ties go to the lower node, then to the first
    in lattice order.

    Parameters
    ----------
    df : DataFrame or None
        The data (only ``columns`` are read); None when ``quasis`` are given.
    columns : list of str
        The k-quasis.
    k : int
        Minimum class size, ≥ 1.
    hierarchies : dict, optional
        Column → ARX file path or :class:`Hierarchy`; automatic hierarchies otherwise.
    suppression : float
        Largest share of records that may be suppressed, in [0, 1) (default 0.05).
    loss : str or callable, optional
        ``"precision"`` (default), ARX's ``"loss"``, ``"discernibility"``, ``"aecs"``
        (average equivalence class size), ``"entropy"`` (non-uniform entropy) — see their
        classes for how suppressed records count — or ``fn(levels, class_sizes,
        n_suppressed, n) -> float``.  A loss without a ``lower_bound`` method is
        evaluated on every k-anonymous node (slower, still exact).
    weights : array, optional
        A frequency set instead of records (issue 12, the Dask backend): row r of
        ``quasis`` stands for ``weights[r]`` records; the result is then per row
        (``class_id``, ``labels``, ``cell_loss`` of each row, −1 = suppressed).
    """
    if not columns:
        raise ParameterError("OLA needs at least one k-quasi.")
    k = int(k)
    if k < 1:
        raise ParameterError(f"k must be at least 1. Got {k}.")
    if not (0.0 <= float(suppression) < 1.0):
        raise ParameterError(f"The 'suppression' limit must be in [0, 1). Got {suppression!r}.")
    if quasis is not None:
        qs = quasis
    elif df is not None:
        qs = encode_quasis(df, columns, hierarchies)
    else:
        raise ParameterError("OLA needs the data or its encoded k-quasis (quasis=...).")
    n = len(qs[0].leaf) if weights is None else int(np.sum(weights))
    max_sup = int(math.floor(float(suppression) * n + 1e-9))
    lossf = _make_loss(loss, [qq.height for qq in qs])
    lat = (
        _Lattice(qs, k, max_sup, lossf)
        if weights is None
        else _WeightedLattice(qs, k, max_sup, lossf, weights)
    )
    best, best_node = _search(
        lat, lossf, k, n, max_sup, float(suppression), [qq.name for qq in qs], check_cancel
    )
    return _release(lat, qs, best_node, best, lossf, k, max_sup, suppression, weights)


def _search(lat: _Lattice, lossf, k: int, n: int, max_sup: int, suppression: float, names, check_cancel):
    """OLA's search of ``lat``: ``(best loss, best node)``.  The top node must be k-anonymous
    (else the one-line error of :func:`_k_too_large_message`); a first bound from one
    generalisation path, then branch and bound over the nodes whose lower bound beats it --
    compiled where the kernel pays (:func:`_kernel_pays`), in numpy otherwise.
    """
    top = lat.size - 1
    t_search = time.perf_counter()
    eligible = lat._kernel_eligible()
    kmod = _ola_kernel() if eligible and _kernel_pays(lat.size, len(lat.tables[0][1])) else None
    kin = lat._kernel_inputs(kmod) if kmod is not None else None
    if kmod is not None and kin is not None:
        kc, ks, kw = kin
        top_ok = bool(kmod.is_anon(top, kc, ks, kw))
    else:
        kmod = None
        top_ok = lat.is_anon(top)
    if not top_ok:
        raise ParameterError(_k_too_large_message(k, lat._class_counts(top), n, max_sup, suppression, names))
    if kmod is not None:
        start = int(kmod.path_bound(kc, ks, kw))
        best, best_node = float(kmod.node_loss(start, kc, ks, kw)), start
    else:
        start = lat.path_bound()
        best, best_node = lat.node_loss(start), start
    # branch and bound: every node whose lower bound beats the best so far, from the top of
    # that region down (a non-anonymous node there rules out everything below it)
    lb = np.asarray(lossf.lower_bound(lat.L), dtype=np.float64)
    region = np.flatnonzero(lb < best)
    if lat.dyn_lb is None:
        region = region[np.lexsort((region, lb[region], -lat.height_of[region]))]
    else:
        # bounds learnt from evaluated nodes hold for the nodes above them: bottom-up, so that
        # every node is reached after (some of) the nodes below it (issue 13)
        region = region[np.lexsort((region, lb[region], lat.height_of[region]))]
    if kmod is not None:
        # the same loop, compiled (issue 13), in slices of 256 nodes between cancel checks
        for i in range(0, len(region), 256):
            if check_cancel is not None:
                check_cancel()
            b, bn = kmod.search(region[i : i + 256], lb, best, best_node, kc, ks, kw)
            best, best_node = float(b), int(bn)
        lat.evaluated += int(ks[4][0])
        _give_buffers(kw)
    else:
        best, best_node = _search_region(lat, region, lb, best, best_node, check_cancel)
    if eligible and kmod is None:
        _NUMPY_SECONDS[0] += time.perf_counter() - t_search
    return best, best_node


def _search_region(
    lat: _Lattice, region: np.ndarray, lb: np.ndarray, best: float, best_node: int, check_cancel
):
    """The numpy branch and bound over ``region`` (in that order): ``(best loss, best node)``;
    ties go to the lower node, then to the first in lattice order.
    """
    for i, node in enumerate(region.tolist()):
        if check_cancel is not None and i % 256 == 0:
            check_cancel()
        if lb[node] >= best or lat.status[node] == -1:
            continue
        if lat.dyn_lb is not None and lat.dyn_lb[node] > best + 1e-12:
            continue
        if lat.dyn_lb is not None and lat.status[node] == 0:
            # bottom-up, an unknown node is most often not anonymous: settle it (and a large
            # down-set) from above rather than one node at a time (issue 13)
            lat.tag_from_above(node)
            if lat.status[node] == -1 or lat.dyn_lb[node] > best + 1e-12:
                continue
        if not lat.is_anon(node):
            continue
        v = lat.node_loss(node)
        if v < best - 1e-12 or (
            abs(v - best) <= 1e-12 and (lat.height_of[node], node) < (lat.height_of[best_node], best_node)
        ):
            best, best_node = v, node
    return best, best_node


def _release(
    lat: _Lattice,
    qs: list[EncodedQuasi],
    node: int,
    best: float,
    lossf,
    k: int,
    max_sup: int,
    suppression: float,
    weights,
) -> GeneralisationResult:
    """The generalisation at ``node`` of the lattice: every record's class (−1 = suppressed) and
    labels, verified k-anonymous and within the suppression limit, and its precision per record.
    """
    lv = lat.L[node]
    # the chosen node on the frequency set (distinct leaf combinations and their counts);
    # records only get their combination's class and labels by one gather each
    bottom, bottom_counts = lat.tables[0]
    cols = [lat.up[j][(0, int(lv[j]))][bottom[j]] for j in range(lat.d)]
    key, _, _ = _combine(cols, [qs[j].card(int(lv[j])) for j in range(lat.d)])
    _, combo_cls = np.unique(key, return_inverse=True)
    cls_size = np.bincount(combo_cls, weights=bottom_counts).astype(np.int64)
    combo_keep = cls_size[combo_cls] >= k
    combo_out = np.full(len(combo_cls), -1, dtype=np.int64)
    _, combo_out[combo_keep] = np.unique(combo_cls[combo_keep], return_inverse=True)
    rc = lat.record_combo
    cls = combo_out[rc]
    keep = cls >= 0
    combo_labels = {qq.name: qq.labels[int(lv[j])][cols[j]] for j, qq in enumerate(qs)}
    # the release check, on the frequency set: the released labels of a record are its
    # combination's labels (gathered below), so classes of released labels have these sizes
    smallest = verify_k_anonymity(
        combo_labels,
        combo_keep,
        k,
        weights=np.bincount(
            rc[keep], weights=None if weights is None else np.asarray(weights)[keep], minlength=len(combo_cls)
        ),
    )
    # every record's code at its column's chosen level (−1 = suppressed): the labels are
    # gathered from them only when asked (CodedLabels), never one record at a time
    combo_codes, cats = {}, {}
    for j, qq in enumerate(qs):
        cc = np.asarray(cols[j], dtype=np.int64 if qq.card(int(lv[j])) >= 2**31 else np.int32).copy()
        cc[~combo_keep] = -1
        combo_codes[qq.name] = cc
        cats[qq.name] = qq.labels[int(lv[j])]
    labels = CodedLabels(combo_codes, cats, rows=rc)
    if (
        int((~keep).sum()) if weights is None else int(np.asarray(weights)[~keep].sum())
    ) > max_sup:  # pragma: no cover - guaranteed by the search
        raise RuntimeError("internal error: OLA exceeded the suppression limit")
    cell = np.ones(len(rc))  # precision per record, whatever metric was optimised
    cell[keep] = float(PrecisionLoss([qq.height for qq in qs]).base(lv))
    info = {
        "lattice_size": lat.size,
        "nodes_evaluated": int(lat.evaluated),
        "max_suppressed": max_sup,
        "suppression_limit": float(suppression),
        "smallest_class_verified": smallest,
    }
    return GeneralisationResult(
        algorithm="ola",
        k=k,
        columns=[qq.name for qq in qs],
        class_id=cls,
        labels=labels,
        loss=float(best),
        loss_name=lossf.name,
        cell_loss=cell,
        node=tuple(int(x) for x in lv),
        levels={qq.name: int(lv[j]) for j, qq in enumerate(qs)},
        heights={qq.name: qq.height for qq in qs},
        info=info,
    )


class _WeightedLattice(_Lattice):
    """The lattice of a frequency set (issue 12): ``quasis[j].leaf`` holds one row per
    combination (e.g. the result of a distributed group-by) and ``weights`` its record count.
    Built as the record lattice of the rows, then the bottom table's counts (and ``n``) are
    replaced by the weighted ones; everything after works on that table, as for records.
    """

    def __init__(self, quasis: list[EncodedQuasi], k: int, max_suppressed: int, loss, weights):
        super().__init__(quasis, k, max_suppressed, loss)
        w = np.asarray(weights, dtype=np.int64)
        bottom, unit = self.tables[0]
        counts = np.bincount(self.record_combo, weights=w, minlength=len(unit)).astype(np.int64)
        self.tables[0] = (bottom, counts)
        self._counts_f = counts.astype(np.float64)
        self.n = self._n = int(counts.sum())
        self._set_fast()
        if hasattr(loss, "prepare"):
            loss.prepare(quasis, self.up, bottom, counts)


def _k_too_large_message(k, counts, n, max_sup, suppression, cols) -> str:
    cs = np.sort(np.asarray(counts))
    # largest k' such that records in classes < k' are at most max_sup
    cum = np.r_[0, np.cumsum(cs)]
    below = cum[np.searchsorted(cs, cs, side="left")]  # records in classes smaller than each size
    feasible = cs[below <= max_sup]
    ok_k = int(feasible.max()) if feasible.size else 1
    need = int(cs[cs < k].sum())
    return (
        f"k = {k} cannot be reached on {', '.join(map(repr, cols))} within the suppression limit "
        f"of {suppression:.1%} ({max_sup} of {n} records), even at full generalisation: "
        f"{need} records ({need / n:.1%}) would have to be suppressed. The largest k that works "
        f"with these hierarchies is {ok_k}; or raise the suppression limit to at least "
        f"{math.ceil(1000 * need / n) / 1000:.1%}, or use hierarchies that end in a single '*'."
    )


def lattice_table(
    df: pd.DataFrame,
    columns: Sequence[str],
    k: int,
    *,
    chosen: Sequence[int] | None = None,
    hierarchies: dict | None = None,
    suppression: float = 0.05,
    loss=None,
    max_nodes: int = 400,
    check_cancel: Callable[[], None] | None = None,
) -> pd.DataFrame:
    """The generalisation levels OLA weighs (issue 24: ARX's explorer shows the lattice): one
    row per node -- the level of each column, the records in classes smaller than k (which
    would be suppressed), whether that is within the suppression limit, and the loss OLA
    minimises (for the nodes within the limit), ``chosen`` marking the node OLA took.

    Every node when the lattice has at most ``max_nodes``; else the bottom, the top, the
    chosen node and its neighbours (one level up or down in one column).  The same data,
    hierarchies and parameters as the run give the run's figures (the search is exact).

    >>> import pandas as pd
    >>> df = pd.DataFrame({"a": [1, 2, 3, 4, 5, 6], "b": list("xxyyxy")})
    >>> t = lattice_table(df, ["a", "b"], 2, suppression=0.0)
    >>> t.columns.tolist()
    ['a', 'b', 'suppressed', 'within limit', 'loss', 'chosen']
    >>> int(t["within limit"].sum()) >= 1
    True
    """
    qs = encode_quasis(df, columns, hierarchies)
    n = len(qs[0].leaf)
    max_sup = int(math.floor(float(suppression) * n + 1e-9))
    lossf = _make_loss(loss, [qq.height for qq in qs])
    lat = _Lattice(qs, int(k), max_sup, lossf)
    if lat.size <= max_nodes:
        nodes = list(range(lat.size))
    else:
        strides = lat._strides
        heights = lat.heights
        base = (
            int(np.dot(np.asarray(chosen, dtype=np.int64), strides)) if chosen is not None else lat.size - 1
        )
        lv = lat.L[base].astype(np.int64)
        near = {0, lat.size - 1, base}
        for j in range(lat.d):
            for step in (-1, 1):
                if 0 <= lv[j] + step < heights[j]:
                    near.add(int(base + step * strides[j]))
        nodes = sorted(near)
    chosen_t = tuple(int(x) for x in chosen) if chosen is not None else None
    rows = []
    for i, node in enumerate(nodes):
        if check_cancel is not None and i % 16 == 0:
            check_cancel()
        ok = lat.evaluate(node)
        levels = tuple(int(x) for x in lat.L[node])
        rows.append(
            {
                **{qq.name: levels[j] for j, qq in enumerate(qs)},
                "suppressed": int(lat.sup[node]),
                "within limit": bool(ok),
                "loss": float(lat.node_loss(node)) if ok else float("nan"),
                "chosen": levels == chosen_t,
            }
        )
    return pd.DataFrame(rows)
