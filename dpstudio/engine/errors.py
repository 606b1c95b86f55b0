"""Exceptions and warnings of the engine.

Every message is written for a user: it names the column, row or parameter at
fault and says what to do.  The command line prints ``str(exc)`` and exits with
code 2; the app shows it in a dialog.
"""

from __future__ import annotations


class DPStudioError(ValueError):
    """Base class of every error caused by the user's input or parameters."""


class InputError(DPStudioError):
    """The data (a column, some rows) cannot be protected as it is."""


class ParameterError(DPStudioError):
    """A method parameter, role or domain is invalid."""


class ParameterTypeError(ParameterError, TypeError):
    """A parameter value of the wrong type (text where a number is needed, ...).

    Both a :class:`ParameterError` (so a :class:`ValueError`, caught like every user error)
    and a :class:`TypeError`, as scikit-learn's ``InvalidParameterError``.
    """


class NotApplicableError(ParameterError):
    """The method cannot run on the current attribute roles."""


class Cancelled(Exception):
    """A long job was cancelled by the user (raised between units of work)."""


class PrivacyLeakWarning(RuntimeWarning):
    """A setting weakens the privacy guarantee (bounds from data, huge epsilon...)."""


def format_rows(rows, limit: int = 10) -> str:
    """Format row numbers (0-based positions) as 1-based data-row numbers for users."""
    rows = list(rows)
    shown = ", ".join(str(int(r) + 1) for r in rows[:limit])
    more = f" and {len(rows) - limit} more" if len(rows) > limit else ""
    return f"{shown}{more}"
