"""Compiled MDAV kernel (numba), imported lazily by :func:`microaggregation.mdav`.

It forms exactly the clusters of the pure-numpy MDAV (``microaggregation._mdav_numpy``), bit
for bit, by doing the same floating-point operations in the same order:

* squared distances ``(z_0 - p_0)^2 + (z_1 - p_1)^2 + …`` summed attribute by attribute;
* the centroid ``total / alive`` from a running sum ``total`` that is lowered by the sum of the
  2k records taken in each step (records of r's cluster then of s's, each in index order;
  numpy adds the columns of that fancy-indexed block one after the other when m >= 2 and
  pairwise when m == 1) and recomputed exactly (numpy's pairwise sum over the remaining
  records in index order) whenever the numpy version compacts its arrays, on the same
  schedule;
* ties to the lowest record index, in "farthest" and in "k nearest".

What differs is only how candidates are found: a k-d tree over the records whose node boxes
shrink as records are clustered, searched branch-and-bound.  A node is skipped only when
its box bound is *strictly* worse than the current best; because IEEE rounding is monotone,
the rounded bound of a box never exceeds (for "nearest") or falls below (for "farthest") the
rounded distance of any record inside it, so no record that could win — ties included — is
skipped.

All functions use ``cache=True``: the first process compiles (a few seconds) and stores the
machine code under ``__pycache__``; later processes load it.
"""

from __future__ import annotations

import numpy as np
from numba import njit

LEAF = 16


# ----------------------------------------------------------------------------- sums


@njit(cache=True)
def _pw_block(a, lo, n):
    """NumPy's pairwise sum for n <= 128 (eight accumulators), bit for bit."""
    if n < 8:
        res = -0.0
        for i in range(n):
            res += a[lo + i]
        return res
    r0 = a[lo]
    r1 = a[lo + 1]
    r2 = a[lo + 2]
    r3 = a[lo + 3]
    r4 = a[lo + 4]
    r5 = a[lo + 5]
    r6 = a[lo + 6]
    r7 = a[lo + 7]
    i = 8
    stop = n - (n % 8)
    while i < stop:
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


@njit(cache=True)
def _pairwise(a, lo, n):
    """NumPy's pairwise summation of a[lo:lo+n] (contiguous reduction), bit for bit: blocks
    of at most 128 summed by :func:`_pw_block`, halves (cut at a multiple of 8) added.
    Iterative, because numba's cache mishandles self-recursive functions.
    """
    if n <= 128:
        return _pw_block(a, lo, n)
    f_lo = np.empty(192, np.int64)  # frames: (lo, n, combine?)
    f_n = np.empty(192, np.int64)
    f_c = np.empty(192, np.bool_)
    vals = np.empty(192)
    fs = 0
    vs = 0
    f_lo[0] = lo
    f_n[0] = n
    f_c[0] = False
    fs = 1
    while fs > 0:
        fs -= 1
        flo = f_lo[fs]
        fn = f_n[fs]
        if f_c[fs]:
            right = vals[vs - 1]
            left = vals[vs - 2]
            vs -= 2
            vals[vs] = left + right
            vs += 1
        elif fn <= 128:
            vals[vs] = _pw_block(a, flo, fn)
            vs += 1
        else:
            n2 = fn // 2
            n2 -= n2 % 8
            f_lo[fs] = flo
            f_n[fs] = fn
            f_c[fs] = True
            f_lo[fs + 1] = flo + n2
            f_n[fs + 1] = fn - n2
            f_c[fs + 1] = False
            f_lo[fs + 2] = flo
            f_n[fs + 2] = n2
            f_c[fs + 2] = False
            fs += 3
    return vals[0]


@njit(cache=True)
def pairwise_sum(a):
    return _pairwise(a, 0, a.shape[0])


# ----------------------------------------------------------------------------- k-d tree


@njit(cache=True)
def _select(perm, Z, lo, hi, kth, dim):
    """Reorder perm[lo:hi] so that position kth holds the record of rank kth by Z[:, dim]
    (smaller before, larger-or-equal after); three-way partitions cope with many ties.
    """
    while hi - lo > 1:
        a = Z[perm[lo], dim]
        b = Z[perm[(lo + hi) // 2], dim]
        c = Z[perm[hi - 1], dim]
        pv = max(min(a, b), min(max(a, b), c))  # median of three
        lt = lo
        i = lo
        gt = hi
        while i < gt:
            v = Z[perm[i], dim]
            if v < pv:
                t = perm[lt]
                perm[lt] = perm[i]
                perm[i] = t
                lt += 1
                i += 1
            elif v > pv:
                gt -= 1
                t = perm[gt]
                perm[gt] = perm[i]
                perm[i] = t
            else:
                i += 1
        if kth < lt:
            hi = lt
        elif kth >= gt:
            lo = gt
        else:
            return


@njit(cache=True)
def build_tree(Z, depth):
    """Implicit balanced k-d tree with 2**depth leaves; node 1 is the root, children 2i, 2i+1.

    Returns perm (position -> record), the records in tree order Zp, node bounds [start, end),
    boxes lo/hi, alive counts, and the leaf of every position.
    """
    n, m = Z.shape
    perm = np.arange(n)
    nn = 1 << (depth + 1)
    start = np.zeros(nn, np.int64)
    end = np.zeros(nn, np.int64)
    for lev in range(depth + 1):
        w = 1 << lev
        for p in range(w):
            node = w + p
            start[node] = (p * n) // w
            end[node] = ((p + 1) * n) // w
    for lev in range(depth):
        w = 1 << lev
        for p in range(w):
            node = w + p
            s = start[node]
            e = end[node]
            if e - s < 2:
                continue
            best = 0
            spread = -1.0
            for j in range(m):
                mn = np.inf
                mx = -np.inf
                for q in range(s, e):
                    v = Z[perm[q], j]
                    if v < mn:
                        mn = v
                    if v > mx:
                        mx = v
                if mx - mn > spread:
                    spread = mx - mn
                    best = j
            _select(perm, Z, s, e, end[2 * node], best)
    Zp = np.empty((n, m))
    for q in range(n):
        for j in range(m):
            Zp[q, j] = Z[perm[q], j]
    lo = np.empty((nn, m))
    hi = np.empty((nn, m))
    cnt = np.zeros(nn, np.int64)
    leaf_of = np.empty(n, np.int64)
    first_leaf = 1 << depth
    everyone = np.ones(n, np.bool_)
    for node in range(first_leaf, 2 * first_leaf):
        for q in range(start[node], end[node]):
            leaf_of[q] = node
        _refit_leaf(Zp, everyone, start, end, lo, hi, cnt, node)
    for node in range(first_leaf - 1, 0, -1):
        _merge_children(lo, hi, cnt, node, m)
    return perm, Zp, start, end, lo, hi, cnt, leaf_of


@njit(cache=True)
def _refit_leaf(Zp, alive, start, end, lo, hi, cnt, node):
    m = Zp.shape[1]
    c = 0
    for j in range(m):
        lo[node, j] = np.inf
        hi[node, j] = -np.inf
    for q in range(start[node], end[node]):
        if not alive[q]:
            continue
        c += 1
        for j in range(m):
            v = Zp[q, j]
            if v < lo[node, j]:
                lo[node, j] = v
            if v > hi[node, j]:
                hi[node, j] = v
    cnt[node] = c


@njit(cache=True)
def _merge_children(lo, hi, cnt, node, m):
    a = 2 * node
    b = a + 1
    cnt[node] = cnt[a] + cnt[b]
    for j in range(m):
        la = lo[a, j] if cnt[a] > 0 else np.inf
        lb = lo[b, j] if cnt[b] > 0 else np.inf
        ha = hi[a, j] if cnt[a] > 0 else -np.inf
        hb = hi[b, j] if cnt[b] > 0 else -np.inf
        lo[node, j] = min(la, lb)
        hi[node, j] = max(ha, hb)


@njit(cache=True)
def _remove(q, Zp, alive, start, end, lo, hi, cnt, leaf_of):
    """Mark position q clustered and shrink the boxes on its path to the root."""
    m = Zp.shape[1]
    alive[q] = False
    node = leaf_of[q]
    _refit_leaf(Zp, alive, start, end, lo, hi, cnt, node)
    node //= 2
    while node >= 1:
        _merge_children(lo, hi, cnt, node, m)
        node //= 2


# ----------------------------------------------------------------------------- queries


@njit(cache=True)
def _sqd(Zp, q, p):
    m = Zp.shape[1]
    d = Zp[q, 0] - p[0]
    d *= d
    for j in range(1, m):
        t = Zp[q, j] - p[j]
        t *= t
        d += t
    return d


@njit(cache=True)
def _box_max(lo, hi, node, p):
    m = p.shape[0]
    a = lo[node, 0] - p[0]
    a *= a
    b = hi[node, 0] - p[0]
    b *= b
    d = max(a, b)
    for j in range(1, m):
        a = lo[node, j] - p[j]
        a *= a
        b = hi[node, j] - p[j]
        b *= b
        d += max(a, b)
    return d


@njit(cache=True)
def _box_min(lo, hi, node, p):
    m = p.shape[0]
    d = 0.0
    for j in range(m):
        if p[j] < lo[node, j]:
            t = lo[node, j] - p[j]
        elif p[j] > hi[node, j]:
            t = p[j] - hi[node, j]
        else:
            t = 0.0
        t *= t
        if j == 0:
            d = t
        else:
            d += t
    return d


@njit(cache=True)
def farthest(p, Zp, perm, alive, start, end, lo, hi, cnt, first_leaf, stack):
    """Position of the alive record farthest from p (lowest record index on ties)."""
    best_d = -1.0
    best_q = -1
    best_i = -1
    sp = 0
    stack[sp] = 1
    sp += 1
    while sp > 0:
        sp -= 1
        node = stack[sp]
        if cnt[node] == 0:
            continue
        if _box_max(lo, hi, node, p) < best_d:
            continue
        if node >= first_leaf:
            for q in range(start[node], end[node]):
                if not alive[q]:
                    continue
                d = _sqd(Zp, q, p)
                if d > best_d or (d == best_d and perm[q] < best_i):
                    best_d = d
                    best_q = q
                    best_i = perm[q]
        else:
            a = 2 * node
            b = a + 1
            # push the more promising child last so that it is searched first
            if _box_max(lo, hi, a, p) > _box_max(lo, hi, b, p):
                stack[sp] = b
                stack[sp + 1] = a
            else:
                stack[sp] = a
                stack[sp + 1] = b
            sp += 2
    return best_q


@njit(cache=True)
def _heap_less(d1, i1, d2, i2):
    return d1 < d2 or (d1 == d2 and i1 < i2)


@njit(cache=True)
def nearest(c, kk, Zp, perm, alive, start, end, lo, hi, cnt, first_leaf, stack, hd, hq, out):
    """out[0] = c, out[1:kk+1] = positions of the kk alive records other than c nearest to c
    (ties to the lowest record index).  hd/hq: scratch max-heap of size kk.
    """
    p = Zp[c]
    size = 0
    sp = 0
    stack[sp] = 1
    sp += 1
    while sp > 0:
        sp -= 1
        node = stack[sp]
        if cnt[node] == 0:
            continue
        if size == kk and _box_min(lo, hi, node, p) > hd[0]:
            continue
        if node >= first_leaf:
            for q in range(start[node], end[node]):
                if not alive[q] or q == c:
                    continue
                d = _sqd(Zp, q, p)
                iq = perm[q]
                if size < kk:
                    # sift up
                    i = size
                    size += 1
                    while i > 0:
                        par = (i - 1) // 2
                        if _heap_less(hd[par], perm[hq[par]], d, iq):
                            hd[i] = hd[par]
                            hq[i] = hq[par]
                            i = par
                        else:
                            break
                    hd[i] = d
                    hq[i] = q
                elif _heap_less(d, iq, hd[0], perm[hq[0]]):
                    # replace the root (the worst) and sift down
                    i = 0
                    while True:
                        ch = 2 * i + 1
                        if ch >= kk:
                            break
                        if ch + 1 < kk and _heap_less(hd[ch], perm[hq[ch]], hd[ch + 1], perm[hq[ch + 1]]):
                            ch += 1
                        if _heap_less(d, iq, hd[ch], perm[hq[ch]]):
                            hd[i] = hd[ch]
                            hq[i] = hq[ch]
                            i = ch
                        else:
                            break
                    hd[i] = d
                    hq[i] = q
        else:
            a = 2 * node
            b = a + 1
            if _box_min(lo, hi, a, p) < _box_min(lo, hi, b, p):
                stack[sp] = b
                stack[sp + 1] = a
            else:
                stack[sp] = a
                stack[sp + 1] = b
            sp += 2
    out[0] = c
    for i in range(kk):
        out[i + 1] = hq[i]


# ----------------------------------------------------------------------------- farthest from the centroid


@njit(cache=True)
def _far_refresh(c, Zp, pos_of, alive, idx, size, n_alive, fs, c0, cl, cd, tmp):
    """Rebuild the candidate list: alive positions sorted by distance to c0 = c, descending,
    keeping every record whose distance is at least the T-th largest (ties included).
    """
    m = Zp.shape[1]
    for j in range(m):
        c0[j] = c[j]
    w = 0
    for i in range(size):
        q = pos_of[idx[i]]
        if alive[q]:
            cl[w] = q
            cd[w] = np.sqrt(_sqd(Zp, q, c0))
            w += 1
    T = min(w, max(1024, min(16384, n_alive // 16)))
    if T < w:
        for i in range(w):
            tmp[i] = cd[i]
        v = np.partition(tmp[:w], w - T)[w - T]
        u = 0
        for i in range(w):
            if cd[i] >= v:
                cl[u] = cl[i]
                cd[u] = cd[i]
                u += 1
        w = u
        fs[4] = 1  # incomplete list: valid down to cut
        cut_v = v
    else:
        fs[4] = 0
        cut_v = -np.inf
    order = np.argsort(-cd[:w])
    for i in range(w):
        tmp[i] = cd[order[i]]
    for i in range(w):
        cd[i] = tmp[i]
    ord_q = cl[:w][order]
    for i in range(w):
        cl[i] = ord_q[i]
    fs[0] = w  # list length
    fs[1] = 0  # head
    fs[2] = 0  # entries scanned since the refresh
    fs[3] = 1  # valid
    return cut_v


@njit(cache=True)
def far_centroid(
    c,
    Zp,
    perm,
    pos_of,
    alive,
    idx,
    size,
    n_alive,
    fs,
    fcut,
    c0,
    cl,
    cd,
    tmp,
    start,
    end,
    lo,
    hi,
    cnt,
    first_leaf,
    stack,
):
    """Position of the alive record farthest from c (lowest record index on ties).

    If |z - c0| < D0 - 2|c - c0| (D0: the largest |z - c0| among alive records), then
    |z - c| < |z* - c| for the record z* at D0, so z cannot be the farthest: only the head
    of the list down to that bound (less a tolerance far above rounding errors) is
    evaluated, with the exact distance formula.  Falls back to the tree search when the list
    cannot vouch for completeness.
    """
    m = Zp.shape[1]
    for _attempt in range(2):
        if fs[3] == 0:
            fcut[0] = _far_refresh(c, Zp, pos_of, alive, idx, size, n_alive, fs, c0, cl, cd, tmp)
        head = fs[1]
        w = fs[0]
        while head < w and not alive[cl[head]]:
            head += 1
        fs[1] = head
        if head == w:
            fs[3] = 0
            continue
        dd = 0.0
        for j in range(m):
            t = c[j] - c0[j]
            dd += t * t
        delta = np.sqrt(dd)
        D0 = cd[head]
        thr = D0 - 2.0 * delta - 1e-9 * (D0 + delta) - 1e-300
        if fs[4] == 1 and thr < fcut[0]:
            fs[3] = 0
            continue
        best_d = -1.0
        best_q = -1
        best_i = -1
        i = head
        while i < w and cd[i] >= thr:
            q = cl[i]
            if alive[q]:
                d = _sqd(Zp, q, c)
                if d > best_d or (d == best_d and perm[q] < best_i):
                    best_d = d
                    best_q = q
                    best_i = perm[q]
            i += 1
        fs[2] += i - head
        if fs[2] > n_alive:
            fs[3] = 0  # scanning has cost as much as a refresh: refresh next time
        return best_q
    return farthest(c, Zp, perm, alive, start, end, lo, hi, cnt, first_leaf, stack)


# ----------------------------------------------------------------------------- MDAV


@njit(cache=True)
def _recompute_total(Zp, pos_of, idx, size, total, buf):
    m = Zp.shape[1]
    for j in range(m):
        for i in range(size):
            buf[i] = Zp[pos_of[idx[i]], j]
        total[j] = _pairwise(buf, 0, size)


@njit(cache=True)
def mdav_run(Z, k, depth, max_steps, st, labels, total, idx, tree, scratch):
    """Run at most max_steps MDAV steps (two clusters each) from the state st.

    st = [label, n_dead, size, alive, phase]; phase 0 = main loop, 1 = done.
    tree = (perm, Zp, start, end, lo, hi, cnt, leaf_of, alive, pos_of).
    """
    perm, Zp, start, end, lo, hi, cnt, leaf_of, alive, pos_of = tree
    stack, hd, hq, take, buf, sums, fs, fcut, c0, cl, cd = scratch
    m = Z.shape[1]
    first_leaf = 1 << depth
    label = st[0]
    n_dead = st[1]
    size = st[2]
    n_alive = st[3]
    p = np.empty(m)
    steps = 0
    while n_alive >= 3 * k and steps < max_steps:
        for j in range(m):
            p[j] = total[j] / n_alive
        r = far_centroid(
            p,
            Zp,
            perm,
            pos_of,
            alive,
            idx,
            size,
            n_alive,
            fs,
            fcut,
            c0,
            cl,
            cd,
            buf,
            start,
            end,
            lo,
            hi,
            cnt,
            first_leaf,
            stack,
        )
        nearest(r, k - 1, Zp, perm, alive, start, end, lo, hi, cnt, first_leaf, stack, hd, hq, take[:k])
        for i in range(k):
            _remove(take[i], Zp, alive, start, end, lo, hi, cnt, leaf_of)
        s = farthest(Zp[r], Zp, perm, alive, start, end, lo, hi, cnt, first_leaf, stack)
        nearest(s, k - 1, Zp, perm, alive, start, end, lo, hi, cnt, first_leaf, stack, hd, hq, take[k:])
        for i in range(k, 2 * k):
            _remove(take[i], Zp, alive, start, end, lo, hi, cnt, leaf_of)
        # labels; records of each cluster in index order (the order numpy sums them in)
        for h in range(2):
            for i in range(h * k, (h + 1) * k):
                take[i] = perm[take[i]]
            seg = take[h * k : (h + 1) * k]
            seg.sort()
            for i in range(h * k, (h + 1) * k):
                labels[take[i]] = label + h
        label += 2
        for j in range(m):
            if m == 1:
                for i in range(2 * k):
                    buf[i] = Z[take[i], j]
                sums[j] = _pairwise(buf, 0, 2 * k)
            else:
                acc = Z[take[0], j]
                for i in range(1, 2 * k):
                    acc += Z[take[i], j]
                sums[j] = acc
            total[j] = total[j] - sums[j]
        n_dead += 2 * k
        n_alive -= 2 * k
        steps += 1
        if n_dead > max(64 * k, size // 8):  # numpy version compacts here
            w = 0
            for i in range(size):
                if alive[pos_of[idx[i]]]:
                    idx[w] = idx[i]
                    w += 1
            size = w
            n_dead = 0
            _recompute_total(Zp, pos_of, idx, size, total, buf)
    if n_alive < 3 * k:
        # tail: compact, exact total, at most one more cluster around the farthest record
        w = 0
        for i in range(size):
            if alive[pos_of[idx[i]]]:
                idx[w] = idx[i]
                w += 1
        size = w
        n_dead = 0
        _recompute_total(Zp, pos_of, idx, size, total, buf)
        if n_alive >= 2 * k:
            for j in range(m):
                p[j] = total[j] / n_alive
            r = farthest(p, Zp, perm, alive, start, end, lo, hi, cnt, first_leaf, stack)
            nearest(r, k - 1, Zp, perm, alive, start, end, lo, hi, cnt, first_leaf, stack, hd, hq, take[:k])
            for i in range(k):
                _remove(take[i], Zp, alive, start, end, lo, hi, cnt, leaf_of)
                labels[perm[take[i]]] = label
            label += 1
        for i in range(size):
            if alive[pos_of[idx[i]]]:
                labels[idx[i]] = label
        st[4] = 1
    st[0] = label
    st[1] = n_dead
    st[2] = size
    st[3] = n_alive


def run(Z: np.ndarray, k: int, check_cancel=None, progress=None) -> np.ndarray:
    """MDAV labels of the standardised C-contiguous float64 matrix Z (n >= 2k, k >= 2)."""
    n, m = Z.shape
    depth = 0
    while (n >> depth) > LEAF:
        depth += 1
    perm, Zp, start, end, lo, hi, cnt, leaf_of = build_tree(Z, depth)
    alive = np.ones(n, dtype=np.bool_)
    pos_of = np.empty(n, dtype=np.int64)
    pos_of[perm] = np.arange(n, dtype=np.int64)
    tree = (perm, Zp, start, end, lo, hi, cnt, leaf_of, alive, pos_of)
    scratch = (
        np.empty(2 * (depth + 2) + 8, np.int64),
        np.empty(max(k - 1, 1)),
        np.empty(max(k - 1, 1), np.int64),
        np.empty(2 * k, np.int64),
        np.empty(max(n, 2 * k)),
        np.empty(m),
        np.zeros(5, np.int64),
        np.zeros(1),
        np.empty(m),
        np.empty(n, np.int64),
        np.empty(n),
    )
    labels = np.empty(n, dtype=np.int64)
    total = Z.T.copy().sum(axis=1)  # numpy's own pairwise row sums, as the numpy version
    idx = np.arange(n, dtype=np.int64)
    st = np.array([0, 0, n, n, 0], dtype=np.int64)
    chunk = 64 if (check_cancel is not None or progress is not None) else 1 << 62
    while st[4] == 0:
        mdav_run(Z, k, depth, chunk, st, labels, total, idx, tree, scratch)
        if st[4] == 0:
            if check_cancel is not None:
                check_cancel()
            if progress is not None:
                progress(1.0 - st[3] / n)
    return labels
