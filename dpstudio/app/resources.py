"""Where the app's bundled files are (icon, style sheet, sample data).

A leaf module: panels and dialogs import from here, never from ``main`` or ``main_window``.
"""

from __future__ import annotations

from pathlib import Path


def resources_dir() -> Path:
    """The repository's ``resources`` folder (also bundled with the frozen app)."""
    import dpstudio

    return Path(dpstudio.__file__).resolve().parent.parent / "resources"


def sample_path() -> Path:
    """The bundled CASC Census sample."""
    return resources_dir() / "census.csv"


def adult_sample_path() -> Path:
    """The bundled UCI Adult sample (ARX extract); its hierarchies are in ``hierarchies/``."""
    return resources_dir() / "adult" / "adult.csv"


def free1_sample_path() -> Path:
    """The bundled sdcMicro ``free1`` survey sample (integer-coded keys, sampling weight)."""
    return resources_dir() / "free1" / "free1.csv"


#: The roles of sdcMicro's free1 reference (``resources/free1/make_reference.R``).
FREE1_ROLES = {
    "SEX": "k-quasi",
    "AGE": "k-quasi",
    "MARSTAT": "k-quasi",
    "KINDPERS": "k-quasi",
    "NUMYOUNG": "k-quasi",
    "NUMOLD": "k-quasi",
    "WEIGHT": "weight",
    "EDUC1": "confidential",
}
