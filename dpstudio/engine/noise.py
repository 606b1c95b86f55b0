"""Noise mechanisms (methods.md §3): Laplace, optimal (staircase) noise, exponential mechanism.

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
    outer = (s2 * 3 * D**3 + s1 * (6 * d * D**2 + 3 * D**3)
             + s0 * (3 * d * d * D + 3 * d * D**2 + D**3)) / 3.0
    return float(2.0 * m0 * (d**3 / 3.0 + outer))


@functools.lru_cache(maxsize=4096)
def _optimal_d_unit(epsilon: float) -> float:
    """Optimal d for Δ = 1 (d scales linearly with Δ)."""
    from scipy.optimize import minimize_scalar

    res = minimize_scalar(lambda d: staircase_variance(1.0, epsilon, d), bounds=(0.0, 1.0),
                          method="bounded", options={"xatol": 1e-10})
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
