"""The guarantee of a release as data (issue 22 §1): :class:`Guarantee`.

A method states what its release guarantees by building a :class:`Guarantee` from a
:class:`GuaranteeContext` (the validated parameters, the protected attributes, the roles,
the released columns).  The object answers the questions other layers ask -- is the release
ε-DP (:attr:`Guarantee.is_dp`), for what scope (:attr:`Guarantee.scope`), which columns it
covers, how ε is split -- and renders the one sentence that is published
(:meth:`Guarantee.render`).  Nobody decides anything by reading the sentence: the API, the
command line, the app and the reports ask the object.

The sentence is the concatenation of the :attr:`Guarantee.clauses` (each a :class:`Clause`
with a code and its exact text, punctuation and spacing included), led by the scope clause
when the model holds per attribute only ("Per-attribute only — not ε-differential privacy
for the records: <reasons>. What holds for each protected attribute's column on its own:
<clauses>").  The wording of that lead and of the clause labels lives in this module only.

A chain of steps (recode → top-code → local suppression → PRAM, recode → ir-dp) composes the
steps' guarantees with :func:`compose`; the rules it applies are in its docstring.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from dpstudio.engine.roles import Role


class Model(str, Enum):
    """The privacy model a guarantee states.

    "Per-attribute ε-DP" is not a model of its own: it is :attr:`EPSILON_DP` with
    :attr:`Scope.PER_ATTRIBUTE` (one field says what, the other where it holds, so the two
    cannot disagree).
    """

    #: ε-differential privacy (bounded: neighbouring data sets differ in one record)
    EPSILON_DP = "epsilon-dp"
    #: individual differential privacy (neighbours of THIS data set only)
    INDIVIDUAL_DP = "individual-dp"
    K_ANONYMITY = "k-anonymity"
    PROBABILISTIC_K_ANONYMITY = "probabilistic-k-anonymity"
    #: (k, ε)-anonymity: k-anonymity plus within-class noise (not DP)
    K_EPSILON_ANONYMITY = "k-epsilon-anonymity"
    #: t-closeness (here exp(ε)-closeness: ε-DP for uninformed intruders only)
    T_CLOSENESS = "t-closeness"
    #: plausible deniability of a randomised response (PRAM)
    PLAUSIBLE_DENIABILITY = "plausible-deniability"
    #: no formal guarantee (a noise-free baseline, an as-published calibration that is not DP)
    NONE = "none"


#: The models of differential privacy (the ones a scope lead names and a budget belongs to).
DP_MODELS = (Model.EPSILON_DP, Model.INDIVIDUAL_DP)
#: The models that hold for the key columns' released values (classes of at least k).
K_MODELS = (Model.K_ANONYMITY, Model.PROBABILISTIC_K_ANONYMITY, Model.K_EPSILON_ANONYMITY)


class Scope(str, Enum):
    """Where the stated model holds."""

    #: for the released records (every protected attribute together)
    RECORDS = "records"
    #: for each protected attribute's column on its own, not for the records
    PER_ATTRIBUTE = "per-attribute"
    #: for a release of one independently shuffled table per protected attribute (the
    #: release as a whole, by sequential composition over the tables)
    TABLES = "per-table"


#: The codes of clauses, with what each says.
CLAUSE_CODES = {
    "claim": "the model and its parameters (the head of the sentence)",
    "budget": "how ε is split over the protected attributes",
    "neighbours": "the neighbouring relation of the DP definition",
    "mechanism": "how the values are protected (noise, clusters, suppression, ...)",
    "meaning": "what the model means for an intruder",
    "caveat": "a limit of the guarantee (calibration, local sensitivity, achieved t, ...)",
    "baseline": "a noise-free baseline: no guarantee, never for release",
    "not-dp": "says that the release is not differentially private",
    "order": "the order of the released records",
    "layout": "the release layout (one table per protected attribute)",
    "changed": "which columns are changed and how",
    "not-changed": "which protected columns are released with their exact values",
    "not-released": "columns not released in this layout",
    "not-covered": "columns released unchanged that the guarantee does not cover",
    "remedy": "how to obtain the record-level guarantee",
    "remedy-layout": "a remedy that offers the 'separate-tables' layout",
    "survey": "the sampling weight and the household id",
    "grid": "the floating-point-safe output grid of the noise",
    "composition": "how the steps of a chain compose",
    "step": "what one step of a chain states",
    "lost": "a step's claim that does not survive the chain",
    "scope-reason": "why a DP model holds per attribute only, not for the records",
    "text": "a method's sentence given as plain text (no structure)",
}


@dataclass(frozen=True)
class Clause:
    """One piece of the sentence: ``code`` (one of :data:`CLAUSE_CODES`) and its exact text
    (with its own punctuation and leading space: the sentence is the concatenation).
    """

    code: str
    text: str

    def __post_init__(self) -> None:
        if self.code not in CLAUSE_CODES:
            raise ValueError(f"unknown clause code {self.code!r}")


@dataclass(frozen=True)
class Uncovered:
    """A released column the guarantee does not cover, and why (``reason``)."""

    column: str
    #: 'released-unchanged' (no role the method protects), 'sampling-weight',
    #: 'household-id' (released at the user's request); in a chain led by a DP claim:
    #: 'other-claim' (changed by a step whose own claim covers it), 'changed-no-claim'
    #: (changed by a step whose claim does not survive, or that makes none)
    reason: str


# --------------------------------------------------------------------------- wording

#: How a guarantee that holds only per attribute starts (its scope comes first).
SCOPE_LEAD = "Per-attribute only — not {what} for the records: "
#: Separates the reasons of a scoped sentence from what holds per attribute.
SCOPE_HOLDS = ". What holds for each protected attribute's column on its own: "
#: What the scope lead says does not hold, per model.
_SCOPE_WHAT = {Model.INDIVIDUAL_DP: "individual differential privacy"}
_SCOPE_WHAT_DEFAULT = "ε-differential privacy"

#: Labels inside a sentence that open a clause about its scope (the reports show them bold).
SCOPE_LABELS = (
    SCOPE_HOLDS[2:].rstrip(),
    "Not covered:",
    "Not changed:",
    "Changed:",
    "CAVEAT:",
    "Not released in this layout:",
    "Remedies:",
)


def scope_what(model: Model) -> str:
    """The words of the scope lead for ``model`` ("ε-differential privacy", ...)."""
    return _SCOPE_WHAT.get(model, _SCOPE_WHAT_DEFAULT)


# --------------------------------------------------------------------------- the guarantee


@dataclass(frozen=True)
class Guarantee:
    """What a release guarantees, as data; :meth:`render` gives the published sentence.

    ``epsilon`` is the declared ε (None: not set); ``epsilon_per_attribute`` the ε_i of each
    protected attribute under the budget split (empty when the attributes are not known or
    the model has no per-attribute budget); ``epsilon_total`` the ε of the stated DP model by
    sequential composition (None when the model is not DP or m is unknown); ``delta`` is 0
    (pure DP).  ``covered`` are the columns the guarantee covers, ``uncovered`` the released
    columns it does not cover (with why), ``not_released`` the columns left out of the
    release.  ``voided_by`` holds the codes of settings under which the stated model does not
    hold as released (``input-order``); ``scope_reasons`` why a DP model holds per attribute
    only.  ``parts``: the claims of the steps of a chain (:func:`compose`).

    >>> g = Guarantee(model=Model.EPSILON_DP, clauses=(Clause("claim", "1-differential privacy."),),
    ...               epsilon=1.0, epsilon_total=1.0)
    >>> g.is_dp, g.render()
    (True, '1-differential privacy.')
    >>> n = g.narrowed_to_attributes("x and y are clustered separately")
    >>> n.is_dp, n.scope.value
    (False, 'per-attribute')
    >>> print(n.render())  # doctest: +ELLIPSIS
    Per-attribute only — not ε-differential privacy for the records: x and y are ... own: 1-differential privacy.
    """

    model: Model
    clauses: tuple[Clause, ...]
    scope: Scope = Scope.RECORDS
    epsilon: float | None = None
    epsilon_per_attribute: tuple[tuple[str, float], ...] = ()
    epsilon_total: float | None = None
    delta: float = 0.0
    k: int | None = None
    t: float | None = None
    covered: tuple[str, ...] = ()
    uncovered: tuple[Uncovered, ...] = ()
    not_released: tuple[str, ...] = ()
    scope_reasons: tuple[Clause, ...] = ()
    voided_by: tuple[str, ...] = ()
    baseline: bool = False
    parts: tuple[Guarantee, ...] = ()

    # ------------------------------------------------------------------ questions

    @property
    def is_dp(self) -> bool:
        """Whether the release as a whole is ε-differentially private: model ε-DP, for the
        records or the separate tables, not voided by a setting, not a baseline.
        """
        return (
            self.model is Model.EPSILON_DP
            and self.scope is not Scope.PER_ATTRIBUTE
            and not self.voided_by
            and not self.baseline
        )

    @property
    def narrowed(self) -> bool:
        """The DP model holds per attribute only, for the reasons in :attr:`scope_reasons`
        (the remedies -- drop or protect the other columns, the 'separate-tables' layout --
        restore the record-level guarantee).
        """
        return bool(self.scope_reasons)

    @property
    def epsilon_shares(self) -> dict[str, float]:
        """ε_i per protected attribute (the budget split)."""
        return dict(self.epsilon_per_attribute)

    def has_clause(self, code: str) -> bool:
        return any(c.code == code for c in self.clauses)

    # ------------------------------------------------------------------ the sentence

    def render(self) -> str:
        """The published sentence (a chain's, :func:`compose`, has no lead of its own: each
        step's sentence carries its scope, and the chain's clause says where its DP holds).
        """
        body = "".join(c.text for c in self.clauses)
        if not self.scope_reasons or self.parts:
            return body
        reasons = "; ".join(r.text for r in self.scope_reasons)
        return SCOPE_LEAD.format(what=scope_what(self.model)) + reasons + SCOPE_HOLDS + body

    def __str__(self) -> str:
        return self.render()

    # ------------------------------------------------------------------ building

    def evolve(self, **changes: Any) -> Guarantee:
        """A copy with ``changes`` (``dataclasses.replace`` without its per-call overhead,
        which was most of the cost of stating a guarantee: no field here is computed).
        """
        unknown = set(changes) - set(self.__dataclass_fields__)
        if unknown:
            raise TypeError(f"unknown Guarantee field(s): {', '.join(sorted(unknown))}")
        new = object.__new__(Guarantee)
        new.__dict__.update(self.__dict__)
        new.__dict__.update(changes)
        return new

    def with_clauses(self, *clauses: Clause) -> Guarantee:
        """The guarantee with ``clauses`` appended (empty texts are left out)."""
        new = tuple(c for c in clauses if c.text)
        return self.evolve(clauses=self.clauses + new) if new else self

    def narrowed_to_attributes(self, reason: str) -> Guarantee:
        """The guarantee holding per attribute only, because of ``reason`` (added to the
        reasons already given).
        """
        return self.evolve(
            scope=Scope.PER_ATTRIBUTE,
            scope_reasons=self.scope_reasons + (Clause("scope-reason", reason),),
        )

    # ------------------------------------------------------------------ JSON

    def to_dict(self) -> dict:
        """A JSON-ready dict (:meth:`from_dict` reads it back)."""
        return {
            "model": self.model.value,
            "scope": self.scope.value,
            "is_dp": self.is_dp,
            "epsilon": _num_out(self.epsilon),
            "epsilon_per_attribute": {c: _num_out(e) for c, e in self.epsilon_per_attribute},
            "epsilon_total": _num_out(self.epsilon_total),
            "delta": _num_out(self.delta),
            "k": self.k,
            "t": _num_out(self.t),
            "covered": list(self.covered),
            "uncovered": [{"column": u.column, "reason": u.reason} for u in self.uncovered],
            "not_released": list(self.not_released),
            "scope_reasons": [{"code": c.code, "text": c.text} for c in self.scope_reasons],
            "voided_by": list(self.voided_by),
            "baseline": self.baseline,
            "clauses": [{"code": c.code, "text": c.text} for c in self.clauses],
            "parts": [p.to_dict() for p in self.parts],
            "sentence": self.render(),
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> Guarantee:
        """The guarantee of :meth:`to_dict` (derived keys -- ``is_dp``, ``sentence`` -- are
        recomputed, not read).
        """
        return cls(
            model=Model(d["model"]),
            scope=Scope(d.get("scope", Scope.RECORDS.value)),
            clauses=tuple(Clause(c["code"], c["text"]) for c in d.get("clauses", ())),
            epsilon=_num_in(d.get("epsilon")),
            epsilon_per_attribute=tuple(
                (str(c), float(e)) for c, e in (d.get("epsilon_per_attribute") or {}).items()
            ),
            epsilon_total=_num_in(d.get("epsilon_total")),
            delta=float(_num_in(d.get("delta")) or 0.0),
            k=None if d.get("k") is None else int(d["k"]),
            t=_num_in(d.get("t")),
            covered=tuple(map(str, d.get("covered", ()))),
            uncovered=tuple(Uncovered(str(u["column"]), str(u["reason"])) for u in d.get("uncovered", ())),
            not_released=tuple(map(str, d.get("not_released", ()))),
            scope_reasons=tuple(Clause(c["code"], c["text"]) for c in d.get("scope_reasons", ())),
            voided_by=tuple(map(str, d.get("voided_by", ()))),
            baseline=bool(d.get("baseline", False)),
            parts=tuple(cls.from_dict(p) for p in d.get("parts", ())),
        )

    @classmethod
    def plain(cls, text: str) -> Guarantee:
        """A sentence given as plain text (a method outside this package that returns one):
        no structure, so no claim (model NONE, not DP).
        """
        return cls(model=Model.NONE, clauses=(Clause("text", str(text)),))


def _num_out(x: float | None) -> Any:
    if x is None:
        return None
    x = float(x)
    if math.isfinite(x):
        return x
    return "inf" if x > 0 else ("-inf" if x < 0 else None)


def _num_in(x: Any) -> float | None:
    if x is None:
        return None
    if x == "inf":
        return math.inf
    if x == "-inf":
        return -math.inf
    return float(x)


# --------------------------------------------------------------------------- the context


@dataclass(frozen=True)
class GuaranteeContext:
    """What a method's ``guarantee`` function is given (instead of underscore keys in the
    parameters): the validated ``params``; the protected ``attributes`` (empty: not known yet,
    e.g. the registry's generic sentence); every column's ``roles`` (empty: not known); the
    ``released`` columns (None: not known); ``run``: what the method's run reported
    (``Output.info``; None before a run, e.g. the app's preview).

    A guarantee may use ``run`` only for facts that are functions of the declared parameters
    and of the RELEASE (t-close-dp's achieved t of an Anatomy release, whose groups are
    released): the sentence is public.
    """

    params: Mapping[str, Any]
    attributes: tuple[str, ...] = ()
    roles: Mapping[str, Role] = field(default_factory=dict)
    released: tuple[str, ...] | None = None
    run: Mapping[str, Any] | None = None

    @classmethod
    def of(
        cls,
        params: Mapping[str, Any],
        attributes: Iterable[str] = (),
        roles: Mapping[str, Any] | None = None,
        released: Iterable[str] | None = None,
        run: Mapping[str, Any] | None = None,
    ) -> GuaranteeContext:
        r = {str(c): (v if isinstance(v, Role) else Role(v)) for c, v in (roles or {}).items()}
        return cls(
            params=dict(params),
            attributes=tuple(map(str, attributes)),
            roles=r,
            released=None if released is None else tuple(map(str, released)),
            run=None if run is None else dict(run),
        )

    def get(self, name: str, default: Any = None) -> Any:
        """A parameter's value (``params.get``)."""
        return self.params.get(name, default)

    def columns(self, *roles: Role) -> list[str] | None:
        """The columns with one of ``roles`` (None when the roles are not known)."""
        if not self.roles:
            return None
        return [c for c, r in self.roles.items() if r in roles]

    def with_params(self, **changes: Any) -> GuaranteeContext:
        return replace(self, params={**self.params, **changes})


# --------------------------------------------------------------------------- presentation

_CLAUSE_SPLIT = re.compile(r"(?<=[.])\s+(?=(?:[A-Z]|\d+-|ε-|k-|t-|\())")
_SCOPE_LEAD_START = SCOPE_LEAD.split("{", 1)[0]


def sentence_parts(sentence: str) -> list[tuple[str, str]]:
    """The sentence cut for display into its clauses (its sentences; the scope lead of a
    scoped guarantee is a clause of its own), each with its kind: ``label:<label>`` (opened
    by one of :data:`SCOPE_LABELS`), ``scope-lead`` ("Per-attribute only — not … for the
    records:") or ``text``.  The texts joined by single spaces give the sentence back.
    Presentation only (the reports format a sentence that may come from a file): decisions
    ask a :class:`Guarantee`.
    """
    text = str(sentence or "").strip()
    clauses: list[str] = []
    for part in _CLAUSE_SPLIT.split(text):
        if part.startswith(_SCOPE_LEAD_START) and ": " in part:
            head, rest = part.split(": ", 1)
            clauses += [head + ":", rest]
        else:
            clauses.append(part)
    out: list[tuple[str, str]] = []
    for c in clauses:
        if not c:
            continue
        label = next((lab for lab in SCOPE_LABELS if c.startswith(lab)), None)
        if label:
            out.append((c, f"label:{label}"))
        elif c.startswith(_SCOPE_LEAD_START):
            out.append((c, "scope-lead"))
        else:
            out.append((c, "text"))
    return out


# --------------------------------------------------------------------------- chains


class Effect(str, Enum):
    """What a step of a chain does to the values of one column."""

    #: a value-wise function fixed before looking at the data (recoding with the user's
    #: breaks, top-coding at a declared threshold): one record's output depends on that
    #: record's value only
    FIXED_MAP = "fixed-map"
    #: a value-wise function chosen from the data (quantile breaks, a top-code at the 99th
    #: percentile): equal values stay equal, but one record can move every break
    DATA_MAP = "data-map"
    #: values set to missing where the data calls for it (local suppression)
    SUPPRESS = "suppress"
    #: values replaced record by record (noise, PRAM, swapping, microaggregation)
    PERTURB = "perturb"


@dataclass(frozen=True)
class Effects:
    """What a method does to its input, as a step of a chain: the columns it ``changes`` with
    the :class:`Effect` on each, the other columns it ``reads`` (e.g. the k-quasi classes that
    decide a noise scale), whether it ``removes_records`` chosen from the data (record
    suppression; a property of the mechanism, not of one run's outcome) and the ``keys`` a
    k-type claim of it holds on (default: the claim's covered columns).  A method declares
    them (``MethodSpec.effects``); the default is :attr:`Effect.PERTURB` on every column it
    protects.
    """

    changes: Mapping[str, Effect]
    reads: tuple[str, ...] = ()
    removes_records: bool = False
    keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class Step:
    """One step of a chain: its own guarantee (``Model.NONE`` for a plain transformation),
    the columns it ``changes`` with the :class:`Effect` on each, the other columns it
    ``reads`` (e.g. the k-quasi classes that decide a noise scale), whether it removes
    records chosen from the data (record suppression) and the ``keys`` of its k-type claim
    (default: the claim's covered columns, else the changed ones).
    """

    name: str
    guarantee: Guarantee
    changes: Mapping[str, Effect]
    reads: tuple[str, ...] = ()
    removes_records: bool = False
    keys: tuple[str, ...] = ()

    @classmethod
    def of(cls, name: str, guarantee: Guarantee, effects: Effects) -> Step:
        """The step named ``name`` with ``guarantee`` and the method's declared ``effects``."""
        return cls(
            name=name,
            guarantee=guarantee,
            changes=dict(effects.changes),
            reads=tuple(effects.reads),
            removes_records=bool(effects.removes_records),
            keys=tuple(effects.keys),
        )

    @property
    def inputs(self) -> set[str]:
        return set(self.changes) | set(self.reads)

    @property
    def dp(self) -> bool:
        return self.guarantee.model in DP_MODELS and not self.guarantee.baseline

    @property
    def data_dependent(self) -> bool:
        """Not a fixed record-by-record function of the data: some output depends on other
        records (a DP step is randomised, but its own guarantee states what holds).
        """
        return self.removes_records or any(e is not Effect.FIXED_MAP for e in self.changes.values())


#: Effects on a key column after which a class of at least k records stays one (value-wise
#: functions map equal combinations to equal ones: classes can only merge).
_KEEPS_CLASSES = (Effect.FIXED_MAP, Effect.DATA_MAP)


def _named(n: int, s: Step) -> str:
    """How a sentence refers to step ``n`` (0-based) of a chain: ``step 2 (ir-dp)``."""
    return f"step {n + 1} ({s.name})"


def _claim_keys(claim: Step) -> set[str]:
    return set(claim.keys) or set(claim.guarantee.covered) or set(claim.changes)


def _survives(claim: Step, later: Sequence[tuple[int, Step]]) -> str | None:
    """Why the claim of ``claim`` does not survive the ``later`` (number, step) pairs (None:
    it does).
    """
    g = claim.guarantee
    keys = _claim_keys(claim)
    for n, s in later:
        if g.model in K_MODELS:
            if s.removes_records:
                return f"{_named(n, s)} removes records, which can leave a class with fewer than k"
            for c in sorted(keys & set(s.changes)):
                e = s.changes[c]
                if e in _KEEPS_CLASSES:
                    continue
                if e is Effect.SUPPRESS and g.model is Model.K_ANONYMITY:
                    continue  # a missing value matches any value: classes only grow
                return (
                    f"{_named(n, s)} changes key {c!r} record by record ({e.value}), so classes "
                    "of the released values are no longer of at least k"
                )
        elif g.model is Model.T_CLOSENESS:
            touched = sorted(keys & set(s.changes))
            if touched or s.removes_records:
                return (
                    f"{_named(n, s)} changes {', '.join(touched) or 'the records'}: the groups' "
                    "distributions are no longer the ones checked"
                )
        # DP, iDP and plausible deniability survive every later step: a later step sees only
        # the released values of those columns (post-processing).  What an EARLIER step does
        # is checked by _dp_lost.
    return None


def _dp_lost(dp_step: Step, earlier: Sequence[tuple[int, Step]]) -> str | None:
    """Why the DP claim of ``dp_step`` is lost through an ``earlier`` step (None: kept).

    A non-DP step before it is harmless when it is a fixed record-by-record function
    (neighbouring data sets stay neighbours).  A data-dependent one is not: when it changes
    a column the DP step reads, one record can change the DP step's input in many records
    (its sensitivity no longer bounds that); when it reads a column the DP step protects,
    its own released output already depends on those values unprotected; when it removes
    records, neighbouring data sets need not stay neighbours.
    """
    for n, s in earlier:
        if s.dp or not s.data_dependent:
            continue
        if s.removes_records:
            return f"{_named(n, s)} removed records chosen from the data before it"
        fed = sorted(c for c, e in s.changes.items() if e is not Effect.FIXED_MAP and c in dp_step.inputs)
        if fed:
            return (
                f"{_named(n, s)} changed {', '.join(fed)} from the data before it (one record "
                "can change many of its input records)"
            )
        leak = sorted(s.inputs & set(dp_step.changes))
        if leak:
            return (
                f"{_named(n, s)} read {', '.join(leak)} before it was protected, and its own "
                "output depends on those values"
            )
    return None


def compose(steps: Sequence[Step]) -> Guarantee:
    """The guarantee of a chain of ``steps`` (each reads the previous step's output).

    What holds, exactly:

    * **DP steps** (ε-DP or individual DP) keep their claim when every step before them is a
      DP step or a fixed record-by-record function (user's breaks, a declared top-code):
      such a function maps neighbouring data sets to neighbouring (or equal) ones.  A
      data-dependent step before a DP step on the columns it reads or protects (quantile
      breaks, local suppression, microaggregation, record suppression) loses the DP claim:
      one record can change many of the DP step's input records.  Steps after a DP step see
      only its released values: post-processing, the claim holds.
    * **Budgets add up** by sequential composition: the chain's ε is the sum of the DP
      steps' ε (an upper bound), δ = 0.  The chain is ε-DP (:attr:`Guarantee.is_dp`) only
      when every DP step keeps an ε-DP claim for the records (any individual-DP step makes it
      individual DP, any per-attribute step per attribute).
    * **k-anonymity** (and probabilistic k-anonymity, (k, ε)-anonymity) of a step's keys
      survives a later step that leaves the keys alone or applies a value-wise function to
      them (recoding, top-coding: classes only merge), and for k-anonymity under the
      missing-matches-any rule a later suppression; it does NOT survive a later step that
      changes keys record by record (PRAM, noise, swapping) or removes records: then only the
      later step's own claim holds for those keys.
    * **t-closeness** survives only steps that change none of its columns and remove no
      records.
    * **Plausible deniability** (PRAM) survives every later step (post-processing).
    * What a chain led by a DP claim **does not cover**: the columns the other steps change
      (``Uncovered`` with reason ``other-claim`` when a surviving claim of such a step covers
      them, ``changed-no-claim`` otherwise) and the steps' own uncovered columns; the
      sentence names them ("Not covered by the epsilon-dp claim: ...").
    * A k-type claim holds on its step's ``keys`` (declared in :class:`Effects`; default the
      claim's covered columns).  Sentences refer to steps as "step n (name)".

    The result lists the surviving claims in :attr:`Guarantee.parts`, says which were lost
    and why, and leads with the DP claim when the chain has one that holds, else with the
    first surviving claim (``Model.NONE`` when none survives).
    """
    steps = list(steps)
    if not steps:
        raise ValueError("compose() needs at least one step")
    numbered = list(enumerate(steps))
    survivors, kept, lost, dp_ok, dp_bad = _surviving_claims(numbered)
    clauses = [
        Clause("step", f"{' ' if n else ''}Step {n + 1} ({s.name}): {s.guarantee.render()}")
        for n, s in numbered
    ]
    covered = tuple(dict.fromkeys(c for g in survivors for c in g.covered))
    uncovered = tuple(
        {u.column: u for s in steps for u in s.guarantee.uncovered if u.column not in covered}.values()
    )
    if dp_ok and not dp_bad:
        return _dp_chain(steps, dp_ok, kept, survivors, clauses, covered, uncovered, lost)
    lead = survivors[0] if survivors else None
    how = (
        " No differential privacy for the chain."
        if dp_bad
        else ("" if survivors else " No step's claim survives the chain: no formal guarantee.")
    )
    return Guarantee(
        model=lead.model if lead else Model.NONE,
        clauses=(*clauses, *lost, *((Clause("composition", how),) if how else ())),
        scope=lead.scope if lead else Scope.RECORDS,
        voided_by=lead.voided_by if lead else (),
        k=lead.k if lead else None,
        t=lead.t if lead else None,
        covered=covered,
        uncovered=uncovered,
        parts=tuple(survivors),
    )


def _surviving_claims(
    numbered: list[tuple[int, Step]],
) -> tuple[list[Guarantee], list[tuple[int, Step]], list[Clause], list[Step], bool]:
    """:func:`compose`'s verdict on each step's claim: the surviving guarantees, the steps
    that made them (numbered), a "lost" clause per claim that does not hold, the DP steps
    whose claim holds, and whether a DP claim was lost.
    """
    survivors: list[Guarantee] = []
    kept: list[tuple[int, Step]] = []
    lost: list[Clause] = []
    dp_ok: list[Step] = []
    dp_bad = False
    for i, s in numbered:
        g = s.guarantee
        if g.model is Model.NONE:
            continue
        why = _dp_lost(s, numbered[:i]) if s.dp else None
        if why is None:
            why = _survives(s, numbered[i + 1 :])
        if why is not None:
            lost.append(Clause("lost", f" The {g.model.value} claim of {_named(i, s)} does not hold: {why}."))
            dp_bad = dp_bad or s.dp
            continue
        survivors.append(g)
        kept.append((i, s))
        if s.dp:
            dp_ok.append(s)
    return survivors, kept, lost, dp_ok, dp_bad


def _dp_chain(
    steps: list[Step],
    dp_ok: list[Step],
    kept: list[tuple[int, Step]],
    survivors: list[Guarantee],
    clauses: list[Clause],
    covered: tuple[str, ...],
    uncovered: tuple[Uncovered, ...],
    lost: list[Clause],
) -> Guarantee:
    """:func:`compose`'s guarantee of a chain whose DP steps all keep their claim: the
    sequential composition of their budgets, led by the DP claim.
    """
    dps = [s.guarantee for s in dp_ok]
    model = Model.INDIVIDUAL_DP if any(g.model is Model.INDIVIDUAL_DP for g in dps) else Model.EPSILON_DP
    totals = [g.epsilon_total for g in dps]
    total = None if any(t is None for t in totals) else math.fsum(t for t in totals if t is not None)
    per: dict[str, float] = {}
    for g in dps:
        for c, e in g.epsilon_per_attribute:
            per[c] = per.get(c, 0.0) + e
    scopes = {g.scope for g in dps}
    scope = (
        Scope.PER_ATTRIBUTE
        if Scope.PER_ATTRIBUTE in scopes
        else (Scope.TABLES if Scope.TABLES in scopes else Scope.RECORDS)
    )
    where = (
        "per attribute only (for the reasons its DP step(s) give: not for the records)"
        if scope is Scope.PER_ATTRIBUTE
        else ("for the separate tables" if scope is Scope.TABLES else "for the records")
    )
    how = (
        f" The chain is {model.value} {where} with ε = {total:g} by sequential composition "
        f"over its {len(dps)} DP step(s) (δ = 0): no step before a DP step changes, from the "
        "data, a column that step reads or protects, or removes records, and the later steps "
        "only post-process its release."
        if total is not None
        else f" The chain is {model.value} {where} by sequential composition over its {len(dps)} DP step(s)."
    )
    dp_cov = set(dict.fromkeys(c for g in dps for c in g.covered))
    others = _dp_not_covered(steps, dp_cov, kept, uncovered)
    extra: list[Clause] = []
    named = [u.column for u in others.values() if u.reason in ("other-claim", "changed-no-claim")]
    if named:
        extra.append(
            Clause(
                "not-covered",
                f" Not covered by the {model.value} claim: {', '.join(named)} (changed by the "
                "other steps: what holds for them is their steps' own claims above, where those "
                "hold).",
            )
        )
    return Guarantee(
        model=model,
        clauses=(*clauses, Clause("composition", how), *extra, *lost),
        scope=scope,
        epsilon=total,
        epsilon_per_attribute=tuple(per.items()),
        epsilon_total=total,
        covered=tuple(c for c in covered if c in dp_cov),
        uncovered=tuple(others.values()),
        voided_by=tuple(dict.fromkeys(v for g in dps for v in g.voided_by)),
        scope_reasons=tuple(r for g in dps for r in g.scope_reasons),
        parts=tuple(survivors),
    )


def _dp_not_covered(
    steps: list[Step], dp_cov: set[str], kept: list[tuple[int, Step]], uncovered: tuple[Uncovered, ...]
) -> dict[str, Uncovered]:
    """What a chain's DP claim does not cover: the columns changed by the other steps
    (covered by their own surviving claims, stated in the sentence, or by none) and the
    steps' uncovered columns, by column.
    """
    others: dict[str, Uncovered] = {}
    for s in steps:
        if s.dp:
            continue
        for c in s.changes:
            if c in dp_cov or c in others:
                continue
            held = next(
                (n for n, t in kept if not t.dp and c in _claim_keys(t) | set(t.guarantee.covered)), None
            )
            others[c] = Uncovered(c, "other-claim" if held is not None else "changed-no-claim")
    for u in uncovered:
        if u.column not in dp_cov and u.column not in others:
            others[u.column] = u
    return others


__all__ = [
    "CLAUSE_CODES",
    "Clause",
    "DP_MODELS",
    "Effect",
    "Effects",
    "Guarantee",
    "GuaranteeContext",
    "K_MODELS",
    "Model",
    "SCOPE_HOLDS",
    "SCOPE_LABELS",
    "SCOPE_LEAD",
    "Scope",
    "Step",
    "Uncovered",
    "compose",
    "scope_what",
    "sentence_parts",
]
