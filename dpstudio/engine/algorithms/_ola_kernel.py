"""Compiled OLA search for the class-size metrics (numba), imported lazily by
:func:`ola.ola` (issue 13).

Discernibility and AECS are not monotone under suppression: their search must settle the
k-anonymity of about eight times more lattice nodes than precision's (Adult, 8 QIs: 1,388
evaluations against 173).  In Python each evaluation costs ~70 µs of numpy calls on the
12,458 bottom combinations plus the tagging around it.  This module runs the *same*
search — :meth:`_Lattice.evaluate`, ``is_anon``, ``node_loss``, ``tag_from_above``,
``path_bound`` and the branch-and-bound loop of :func:`ola`, step for step, in the same
order, with the same floating-point operations — so it evaluates the same nodes, tags the
same statuses and learns the same bounds, and returns the same optimum (the tests compare
both paths node for node).  What differs is only how a node's classes are counted:

* in one pass with a reused bin array (``bins[id_A · n_B + id_B] += count``) instead of
  ``bincount`` + ``compress`` + sums;
* from the smallest stored class table of a node below it — an evaluated predecessor, one
  of the last 16 evaluated nodes, or the table of the node's group-A levels over group B's
  bottom (built when first needed and shared by all nodes with those levels) — instead of
  from all bottom combinations (a class of a more specific node lies in exactly one class
  of the node: its representative's group combinations name it).  On Adult the evaluated
  nodes have ~1,200 classes against 12,458 bottom combinations, and most evaluations roll
  up from a predecessor's table of ~1,700 rows;
* branch-free: whether a row opens a new class is unpredictable, and a mispredicted branch
  per row cost more than the counting itself.

Tables live in an arena (FIFO, reused across searches with the other work arrays); a table
is read only if the next table stored cannot overwrite it (:func:`_usable`).

All sums are integer sums: the class sizes, the suppressed records and Σ c² are exact (the
lattice uses this path only for n, k < 2**26, as for its one-pass numpy statistics), and
the bound and loss are the same float64 expressions as ``DiscernibilityLoss._from_counts``
/ ``AECSLoss._from_counts``.

Array arguments (built by ``_Lattice._kernel_inputs``):

``C`` (constants)
    ``heights, strides, L, height_of, vecA, vecB, DA, DB, nA, nB, rowA, rowB, w, par`` —
    the lattice shape, each node's level vector and height, its group-A / group-B vector
    index, the dense id of every group combination at every group vector (``DA[v, a]``)
    and how many there are, the group combinations of every bottom combination and its
    record count, and ``par = [k, max_sup, n, kind]`` (kind 0 discernibility, 1 AECS).
``S`` (state, shared with the Python lattice and updated in place)
    ``status, sup, loss_val, dyn_lb, evaluated`` (the last a one-element counter).
``W`` (work space)
    ``bins, touched, first, arena_a, arena_b, arena_c, meta, node_pos, node_len, recent,
    in_a`` — the bin array (all zero between counts), the classes of the table being counted
    and their first source row, the arena (a representative's group-A and group-B
    combination and the records of every stored class), its write row / absolute position /
    – / number of tables stored, each node's table (absolute position, classes), the last
    evaluated nodes, and which attributes are in group A.

All functions use ``cache=True`` (compiled once per install, loaded from ``__pycache__``)
and ``nogil=True``: they touch no Python object, so a search in a worker thread leaves the
interpreter to the others (the app's window stays responsive; the numpy search, a Python
loop, gives it up every few milliseconds).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _box(lo, hi, strides, arr, value, mode):
    """Over the box lo <= levels <= hi (inclusive) of the lattice: mode 0 sets arr to value,
    mode 1 raises arr to at least value.  The last attribute has stride 1, so the box is
    walked as contiguous runs of it.
    """
    d = lo.shape[0]
    last = d - 1
    idx = lo.copy()
    base = 0
    for j in range(d):
        base += lo[j] * strides[j]
    run = hi[last] - lo[last] + 1
    while True:
        if mode == 0:
            for i in range(base, base + run):
                arr[i] = value
        else:
            for i in range(base, base + run):
                if arr[i] < value:
                    arr[i] = value
        j = last - 1
        while j >= 0:
            if idx[j] < hi[j]:
                idx[j] += 1
                base += strides[j]
                break
            base -= (idx[j] - lo[j]) * strides[j]
            idx[j] = lo[j]
            j -= 1
        if j < 0:
            return


@njit(cache=True, nogil=True)
def _store_begin(W, length):
    """Reserve ``length`` rows at the arena's write position (wrapping to its start when
    they do not fit before its end); returns (row, absolute position).
    """
    arena_c = W[5]
    meta = W[6]
    cap = arena_c.shape[0]
    if meta[0] + length > cap:
        meta[1] += cap - meta[0]
        meta[0] = 0
    row = meta[0]
    pos = meta[1]
    meta[0] += length
    meta[1] += length
    return row, pos


@njit(cache=True, nogil=True)
def _usable(W, node, m0):
    """Whether ``node``'s stored table is intact and stays so while the next table (at most
    m0 rows) is stored: a source is read while the new table is written.  Rows at absolute
    position p live in arena row p mod cap, so the table at ``pos`` survives every write
    that ends by pos + cap; the next one ends by total + m0, or, if it may wrap to the
    arena's start, by the next lap's start + m0.
    """
    pos = W[7][node]
    if pos < 0:
        return False
    cap = W[5].shape[0]
    row = W[6][0]
    total = W[6][1]
    end = total + m0 if row + m0 <= cap else total - row + cap + m0
    return end <= pos + cap


@njit(cache=True, nogil=True)
def _count(va, vb, C, W, src_a, src_b, src_c, m):
    """Count the classes at group vectors (va, vb) from a class table (src_a / src_b: the
    group-A / group-B combination of a representative record, src_c: records; m rows) and
    store the resulting table in the arena.  Returns (suppressed records, classes, classes
    smaller than k, Σ c² over the others, absolute arena position of the table).
    """
    heights, strides, L, height_of, vecA, vecB, DA, DB, nA, nB, rowA, rowB, w, par = C
    bins, touched, first, arena_a, arena_b, arena_c = W[0], W[1], W[2], W[3], W[4], W[5]
    k = par[0]
    da = DA[va]
    db = DB[vb]
    nb = nB[vb]
    nt = 0
    for i in range(m):
        key = da[src_a[i]] * nb + db[src_b[i]]
        c = bins[key]
        # branch-free: whether a row opens a class is unpredictable
        touched[nt] = key
        first[nt] = i
        nt += c == 0
        bins[key] = c + src_c[i]
    row, pos = _store_begin(W, nt)
    sup = 0
    nsmall = 0
    sq = 0
    for t in range(nt):
        key = touched[t]
        c = bins[key]
        bins[key] = 0
        i = first[t]
        arena_a[row + t] = src_a[i]
        arena_b[row + t] = src_b[i]
        arena_c[row + t] = c
        c64 = np.int64(c)
        small = np.int64(c < k)
        sup += c64 * small
        nsmall += small
        sq += c64 * c64 * (1 - small)
    return sup, nt, nsmall, sq, pos


@njit(cache=True, nogil=True)
def _classes(node, C, W):
    """Class statistics of ``node``, counted from the smallest stored table of a node below
    it — a predecessor, one of the last evaluated nodes, or the node's group-A levels over
    the bottom of group B (stored once built) — else from the bottom combinations.  A class
    of a more specific node lies in exactly one class of ``node``, so its representative's
    group ids at the node's vectors name that class.  The node's own table is stored for the
    nodes above it.
    """
    heights, strides, L, height_of, vecA, vecB, DA, DB, nA, nB, rowA, rowB, w, par = C
    meta, node_pos, node_len, recent, in_a = W[6], W[7], W[8], W[9], W[10]
    d = heights.shape[0]
    m0 = w.shape[0]
    best = -1
    best_len = m0
    for j in range(d):  # predecessors
        if L[node, j] > 0:
            p = node - strides[j]
            if node_len[p] < best_len and _usable(W, p, m0):
                best = p
                best_len = node_len[p]
    for r in range(recent.shape[0]):  # the last evaluated nodes
        src = recent[r]
        if src < 0 or node_len[src] >= best_len or not _usable(W, src, m0):
            continue
        below = True
        for j in range(d):
            if L[src, j] > L[node, j]:
                below = False
                break
        if below:
            best = src
            best_len = node_len[src]
    if best < 0:
        # the node's group-A levels over group B's bottom: shared by every node with them
        aux = 0
        for j in range(d):
            if in_a[j]:
                aux += L[node, j] * strides[j]
        if aux != node:
            if not _usable(W, aux, m0):
                s = _count(vecA[aux], vecB[aux], C, W, rowA, rowB, w, m0)
                node_pos[aux] = s[4]
                node_len[aux] = s[1]
            if node_len[aux] < best_len and _usable(W, aux, m0):  # (a small arena may not keep it)
                best = aux
                best_len = node_len[aux]
    if best < 0:
        s = _count(vecA[node], vecB[node], C, W, rowA, rowB, w, m0)
    else:
        r0 = node_pos[best] % W[5].shape[0]
        sa = W[3][r0 : r0 + best_len]
        sb = W[4][r0 : r0 + best_len]
        sc = W[5][r0 : r0 + best_len]
        s = _count(vecA[node], vecB[node], C, W, sa, sb, sc, best_len)
    node_pos[node] = s[4]
    node_len[node] = s[1]
    recent[meta[3] % recent.shape[0]] = node
    meta[3] += 1
    return s[0], s[1], s[2], s[3]


@njit(cache=True, nogil=True)
def evaluate(node, C, S, W):
    """:meth:`_Lattice.evaluate` for discernibility / AECS: True if ``node`` needs at most
    max_sup suppressed records; tags the lattice, raises the learnt bounds above the node
    and scores it when it is within the limit.
    """
    heights, strides, L, height_of, vecA, vecB, DA, DB, nA, nB, rowA, rowB, w, par = C
    status, sups, loss_val, dyn, counter = S
    max_sup = par[1]
    s0 = sups[node]
    if s0 >= 0:
        return s0 <= max_sup
    k = par[0]
    n = par[2]
    kind = par[3]
    sup, ncls, nsmall, sq = _classes(node, C, W)
    sups[node] = sup
    counter[0] += 1
    ok = sup <= max_sup
    lv = L[node].astype(np.int64)
    if kind == 0:
        # DiscernibilityLoss._from_counts (exact integers in float64)
        b = (float(sq) + float(k) * float(sup)) / (float(n) * float(n))
        v = (float(sq) + float(n * sup)) / float(n * n)
    else:
        # AECSLoss._from_counts
        n_kept = ncls - nsmall
        most = n_kept + sup // k + (1 if nsmall else 0)
        x = min(most, ncls)
        if x < 1:
            x = 1
        b = float(n) / float(x)
        den = n_kept + (1 if sup else 0)
        v = float(n) / float(den) if den else np.nan
    top = heights - 1
    if b > dyn[node]:
        _box(lv, top, strides, dyn, b, 1)
    if ok:
        loss_val[node] = v
        if status[node] != 1:  # else its up-set is tagged already (tags are up-closed)
            _box(lv, top, strides, status, np.int8(1), 0)
    else:
        _box(np.zeros_like(lv), lv, strides, status, np.int8(-1), 0)
    return ok


@njit(cache=True, nogil=True)
def is_anon(node, C, S, W):
    st = S[0][node]
    if st == 0:
        return evaluate(node, C, S, W)
    return st == 1


@njit(cache=True, nogil=True)
def node_loss(node, C, S, W):
    """:meth:`_Lattice.node_loss` of a k-anonymous node (the loss is scored when the node is
    evaluated).
    """
    lossv = S[2]
    if np.isnan(lossv[node]):
        evaluate(node, C, S, W)
    return lossv[node]


@njit(cache=True, nogil=True)
def _first_anonymous(path, hi, C, S, W):
    """Binary search of path[0..hi] (generalisations in order; path[hi] anonymous or past
    the part searched) for the index of its first k-anonymous node, as the lattice's.
    """
    lo = 0
    while lo < hi:
        mid = (lo + hi) // 2
        if is_anon(path[mid], C, S, W):
            hi = mid
        else:
            lo = mid + 1
    return lo


@njit(cache=True, nogil=True)
def _rel(level, top):
    return float(level) / float(top if top > 1 else 1)


@njit(cache=True, nogil=True)
def tag_from_above(node, C, S, W):
    """:meth:`_Lattice.tag_from_above`, step for step."""
    heights, strides, L, height_of, vecA, vecB, DA, DB, nA, nB, rowA, rowB, w, par = C
    status = S[0]
    d = heights.shape[0]
    # the path's steps: attribute j from level l to l + 1, ordered by (l / top_j, j)
    nsteps = 0
    for j in range(d):
        nsteps += heights[j] - 1 - L[node, j]
    key = np.empty(nsteps, np.float64)
    att = np.empty(nsteps, np.int64)
    t = 0
    for j in range(d):
        top = heights[j] - 1
        for lvl in range(L[node, j], top):
            key[t] = _rel(lvl, top)
            att[t] = j
            t += 1
    # insertion sort by (key, attribute): a total order (one attribute never repeats a key)
    for a in range(1, nsteps):
        kk = key[a]
        aa = att[a]
        b = a - 1
        while b >= 0 and (key[b] > kk or (key[b] == kk and att[b] > aa)):
            key[b + 1] = key[b]
            att[b + 1] = att[b]
            b -= 1
        key[b + 1] = kk
        att[b + 1] = aa
    path = np.empty(nsteps + 1, np.int64)
    path[0] = node
    for t in range(nsteps):
        path[t + 1] = path[t] + strides[att[t]]
    lo = _first_anonymous(path, nsteps, C, S, W)
    if lo == 0:
        return
    cur = path[lo - 1]
    rel = np.empty(d, np.float64)
    while True:
        for j in range(d):
            rel[j] = _rel(L[cur, j], heights[j] - 1)
        order = np.argsort(rel, kind="mergesort")  # stable, as numpy's kind="stable"
        moved = False
        for jj in range(d):
            j = order[jj]
            if L[cur, j] < heights[j] - 1:
                nxt = cur + strides[j]
                if status[nxt] == 0 and not evaluate(nxt, C, S, W):
                    cur = nxt
                    moved = True
                    break
        if not moved:
            return


@njit(cache=True, nogil=True)
def path_bound(C, S, W):
    """:meth:`_Lattice.path_bound`: the lowest k-anonymous node on the bottom → top path
    that raises the attribute of lowest relative level first (−1 if the top is not).
    """
    heights, strides, L, height_of, vecA, vecB, DA, DB, nA, nB, rowA, rowB, w, par = C
    d = heights.shape[0]
    lv = np.zeros(d, np.int64)
    total = 0
    for j in range(d):
        total += heights[j] - 1
    path = np.empty(total + 1, np.int64)
    path[0] = 0
    cur = 0
    for t in range(total):
        jbest = -1
        rbest = np.inf
        for j in range(d):
            if lv[j] < heights[j] - 1:
                r = _rel(lv[j], heights[j] - 1)
                if r < rbest:
                    rbest = r
                    jbest = j
        lv[jbest] += 1
        cur += strides[jbest]
        path[t + 1] = cur
    if not is_anon(path[total], C, S, W):
        return -1
    return path[_first_anonymous(path, total, C, S, W)]


@njit(cache=True, nogil=True)
def search(region, lb, best, best_node, C, S, W):
    """The branch-and-bound loop of :func:`ola` over ``region`` (nodes in visiting order,
    ``lb`` the static lower bounds) for a learnt-bound metric; returns (best, best_node).
    """
    heights, strides, L, height_of, vecA, vecB, DA, DB, nA, nB, rowA, rowB, w, par = C
    status = S[0]
    dyn = S[3]
    for i in range(region.shape[0]):
        node = region[i]
        if lb[node] >= best or status[node] == -1:
            continue
        if dyn[node] > best + 1e-12:
            continue
        if status[node] == 0:
            tag_from_above(node, C, S, W)
            if status[node] == -1 or dyn[node] > best + 1e-12:
                continue
        if not is_anon(node, C, S, W):
            continue
        v = node_loss(node, C, S, W)
        if v < best - 1e-12:
            best = v
            best_node = node
        elif abs(v - best) <= 1e-12:
            h, hb = height_of[node], height_of[best_node]
            if h < hb or (h == hb and node < best_node):
                best = v
                best_node = node
    return best, best_node


@njit(cache=True, nogil=True)
def group_dense(distinct, up, cards, gh, dense, counts, seen, keys):
    """Dense ids of a group's combinations at every group level vector (the kernel's
    ``DA``/``DB``): row v of ``dense`` numbers the distinct generalised combinations at the
    levels of vector v (C order over the group's attributes, as ``vec_of``) in order of first
    appearance; ``counts[v]`` is how many there are.  ``distinct[t, i]`` is the level-0 code of
    attribute t of combination i, ``up[t, l, c]`` the level-l code of level-0 code c,
    ``cards[t, l]`` the number of level-l codes; ``seen`` (all −1, size ≥ the product of the
    level-0 numbers of codes) and ``keys`` (size n0) are work space, left as found.
    """
    g, n0 = distinct.shape
    lv = np.zeros(g, np.int64)
    for v in range(dense.shape[0]):
        rem = v
        for t in range(g - 1, -1, -1):
            lv[t] = rem % gh[t]
            rem //= gh[t]
        nid = 0
        for i in range(n0):
            key = 0
            for t in range(g):
                key = key * cards[t, lv[t]] + up[t, lv[t], distinct[t, i]]
            x = seen[key]
            if x < 0:
                x = nid
                seen[key] = nid
                nid += 1
            dense[v, i] = x
            keys[i] = key
        for i in range(n0):
            seen[keys[i]] = -1
        counts[v] = nid
