"""Randomness (SPEC 7): every stochastic function takes a seed or a Generator."""

from __future__ import annotations

import numpy as np


def as_rng(seed: "int | np.random.Generator | None") -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(seed)


def point_rng(seed: "int | None", *key: int) -> np.random.Generator:
    """An independent stream for one grid point of a sweep (order-independent)."""
    if seed is None:
        return np.random.default_rng()
    ss = np.random.SeedSequence(entropy=int(seed), spawn_key=tuple(int(k) for k in key))
    return np.random.default_rng(ss)
