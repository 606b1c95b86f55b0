"""Noise mechanisms (docs/methods.md §3): Laplace, optimal (staircase) noise, exponential mechanism.

Releases use only the floating-point-safe samplers at the end of this module
(:func:`grid_noise`: exact discrete Laplace / staircase on each attribute's output grid,
issue 8 §3).  The continuous samplers (:func:`laplace_noise`, :func:`staircase_noise`,
:func:`sample_noise`) and densities are kept as references for analysis and tests: a
floating-point draw added to a double leaks the true value through its low bits (Mironov 2012).

Every sampler takes a :class:`numpy.random.Generator`; the same generator state gives the
same draws bit for bit.  ``sensitivity`` and ``epsilon`` may be scalars or arrays that
broadcast to ``size`` (e.g. one sensitivity per cluster, one ε per attribute).

Staircase noise (thesis ch. 4, Theorem 1), for sensitivity Δ and budget ε, has density

* ``M0`` on ``|x| <= d``,
* ``M0 * exp(-(i+1) ε)`` on ``d + iΔ <= |x| < d + (i+1)Δ``, i = 0, 1, …,

with ``M0 = 1 / (2d + 2Δ e^{-ε} / (1 - e^{-ε}))`` and ``d ∈ [0, Δ]`` chosen to minimise
the variance.  It is ε-DP for sensitivity Δ (a shift by at most Δ moves the step index by at
most one) and has less variance than Laplace(Δ/ε).

>>> round(staircase_variance(1.0, 1.0, 0.416737), 2)
1.92
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from decimal import MAX_EMAX, MIN_EMIN, ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal, localcontext
from fractions import Fraction
from typing import SupportsInt, TypedDict, cast

import numpy as np

__all__ = [
    "laplace_noise",
    "staircase_optimal_d",
    "staircase_variance",
    "staircase_noise",
    "staircase_cdf",
    "staircase_pdf",
    "sample_noise",
    "noise_variance",
    "exponential_mechanism",
    "clamp",
    "NOISE_KINDS",
]

NOISE_KINDS = ("laplace", "staircase")


# --------------------------------------------------------------------------- Laplace


def laplace_noise(rng: np.random.Generator, scale, size=None) -> np.ndarray:
    """Laplace(0, ``scale``) draws of shape ``size`` (``scale`` broadcasts; scale 0 gives 0).

    >>> laplace_noise(np.random.default_rng(0), 0.0, 3).tolist()
    [0.0, 0.0, 0.0]
    """
    scale = np.asarray(scale, dtype=np.float64)
    if size is None:
        size = scale.shape
    if np.any(scale < 0) or not np.all(np.isfinite(scale)):
        raise ValueError("Laplace scale must be a finite number >= 0.")
    # Inverse-CDF from one uniform per draw: deterministic and supports scale 0 exactly.
    u = rng.random(size) - 0.5
    return -scale * np.sign(u) * np.log1p(-2.0 * np.abs(u)) + 0.0  # + 0.0: no negative zeros


# --------------------------------------------------------------------------- staircase


def _q(epsilon: float) -> tuple[float, float]:
    """(q, 1 - q) with q = e^{-ε}, computed stably."""
    return math.exp(-epsilon), -math.expm1(-epsilon)


def _m0(sensitivity: float, epsilon: float, d: float) -> float:
    q, one_q = _q(epsilon)
    return 1.0 / (2.0 * d + 2.0 * sensitivity * q / one_q)


def staircase_variance(sensitivity: float, epsilon: float, d: float | None = None) -> float:
    """Variance of staircase noise with parameter ``d`` (default: the optimal d).

    Closed form: 2·M0·[d³/3 + Σ_i q^{i+1} ∫_{d+iΔ}^{d+(i+1)Δ} x² dx], q = e^{-ε}.

    >>> round(staircase_variance(1.0, 0.1), 2), round(staircase_variance(1.0, 0.5), 2)
    (199.92, 7.92)
    """
    sensitivity = float(sensitivity)
    epsilon = float(epsilon)
    if sensitivity < 0 or epsilon <= 0:
        raise ValueError("staircase needs sensitivity >= 0 and epsilon > 0")
    if sensitivity == 0:
        return 0.0
    if d is None:
        d = staircase_optimal_d(sensitivity, epsilon)
    D = sensitivity
    q, one_q = _q(epsilon)
    m0 = _m0(D, epsilon, d)
    # Σ_{i>=0} q^{i+1} i^j for j = 0, 1, 2
    s0 = q / one_q
    s1 = q * q / one_q**2
    s2 = q * q * (1.0 + q) / one_q**3
    # (d+iΔ+Δ)^3 - (d+iΔ)^3 = 3(d+iΔ)^2 Δ + 3(d+iΔ)Δ^2 + Δ^3
    #   = i^2 (3Δ^3) + i (6dΔ^2 + 3Δ^3) + (3d^2Δ + 3dΔ^2 + Δ^3)
    outer = (
        s2 * 3 * D**3 + s1 * (6 * d * D**2 + 3 * D**3) + s0 * (3 * d * d * D + 3 * d * D**2 + D**3)
    ) / 3.0
    return float(2.0 * m0 * (d**3 / 3.0 + outer))


@functools.lru_cache(maxsize=4096)
def _optimal_d_unit(epsilon: float) -> float:
    """Optimal d for Δ = 1 (d scales linearly with Δ)."""
    from scipy.optimize import minimize_scalar

    res = minimize_scalar(
        lambda d: staircase_variance(1.0, epsilon, d),
        bounds=(0.0, 1.0),
        method="bounded",
        options={"xatol": 1e-10},
    )
    d = float(res.x)
    # the bounded method never evaluates the end points: compare them explicitly
    best = min((staircase_variance(1.0, epsilon, x), x) for x in (0.0, d, 1.0))
    return float(best[1])


def staircase_optimal_d(sensitivity: float, epsilon: float) -> float:
    """The d ∈ [0, Δ] minimising the variance of staircase noise (numerically).

    >>> round(staircase_optimal_d(1.0, 1.0), 5)
    0.41674
    """
    sensitivity = float(sensitivity)
    epsilon = float(epsilon)
    if sensitivity < 0 or not epsilon > 0:
        raise ValueError("staircase needs sensitivity >= 0 and epsilon > 0")
    return sensitivity * _optimal_d_unit(epsilon)


def _staircase_unit(rng: np.random.Generator, epsilon: float, size) -> np.ndarray:
    """Exact staircase draws for Δ = 1 with the optimal d.

    Sign uniform; with probability 2·M0·d the magnitude is uniform on [0, d]; otherwise the
    step index i is geometric, P(i) = (1-q) q^i, and the magnitude uniform on [d+i, d+i+1).
    """
    d = _optimal_d_unit(epsilon)
    q, one_q = _q(epsilon)
    m0 = _m0(1.0, epsilon, d)
    p_center = 2.0 * m0 * d
    sign = np.where(rng.random(size) < 0.5, -1.0, 1.0)
    center = rng.random(size) < p_center
    # geometric number of failures with success probability 1 - q (numpy counts trials >= 1)
    i = rng.geometric(one_q, size) - 1
    u = rng.random(size)
    mag = np.where(center, u * d, d + i + u)
    return sign * mag


def staircase_noise(rng: np.random.Generator, sensitivity, epsilon, size=None) -> np.ndarray:
    """Exact samples of optimal (staircase) ε-DP noise for L1 sensitivity ``sensitivity``.

    ``sensitivity`` and ``epsilon`` broadcast to ``size``; sensitivity 0 gives 0.
    """
    sens = np.asarray(sensitivity, dtype=np.float64)
    eps = np.asarray(epsilon, dtype=np.float64)
    if size is None:
        size = np.broadcast_shapes(sens.shape, eps.shape)
    size = tuple(np.atleast_1d(size).tolist()) if not isinstance(size, tuple) else size
    if np.any(sens < 0) or not np.all(np.isfinite(sens)):
        raise ValueError("staircase sensitivity must be a finite number >= 0")
    if np.any(~(eps > 0)) or not np.all(np.isfinite(eps)):
        raise ValueError("staircase epsilon must be a finite number > 0")
    sens_b = np.broadcast_to(sens, size)
    eps_b = np.broadcast_to(eps, size)
    uniq = np.unique(eps_b)
    if uniq.size == 1:
        unit = _staircase_unit(rng, float(uniq[0]), size)
    else:
        unit = np.empty(size, dtype=np.float64)
        for e in uniq:  # one pass per distinct ε (few: one per attribute)
            mask = eps_b == e
            unit[mask] = _staircase_unit(rng, float(e), int(mask.sum()))
    return unit * sens_b + 0.0


def staircase_cdf(x, sensitivity: float, epsilon: float, d: float | None = None) -> np.ndarray:
    """Exact CDF of staircase noise (for goodness-of-fit tests)."""
    D = float(sensitivity)
    if d is None:
        d = staircase_optimal_d(D, epsilon)
    q, one_q = _q(float(epsilon))
    m0 = _m0(D, epsilon, d)
    x = np.asarray(x, dtype=np.float64)
    a = np.abs(x)
    inner = m0 * np.minimum(a, d)
    t = np.maximum(a - d, 0.0) / D
    i = np.floor(t)
    frac = t - i
    # mass of full steps 0..i-1: M0 Δ Σ_{j<i} q^{j+1} = M0 Δ q (1 - q^i)/(1 - q)
    full = m0 * D * q * (-np.expm1(i * math.log(q))) / one_q
    part = m0 * D * np.exp((i + 1) * math.log(q)) * frac
    half = inner + full + part
    return np.where(x >= 0, 0.5 + half, 0.5 - half)


def staircase_pdf(x, sensitivity: float, epsilon: float, d: float | None = None) -> np.ndarray:
    """Density of staircase noise."""
    D = float(sensitivity)
    if d is None:
        d = staircase_optimal_d(D, epsilon)
    m0 = _m0(D, epsilon, d)
    a = np.abs(np.asarray(x, dtype=np.float64))
    i = np.floor(np.maximum(a - d, 0.0) / D)
    return np.where(a <= d, m0, m0 * np.exp(-(i + 1) * float(epsilon)))


# --------------------------------------------------------------------------- dispatch


def sample_noise(kind: str, rng: np.random.Generator, sensitivity, epsilon, size=None) -> np.ndarray:
    """ε-DP noise for L1 sensitivity ``sensitivity``: ``kind`` 'laplace' (scale Δ/ε) or 'staircase'.

    >>> sample_noise("laplace", np.random.default_rng(1), 0.0, 1.0, 2).tolist()
    [0.0, 0.0]
    """
    if kind == "laplace":
        sens = np.asarray(sensitivity, dtype=np.float64)
        eps = np.asarray(epsilon, dtype=np.float64)
        if np.any(~(eps > 0)):
            raise ValueError("epsilon must be > 0")
        return laplace_noise(rng, sens / eps, size)
    if kind == "staircase":
        return staircase_noise(rng, sensitivity, epsilon, size)
    raise ValueError(f"unknown noise kind {kind!r}; use one of {', '.join(NOISE_KINDS)}")


def noise_variance(kind: str, sensitivity: float, epsilon: float) -> float:
    """Variance of one draw of ``kind`` noise (for reports: expected SSE from noise)."""
    if kind == "laplace":
        return 2.0 * (float(sensitivity) / float(epsilon)) ** 2
    if kind == "staircase":
        return staircase_variance(sensitivity, epsilon)
    raise ValueError(f"unknown noise kind {kind!r}")


# --------------------------------------------------------------------------- exponential mechanism


def exponential_mechanism(rng: np.random.Generator, quality, epsilon: float, sensitivity: float):
    """Sample candidate indices with Pr(t) ∝ exp(ε·q(t) / (2Δq)).

    ``quality`` has shape (..., n_candidates); returns an int for a 1-D ``quality``, else an
    integer array of shape ``quality.shape[:-1]``.  Stable: the row maximum is subtracted
    before exponentiating.  ``sensitivity`` 0 (all candidates equally good to the mechanism)
    selects uniformly among the maximal-quality candidates.
    """
    qual = np.asarray(quality, dtype=np.float64)
    if qual.ndim == 0 or qual.shape[-1] == 0:
        raise ValueError("exponential_mechanism needs at least one candidate")
    if not epsilon > 0:
        raise ValueError("epsilon must be > 0")
    if sensitivity < 0:
        raise ValueError("sensitivity must be >= 0")
    shifted = qual - qual.max(axis=-1, keepdims=True)
    if sensitivity == 0:
        w = (shifted == 0).astype(np.float64)
    else:
        w = np.exp(shifted * (float(epsilon) / (2.0 * float(sensitivity))))
    cum = np.cumsum(w, axis=-1)
    total = cum[..., -1:]
    u = rng.random(qual.shape[:-1] + (1,)) * total
    idx = (cum <= u).sum(axis=-1)
    idx = np.minimum(idx, qual.shape[-1] - 1)
    if qual.ndim == 1:
        return int(idx)
    return idx.astype(np.int64)


# --------------------------------------------------------------------------- clamp


def clamp(x, lb, ub) -> np.ndarray:
    """Clamp to [lb, ub] (post-processing, keeps DP); bounds broadcast (e.g. per column)."""
    return np.clip(np.asarray(x, dtype=np.float64), lb, ub)


# =========================================================================== floating-point-safe noise
#
# Releases never use the continuous samplers above (Mironov 2012: the low bits of a
# floating-point Laplace draw added to a double reveal which true value it was added to).
# Every noisy release is an *integer* on a declared grid of granularity γ (the attribute's
# precision), drawn exactly from a discrete distribution:
#
# * discrete Laplace (two-sided geometric), P(z) ∝ exp(-r·|z|), z ∈ ℤ (Canonne, Kamath &
#   Steinke 2020, Algorithm 2: a geometric magnitude, a sign, rejection of "−0");
# * discrete staircase, P(z) ∝ exp(-ε'·L(z)) with L(z) = 0 for |z| ≤ c and
#   ⌈(|z| − c)/Δ⌉ beyond: a shift by at most Δ moves L by at most one, so it is ε'-DP.
#
# The geometric magnitude is sampled EXACTLY: Y = max{y : U ≤ e^{-r·y}} for a uniform U whose
# bits are drawn lazily.  The first 64 bits decide Y in all but ~10⁻⁹ of the draws, with
# double-precision values of e^{-r·y} checked against a relative error margin (1e-9) that is
# four orders of magnitude above their worst-case error (≈ 2e-13 for r·y ≤ 745); the rare
# undecided draws are settled by drawing more bits of U and comparing with rigorous decimal
# bounds of e^{-r·y} (``decimal``'s exp at growing precision, widened by ten units in the last
# place).  So the output distribution is exactly the discrete one for the rate r, which is the
# double nearest below ε·(1 − 2⁻⁴⁰)/Δ: the budget actually spent, r·Δ, is < ε.

EPS_SAFETY = 2.0**-40  # ε' = ε·(1 − 2⁻⁴⁰): float rounding of the rate can never exceed ε
MAX_GRID_UNITS = 2**50  # largest sensitivity / range in grid units (int64 and double exact)
_TWO64 = float(2**64)


def _exp_neg_bounds(x: Fraction, prec: int) -> tuple[Fraction, Fraction]:
    """Rigorous rational bounds lo ≤ e^{-x} ≤ hi (x ≥ 0 rational) at ``prec`` decimal digits."""
    with localcontext() as ctx:
        ctx.prec = prec
        ctx.Emax, ctx.Emin = MAX_EMAX, MIN_EMIN
        num, den = Decimal(x.numerator), Decimal(x.denominator)
        ctx.rounding = ROUND_FLOOR
        x_lo = num / den
        ctx.rounding = ROUND_CEILING
        x_hi = num / den
        ctx.rounding = ROUND_HALF_EVEN
        e_hi = (-x_lo).exp()  # e^{-x_lo} ≥ e^{-x}
        e_lo = (-x_hi).exp()
    widen = Fraction(1, 10 ** (prec - 2))  # ≥ 10 units in the last place
    return Fraction(e_lo) * (1 - widen), Fraction(e_hi) * (1 + widen)


class _UState(TypedDict):
    lo: Fraction  # U lies in [lo, lo + w)
    w: Fraction
    prec: int  # decimal digits of the bounds on e^{-x}


def _geometric_one(rng: np.random.Generator, a: int, nbits: int, rate: Fraction, guess: int) -> int:
    """Exact Y = max{y ≥ 0 : U ≤ e^{-rate·y}} for U whose first ``nbits`` bits are ``a``
    (the rest drawn from ``rng`` as needed).
    """
    state: _UState = {"lo": Fraction(a, 1 << nbits), "w": Fraction(1, 1 << nbits), "prec": 40}

    def below(j: int) -> bool:  # U ≤ e^{-rate·j}?
        if j <= 0:
            return True
        x = rate * j
        while True:
            q_lo, q_hi = _exp_neg_bounds(x, state["prec"])
            if state["lo"] + state["w"] <= q_lo:
                return True
            if state["lo"] >= q_hi:  # U = e^{-x} exactly has probability 0
                return False
            bits = int(rng.integers(0, 1 << 32, dtype=np.uint64))
            state["lo"] += state["w"] * Fraction(bits, 1 << 32)
            state["w"] /= 1 << 32
            state["prec"] += 12

    lo = max(int(guess), 0)
    if below(lo):  # gallop up to a bracket [lo true, hi false]
        step = 1
        while below(lo + step):
            lo, step = lo + step, step * 2
        hi = lo + step
    else:
        hi, step = lo, 1
        lo = max(hi - step, 0)
        while not below(lo):
            hi, step = lo, step * 2
            lo = max(hi - step, 0)
    while hi - lo > 1:  # binary search: below(lo), not below(hi)
        mid = (lo + hi) // 2
        if below(mid):
            lo = mid
        else:
            hi = mid
    return lo


_SMALL_RATE = 2.0**-24
_MIN_RATE = 2.0**-62


def _geometric_direct(rng: np.random.Generator, r, size: tuple) -> np.ndarray:
    """Exact geometric draws by the lazy inverse CDF (rates ≥ 2⁻²⁴; see the notes above).

    Y = ⌊X⌋ with X = −ln(U)/r.  U's first 53 bits are ``rng.random()`` = u = k/2⁵³ exactly, so
    U ∈ [u, u + 2⁻⁵³) and X ∈ (x − d, x] with x = −ln(u)/r, d ≤ 2⁻⁵³/(u·r).  The computed x̃
    differs from x by at most e = x̃·2⁻⁴⁹ (ln within a few ulp, one division), so
    X ∈ (x̃ − e − d, x̃ + e]: when that interval holds no integer (or ⌊x̃⌋ = 0 and x̃ + e < 1:
    X ≥ 0 always), Y = ⌊x̃⌋ exactly.  Both bounds are checked with a factor 2 to spare.
    """
    u = rng.random(size)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore", under="ignore"):
        x = np.log(u)
        x /= -r  # x̃ = −ln(u)/r (u = 0 → inf: not ok below)
        y0 = np.floor(x)
        frac = x - y0  # exact
        e = x * 2.0**-48  # 2·e
        ok = frac < 1.0 - e  # X ≤ x̃ + e < ⌊x̃⌋ + 1
        d = (2.0**-52 / r) / u  # 2·d
        d += e
        ok &= (frac > d) | (y0 == 0.0)  # X > x̃ − e − d > ⌊x̃⌋  (or Y ≥ 0 = ⌊x̃⌋)
        ok &= y0 < 2.0**52  # False for inf and nan
        y = y0.astype(np.int64)  # undecided entries are overwritten below
    if not ok.all():
        bad = np.flatnonzero(~ok.reshape(-1))
        yf, uf = y.reshape(-1), u.reshape(-1)
        rf = np.broadcast_to(r, size).reshape(-1)
        for i in bad:
            k = int(uf[i] * 2.0**53)
            guess = float(y0.reshape(-1)[i])
            guess = int(guess) if math.isfinite(guess) and guess < 2.0**52 else 0
            yf[i] = _geometric_one(rng, k, 53, Fraction(float(rf[i])), guess)
    return y


def _shape(size) -> tuple[int, ...]:
    """``size`` as a shape tuple (a scalar count n gives (n,))."""
    if np.isscalar(size):
        # np.isscalar's guard also admits complex/str scalars; int() rejects those at run time
        return (int(cast(SupportsInt, size)),)
    return tuple(size)


def geometric_exact(rng: np.random.Generator, rate, size) -> np.ndarray:
    """Exact geometric draws on {0, 1, …}: P(Y = y) = (1 − e^{-r})·e^{-r·y}, ``rate`` r > 0
    (a scalar or an array of shape ``size``; the double value is the exact rate).

    Rates below 2⁻²⁴ (scales above 1.7·10⁷ grid units) are split exactly: Y = M·G + R with
    M = 2^j, r·M ∈ [2⁻²⁴, 2⁻²³), G geometric of rate r·M and R on [0, M) with
    P(R = i) ∝ e^{-r·i}, drawn by rejection from the uniform (accepted iff U ≤ e^{-r·i},
    decided by an integer comparison with 1 − 2⁻²³ ≤ e^{-r·i}, else exactly).
    """
    size = _shape(size)
    r = np.asarray(rate, dtype=np.float64)
    if r.ndim == 0:  # scalar rate: the same draws, without the array checks' overhead
        rf0 = float(r)
        if not (rf0 >= _MIN_RATE and rf0 < math.inf):
            raise ValueError(f"geometric rate must be a finite number >= 2^-62 (got {rf0!r})")
        if rf0 >= _SMALL_RATE:
            return _geometric_direct(rng, r, size)
    else:
        if np.any(~(r >= _MIN_RATE)) or not np.all(np.isfinite(r)):
            raise ValueError(f"geometric rate must be a finite number >= 2^-62 (got {np.min(r)!r})")
        r = np.broadcast_to(r, size)
    small = r < _SMALL_RATE
    if not np.any(small):
        return _geometric_direct(rng, r, size)
    j = np.where(small, np.ceil(np.log2(_SMALL_RATE / r)), 0.0)
    scaled = np.ldexp(r, j.astype(np.int64))  # exact: times a power of two
    j = np.where(scaled < _SMALL_RATE, j + 1, j)  # guard the float log2
    scaled = np.ldexp(r, j.astype(np.int64))
    M = np.ldexp(1.0, j.astype(np.int64)).astype(np.int64)
    y = _geometric_direct(rng, scaled, size) * M
    # R: truncated geometric on [0, M) by rejection from the uniform.  One 64-bit draw per
    # try: its low j bits are R (uniform on [0, M)), its high 64 − j bits the first bits of the
    # acceptance uniform V; accept iff V ≤ e^{-r·R}, decided at once when
    # (a + 1)/2^(64−j) ≤ 1 − 2⁻²³ (< e^{-r·R} since r·R < r·M < 2⁻²³), else exactly.
    flat_y = y.reshape(-1)
    jf = np.broadcast_to(j.astype(np.int64), size).reshape(-1)
    rf = np.broadcast_to(r, size).reshape(-1)
    pending = None if M.ndim == 0 else np.flatnonzero(jf > 0)
    while pending is None or pending.size:
        idx = np.arange(flat_y.size) if pending is None else pending
        jj = np.uint64(int(jf[0])) if pending is None else jf[idx].astype(np.uint64)
        raw = rng.integers(0, 2**64, size=idx.size, dtype=np.uint64)
        R = (raw & ((np.uint64(1) << jj) - np.uint64(1))).astype(np.int64)
        a = raw >> jj
        limit = (np.uint64(1) << (np.uint64(64) - jj)) - (np.uint64(1) << (np.uint64(41) - jj))
        acc = a < limit
        if not acc.all():
            for t in np.flatnonzero(~acc):  # rare (2⁻²³): decide exactly
                x = Fraction(float(rf[idx[t]])) * int(R[t])
                nb = 64 - int(jf[idx[t]])
                acc[t] = _uniform_below_exp(rng, int(a[t]), x, nb)
        if pending is None and acc.all():
            flat_y += R
            break
        flat_y[idx[acc]] += R[acc]
        pending = idx[~acc]
    return y


def _uniform_below_exp(rng: np.random.Generator, a: int, x: Fraction, nbits: int = 64) -> bool:
    """Exact test U ≤ e^{-x} for U whose first ``nbits`` bits are ``a``."""
    lo, w, prec = Fraction(a, 1 << nbits), Fraction(1, 1 << nbits), 40
    while True:
        q_lo, q_hi = _exp_neg_bounds(x, prec)
        if lo + w <= q_lo:
            return True
        if lo >= q_hi:
            return False
        lo += w * Fraction(int(rng.integers(0, 1 << 32, dtype=np.uint64)), 1 << 32)
        w /= 1 << 32
        prec += 12


def _as_rate_array(rate, size) -> np.ndarray:
    r = np.asarray(rate, dtype=np.float64)
    return r if r.ndim == 0 else np.broadcast_to(r, size)


def discrete_laplace(rng: np.random.Generator, rate, size) -> np.ndarray:
    """Exact discrete Laplace draws (int64): P(z) = (1−q)/(1+q)·q^{|z|}, q = e^{-rate}.
    ``rate`` = ∞ gives 0 (no noise: sensitivity 0).
    """
    size = _shape(size)
    r = _as_rate_array(rate, size)
    if r.ndim == 0:
        if not float(r) > 0:  # also nan
            raise ValueError("discrete Laplace rate must be > 0")
    elif np.any(np.isnan(r)) or np.any(r <= 0):
        raise ValueError("discrete Laplace rate must be > 0")
    out = np.zeros(size, dtype=np.int64)
    flat = out.reshape(-1)
    if r.ndim == 0:
        if float(r) == math.inf:
            return out
        pending = None
        rr = r
    else:
        pending = np.flatnonzero(np.isfinite(r.reshape(-1)))
        rr = r.reshape(-1)[pending]
    m = flat.size if pending is None else pending.size
    while m:
        y = geometric_exact(rng, rr, m)
        neg = rng.integers(0, 2, size=m, dtype=bool)
        reject = neg & (y == 0)  # "−0": redraw (CKS Algorithm 2)
        np.negative(y, out=y, where=neg)
        if pending is None:  # first pass over everything: no fancy indexing
            flat[:] = y
            pending = np.flatnonzero(reject)
        else:
            keep = ~reject
            flat[pending[keep]] = y[keep]
            pending = pending[reject]
        if np.ndim(rr):
            rr = rr[reject]
        m = pending.size
    return out


def discrete_laplace_pmf(z, rate: float) -> np.ndarray:
    q = math.exp(-rate)
    return (1 - q) / (1 + q) * np.exp(-rate * np.abs(np.asarray(z, dtype=np.float64)))


def staircase_center(sens: int, epsilon: float) -> int:
    """Half-width c ∈ [0, Δ−1] of the discrete staircase's central step: the c near the
    continuous optimum d* (thesis Theorem 1) with the least variance.
    """
    sens = int(sens)
    d = staircase_optimal_d(float(sens), float(epsilon))
    cands = {min(max(int(math.floor(d)) + j, 0), sens - 1) for j in (-1, 0, 1)}
    return min(sorted(cands), key=lambda c: discrete_staircase_variance(sens, epsilon, c))


def _staircase_centers(sens: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """Vectorised c = min(⌊Δ·d*(ε)/1⌋, Δ−1) (d* scales linearly with Δ)."""
    d_unit = (
        np.vectorize(_optimal_d_unit, otypes=[np.float64])(eps)
        if eps.ndim
        else np.float64(_optimal_d_unit(float(eps)))
    )
    return np.minimum(np.floor(sens * d_unit).astype(np.int64), sens - 1)


def discrete_staircase_variance(sens: int, epsilon: float, c: int | None = None) -> float:
    """Variance of discrete staircase noise (closed form; see module notes)."""
    D = float(sens)
    C = float(staircase_center(sens, epsilon) if c is None else c)
    b, one_b = _q(float(epsilon))
    s0, s1, s2 = b / one_b, b * b / one_b**2, b * b * (1 + b) / one_b**3
    K = D * (D + 1) * (2 * D + 1) / 6
    W = (2 * C + 1) + 2 * D * s0
    second = 2 * C * (C + 1) * (2 * C + 1) / 6 + 2 * (
        D**3 * s2 + (2 * C * D * D + D * D * (D + 1)) * s1 + (D * C * C + C * D * (D + 1) + K) * s0
    )
    return second / W


def discrete_staircase_pmf(z, sens: int, epsilon: float, c: int) -> np.ndarray:
    a = np.abs(np.asarray(z, dtype=np.int64))
    level = np.where(a <= c, 0, -((c - a) // int(sens)))  # ⌈(|z|−c)/Δ⌉
    b, one_b = _q(float(epsilon))
    W = (2 * c + 1) + 2 * sens * b / one_b
    return np.exp(-float(epsilon) * level) / W


#: Largest ε one staircase draw uses: above it e^{-ε} underflows.  Using less ε than given is
#: privacy-safe (the draw is then noisier than it needs to be, never less).
STAIRCASE_MAX_EPS = 700.0
#: Below this acceptance probability the exact staircase sampler would take too long.
STAIRCASE_MIN_ACCEPT = 1e-4


def staircase_parameters(S: np.ndarray, E: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-draw ε capped at :data:`STAIRCASE_MAX_EPS` and the central half-widths c; refuse
    (``ParameterError``) when the exact sampler's acceptance e^{-ε} + (1 − e^{-ε})(2c+1)/(2Δ)
    is below :data:`STAIRCASE_MIN_ACCEPT` (large ε per draw with a sensitivity of many grid
    steps): Laplace noise, a coarser precision or a smaller ε per draw avoid it.
    """
    from dpstudio.engine.errors import ParameterError

    E = np.minimum(E, STAIRCASE_MAX_EPS)
    C = _staircase_centers(S, E)
    if S.size:
        b = np.exp(-E)
        acc = b + (1.0 - b) * (2.0 * C + 1.0) / (2.0 * np.maximum(S, 1))
        if float(acc.min()) < STAIRCASE_MIN_ACCEPT:
            raise ParameterError(
                "The 'noise' parameter 'staircase' cannot be sampled exactly at this ε per draw "
                f"(up to {float(E.max()):g}) with a sensitivity of up to {int(S.max())} grid steps "
                "(the exact sampler would need over 10,000 tries per value). Use noise='laplace', "
                "a coarser precision or a smaller ε."
            )
    return E, C


def discrete_staircase(rng: np.random.Generator, sens, epsilon, size) -> np.ndarray:
    """Exact discrete staircase draws (int64) for integer sensitivity ``sens`` ≥ 0 and
    ``epsilon`` (both broadcast to ``size``; sensitivity 0 gives 0).

    Level L geometric with rate ε (exact); L = 0 accepted with probability (2c+1)/(2Δ)
    (an exact integer comparison), else redrawn; then a uniform integer of the level's set
    (|z| ≤ c, or c + (L−1)Δ < |z| ≤ c + LΔ with a random sign).  P(z) ∝ e^{-ε·L(z)}.
    """
    size = _shape(size)
    S = np.broadcast_to(np.asarray(sens, dtype=np.int64), size).reshape(-1)
    E = np.broadcast_to(np.asarray(epsilon, dtype=np.float64), size).reshape(-1)
    if np.any(S < 0) or np.any(~(E > 0)) or not np.all(np.isfinite(E)):
        raise ValueError("staircase needs sensitivity >= 0 and epsilon > 0")
    out = np.zeros(S.size, dtype=np.int64)
    pending = np.flatnonzero(S > 0)
    E = E.copy()
    Cs = np.zeros(S.size, dtype=np.int64)
    E[pending], Cs[pending] = staircase_parameters(S[pending], E[pending])
    while pending.size:
        s, e, c = S[pending], E[pending], Cs[pending]
        level = geometric_exact(rng, e, pending.size)
        accept = (level > 0) | (rng.integers(0, 2 * s) < 2 * c + 1)
        idx, s, c, level = pending[accept], s[accept], c[accept], level[accept]
        centre = level == 0
        m = idx.size
        u = rng.integers(0, 2 * s)  # one draw: sign and position within the step
        sign = np.where(u % 2 == 0, 1, -1)
        step = c + (level - 1) * s + u // 2 + 1
        z_c = rng.integers(-c, c + 1, size=m)
        out[idx] = np.where(centre, z_c, sign * step)
        pending = pending[~accept]
    return out.reshape(size)


#: the smallest noise rate ε′/Δ (per grid step) the exact sampler draws (:func:`geometric_exact`)
MIN_NOISE_RATE = 2.0**-62


def _coarser(gamma: float, factor: float) -> float:
    """A round precision at least ``factor`` times ``gamma`` (advice in messages)."""
    return float(10.0 ** math.ceil(math.log10(max(gamma * factor, 1e-300))))


def check_grid_budget(column: str, grid: Grid, epsilon: float) -> None:
    """Refuse up front (``ParameterError`` naming the column, its precision and ε) when ``epsilon``
    over the grid's span is finer than the exact sampler can draw.  Every method's draw for this
    attribute has a sensitivity of at least the span (grid steps) and an ε of at most
    ``epsilon``, so ε′/span bounds the rate of every draw from above: the check never refuses a
    usable setting; combinations with the ε split and the cluster count are refused by
    :func:`check_grid_noise` before the first draw.
    """
    from dpstudio.engine.errors import ParameterError

    if grid.span is None or grid.span <= 0:
        return
    e = float(epsilon) * (1.0 - EPS_SAFETY)
    if e / grid.span >= MIN_NOISE_RATE:
        return
    need = grid.span / (e / MIN_NOISE_RATE)
    raise ParameterError(
        f"Column {column!r}: ε {float(epsilon):g} with precision {grid.gamma:g} "
        f"({grid.span:,} grid steps across its domain) asks for noise finer than the exact sampler "
        f"can draw (ε per grid step must be at least 2^-62 ≈ 2.2e-19). Choose a coarser precision, "
        f"e.g. --precision {column}={_coarser(grid.gamma, need):g}, or a larger ε."
    )


def check_grid_noise(sens, epsilon) -> None:
    """Backstop before a grid draw: ``ParameterError`` (not the sampler's ValueError) when a
    sensitivity exceeds :data:`MAX_GRID_UNITS` or a rate ε′/Δ is below :data:`MIN_NOISE_RATE`
    (the method's ε split, the grid and the cluster count combined; no single range shows it).
    """
    if np.ndim(sens) == 0 and np.ndim(epsilon) == 0:
        # scalars (ir-dp: one per column and cell of a sweep): the same tests in plain floats
        # (the same IEEE operations), the array code below only to word a refusal
        s0, e0 = float(sens), float(epsilon)
        r0 = e0 * (1.0 - EPS_SAFETY) / s0 if s0 > 0 else math.inf
        if not (s0 > MAX_GRID_UNITS or r0 < MIN_NOISE_RATE):
            return
    from dpstudio.engine.errors import ParameterError

    s = np.asarray(sens, dtype=np.float64)
    e = np.asarray(epsilon, dtype=np.float64)
    if not (s.size and e.size):
        return
    if np.any(s > MAX_GRID_UNITS):
        raise ParameterError(
            f"The noise's sensitivity ({float(s.max()):,.0f} grid steps: domain width / precision, "
            "times the number of clusters a record can move) exceeds 2^50 grid steps, beyond exact "
            "integer arithmetic. Choose a coarser precision (--precision COLUMN=…) or a narrower domain."
        )
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(s > 0, e * (1.0 - EPS_SAFETY) / np.where(s > 0, s, 1.0), np.inf)
    if rate.size and float(np.min(rate)) < MIN_NOISE_RATE:
        i = int(np.argmin(np.broadcast_to(rate, np.broadcast_shapes(rate.shape))))
        sm = float(np.broadcast_to(s, rate.shape).reshape(-1)[i])
        em = float(np.broadcast_to(e, rate.shape).reshape(-1)[i])
        raise ParameterError(
            f"ε per noise draw {em:g} over a sensitivity of {sm:,.0f} grid steps asks for noise finer "
            "than the exact sampler can draw (ε per grid step must be at least 2^-62 ≈ 2.2e-19; the "
            "method splits ε over the attributes and clusters). Choose a coarser precision "
            "(--precision COLUMN=…), a larger ε or fewer protected attributes."
        )


def grid_noise(kind: str, rng: np.random.Generator, sens, epsilon, size) -> np.ndarray:
    """Integer ε-DP noise for integer sensitivity ``sens`` (grid units; arrays broadcast to
    ``size``): discrete Laplace of rate ε·(1−2⁻⁴⁰)/Δ or discrete staircase.  Sensitivity 0
    gives 0.
    """
    size = _shape(size)
    sens_a = np.asarray(sens)
    eps_a = np.asarray(epsilon, dtype=np.float64)
    check_grid_noise(sens_a, eps_a)
    if eps_a.ndim == 0 and sens_a.ndim == 0:  # scalars (ir-dp): plain comparisons
        e0, s0 = float(eps_a), float(sens_a)
        if not (e0 > 0 and e0 < math.inf):
            raise ValueError("epsilon must be > 0")
        if s0 < 0 or s0 > MAX_GRID_UNITS:
            raise ValueError(f"grid sensitivity must be in [0, {MAX_GRID_UNITS}]")
    else:
        if np.any(~(eps_a > 0)) or not np.all(np.isfinite(eps_a)):
            raise ValueError("epsilon must be > 0")
        if np.any(sens_a < 0) or np.any(sens_a > MAX_GRID_UNITS):
            raise ValueError(f"grid sensitivity must be in [0, {MAX_GRID_UNITS}]")
    if kind == "laplace":
        with np.errstate(divide="ignore"):
            rate = eps_a * (1.0 - EPS_SAFETY) / sens_a.astype(np.float64)
        return discrete_laplace(rng, rate, size)
    if kind == "staircase":
        return discrete_staircase(rng, sens_a, eps_a * (1.0 - EPS_SAFETY), size)
    raise ValueError(f"unknown noise kind {kind!r}; use one of {', '.join(NOISE_KINDS)}")


def grid_noise_variance(kind: str, sens: int, epsilon: float) -> float:
    """Variance (grid units²) of one :func:`grid_noise` draw."""
    if sens == 0:
        return 0.0
    e = float(epsilon) * (1.0 - EPS_SAFETY)
    if kind == "laplace":
        q = math.exp(-e / float(sens))
        return 2 * q / (1 - q) ** 2
    if kind == "staircase":
        return discrete_staircase_variance(int(sens), e)
    raise ValueError(f"unknown noise kind {kind!r}")


# --------------------------------------------------------------------------- output grids


@dataclass(frozen=True)
class Grid:
    """The declared output grid of one attribute: values k·γ for integers k.

    Values are handled in offset units t = rint(x/γ) − ``base`` (``base`` = rint(lb/γ), 0
    without a domain): rint is monotone, so every value of the domain maps into
    [0, ``span``], ``span`` = rint(ub/γ) − base, the sensitivity of one value in grid units
    (= (ub − lb)/γ when the bounds lie on the grid, at most ⌊(ub − lb)/γ⌋ + 1).  Releases are
    clamped to [``lo``, ``hi``] = [⌈lb/γ⌉, ⌊ub/γ⌋] − base (on the grid and inside the domain).
    """

    column: str
    gamma: float
    base: int = 0
    span: int | None = None
    lo: int | None = None
    hi: int | None = None
    decimals: int = 0
    integer: bool = False

    def to_units(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if x.ndim == 0:
            return np.rint(x / self.gamma).astype(np.int64) - self.base
        q = np.divide(x, self.gamma)  # one temporary, rounded in place (the same values)
        np.rint(q, out=q)
        t = q.astype(np.int64)
        del q
        if self.base:
            t -= self.base
        return t

    def from_units(self, u, *, overwrite: bool = False) -> np.ndarray:
        """Clamp to the domain's grid points and convert to values with no more digits than γ:
        (base + u)·G / 10^d with the integer G = γ·10^d, one correctly rounded division, so
        the double is the one nearest the decimal value (printed without spurious digits).
        ``overwrite``: ``u`` (an int64 array) is the caller's scratch, clamped and shifted in
        place (no temporary copies; the same values).
        """
        u = np.asarray(u, dtype=np.int64)
        if overwrite and u.ndim and u.flags.writeable:
            return self._from_units_inplace(u)
        if self.lo is not None:  # np.clip's steps (max, then min) without its wrapper's cost
            u = np.maximum(u, self.lo)
            if self.hi is not None:
                u = np.minimum(u, self.hi)
        if self.integer:
            return (u + self.base) * int(self.gamma)
        G = round(self.gamma * 10**self.decimals)
        big = 2**53 // max(G, 1)
        if (
            self.lo is not None
            and self.hi is not None
            and abs(self.base) + abs(self.lo) + abs(self.hi) < big
            and abs(G - self.gamma * 10**self.decimals) < 1e-6
        ):
            w = u + self.base
            if G != 1:
                w *= G
            return w / float(10**self.decimals)
        v = (u + self.base).astype(np.float64) * self.gamma
        return np.round(v, self.decimals) + 0.0

    def _from_units_inplace(self, u: np.ndarray) -> np.ndarray:
        """:meth:`from_units` of the int64 array ``u``, overwriting it: the same operations
        in the same order, each into ``u`` instead of a new array.
        """
        if self.lo is not None:
            np.maximum(u, self.lo, out=u)
            if self.hi is not None:
                np.minimum(u, self.hi, out=u)
        u += self.base
        if self.integer:
            u *= int(self.gamma)
            return u
        G = round(self.gamma * 10**self.decimals)
        big = 2**53 // max(G, 1)
        if (
            self.lo is not None
            and self.hi is not None
            and abs(self.base) + abs(self.lo) + abs(self.hi) < big
            and abs(G - self.gamma * 10**self.decimals) < 1e-6
        ):
            if G != 1:
                u *= G
            return u / float(10**self.decimals)
        v = u.astype(np.float64) * self.gamma
        return np.round(v, self.decimals) + 0.0


def from_units_columns(grids, u: np.ndarray) -> np.ndarray:
    """``Grid.from_units`` of m columns at once: ``u`` (..., m, c) int64 grid units, column j on
    ``grids[j]``; a float64 array of the same shape, entry for entry the value
    ``grids[j].from_units(u[..., j, :])`` (as a float64).  When every grid takes from_units'
    decimal path (clamped, (base + u)·G / 10^d) the same integer steps and the same correctly
    rounded division run on all columns together (per-column constants broadcast); otherwise
    column by column.
    """
    u = np.asarray(u, dtype=np.int64)
    m = u.shape[-2]
    consts = [_decimal_path(g) for g in grids]
    if len(grids) != m or any(c is None for c in consts):
        out = np.empty(u.shape, dtype=np.float64)
        for j, g in enumerate(grids):
            out[..., j, :] = g.from_units(u[..., j, :])
        return out
    lo, hi, base, G, scale = (np.asarray([c[i] for c in consts])[:, None] for i in range(5))
    w = np.clip(u, lo.astype(np.int64), hi.astype(np.int64))
    w += base.astype(np.int64)
    w *= G.astype(np.int64)  # G = 1 multiplies by 1: the same integers
    return w / scale.astype(np.float64)


def _decimal_path(g: Grid):
    """(lo, hi, base, G, 10^d) when ``g.from_units`` takes its decimal path, else None."""
    if g.lo is None or g.hi is None or g.integer:
        return None
    G = round(g.gamma * 10**g.decimals)
    big = 2**53 // max(G, 1)
    if abs(g.base) + abs(g.lo) + abs(g.hi) < big and abs(G - g.gamma * 10**g.decimals) < 1e-6:
        return (g.lo, g.hi, g.base, G, float(10**g.decimals))
    return None


def decimals_of(gamma: float) -> int:
    """Digits after the point that multiples of ``gamma`` need (0.01 → 2, 0.25 → 2, 100 → 0)."""
    for d in range(0, 16):
        s = gamma * 10**d
        if abs(s - round(s)) <= 1e-9 * max(s, 1.0):
            return d
    return 15


def default_precision(domain, integer: bool) -> float | None:
    """The default grid γ from declared facts only (issue 21 §3 N2): 1 for a column declared
    of type ``integer``; for others 10^(⌊log10(ub − lb)⌋ − 6) of the declared domain (about a
    millionth of its width); ``None`` without a domain (the user must declare one or the
    other).  Never the column's values or dtype: one record of 40.5, or one missing value,
    must not change what every released value shows.
    """
    if integer:
        return 1.0
    if domain is None:
        return None
    width = float(domain[1]) - float(domain[0])
    return float(10.0 ** (math.floor(math.log10(width)) - 6))


def make_grid(column: str, gamma: float, domain=None, integer: bool = False, n: int | None = None) -> Grid:
    """The :class:`Grid` of ``column``; ``ParameterError`` with advice when γ is unusable.
    ``integer``: the column is declared of type integer (released as int64 when γ is a whole
    number).
    """
    from dpstudio.engine.errors import ParameterError

    g = float(gamma)
    integer = bool(integer) and g >= 1 and g == round(g)
    dec = decimals_of(g)
    if domain is None:
        return Grid(column, g, decimals=dec, integer=integer)
    lb, ub = float(domain[0]), float(domain[1])
    base = int(np.rint(lb / g))
    span = int(np.rint(ub / g)) - base
    lo, hi = int(math.ceil(lb / g)) - base, int(math.floor(ub / g)) - base
    if span > MAX_GRID_UNITS or (n is not None and span * max(int(n), 1) >= 2**53):
        coarser = 10.0 ** math.ceil(
            math.log10((ub - lb) / (MAX_GRID_UNITS / max(int(n or 1), 1) if n else MAX_GRID_UNITS))
        )
        raise ParameterError(
            f"Precision {g:g} of column {column!r} is too fine for its domain [{lb:g}, {ub:g}] "
            f"({span:,} grid steps; sums over the records would overflow exact integer "
            f"arithmetic). Choose a coarser precision, e.g. --precision {column}={coarser:g}."
        )
    if lo > hi:
        raise ParameterError(
            f"Precision {g:g} of column {column!r} leaves no grid point inside its domain "
            f"[{lb:g}, {ub:g}]; choose a finer precision."
        )
    return Grid(column, g, base, span, lo, hi, dec, integer)


def job_grid(job, column: str) -> Grid:
    """The grid of ``column`` for a running :class:`~dpstudio.engine.types.Job`."""
    from dpstudio.engine.errors import ParameterError

    prec = getattr(job, "precision", None) or {}
    dom = job.domains.get(column)
    cache = getattr(job, "cache", None)
    # the grid is a function of the column's declared type, domain, precision and n: kept in
    # the job's cache (a sweep reuses it for every ε and repetition)
    from dpstudio.engine.roles import declared_integer

    integer = declared_integer(getattr(job, "types", None), column)
    key = ("noise.grid", column, prec.get(column), None if dom is None else tuple(dom), job.n, integer)
    if cache is not None and key in cache:
        return cache[key]
    gamma = prec.get(column)
    if gamma is None:
        gamma = default_precision(dom, integer)
    if gamma is None:
        raise ParameterError(missing_precision_message(column))
    g = make_grid(column, gamma, dom, integer, job.n)
    if cache is not None:
        cache[key] = g
    return g


def missing_precision_message(column: str) -> str:
    """What to declare for a noisy column with no precision, no domain and no integer type."""
    return (
        f"Column {column!r} needs an output precision (the grid its noisy values are rounded "
        f"to, e.g. 0.01 or 100), a declared domain to derive one from, or the type integer "
        f"(whole numbers, γ = 1): --precision {column}=0.01, --domain {column}=LOWER:UPPER or "
        f"--type {column}=integer."
    )


def pd_is_integer(series) -> bool:
    import pandas as pd

    return bool(pd.api.types.is_integer_dtype(series)) and not pd.api.types.is_bool_dtype(series)


def round_half_up_div(num: np.ndarray, den) -> np.ndarray:
    """⌊num/den + 1/2⌋ in exact integer arithmetic (den > 0)."""
    den = np.asarray(den, dtype=np.int64)
    return np.floor_divide(2 * np.asarray(num, dtype=np.int64) + den, 2 * den)


def grid_info(kind: str, grid: Grid, sens_units, epsilon: float, divisor=1) -> dict:
    """Public description of one attribute's grid noise: precision γ, sensitivity in grid
    units, the effective ε′, and in value units (γ·units/``divisor``: ``divisor`` = cluster
    size when the noise is drawn on a cluster sum and released as its mean) the sensitivity
    actually covered (Δ plus rounding), the Laplace-equivalent scale and the noise s.d.
    """
    if np.ndim(sens_units) == 0 and np.ndim(divisor) == 0:
        # scalars (ir-dp): memoised, a sweep asks the same question for every repetition
        return dict(_grid_info_scalar(kind, grid, float(sens_units), float(epsilon), float(divisor)))
    return _grid_info(kind, grid, sens_units, epsilon, divisor)


@functools.lru_cache(maxsize=1024)
def _grid_info_scalar(kind: str, grid: Grid, sens_units: float, epsilon: float, divisor: float) -> dict:
    return _grid_info(kind, grid, sens_units, epsilon, divisor)


def _grid_info(kind: str, grid: Grid, sens_units, epsilon: float, divisor=1) -> dict:
    units = np.atleast_1d(np.asarray(sens_units, dtype=np.float64))
    div = np.broadcast_to(np.asarray(divisor, dtype=np.float64), units.shape)
    s = units / div
    e = float(epsilon) * (1.0 - EPS_SAFETY)
    out = {
        "precision": grid.gamma,
        "epsilon_effective": e,
        "sensitivity_grid_units": int(units.max()) if units.size else 0,
    }
    if kind == "laplace":
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            q = np.exp(-e / units)
            sd = np.where(units > 0, np.sqrt(2 * q) / (1 - q), 0.0) * grid.gamma / div
    elif units.size == 1:
        sd = (
            np.array([math.sqrt(grid_noise_variance(kind, int(units[0]), float(epsilon)))]) * grid.gamma / div
        )
    else:  # many sensitivities: the continuous staircase's sd (within a grid step)
        sd = s * math.sqrt(staircase_variance(1.0, e)) * grid.gamma
    if s.size == 1:
        out.update(
            sensitivity=float(s[0]) * grid.gamma, scale=float(s[0]) * grid.gamma / e, noise_sd=float(sd[0])
        )
    else:
        out.update(
            sensitivity_mean=float(s.mean()) * grid.gamma,
            sensitivity_max=float(s.max()) * grid.gamma,
            scale_mean=float(s.mean()) * grid.gamma / e,
            scale_max=float(s.max()) * grid.gamma / e,
            noise_sd_mean=float(sd.mean()),
        )
    return out


def grid_clause(precision: dict, explicit: dict | None = None) -> str:
    """The sentence the guarantee adds for grid noise (issue 8 §3)."""
    if not precision:
        return ""
    explicit = explicit or {}
    parts = ", ".join(f"{c} {g:g}" + ("" if c in explicit else " (default)") for c, g in precision.items())
    return (
        f" Floating-point-safe noise: every noisy value is an integer number of steps of its "
        f"attribute's output precision γ ({parts}; the default is 1 for columns declared "
        "integer, else 10^(⌊log10(ub − lb)⌋ − 6) of the declared domain), sampled exactly (no "
        "floating-point approximation of the distribution) from a discrete Laplace or staircase distribution calibrated to the "
        "sensitivity in grid steps (Δ/γ, plus one step when a domain bound is not on the "
        "grid, which covers the rounding of the true value) with ε′ = ε·(1 − 2⁻⁴⁰) ≤ ε; "
        "clustered methods add it to the cluster sums and release the mean rounded to the "
        "grid. Released values lie on the grid, inside the domain, with no more digits "
        "than γ."
    )


# --------------------------------------------------------------------------- exact discrete Gaussian
#
# Canonne, Kamath & Steinke (2020), Algorithm 3: a discrete Laplace proposal Y (rate r = the
# double nearest 1/t, t = ⌊σ⌋ + 1) accepted with probability exp(−(|Y| − r·σ²)²/(2σ²)), decided
# exactly (:func:`_uniform_below_exp`, rational exponent).  With the proposal's ACTUAL rate r in
# the acceptance exponent the accepted values are distributed exactly ∝ exp(−y²/(2σ²)) (the
# factor exp(r|y|) of the proposal cancels), whatever rounding r has.  σ² is a rational.


def discrete_gaussian(rng: np.random.Generator, sigma2: Fraction, size: int) -> np.ndarray:
    """Exact draws (int64) of the discrete Gaussian N_ℤ(0, σ²): P(z) ∝ exp(−z²/(2σ²)).

    ``sigma2`` is σ² as an exact rational (> 0).  Expected proposals per draw < 2 for σ ≥ 1.
    Each acceptance U ≤ exp(−g) is decided from U's first 64 bits against the double value of
    exp(−g) with a relative margin of 10⁻⁹ (far above its error), else exactly.
    """
    s2 = Fraction(sigma2)
    if not s2 > 0:
        raise ValueError("discrete Gaussian needs sigma^2 > 0")
    t = math.floor(math.sqrt(float(s2))) + 1
    r = 1.0 / t
    rs2 = Fraction(r) * s2
    s2f = float(s2)
    out = np.empty(int(size), dtype=np.int64)
    filled = 0
    while filled < out.size:
        m = out.size - filled
        y = discrete_laplace(rng, r, m)
        a = rng.integers(0, 2**64, size=m, dtype=np.uint64)
        g = (np.abs(y) - r * s2f) ** 2 / (2 * s2f)
        p = np.exp(-g)
        u = a.astype(np.float64) / _TWO64
        acc = u < p * (1 - 1e-9)
        rej = u > p * (1 + 1e-9) + 2.0**-52
        for i in np.flatnonzero(~acc & ~rej):  # undecided: exactly
            gi = (abs(int(y[i])) - rs2) ** 2 / (2 * s2)
            acc[i] = _uniform_below_exp(rng, int(a[i]), gi, 64)
        keep = y[acc]
        out[filled : filled + keep.size] = keep[: out.size - filled]
        filled += min(keep.size, out.size - filled)
    return out


def discrete_gaussian_pmf(z, sigma2: float, tail: int | None = None) -> np.ndarray:
    """P(Z = z) of N_ℤ(0, σ²) (float; normalised over |z| ≤ ``tail``, default 40σ + 40)."""
    s = math.sqrt(float(sigma2))
    k = int(40 * s + 40) if tail is None else int(tail)
    grid = np.arange(-k, k + 1, dtype=np.float64)
    norm = float(np.exp(-(grid**2) / (2 * float(sigma2))).sum())
    z = np.asarray(z, dtype=np.float64)
    return np.exp(-(z**2) / (2 * float(sigma2))) / norm


# --------------------------------------------------------------------------- exact exponential mechanism
#
# Candidates with integer scores s ≥ 0 (lower = better) whose sensitivity is Δ (one record
# changes every candidate's score by at most Δ) are drawn with integer weights
# W(s) = max(⌈2^K·e^{−a′(s − m)}·(1 + 3η)⌉, T), m the smallest score, a′ = ε(1 − 2⁻¹⁰)/(2Δ),
# computed in double precision (relative error < η = 10⁻¹²).  Up to the common factor
# 2^K·e^{a′m} (which cancels in the probabilities), W is max(e^{−a′s}, T·e^{−a′m}/2^K): both
# arguments move by at most e^{a′Δ} between neighbours (s and m by at most Δ), so every
# weight does, and so does the total; the ceiling adds at most (1 + 5η) and 1/T.  Hence the
# probability ratio is at most A² + 2A·e^{a′Δ}/T + 1/T² with A = e^{a′Δ}(1 + 5η), which
# :func:`em_weights` checks against e^ε with rigorous rational bounds before any draw.  The
# floor T keeps far candidates at a relative weight of about 2⁻⁶⁴, never 0 (a zero would
# break the ratio).  The draw is a uniform integer over the exact total.

_EM_SLACK = 2.0**-10
_EM_ETA = 1e-12


def em_weights(scores, epsilon: float, sensitivity: int) -> list[int]:
    """Integer weights (exact, see above) of candidates with integer ``scores`` ≥ 0."""
    s = np.asarray(scores, dtype=np.int64)
    if s.size == 0:
        raise ValueError("the exponential mechanism needs at least one candidate")
    if np.any(s < 0):
        raise ValueError("scores must be >= 0")
    d = int(sensitivity)
    if d < 1:
        raise ValueError("sensitivity must be a positive integer")
    eps = float(epsilon)
    a = eps * (1.0 - _EM_SLACK) / (2.0 * d)
    T = max(1, math.ceil(4.0 / (eps * _EM_SLACK)))
    K = 64 + max(0, math.ceil(math.log2(T)))
    _check_em_calibration(eps, a, d, T)
    f = np.ldexp(np.exp(-a * (s - s.min()).astype(np.float64)), K)
    w = np.ceil(f * (1 + 3 * _EM_ETA))
    ceil_t = float(T)
    return [int(v) if v > ceil_t else T for v in w.tolist()]


@functools.lru_cache(maxsize=256)
def _check_em_calibration(eps: float, a: float, d: int, T: int) -> None:
    """A² + 2A·e^{a′Δ}/T + 1/T² ≤ e^ε, A = e^{a′Δ}(1 + 5η), with rigorous rational bounds."""
    e_lo = 1 / _exp_neg_bounds(Fraction(repr(eps)), 60)[1]
    ead_hi = 1 / _exp_neg_bounds(Fraction(a) * d, 60)[0]
    A = ead_hi * (1 + 5 * Fraction(_EM_ETA))
    if A * A + 2 * A * ead_hi / T + Fraction(1, T * T) > e_lo:  # pragma: no cover - never in [1e-6, 1e4]
        raise ValueError("exponential mechanism: the weights cannot be calibrated at this epsilon")


def exponential_mechanism_exact(rng: np.random.Generator, scores, epsilon: float, sensitivity: int) -> int:
    """Index of one candidate drawn with probability ∝ :func:`em_weights` (ε-DP, exact)."""
    import bisect
    import itertools

    w = em_weights(scores, epsilon, sensitivity)
    acc = list(itertools.accumulate(w))
    total = acc[-1]
    u = _uniform_below(rng, total)
    return bisect.bisect_right(acc, u)


def _uniform_below(rng: np.random.Generator, n: int) -> int:
    """Exact uniform integer in [0, n) from random bits (rejection); the one such draw of the
    exact samplers (the query desk's refinement and exponential mechanism).
    """
    if n <= 0:
        raise ValueError("n must be > 0")
    if n < (1 << 62):
        return int(rng.integers(0, n))
    bits = n.bit_length()
    nbytes = (bits + 7) // 8
    while True:
        v = int.from_bytes(rng.bytes(nbytes), "little") & ((1 << bits) - 1)
        if v < n:
            return v
