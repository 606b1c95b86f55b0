"""Compiled round 0 of the keyed dense Laplace sampler (numba), imported lazily by
:func:`keyed._laplace_dense` (issue 27 §1: the numpy version makes ~28 passes over every
chunk of 65,536 draws).

It gives the draws of :func:`keyed._laplace_words` bit for bit, because it does no floating-
point operation numpy does not do in the same order on the same operands:

* the one transcendental step, ``log(u)``, is NOT done here: the caller takes it with numpy
  (``np.log``, whose SIMD implementation may differ from the C library's ``log`` that numba
  would call) and passes ``x = log(u)`` in;
* the rest are IEEE-754 basic operations, correctly rounded on every conforming machine and
  identical in numpy and in LLVM's code without ``fastmath`` (no reassociation, no fused
  multiply-add contraction: numba emits neither unless asked): the uniform
  ``(w >> 11)·2⁻⁵³`` (an exact conversion and an exact scaling), one division by
  ``−scaled``, ``floor``, subtractions, a multiplication by 2⁻⁴⁸, the division
  ``(2⁻⁵²/scaled)/u`` (the numerator computed by the caller as numpy does) and comparisons;
* the float → integer conversion is made only for a decided draw (0 ≤ y0 < 2⁵²: exact);
* integer steps (shifts, masks, the split of small rates, the sign) as numpy's uint64/int64.

A draw whose floating-point test cannot decide it (~10⁻⁹ of them), or that needs the exact
test of the split (rates < 2⁻²⁴, 2⁻²³ of the draws), is not decided here: the kernel reports
it and the caller runs the numpy round on that chunk (the exact fallbacks live there only).
Tests compare the two on crafted words through every branch and on random words.

``cache=True``: the first process compiles (a second or two) and stores the machine code
under ``__pycache__``; later processes load it.  ``nogil``: chunks of different columns run
in threads side by side (parallel.py).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from dpstudio.engine.algorithms.keyed import _LO, _M0, _M1, _S32, _U53, _W0, _W1

_E48 = 2.0**-48
_TWO52 = 2.0**52


@njit(cache=True, nogil=True, inline="always")
def _mulhilo(x, m, m_lo, m_hi):
    """(high, low) 64-bit halves of x·m from 32-bit halves (``keyed._mulhilo``'s steps)."""
    lo, hi = x & _LO, x >> _S32
    t = lo * m_lo
    p = hi * m_lo + (t >> _S32)
    q = lo * m_hi + (p & _LO)
    return hi * m_hi + (p >> _S32) + (q >> _S32), x * m


#: counters per batch of :func:`philox_words` (the rounds run over a batch at a time, in
#: arrays: LLVM vectorises the 32-bit partial products)
_BATCH = 256


@njit(cache=True, nogil=True)
def philox_words(k0, k1, first, rnd, lane, u, w1, w2):
    """Philox-4x64-10 under key (k0, k1) at counters (first + 1 + i, rnd, lane, 0) -- the
    words numpy's ``Philox(key, counter=[first, rnd, lane, 0])`` gives for block i
    (``KeyedStream._run``; the rounds of :func:`keyed.philox_block`, its 128-bit products
    from 32-bit halves as ``keyed._mulhilo``): ``u[i]`` = (word 0 >> 11)·2⁻⁵³ (numpy's
    double; an exact conversion and scaling), ``w1[i]``, ``w2[i]`` words 1 and 2.  Integer
    arithmetic only (wrapping uint64).
    """
    c0 = np.empty(_BATCH, np.uint64)
    c1 = np.empty(_BATCH, np.uint64)
    c2 = np.empty(_BATCH, np.uint64)
    c3 = np.empty(_BATCH, np.uint64)
    m0_lo, m0_hi = _M0 & _LO, _M0 >> _S32
    m1_lo, m1_hi = _M1 & _LO, _M1 >> _S32
    m = u.size
    for s in range(0, m, _BATCH):
        nb = min(_BATCH, m - s)
        for i in range(nb):
            c0[i] = first + np.uint64(1) + np.uint64(s + i)
            c1[i] = rnd
            c2[i] = lane
            c3[i] = np.uint64(0)
        a0 = k0
        a1 = k1
        for r in range(10):
            if r:
                a0 = a0 + _W0
                a1 = a1 + _W1
            for i in range(nb):
                hi0, lo0 = _mulhilo(c0[i], _M0, m0_lo, m0_hi)
                hi1, lo1 = _mulhilo(c2[i], _M1, m1_lo, m1_hi)
                c0[i] = hi1 ^ c1[i] ^ a0
                c2[i] = hi0 ^ c3[i] ^ a1
                c1[i] = lo1
                c3[i] = lo0
        for i in range(nb):
            u[s + i] = np.float64(c0[i] >> np.uint64(11)) * _U53
            w1[s + i] = c1[i]
            w2[s + i] = c2[i]


@njit(cache=True, nogil=True)
def laplace_round(u, w1, w2, x, neg_scaled, d0, small, ji, limit, y, ok):
    """Round 0 of the dense sampler from the uniforms ``u`` of words 0, words 1 and 2 (``w1``,
    ``w2``) and ``x = log(u)`` (m float64, numpy's), for a scalar rate: ``neg_scaled`` =
    −scaled, ``d0`` = 2⁻⁵²/scaled,
    ``small`` (rate < 2⁻²⁴) with ``ji`` = j and ``limit`` the split's acceptance bound.
    Writes ``y`` (int64) and ``ok`` (bool: False = "−0", redraw from round 1) and returns the
    index of the first draw it could not decide (the caller then runs the numpy round on the
    whole chunk), or −1 when every draw was decided.
    """
    ju = np.uint64(ji)
    mask = (np.uint64(1) << ju) - np.uint64(1)
    for i in range(x.size):
        xi = x[i] / neg_scaled
        y0 = np.floor(xi)
        frac = xi - y0
        e = xi * _E48
        if not frac < 1.0 - e:
            return i
        d = d0 / u[i]
        d = d + e
        if not (frac > d or y0 == 0.0):
            return i
        if not y0 < _TWO52:
            return i
        yu = np.uint64(y0)  # 0 <= y0 < 2^52: exact
        if small:  # Y = M·G + R (wrapping as numpy's int64 does: uint64 arithmetic)
            raw = w1[i]
            if not (raw >> ju) < limit:
                return i
            yu = (yu << ju) + (raw & mask)
        if w2[i] & np.uint64(1):
            ok[i] = yu != np.uint64(0)  # "−0": redraw (CKS Algorithm 2)
            y[i] = np.int64(np.uint64(0) - yu)
        else:
            ok[i] = True
            y[i] = np.int64(yu)
    return -1


@njit(cache=True, nogil=True)
def philox_streams(keys, nc, u, w1, w2):
    """:func:`philox_words` of ids 0 … nc − 1 (round 0, lane 0) for every stream s of
    ``keys`` (S, 2) uint64, into rows s·nc … (s + 1)·nc − 1 of ``u``, ``w1``, ``w2`` (the
    words ``keyed.contiguous_words`` gives, read as there): one call for a sweep cell's
    S = repetitions × attributes streams.
    """
    zero = np.uint64(0)
    for s in range(keys.shape[0]):
        a = s * nc
        philox_words(keys[s, 0], keys[s, 1], zero, zero, zero, u[a : a + nc], w1[a : a + nc], w2[a : a + nc])


@njit(cache=True, nogil=True)
def laplace_rounds(u, w1, w2, x, nc, neg_scaled, d0, small, ji, limit, y, ok, undecided):
    """:func:`laplace_round` of every stream s (rows s·nc … (s + 1)·nc − 1) with its own
    constants (``neg_scaled[s]`` …, as ``keyed._split`` gives them for its scalar rate);
    ``undecided[s]``: laplace_round's answer for that stream (−1 when every draw was decided).
    """
    for s in range(neg_scaled.size):
        a = s * nc
        b = a + nc
        undecided[s] = laplace_round(
            u[a:b], w1[a:b], w2[a:b], x[a:b], neg_scaled[s], d0[s], small[s], ji[s], limit[s], y[a:b], ok[a:b]
        )
