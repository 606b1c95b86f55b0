"""Out-of-core plans: how a method runs on data larger than memory (issue 22 §3).

A method that runs out of core says so in its :class:`~dpstudio.engine.registry.MethodSpec`
(``outofcore=``) with one of the plans below.  The plan names the *shape* of the method's
computation, and carries the method's own calibration as plain functions; an out-of-core
backend (:mod:`dpstudio.engine.backends.dask_backend`) owns partitioning, scheduling and I/O
and calls those functions on pieces of the data.  The in-memory run of the method calls the
same functions, so a calibration is defined once, in the method's module, and both engines
give the same release under the same seed.  Nothing here (nor in a method module) imports
Dask.

The shapes:

* :class:`Rowwise` -- every released value is a function of its own record (``laplace``):
  the backend calls ``release`` on each partition;
* :class:`Ranked` -- individual ranking: each protected attribute sorted on its own (ties by
  record id), cut into clusters of k consecutive ranks, the last taking the remainder
  (``ir-dp``, ``idp-ls``, ``idp-cbls``, ``ir-swap``): the backend sorts, and calls ``release``
  on blocks of complete clusters (:class:`ClusterBlock`);
* :class:`SingleOrder` -- one total order of the records on a key of all the protected
  attributes together, cut into clusters the same way (single-order ``insensitive-dp``);
* :class:`FrequencySet` -- the method needs only the frequency of each combination of its
  (encoded) key columns, then rewrites every record from that table (``k-eps`` with OLA, as
  ARX does).

Every plan has ``refuse(params)``: why these parameters do not run out of core (one line,
naming what to do), or ``None``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from dpstudio.engine.errors import NotApplicableError

__all__ = [
    "NotOutOfCore",
    "Attribute",
    "ClusterBlock",
    "Rowwise",
    "Ranked",
    "SingleOrder",
    "FrequencySet",
    "FrequencyTask",
    "FrequencyChoice",
    "OutOfCorePlan",
    "cluster_block",
]


class NotOutOfCore(NotApplicableError):
    """A method, or an option of it, that does not run out of core (on Dask)."""


def _runs(_params: dict) -> str | None:
    return None


@dataclass(frozen=True)
class Attribute:
    """What a plan's function is told about one protected attribute of a run."""

    #: the column
    column: str
    #: its position in the method's list of protected columns (keys its streams)
    index: int
    #: the run's keyed root (:func:`dpstudio.engine.algorithms.keyed.root_key`)
    root: tuple[int, int]
    #: the validated parameters of the run
    params: dict
    #: number of records of the whole data
    n: int
    #: the attribute's output grid (noisy methods), else None
    grid: Any = None
    #: its share ε_i of the budget (None without ε)
    epsilon: float | None = None

    def stream(self, purpose: int) -> Any:
        """The keyed stream of ``purpose`` (``keyed.PURPOSE_*``) of this attribute: the one
        :func:`~dpstudio.engine.protection._common.job_stream` gives in memory.
        """
        from dpstudio.engine.algorithms import keyed as K

        return K.KeyedStream(self.root, purpose, self.index)


@dataclass(frozen=True)
class ClusterBlock:
    """Whole clusters of a total order (individual ranking, single order), in rank order: what
    a :class:`Ranked` or :class:`SingleOrder` plan's ``release`` receives.  Every cluster of
    the block is complete; the clusters need not be consecutive.
    """

    #: the values in rank order: (records,) for one attribute, (records, m) for a single order
    values: np.ndarray
    #: the global rank of every record
    ranks: np.ndarray
    #: each cluster's first position in ``values``, its size and its global id (rank // k, the
    #: last cluster taking the remainder), clusters in rank order
    starts: np.ndarray
    sizes: np.ndarray
    ids: np.ndarray
    #: the record ids (input positions) of the records, in the same order
    rows: np.ndarray
    #: records and clusters of the whole order, and k
    n: int
    n_clusters: int
    k: int
    #: the values in their own dtype (a method releasing the values themselves: ir-swap)
    original: np.ndarray | None = None


def cluster_block(
    values: np.ndarray,
    *,
    ranks: np.ndarray | int,
    n: int,
    k: int,
    rows: np.ndarray | None = None,
    original: np.ndarray | None = None,
) -> ClusterBlock:
    """The :class:`ClusterBlock` of ``values`` (in rank order, whole clusters) of global ranks
    ``ranks`` (ascending; an int: the first of consecutive ranks) in an order of ``n`` records
    cut into clusters of ``k``.  ``ValueError`` when a cluster is not whole.

    >>> b = cluster_block(np.arange(7.0), ranks=0, n=7, k=3)
    >>> b.ids.tolist(), b.starts.tolist(), b.sizes.tolist()
    ([0, 1], [0, 3], [3, 4])
    """
    from dpstudio.engine.algorithms.microaggregation import n_clusters_for

    kk = max(int(k), 1)
    nc = n_clusters_for(n, k)
    m = int(values.shape[0])
    if isinstance(ranks, (int, np.integer)):
        ranks = np.arange(int(ranks), int(ranks) + m, dtype=np.int64)
    ranks = np.asarray(ranks, dtype=np.int64)
    if ranks.shape != (m,):
        raise ValueError(f"internal: {ranks.size} ranks for {m} values")
    cl = np.minimum(ranks // kk, nc - 1)
    first = np.empty(m, dtype=bool)
    first[:1] = True
    np.not_equal(cl[1:], cl[:-1], out=first[1:])
    starts = np.flatnonzero(first).astype(np.int64)
    ids = cl[starts]
    sizes = np.diff(np.r_[starts, m]).astype(np.int64)
    want = np.where(ids == nc - 1, n - (nc - 1) * kk, kk)
    if m and (not np.array_equal(sizes, want) or int(ranks[0]) != int(ids[0]) * kk):
        raise ValueError("internal: a block of ranks holds a cluster that is not whole")
    return ClusterBlock(
        values=values,
        ranks=ranks,
        starts=starts,
        sizes=sizes,
        ids=ids,
        rows=np.zeros(0, np.int64) if rows is None else np.asarray(rows, dtype=np.int64),
        n=int(n),
        n_clusters=int(nc),
        k=kk,
        original=original,
    )


@dataclass(frozen=True)
class Rowwise:
    """Each released value is a function of its own record only (and of keyed draws by its
    record id).  ``release(values, rows, attribute)``: the released values of one attribute
    for records ``rows`` (input positions) holding ``values`` (float64).
    """

    kind: ClassVar[str] = "rowwise"
    release: Callable[[np.ndarray, np.ndarray, Attribute], np.ndarray]
    #: the protected attributes have an output grid (noise)
    noisy: bool = True
    refuse: Callable[[dict], str | None] = _runs


@dataclass(frozen=True)
class Ranked:
    """Individual ranking (each protected attribute on its own, ties by record id; clusters of
    k consecutive ranks, the last taking the remainder).  ``release(block, attribute)``: the
    released value of every record of a :class:`ClusterBlock` of the attribute, in rank order.
    """

    kind: ClassVar[str] = "ranked"
    release: Callable[[ClusterBlock, Attribute], np.ndarray]
    #: the protected attributes have an output grid (noise); if not, the released values are
    #: the attribute's own values (the block's ``original``), in the column's dtype
    noisy: bool = True
    #: every record of a cluster is released with the same value
    constant_per_cluster: bool = True
    refuse: Callable[[dict], str | None] = _runs


@dataclass(frozen=True)
class SingleOrder:
    """One total order of the records on all the protected attributes together, clusters of k
    consecutive ranks (the last taking the remainder).

    ``sort_key(X, lower, upper, params)``: the sort keys of records ``X`` ((records, m),
    float64), most significant first (the backend breaks remaining ties by record id);
    ``release(block, attributes)``: the released values of each attribute (a list of arrays,
    in rank order) for a block of whole clusters (``block.values`` is X in rank order).
    """

    kind: ClassVar[str] = "single-order"
    sort_key: Callable[[np.ndarray, np.ndarray, np.ndarray, dict], list[np.ndarray]]
    release: Callable[[ClusterBlock, list[Attribute]], list[np.ndarray]]
    noisy: bool = True
    refuse: Callable[[dict], str | None] = _runs


@dataclass
class FrequencyChoice:
    """What a :class:`FrequencySet` method decides from the frequency table."""

    #: per row of the table: whether its records are released
    keep: np.ndarray
    #: per key column: the released label of each code (None: the column is released as is)
    labels: dict[str, np.ndarray | None]
    #: private facts for the audit trail, and private warnings
    info: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


@dataclass
class FrequencyTask:
    """A :class:`FrequencySet` method's work on one run: its key ``columns``,
    ``encode(partition) -> {column: int64 codes}`` (raising ``InputError`` naming a value it
    cannot encode) and ``choose(table) -> FrequencyChoice`` on the frequency table (one row per
    distinct combination of codes, in ascending order, with its record count in ``'__n'``).
    """

    columns: list[str]
    encode: Callable[[Any], dict[str, np.ndarray]]
    choose: Callable[[Any], FrequencyChoice]


@dataclass(frozen=True)
class FrequencySet:
    """The method needs only the frequency table of its encoded key columns.
    ``setup(prepared, hierarchies) -> FrequencyTask`` (raising :class:`NotOutOfCore` for
    roles or options it does not run out of core).
    """

    kind: ClassVar[str] = "frequency-set"
    setup: Callable[[Any, dict | None], FrequencyTask]
    refuse: Callable[[dict], str | None] = _runs


#: What ``MethodSpec.outofcore`` holds.
OutOfCorePlan = Rowwise | Ranked | SingleOrder | FrequencySet
