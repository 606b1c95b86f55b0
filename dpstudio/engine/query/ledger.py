"""The query desk's privacy-budget ledger (thesis Protocol 2): one PRIVATE file per data set,
shared by the command line, the app and the Python API.

Every answered query spends its ε; by sequential composition the sum over the answered
queries must never exceed the data set's total budget.  What this module guarantees:

* **Exact sums.**  ε values are added as the exact decimals typed (:func:`eps_fraction`:
  0.1 is 1/10, not the binary double), in :class:`fractions.Fraction`, so four answers of 0.5
  reach a budget of 2 exactly and a fifth is refused; a composed ε that is not such a decimal
  is recorded rounded UP (:func:`recorded_epsilon`), never down.
* **Validation on every path.**  :meth:`BudgetLedger.spend` takes only finite numbers > 0
  (never a bool or a text); a ledger read from a file whose total or entries are not finite
  positive numbers, whose entries are not numbered 1, 2, … or whose structure is wrong is
  refused with one line naming the entry (:class:`LedgerError`).
* **One answer at a time per ledger.**  :func:`locked_ledger` holds an OS lock
  (``fcntl.flock`` on ``<ledger>.lock`` next to the ledger; ``msvcrt.locking`` on Windows) from
  reading the ledger and checking the remaining budget, through drawing the answer, to writing
  the ledger.  The OS releases it when the process dies.  Waiting for it is bounded
  (:data:`DEFAULT_WAIT` seconds, then :class:`LedgerBusy`: "ledger L is in use by another
  query; try again").
* **Write-ahead.**  A ledger bound to its file (inside :func:`locked_ledger`) writes the file
  in :meth:`BudgetLedger.spend`, before the caller gets the answer; if the write fails the
  spend is not recorded in memory either and the exception reaches the caller, so no answer is
  released whose ε is not on file.  The file is written atomically, owner-only (0600), by ONE
  function (:func:`write_ledger_file`) that refuses FIFOs, devices, folders, symbolic links and
  read-only files (checked with ``os.lstat``; a FIFO is never opened).

A project file (``.dpsproj``) does not hold the spending: it may name the ledger file
(:data:`PROJECT_KEY`).  Project files of older versions kept the ledger inside
(:data:`LEGACY_PROJECT_KEY`); :func:`load_ledger` still reads those, the app moves them to
their own file.
"""

from __future__ import annotations

import contextlib
import csv
import io as _io
import json
import math
import numbers
import os
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

from dpstudio.engine.errors import ParameterError
from dpstudio.engine.safe_write import open_lock_file

__all__ = [
    "DEFAULT_WAIT",
    "LEDGER_FORMAT",
    "BudgetExceeded",
    "BudgetLedger",
    "LedgerBusy",
    "LedgerError",
    "check_ledger_path",
    "eps_fraction",
    "ledger_lock_path",
    "load_ledger",
    "locked_ledger",
    "read_ledger_file",
    "recorded_epsilon",
    "resolve_ledger_path",
    "save_ledger",
    "write_ledger_file",
]

LEDGER_FORMAT = "dpstudio-query-ledger"
LEDGER_VERSION = 3  # 3: δ and budgets per requester; 2: budget changes as events (older files are read)
DEFAULT_WAIT = 30.0  # seconds a query waits for a ledger in use by another query
MAX_LEDGER_BYTES = 64 << 20  # a ledger of ~100 000 answers; anything larger is not a ledger
PROJECT_KEY = "query_ledger_file"  # a project file names its data set's ledger file
LEGACY_PROJECT_KEY = "query_ledger"  # older project files held the ledger itself
_POLL = 0.05


class BudgetExceeded(ParameterError):
    """The ledger's total budget does not cover the query's ε (nothing was spent)."""


class LedgerError(ParameterError):
    """A ledger file that cannot be used: damaged, edited, or not a regular writable file."""


class LedgerBusy(LedgerError):
    """Another query holds the ledger's lock longer than the caller waits."""


# =========================================================================== exact ε


def eps_fraction(epsilon) -> Fraction:
    """The ε a user typed as an exact decimal fraction (0.1 is 1/10, not the binary double):
    the factors are calibrated to it and the ledger adds it, so 0.5 + 0.2 + 0.2 + 0.1 is
    exactly 1.  A :class:`~fractions.Fraction` is taken as it is.
    """
    if isinstance(epsilon, Fraction):
        return epsilon
    return Fraction(repr(float(epsilon)))


def _exact_positive(value, what: str) -> Fraction:
    """``value`` as an exact fraction when it is a finite number > 0 (never a bool or a text)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ParameterError(f"{what} must be a number > 0, got {value!r}.")
    if isinstance(value, Fraction):
        f = value
    else:
        if not _finite(value):
            raise ParameterError(f"{what} must be a finite number > 0, got {value!r}.")
        f = eps_fraction(float(value))
    if f <= 0:
        raise ParameterError(f"{what} must be a number > 0, got {value!r}.")
    return f


def recorded_epsilon(value: Fraction) -> float:
    """The float written for an exact ε: the nearest double whose shortest decimal is ≥ the
    exact value (rounded up, so the file never records less than was spent).
    """
    x = float(value)
    while eps_fraction(x) < value:
        x = math.nextafter(x, math.inf)
    return x


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


# =========================================================================== the ledger


class BudgetLedger:
    """The private budget of one data set's query desk (thesis Protocol 2).

    Every answered query spends its ε; the sum over answered queries (sequential composition)
    never exceeds ``total``: a query that would exceed it is refused (:class:`BudgetExceeded`,
    naming the remaining budget) and nothing is spent.  Sums are exact (fractions of the
    ε values as the exact decimals typed, see :func:`eps_fraction`), so rounding can never let
    the total be overrun.

    A ledger made here lives in memory.  The one inside :func:`locked_ledger` is bound to its
    file: :meth:`spend` and :meth:`set_total` write the file before they return (write-ahead).
    """

    def __init__(
        self,
        total: float,
        *,
        dataset: str | None = None,
        digest: str | None = None,
        entries: list | None = None,
        created: str | None = None,
        events: list | None = None,
        source: str = "ledger",
        delta: float | None = None,
        requesters: dict | None = None,
    ):
        self._total = _check_total(total, source)
        self.delta = _check_delta(delta, source)
        self.requesters: dict[str, Fraction] = _check_requesters(requesters, source)
        self.dataset = dataset
        self.digest = digest
        self.entries: list[dict] = _check_entries(entries, source)
        self.events: list[dict] = _check_events(events, source)
        self.created = created or _now()
        self.path: str | None = None  # set while bound to its file (locked_ledger)
        self.on_file = False  # locked_ledger: True when read from its file, False when new
        self._spent_exact = sum((eps_fraction(e["epsilon"]) for e in self.entries), Fraction(0))
        if self._spent_exact > self._total:
            raise LedgerError(
                f"{source}: its answers spend {float(self._spent_exact):g}, more than its total budget "
                f"{float(self._total):g}; the file was edited or damaged (restore it from a backup)."
            )
        for name, budget in self.requesters.items():
            if self.spent_by_exact(name) > budget:
                raise LedgerError(
                    f"{source}: requester {name!r} spent {float(self.spent_by_exact(name)):g}, more than "
                    f"their budget {float(budget):g}; the file was edited or damaged."
                )
        _check_zcdp(self.entries, self.delta, source)

    # ---- the budget
    @property
    def total(self) -> float:
        return float(self._total)

    @property
    def total_exact(self) -> Fraction:
        return self._total

    def _spent(self) -> Fraction:
        return self._spent_exact

    @property
    def spent(self) -> float:
        return float(self._spent_exact)

    @property
    def remaining_exact(self) -> Fraction:
        return self._total - self._spent_exact

    @property
    def remaining(self) -> float:
        return float(self.remaining_exact)

    def check(self, epsilon, requester: str | None = None) -> None:
        """Refuse (:class:`BudgetExceeded`) an ε beyond the remaining budget (the data set's,
        and the requester's when the ledger gives requesters budgets); spends nothing.
        """
        e = _exact_positive(epsilon, "ε")
        if self._spent_exact + e > self._total:
            raise BudgetExceeded(
                f"Query refused: it needs ε = {float(e):g} but only {self.remaining:g} of "
                f"the data set's total budget {self.total:g} remains (spent {self.spent:g} on "
                f"{len(self.entries)} queries). Nothing was spent; ask for a smaller ε."
            )
        if self.requesters:
            if not requester or requester not in self.requesters:
                raise BudgetExceeded(
                    f"Query refused: this ledger gives budgets per requester ({', '.join(sorted(self.requesters))}) "
                    f"and {requester or 'no requester'!r} has none. Nothing was spent; the office sets one "
                    "(--requester NAME --requester-budget EPSILON, or the panel's Set requester budget)."
                )
            left = self.requesters[requester] - self.spent_by_exact(requester)
            if e > left:
                raise BudgetExceeded(
                    f"Query refused: it needs ε = {float(e):g} but requester {requester!r} has only "
                    f"{float(left):g} of their budget {float(self.requesters[requester]):g} left. Nothing was spent."
                )

    # ---- requesters (thesis Protocol 2 is per user)
    def spent_by_exact(self, requester: str) -> Fraction:
        return sum(
            (eps_fraction(e["epsilon"]) for e in self.entries if e.get("requester") == requester), Fraction(0)
        )

    def spent_by(self, requester: str) -> float:
        return float(self.spent_by_exact(requester))

    def requester_summary(self) -> list[dict]:
        """Spending per requester: name, budget (None: none set), spent, answers, remaining."""
        names = sorted({e.get("requester") or "" for e in self.entries} | set(self.requesters))
        out = []
        for n in names:
            spent = (
                self.spent_by_exact(n)
                if n
                else sum(
                    (eps_fraction(e["epsilon"]) for e in self.entries if not e.get("requester")), Fraction(0)
                )
            )
            b = self.requesters.get(n)
            out.append(
                {
                    "requester": n or "(none)",
                    "budget": None if b is None else float(b),
                    "spent": float(spent),
                    "answers": sum(1 for e in self.entries if (e.get("requester") or "") == n),
                    "remaining": None if b is None else float(b - spent),
                }
            )
        return out

    def set_requester_budget(self, requester: str, budget, *, by: str | None = None) -> dict | None:
        """Give ``requester`` a budget (an office decision, recorded as an event; never below
        what they spent).  ``None`` when unchanged.
        """
        if not isinstance(requester, str) or not requester.strip():
            raise ParameterError("A requester budget needs the requester's name.")
        new = _check_total(budget, f"The budget of requester {requester!r}")
        if self.requesters.get(requester) == new:
            return None
        if new < self.spent_by_exact(requester):
            raise ParameterError(
                f"The budget of requester {requester!r} cannot be {float(new):g}: {self.spent_by(requester):g} "
                "is already spent."
            )
        event: dict[str, Any] = {
            "time": _now(),
            "event": "requester budget set",
            "requester_budget": requester,
            "to": float(new),
            "after_entry": len(self.entries),
        }
        if self.requesters.get(requester) is not None:
            event["from"] = float(self.requesters[requester])
        if by:
            event["requester"] = by
        reqs = {**self.requesters, requester: new}
        if self.path is not None:
            self._write(events=[*self.events, event], requesters=reqs)
        self.events.append(event)
        self.requesters = reqs
        return event

    # ---- answers of any mechanism (the Gaussian's ρ composed in zCDP)
    def charge(self, epsilon, *, mechanism: str = "refinement", delta: float | None = None) -> Fraction:
        """The ε this ledger charges for an answer: ε itself, or for the Gaussian mechanism the
        increase of the (ε, δ) that ALL its Gaussian answers' ρ convert to (zCDP composition).
        """
        e = _exact_positive(epsilon, "ε")
        if mechanism != "gaussian":
            return e
        from dpstudio.engine.query.mechanisms import eps_of_rho, rho_for

        d = self._answer_delta(delta)
        rho_total = _rho_total(self.entries) + rho_for(e, d)
        conv = Fraction(eps_of_rho(rho_total, d))
        before = _zcdp_charged(self.entries)
        return max(conv - before, Fraction(1, 10**12))

    def _answer_delta(self, delta) -> float:
        if self.delta is not None and delta is not None and float(delta) != self.delta:
            raise ParameterError(
                f"δ = {float(delta):g} differs from this ledger's δ = {self.delta:g} (all Gaussian answers of a "
                "data set are composed at one δ): leave δ out."
            )
        d = self.delta if self.delta is not None else delta
        if d is None:
            raise ParameterError(
                "The Gaussian mechanism needs δ (--delta, e.g. 1e-6), fixed once per ledger."
            )
        return float(d)

    def check_answer(self, epsilon, *, mechanism: str = "refinement", delta=None, requester=None) -> Fraction:
        """:meth:`check` of what :meth:`charge` charges; returns it."""
        c = self.charge(epsilon, mechanism=mechanism, delta=delta)
        self.check(c, requester)
        return c

    def spend_answer(self, epsilon, *, mechanism: str = "refinement", delta=None, rho=None, **record) -> dict:
        """Record an answer of any mechanism (the file first, when bound); see :meth:`charge`."""
        c = self.check_answer(epsilon, mechanism=mechanism, delta=delta, requester=record.get("requester"))
        extra: dict[str, Any] = {"mechanism": mechanism}
        if mechanism == "gaussian":
            d = self._answer_delta(delta)
            extra.update(rho=float(rho), delta=d, epsilon_asked=float(epsilon))
            if self.delta is None:
                self.delta = d  # fixed with the first Gaussian answer (written with it)
        return self.spend(c, **extra, **record)

    def spend(self, epsilon, **record) -> dict:
        """Record one answer of ``epsilon`` (a finite number > 0; a Fraction is taken exactly).

        Bound to its file, the file is written first: if that fails nothing is recorded and
        the error is raised, so the caller must not release the answer.
        """
        e = _exact_positive(epsilon, "ε")
        self.check(e, record.get("requester"))
        entry: dict[str, Any] = {"n": len(self.entries) + 1, "time": _now(), "epsilon": recorded_epsilon(e)}
        entry.update({k: v for k, v in record.items() if v is not None and k not in entry})
        exact = eps_fraction(entry["epsilon"])
        entry["remaining"] = float(self._total - self._spent_exact - exact)
        if self.path is not None:
            self._write(entries=[*self.entries, entry])
        self.entries.append(entry)
        self._spent_exact += exact
        return entry

    def set_total(self, total, *, requester: str | None = None) -> dict | None:
        """Change the total budget (an office decision, recorded as an event of the ledger);
        never below what was spent.  ``None`` when it is already ``total``.
        """
        new = _check_total(total, "The total budget")
        if new == self._total:
            return None
        if new < self._spent_exact:
            raise ParameterError(
                f"The total budget cannot be {float(new):g}: {self.spent:g} is already spent."
            )
        event: dict[str, Any] = {
            "time": _now(),
            "event": "total budget changed",
            "from": self.total,
            "to": float(new),
            "after_entry": len(self.entries),
        }
        if requester:
            event["requester"] = requester
        if self.path is not None:
            self._write(total=new, events=[*self.events, event])
        self.events.append(event)
        self._total = new
        return event

    def extends(self, other: BudgetLedger) -> bool:
        """True when this ledger is ``other`` plus possibly later answers and budget changes
        (same data set, same creation, ``other``'s entries and events as a prefix).
        """
        return (
            self.created == other.created
            and self.digest == other.digest
            and self.entries[: len(other.entries)] == other.entries
            and self.events[: len(other.events)] == other.events
        )

    # ---- persistence
    def to_dict(self, *, total: Fraction | None = None, entries=None, events=None, requesters=None) -> dict:
        t = self._total if total is None else total
        ent = self.entries if entries is None else entries
        spent = sum((eps_fraction(e["epsilon"]) for e in ent), Fraction(0))
        reqs = self.requesters if requesters is None else requesters
        extra: dict[str, Any] = {}
        if self.delta is not None:
            extra["delta"] = self.delta
        if reqs:
            extra["requesters"] = {k: float(v) for k, v in reqs.items()}
        return extra | {
            "format": LEDGER_FORMAT,
            "version": LEDGER_VERSION if extra else 2,  # 3 only when δ or requester budgets are used
            "total": float(t),
            "dataset": self.dataset,
            "digest": self.digest,
            "created": self.created,
            "spent": float(spent),
            "remaining": float(t - spent),
            "entries": [dict(e) for e in ent],
            "events": [dict(e) for e in (self.events if events is None else events)],
        }

    def _write(self, **changes) -> None:
        assert self.path is not None
        write_ledger_file(self.path, self.to_dict(**changes))

    def save(self) -> str:
        """Write a ledger bound to its file (inside :func:`locked_ledger`)."""
        if self.path is None:
            raise ParameterError("This ledger is not bound to a file: use save_ledger(path, ledger).")
        self._write()
        return self.path

    @classmethod
    def from_dict(cls, data, *, source: str = "ledger") -> BudgetLedger:
        """A ledger from its dict, validated (one-line :class:`LedgerError` naming the fault)."""
        if not isinstance(data, dict) or data.get("format") != LEDGER_FORMAT:
            raise LedgerError(f"{source} is not a dpstudio query ledger.")
        version = data.get("version", 1)
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise LedgerError(f"{source}: its version {version!r} is not a ledger version.")
        if version > LEDGER_VERSION:
            raise LedgerError(
                f"{source} was written by a newer dpstudio (ledger version {version}): update dpstudio."
            )
        if "total" not in data:
            raise LedgerError(f"{source} has no total budget: the file was edited or damaged.")
        for key in ("dataset", "digest", "created"):
            if data.get(key) is not None and not isinstance(data[key], str):
                raise LedgerError(f"{source}: its {key} {data[key]!r} is not a text.")
        for key in ("entries", "events"):
            if data.get(key) is not None and not isinstance(data[key], list):
                raise LedgerError(f"{source}: its {key} must be a list, got {type(data[key]).__name__}.")
        led = cls(
            data["total"],
            dataset=data.get("dataset"),
            digest=data.get("digest"),
            entries=data.get("entries") or [],
            created=data.get("created"),
            events=data.get("events") or [],
            source=source,
            delta=data.get("delta"),
            requesters=data.get("requesters"),
        )
        spent = data.get("spent")
        if spent is not None and (
            isinstance(spent, bool) or not isinstance(spent, (int, float)) or spent != led.spent
        ):
            raise LedgerError(
                f"{source}: its spent total {spent!r} does not match its answers ({led.spent:g}); "
                "the file was edited or damaged (restore it from a backup)."
            )
        return led

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False, allow_nan=False)

    @classmethod
    def from_json(cls, text: str, *, source: str = "ledger") -> BudgetLedger:
        from dpstudio.engine.errors import InputError
        from dpstudio.engine.io import loads_json

        try:  # nesting depth and huge integers checked too (one line)
            data = loads_json(text, what=source)
        except InputError as exc:
            raise LedgerError(str(exc)) from None
        return cls.from_dict(data, source=source)

    def audit_csv(self) -> str:
        cols = ["n", "time", "requester", "query", "kind", "epsilon", "remaining", "prior", "response"]
        buf = _io.StringIO()
        wr = csv.writer(buf)
        wr.writerow(cols)
        for e in self.entries:
            wr.writerow(
                [
                    json.dumps(e.get(c), ensure_ascii=False)
                    if isinstance(e.get(c), dict)
                    else ("" if e.get(c) is None else e.get(c))
                    for c in cols
                ]
            )
        return buf.getvalue()

    def export(self, path, fmt: str | None = None, *, protect: tuple | list = ()) -> str:
        """Write the audit trail (CSV or JSON, from the suffix unless ``fmt``), owner-only 0600,
        through the one guarded writer (never over ``protect``: the data file).
        """
        from dpstudio.engine.io import atomic_write  # the one guarded writer (safe_write)

        fmt = (fmt or str(path).rsplit(".", 1)[-1]).lower()
        if fmt not in ("csv", "json"):
            raise ParameterError("Export the ledger as .csv or .json.")
        text = self.audit_csv() if fmt == "csv" else self.to_json()

        def writer(tmp):
            with open(tmp, "w", encoding="utf-8", newline="") as fh:
                fh.write(text)

        return atomic_write(path, writer, protect=protect, private=True, what="ledger audit")


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _finite(v) -> bool:
    """A finite real number (a huge int that no float holds is not)."""
    try:
        return math.isfinite(float(v))
    except (OverflowError, TypeError, ValueError):
        return False


def _check_total(total, source: str) -> Fraction:
    what = "The total budget" if source in ("ledger", "The total budget") else f"{source}: its total budget"
    if isinstance(total, bool) or not isinstance(total, numbers.Real):
        raise LedgerError(f"{what} must be a finite number > 0, got {total!r}.")
    if isinstance(total, Fraction):
        t = total
    else:
        if not _finite(total):
            raise LedgerError(f"{what} must be a finite number > 0, got {total!r}.")
        t = eps_fraction(total)
    if t <= 0:
        raise LedgerError(f"{what} must be a finite number > 0, got {total!r}.")
    return t


def _check_delta(delta, source: str) -> float | None:
    if delta is None:
        return None
    if isinstance(delta, bool) or not _is_number(delta) or not (0 < float(delta) <= 1e-2):
        raise LedgerError(f"{source}: its δ {delta!r} is not a number in (0, 0.01].")
    return float(delta)


def _check_requesters(reqs, source: str) -> dict[str, Fraction]:
    if reqs is None:
        return {}
    if not isinstance(reqs, dict):
        raise LedgerError(f"{source}: its requesters must be a mapping name -> budget.")
    out = {}
    for k, v in reqs.items():
        if not isinstance(k, str) or not k:
            raise LedgerError(f"{source}: a requester's name {k!r} is not a text.")
        out[k] = _check_total(v, f"{source}: requester {k!r}")
    return out


def _rho_total(entries) -> Fraction:
    return sum((Fraction(e["rho"]) for e in entries if e.get("mechanism") == "gaussian"), Fraction(0))


def _zcdp_charged(entries) -> Fraction:
    return sum((eps_fraction(e["epsilon"]) for e in entries if e.get("mechanism") == "gaussian"), Fraction(0))


def _check_zcdp(entries, delta, source: str) -> None:
    """Gaussian entries: ρ finite > 0, a δ, and charged at least what their ρ converts to."""
    gauss = [e for e in entries if e.get("mechanism") == "gaussian"]
    if not gauss:
        return
    for e in gauss:
        r = e.get("rho")
        if not _is_number(r) or not _finite(r) or r <= 0:
            raise LedgerError(f"{source}: entry {e.get('n')} has rho {r!r}; the file was edited or damaged.")
    if delta is None:
        raise LedgerError(f"{source}: it has Gaussian answers but no δ; the file was edited or damaged.")
    from dpstudio.engine.query.mechanisms import eps_of_rho

    if _zcdp_charged(entries) < Fraction(eps_of_rho(_rho_total(entries), delta)):
        raise LedgerError(
            f"{source}: its Gaussian answers are charged less than their ρ converts to; the file was edited "
            "or damaged (restore it from a backup)."
        )


def _check_entries(entries, source: str) -> list[dict]:
    out = []
    for i, e in enumerate(list(entries or []), start=1):
        where = f"{source}: entry {i}"
        if not isinstance(e, dict):
            raise LedgerError(
                f"{where} is not a record ({type(e).__name__}); the file was edited or damaged."
            )
        if "epsilon" not in e:
            raise LedgerError(f"{where} has no epsilon; the file was edited or damaged.")
        eps = e["epsilon"]
        if not _is_number(eps) or not _finite(eps) or eps <= 0:
            raise LedgerError(
                f"{where} has epsilon {eps!r}; every ε must be a finite number > 0 "
                "(the file was edited or damaged: restore it from a backup)."
            )
        n = e.get("n", i)
        if not (isinstance(n, int) and not isinstance(n, bool)) or n != i:
            raise LedgerError(
                f"{where} is numbered {n!r}: entries are missing or out of order "
                "(the file was edited or damaged: restore it from a backup)."
            )
        rem = e.get("remaining")
        if rem is not None and (not _is_number(rem) or not _finite(rem)):
            raise LedgerError(f"{where} has remaining {rem!r}, not a finite number.")
        for key in ("time", "query", "kind", "prior", "requester", "mechanism"):
            if e.get(key) is not None and not isinstance(e[key], str):
                raise LedgerError(f"{where}: its {key} {e[key]!r} is not a text.")
        bad = _nonfinite_key(e)
        if bad is not None:  # a ledger is written as strict JSON: Infinity/NaN cannot be kept
            raise LedgerError(f"{where}: its {bad} is not a finite number; the file was edited or damaged.")
        out.append(dict(e))
    return out


def _nonfinite_key(record: dict) -> str | None:
    """The key of ``record`` under which an infinite or NaN number lies (searched without
    recursion, at any depth), else None.
    """
    stack = [(k, v) for k, v in record.items()]
    while stack:
        k, v = stack.pop()
        if isinstance(v, float) and not math.isfinite(v):
            return str(k)
        if isinstance(v, dict):
            stack += [(k, x) for x in v.values()]
        elif isinstance(v, list):
            stack += [(k, x) for x in v]
    return None


def _check_events(events, source: str) -> list[dict]:
    out = []
    for i, ev in enumerate(list(events or []), start=1):
        where = f"{source}: event {i}"
        if not isinstance(ev, dict):
            raise LedgerError(f"{where} is not a record; the file was edited or damaged.")
        for key in ("from", "to"):
            v = ev.get(key)
            if key == "from" and v is None and ev.get("requester_budget") is not None:
                continue  # a requester's first budget has no 'from'
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not _finite(v) or v <= 0:
                raise LedgerError(f"{where} has {key} {v!r}; a total budget must be a finite number > 0.")
        bad = _nonfinite_key(ev)
        if bad is not None:
            raise LedgerError(f"{where}: its {bad} is not a finite number; the file was edited or damaged.")
        out.append(dict(ev))
    return out


# =========================================================================== the file


def _label(path) -> str:
    return f"ledger {path}"


def _lstat_regular(path: str, what: str) -> os.stat_result | None:
    """``os.lstat`` of ``path`` (None when absent); refuses anything but a regular file."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LedgerError(f"{what}: {exc.strerror or exc}.") from None
    if stat.S_ISLNK(st.st_mode):
        raise LedgerError(f"{what} is a symbolic link: name the file itself.")
    if stat.S_ISDIR(st.st_mode):
        raise LedgerError(f"{what} is a folder: name a ledger file (e.g. ledger.json).")
    if not stat.S_ISREG(st.st_mode):
        raise LedgerError(f"{what} is not a regular file (a FIFO, device or socket): name a ledger file.")
    return st


def check_ledger_path(path) -> None:
    """Refuse (one-line :class:`LedgerError`) a ledger path that cannot be (re)written as a
    private regular file: a FIFO, device, socket, folder, symbolic link or read-only file, or
    a missing folder.  Nothing is opened.
    """
    path = os.path.abspath(str(path))
    st = _lstat_regular(path, _label(path))
    if st is not None and not st.st_mode & stat.S_IWUSR:
        raise LedgerError(
            f"{_label(path)} is read-only: it is not replaced; make it writable "
            "(chmod u+w) if it is the data set's ledger, or name another file."
        )
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise LedgerError(f"{_label(path)}: the folder {folder} does not exist.")


def write_ledger_file(path, data: dict) -> str:
    """THE one function that writes a ledger file: atomically, owner-only (0600), through the
    one guarded writer (:mod:`dpstudio.engine.safe_write`).

    Refuses FIFOs, devices, sockets, folders, symbolic links and read-only files (``os.lstat``;
    nothing is opened), and NaN/infinite numbers.  Callers hold the ledger's lock.
    """
    from dpstudio.engine.io import atomic_write  # the one guarded writer (safe_write)

    path = os.path.abspath(str(path))
    check_ledger_path(path)
    try:
        text = json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False)
    except ValueError as exc:  # pragma: no cover - the ledger validates every number
        raise LedgerError(f"{_label(path)}: not written ({exc}).") from None

    def writer(tmp):
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)

    return atomic_write(path, writer, private=True, what="query ledger")


def _read_json(path: str, what: str):
    """The JSON of a regular file, read without following links or blocking on a FIFO."""
    if _lstat_regular(path, what) is None:
        return None
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise LedgerError(f"Cannot read {what}: {exc.strerror or exc}.") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # replaced between lstat and open
            raise LedgerError(f"{what} is not a regular file: name a ledger file.")
        if st.st_size > MAX_LEDGER_BYTES:
            raise LedgerError(f"{what} is {st.st_size:,} bytes: not a dpstudio query ledger.")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            raw = fh.read(MAX_LEDGER_BYTES + 1)
    except OSError as exc:
        raise LedgerError(f"Cannot read {what}: {exc.strerror or exc}.") from None
    finally:
        os.close(fd)
    from dpstudio.engine.errors import InputError
    from dpstudio.engine.io import loads_json

    try:  # nesting depth and huge integers checked too (one line, never a RecursionError)
        return loads_json(raw, what=f"Cannot read {what}")
    except InputError as exc:
        raise LedgerError(str(exc)) from None


def read_ledger_file(path) -> BudgetLedger | None:
    """The ledger in the ledger file ``path`` (validated), or None when there is no file."""
    path = str(path)
    data = _read_json(path, _label(path))
    if data is None:
        return None
    return BudgetLedger.from_dict(data, source=_label(path))


def _project_data(path: str):
    """The project dict when ``path`` is a dpstudio project file, else None."""
    if not os.path.isfile(path):
        return None
    data = _read_json(path, f"file {path}")
    if isinstance(data, dict) and "schema_version" in data and data.get("format") != LEDGER_FORMAT:
        return data
    return None


def resolve_ledger_path(path) -> str:
    """The ledger file that ``path`` names: ``path`` itself, or, for a project file, the
    ledger file it names (relative to the project's folder).  A project of an older version
    that holds its ledger inside is refused with what to do.
    """
    path = str(path)
    proj = _project_data(path)
    if proj is None:
        return path
    ref = proj.get(PROJECT_KEY)
    if isinstance(ref, str) and ref:
        return ref if os.path.isabs(ref) else os.path.join(os.path.dirname(os.path.abspath(path)), ref)
    if proj.get(LEGACY_PROJECT_KEY) is not None:
        raise LedgerError(
            f"Project {path} holds its query ledger inside (an older dpstudio): open the project "
            "in the app once to move the ledger to its own file, then give that file."
        )
    raise LedgerError(f"Project {path} names no ledger file: give the ledger file itself (e.g. ledger.json).")


def load_ledger(path) -> BudgetLedger | None:
    """A snapshot of a ledger: a ledger file, or the ledger a project file names (for a project
    of an older version, the ledger it holds inside).  ``None`` when there is none yet.
    Use :func:`locked_ledger` to spend.
    """
    path = str(path)
    proj = _project_data(path)
    if proj is not None:
        ref = proj.get(PROJECT_KEY)
        if isinstance(ref, str) and ref:
            return read_ledger_file(resolve_ledger_path(path))
        led = proj.get(LEGACY_PROJECT_KEY)
        return None if led is None else BudgetLedger.from_dict(led, source=f"the ledger in project {path}")
    if _lstat_regular(path, _label(path)) is None:
        raise LedgerError(f"{_label(path)} does not exist.")
    return read_ledger_file(path)


def save_ledger(path, ledger: BudgetLedger, *, timeout: float = DEFAULT_WAIT) -> str:
    """Write an in-memory ``ledger`` to the ledger file ``path`` (0600), under the ledger's
    lock.  An existing file is replaced only when ``ledger`` extends it (it holds every answer
    of the file): a copy that misses answers spent meanwhile is refused, never written over them.
    """
    path = str(path)
    if _project_data(path) is not None:
        raise LedgerError(
            f"{path} is a project file: a project no longer holds the ledger; save the ledger "
            "to its own file (e.g. ledger.json)."
        )
    with _FileLock(path, timeout):
        old = read_ledger_file(path)
        if old is not None and not ledger.extends(old):
            raise LedgerError(
                f"{_label(path)} holds answers that this copy of the ledger does not "
                f"({len(old.entries)} on file): it is not replaced; spend through locked_ledger()."
            )
        return write_ledger_file(path, ledger.to_dict())


# =========================================================================== the lock


def ledger_lock_path(path) -> str:
    """The lock file next to the ledger (``L.lock``): created once, never removed."""
    return os.path.abspath(str(path)) + ".lock"


_held: dict[str, int] = {}  # lock file -> thread holding it in this process
_held_guard = threading.Lock()


class _FileLock:
    """An exclusive OS lock on ``<ledger>.lock``, released by the OS if the process dies."""

    def __init__(self, path, timeout: float = DEFAULT_WAIT, check_cancel: Callable[[], None] | None = None):
        self.ledger = str(path)
        self.path = ledger_lock_path(path)
        self.timeout = float(timeout)
        self.check_cancel = check_cancel
        self.fd: int | None = None

    def __enter__(self) -> _FileLock:
        me = threading.get_ident()
        with _held_guard:
            if _held.get(self.path) == me:
                raise LedgerError(f"{_label(self.ledger)} is already locked by this query.")
        _lstat_regular(self.path, f"the lock file {self.path}")
        flags = os.O_RDWR | os.O_CREAT
        flags |= getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = open_lock_file(self.path, flags)  # the one writer makes it (empty, never written)
        except OSError as exc:
            raise LedgerError(
                f"{_label(self.ledger)}: cannot open its lock file {self.path}: {exc.strerror or exc}."
            ) from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise LedgerError(f"The lock file {self.path} is not a regular file.")
            deadline = time.monotonic() + self.timeout
            while not _try_lock(fd):
                if time.monotonic() >= deadline:
                    raise LedgerBusy(
                        f"{_label(self.ledger)} is in use by another query; try again "
                        f"(waited {self.timeout:g} s)."
                    )
                if self.check_cancel is not None:
                    self.check_cancel()
                time.sleep(_POLL)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        with _held_guard:
            _held[self.path] = me
        return self

    def __exit__(self, *exc) -> None:
        with _held_guard:
            _held.pop(self.path, None)
        if self.fd is not None:
            fd, self.fd = self.fd, None
            try:
                _unlock(fd)
            finally:
                os.close(fd)


if sys.platform == "win32":  # pragma: no cover - Windows: a one-byte lock of the lock file
    import msvcrt

    def _try_lock(fd: int) -> bool:
        try:
            os.lseek(fd, 0, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            return True
        except OSError:
            return False

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False
        except OSError as exc:  # e.g. a file system without locks
            raise LedgerError(f"Cannot lock the ledger's lock file: {exc.strerror or exc}.") from None

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


@contextlib.contextmanager
def locked_ledger(
    path,
    *,
    total: float | None = None,
    dataset: str | None = None,
    digest: str | None = None,
    timeout: float = DEFAULT_WAIT,
    check_cancel: Callable[[], None] | None = None,
) -> Iterator[BudgetLedger]:
    """Hold the ledger file ``path`` exclusively: yield its ledger bound to the file.

    Inside, :meth:`BudgetLedger.check` sees every answer of every process, and
    :meth:`BudgetLedger.spend` writes the file before it returns.  Answer inside the block,
    release the answer only after ``spend`` returned.  A ledger that does not exist yet is
    created with ``total`` (its file is written at the first spend); without ``total`` it is
    refused.  ``digest``: the data set's SHA-256; a ledger bound to other data is refused.
    Waits at most ``timeout`` seconds for another query (:class:`LedgerBusy`), calling
    ``check_cancel`` meanwhile.
    """
    path = os.path.abspath(str(path))
    check_ledger_path(path)  # before waiting: a FIFO, a folder or a read-only file is refused
    if total is None and not ledger_exists(path):  # refused before a lock file is made
        raise LedgerError(_missing(path))
    with _FileLock(path, timeout, check_cancel):
        check_ledger_path(path)
        led = read_ledger_file(path)
        if led is None:
            if total is None:
                raise LedgerError(_missing(path))
            led = BudgetLedger(total, dataset=dataset, digest=digest)
        else:
            led.on_file = True
        if digest and led.digest and led.digest != digest:
            raise LedgerError(
                f"{_label(path)} belongs to another data set ({led.dataset}); use that data set's "
                "ledger, or another ledger file for this one."
            )
        led.path = path
        try:
            yield led
        finally:
            led.path = None


def _missing(path: str) -> str:
    return (
        f"{_label(path)} does not exist yet: give the data set's total query budget once to "
        "create it (dpstudio query … --budget TOTAL_EPSILON)."
    )


def ledger_exists(path) -> bool:
    """True when ``path`` is an existing ledger file (FIFOs and folders are refused)."""
    return _lstat_regular(str(path), _label(path)) is not None


def migrate_embedded(ledger: BudgetLedger, path, *, timeout: float = DEFAULT_WAIT) -> bool:
    """Move a ledger that an older project held inside to the ledger file ``path``: written
    when there is no file, or when it extends the file; nothing to do when the file already
    extends it.  False (nothing written) when the two differ (the caller asks for another file).
    """
    path = os.path.abspath(str(path))
    with _FileLock(path, timeout):
        old = read_ledger_file(path)
        if old is not None and old.extends(ledger):
            return True
        if old is not None and not ledger.extends(old):
            return False
        write_ledger_file(path, ledger.to_dict())
        return True


def default_ledger_name(dataset: str, digest: str) -> str:
    """A ledger file name for a data set: its stem and the first 16 hex digits of its SHA-256."""
    stem = Path(dataset).stem or "data"
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in stem)[:60]
    return f"{safe}-{digest[:16]}.ledger.json"
