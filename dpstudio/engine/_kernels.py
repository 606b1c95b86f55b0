"""Loading the compiled (numba) kernels: each is imported lazily, once per process, and only
where its load time pays (the callers' tiers); results are identical with or without it.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType


def load_kernel(slot: list, module: str, env_var: str) -> ModuleType | None:
    """The kernel module ``module``, imported on first use into ``slot`` (a one-element list
    the caller keeps: [module, or None when numba is missing or unusable]), or None when
    ``env_var=1`` asks for the numpy path.
    """
    if os.environ.get(env_var, "") not in ("", "0"):
        return None
    if not slot:
        try:
            mod: ModuleType | None = importlib.import_module(module)
        except Exception:  # numba missing or unusable with this numpy
            mod = None
        slot.append(mod)
    return slot[0]
