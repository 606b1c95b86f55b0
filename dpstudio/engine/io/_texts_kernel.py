"""Compiled decimal texts of tenths (numba), imported lazily by :func:`writing._decimal_texts`
(issue 27 §1: Arrow's cast of decimal64 to text was ~10 % of a laplace / ir-dp run's CPU).

``k`` (int64, |k| < 10¹⁸) is written as Arrow writes the decimal ``k``/10 of scale 1: a minus
sign for k < 0, the digits of |k| // 10 (at least one: "0"), ".", the digit |k| % 10 --
"12.0", "-0.5", "0.0".  Integer arithmetic only; the tests compare every text with Arrow's
cast (edges of every digit count, random values).

``cache=True``: the first process compiles and stores the machine code under
``__pycache__``; later processes load it.  ``nogil``: blocks are formatted in threads.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def tenths_offsets(k, offsets):
    """Arrow string offsets of the texts of ``k``/10 into ``offsets`` (len(k) + 1 int32)."""
    pos = 0
    offsets[0] = 0
    ten = np.uint64(10)
    for i in range(k.size):
        n = 3  # "d.d"
        if k[i] < 0:
            n += 1
            v = np.uint64(-k[i])
        else:
            v = np.uint64(k[i])
        p = np.uint64(100)  # |k| >= 100: two digits before the point, and so on
        while v >= p and n < 21:
            p *= ten
            n += 1
        pos += n
        offsets[i + 1] = pos


@njit(cache=True, nogil=True)
def tenths_fill(k, offsets, data):
    """The texts of ``k``/10 into ``data`` (uint8) at ``offsets``."""
    ten = np.uint64(10)
    zero = np.uint64(48)
    for i in range(k.size):
        neg = k[i] < 0
        v = np.uint64(-k[i]) if neg else np.uint64(k[i])
        end = offsets[i + 1]
        q = v // ten
        data[end - 1] = np.uint8(zero + (v - q * ten))
        data[end - 2] = np.uint8(46)  # "."
        v = q
        p = end - 3
        while True:
            q = v // ten
            data[p] = np.uint8(zero + (v - q * ten))
            v = q
            p -= 1
            if v == np.uint64(0):
                break
        if neg:
            data[offsets[i]] = np.uint8(45)  # "-"
