"""The one type of warning and note the engine gives: :class:`Notice` -- its text with a
``code``, a ``severity`` and a ``public`` flag (issue 22 §1).

Whether a notice may be published (in the metadata and the release note) is decided by its
code, declared once in :data:`NOTICE_CODES`: a public code is a function of the declared
parameters only ("ε is very large", "records in input order"); every other code is a fact
about the original data ("column X is constant", "12 records dropped") and stays private
(shown to the operator, kept in the private audit trail, never in a public file).  Programs
tell notices apart by their code, never by their wording.

A :class:`Notice` is a ``str`` (its text), so lists of notices print, compare and serialise
as before.  A method may still put plain text in ``Output.warnings``: it is read as a private
``method-note`` (the safe default).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Severity(str, Enum):
    """How much a notice matters to the operator."""

    #: a fact worth knowing (records dropped, suppressions made)
    INFO = "info"
    #: something that weakens the release or its utility (ε very large, input order)
    WARNING = "warning"


@dataclass(frozen=True)
class NoticeCode:
    """The declaration of one code: whether its notices may be published, their severity
    and what the code means.
    """

    public: bool
    severity: Severity
    meaning: str


_PUB, _PRIV = True, False
_I, _W = Severity.INFO, Severity.WARNING

#: Every code the engine and the methods use (one place: a new method adds its codes here).
NOTICE_CODES: dict[str, NoticeCode] = {
    # public: functions of the declared parameters (and roles) only
    "epsilon-large": NoticeCode(_PUB, _W, "the (composed) ε is very large: the DP guarantee is weak"),
    "input-order": NoticeCode(_PUB, _W, "records are released in input order (order=input)"),
    "as-published": NoticeCode(_PUB, _W, "the as-published calibration does not satisfy ε-DP"),
    "rigorous-k1": NoticeCode(_PUB, _W, "k = 1 with the rigorous calibration: use 'laplace'"),
    "hierarchy-ignored": NoticeCode(_PUB, _I, "hierarchies given for columns that are not generalised"),
    "confidence-ignored": NoticeCode(_PUB, _I, "c-confidence given without ε-quasi-identifiers"),
    # private: facts about the original data (or about this run on it)
    "domain-at-data-bound": NoticeCode(
        _PRIV, _W, "a declared domain bound equals the data's minimum or maximum"
    ),
    "constant-column": NoticeCode(_PRIV, _I, "a protected column holds one value only"),
    "records-dropped": NoticeCode(_PRIV, _I, "records with missing values were dropped"),
    "integer-valued-untyped": NoticeCode(
        _PRIV, _I, "a noisy column holds whole numbers but has no declared type"
    ),
    "non-integer-values": NoticeCode(
        _PRIV, _W, "a column declared integer holds values that are not whole numbers"
    ),
    "pile-up": NoticeCode(_PRIV, _W, "many noisy values were clamped to a domain bound"),
    "baseline": NoticeCode(_PRIV, _W, "no ε: the noise-free baseline of a sweep, never for release"),
    "layout-not-released": NoticeCode(
        _PRIV, _I, "layout 'separate-tables': the columns that are not protected are not released"
    ),
    "layout-unlinked": NoticeCode(
        _PRIV, _I, "layout 'separate-tables': record-level measures describe no real record"
    ),
    "microaggregation-no-gain": NoticeCode(
        _PRIV, _I, "k² ≤ n: the rigorous noise is at least plain Laplace's"
    ),
    "staircase-split": NoticeCode(
        _PRIV, _W, "staircase noise split over the clusters: far more noise than Laplace"
    ),
    "many-clusters": NoticeCode(_PRIV, _W, "ε spread over many clusters: centroids close to random"),
    "hierarchy-not-used": NoticeCode(
        _PRIV, _I, "a hierarchy was not used (numeric column with a domain, or Mondrian)"
    ),
    "records-suppressed": NoticeCode(_PRIV, _I, "records suppressed and not in the release"),
    "values-suppressed": NoticeCode(_PRIV, _I, "key values set to missing by local suppression"),
    "k-quasi-wiped": NoticeCode(
        _PRIV, _W, "a k-quasi was generalised to the top of its hierarchy ('*' in every record)"
    ),
    "categorical-proximity": NoticeCode(_PRIV, _I, "a categorical k-quasi is grouped on its category codes"),
    "t-achieved": NoticeCode(_PRIV, _W, "the achieved t exceeds the target e^ε"),
    "recode-breaks-from-data": NoticeCode(
        _PRIV, _W, "recoding breaks computed from the data (data-dependent parameters)"
    ),
    "recode-ties": NoticeCode(_PRIV, _I, "tied quantile breaks merged: fewer intervals than asked"),
    "recode-unknown-category": NoticeCode(_PRIV, _I, "categories named for merging do not occur in the data"),
    "threshold-from-data": NoticeCode(
        _PRIV, _W, "a top/bottom-coding threshold computed from the data (a data-dependent parameter)"
    ),
    "values-coded": NoticeCode(_PRIV, _I, "how many values top or bottom coding replaced"),
    "pram-changed": NoticeCode(_PRIV, _I, "how many values PRAM changed"),
    "pram-matrix-from-data": NoticeCode(
        _PRIV, _I, "the invariant PRAM matrix is computed from the category frequencies"
    ),
    "pram-many-categories": NoticeCode(_PRIV, _W, "a PRAM variable with very many categories"),
    "chain-incomplete": NoticeCode(
        _PRIV, _W, "a chain built so far leaves quasi-identifiers unprotected (not for release)"
    ),
    "rl-not-computed": NoticeCode(_PRIV, _I, "record linkage left out of an assessment (too many records)"),
    "weighted-estimates": NoticeCode(_PRIV, _I, "a note of the weighted estimates (original vs release)"),
    "method-note": NoticeCode(
        _PRIV, _I, "a fact about the data reported by the method (plain text, no code of its own)"
    ),
}


class Notice(str):
    """A warning or note: its text (this ``str``) with a ``code`` (one of
    :data:`NOTICE_CODES`), a ``severity`` and a ``public`` flag, both taken from the code's
    declaration.  Build one with :func:`notice` (or :func:`public_warning` /
    :func:`private_note`).
    """

    code: str
    severity: Severity
    public: bool

    def __new__(cls, code: str, message: str) -> Notice:
        decl = NOTICE_CODES.get(str(code))
        if decl is None:
            raise ValueError(f"unknown notice code {code!r} (declare it in NOTICE_CODES)")
        obj = super().__new__(cls, message)
        obj.code = str(code)
        obj.severity = decl.severity
        obj.public = decl.public
        return obj

    def __reduce__(self):
        return (Notice, (self.code, str(self)))

    def to_dict(self) -> dict:
        return {"code": self.code, "severity": self.severity.value, "public": self.public, "text": str(self)}


def notice(code: str, message: str) -> Notice:
    """The notice ``message`` with ``code`` (its public flag and severity come from the code)."""
    return Notice(code, message)


def public_warning(code: str, message: str) -> Notice:
    """A notice whose code is declared public (a function of the parameters only)."""
    out = Notice(code, message)
    if not out.public:
        raise ValueError(f"notice code {code!r} is private")
    return out


def private_note(code: str, message: str) -> Notice:
    """A notice whose code is declared private (a fact about the original data)."""
    out = Notice(code, message)
    if out.public:
        raise ValueError(f"notice code {code!r} is public")
    return out


def as_notice(w: str) -> Notice:
    """``w`` as a notice: plain text (a method's own warning) is a private ``method-note``."""
    return w if isinstance(w, Notice) else Notice("method-note", str(w))


def is_public(w: str) -> bool:
    """Whether ``w`` may be published: only a notice whose code is declared public."""
    return isinstance(w, Notice) and w.public


def note_code(w: str) -> str:
    """The code of a notice (``method-note`` for plain text)."""
    return w.code if isinstance(w, Notice) else "method-note"


__all__ = [
    "NOTICE_CODES",
    "Notice",
    "NoticeCode",
    "Severity",
    "as_notice",
    "is_public",
    "note_code",
    "notice",
    "private_note",
    "public_warning",
]
