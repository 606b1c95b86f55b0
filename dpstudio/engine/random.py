"""Randomness (SPEC 7): every stochastic function takes a seed or a Generator.

Seeds are secrets: whoever knows the seed of a release regenerates its noise and its shuffles
and removes them.  So a seed is drawn from the operating system's entropy unless the user pins
one (:func:`fresh_seed`, 128 bits), it is written only to the owner-only project file, and a
pinned seed below 2^64 (:data:`STRONG_SEED`) is warned about (:func:`seed_warning`).
"""

from __future__ import annotations

import numpy as np

#: Seeds below this can be searched exhaustively by a determined intruder: warn.
STRONG_SEED = 2**64


def as_rng(seed: int | np.random.Generator | None) -> np.random.Generator:
    """A Generator from a seed of any width (``None``: fresh OS entropy)."""
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, (int, np.integer)):
        seed = _check(seed)
    return np.random.default_rng(seed)


def point_rng(seed: int | None, *key: int) -> np.random.Generator:
    """An independent stream for one grid point of a sweep (order-independent).

    ``seed`` may be of any width (SeedSequence takes big integers); ``None`` gives every point
    fresh OS entropy.
    """
    if seed is None:
        return np.random.default_rng()
    ss = np.random.SeedSequence(entropy=_check(seed), spawn_key=tuple(int(k) for k in key))
    return np.random.default_rng(ss)


def fresh_seed() -> int:
    """A new seed from the operating system's entropy (128 bits)."""
    s = _os_entropy()
    while s < STRONG_SEED:  # probability 2^-64: never in practice, but keep the promise
        s = _os_entropy()
    return s


def _os_entropy() -> int:
    e = np.random.SeedSequence().entropy
    # SeedSequence() without entropy always draws a 128-bit int from the OS (the stubs also allow
    # the user-supplied forms Sequence[int] | None, which cannot occur here).
    assert isinstance(e, int)
    return e


def format_seed(seed: int) -> str:
    """The seed as hex text (``0x…``), as shown in the app and stored in project files."""
    return hex(_check(seed))


def parse_seed(text: str | int, what: str = "seed") -> int:
    """A seed from ``0x…`` hex or decimal text (or an int).  Raises ParameterError naming
    ``what`` for anything else (negative, empty, not a number, a float).
    """
    from dpstudio.engine.errors import ParameterError

    if isinstance(text, bool):
        raise ParameterError(f"{what}: expected a whole number (decimal or 0x… hex), got {text!r}.")
    if isinstance(text, (int, np.integer)):
        v = int(text)
    else:
        t = str(text).strip().replace("_", "").replace(" ", "")
        try:
            if t.lower().startswith("0x"):
                if len(t) <= 2:
                    raise ValueError
                v = int(t[2:], 16)
            elif t.isdigit():  # no signs, no floats, no other bases
                v = int(t, 10)
            else:
                raise ValueError
        except ValueError:
            raise ParameterError(
                f"{what}: {str(text)[:40]!r} is not a seed; give a whole number, decimal "
                "(e.g. 340282366920938463463374607431768211455) or hex (e.g. 0x9f3c…), or "
                "leave it out for a fresh random seed."
            ) from None
    if v < 0:
        raise ParameterError(f"{what}: a seed cannot be negative.")
    return v


def is_weak_seed(seed: int) -> bool:
    return int(seed) < STRONG_SEED


def seed_warning(seed: int | None) -> str:
    """A one-line warning for a weak seed ('' for a strong one or for ``None``)."""
    if seed is None or not is_weak_seed(seed):
        return ""
    return (
        f"the seed has only {max(int(seed).bit_length(), 1)} bits (below 2^64): an intruder "
        "who guesses it removes the noise. Use a fresh random seed (128 bits) for a release."
    )


def _check(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be a non-negative int, got {type(seed).__name__}")
    if int(seed) < 0:
        raise ValueError("seed must be non-negative")
    return int(seed)
