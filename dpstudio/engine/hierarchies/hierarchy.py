"""Generalisation hierarchies / taxonomies: one data structure for (k, ε)-anonymity
(generalisation levels) and categorical DP (taxonomy trees).

ARX's CSV format: no header, semicolon-separated, one row per leaf (original value),
column 0 = the value itself (level 0), each further column the next level, the last
usually ``*``.  Every row must have the same number of levels and a label at level l
must always have the same parent at level l+1.
"""

from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from dpstudio.engine.errors import InputError, ParameterError


@dataclass
class Hierarchy:
    """A generalisation hierarchy.

    ``table[i, l]`` is the label of leaf i at level l (level 0 = the leaf).
    """

    table: np.ndarray  # (n_leaves, height) of str (object)
    name: str = ""
    source: str = ""
    _index: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.table = np.asarray(self.table, dtype=object)
        if self.table.ndim != 2 or self.table.shape[0] == 0 or self.table.shape[1] == 0:
            raise InputError(f"Hierarchy {self.name!r} is empty.")
        self._validate()
        self._index = {str(v): i for i, v in enumerate(self.table[:, 0])}

    # ---- construction -------------------------------------------------
    @classmethod
    def from_rows(cls, rows: list[list[str]], name: str = "", source: str = "") -> Hierarchy:
        rows = [[str(x).strip() for x in r] for r in rows if any(str(x).strip() for x in r)]
        if not rows:
            raise InputError(f"Hierarchy {name or source!r} has no rows.")
        widths = {len(r) for r in rows}
        if len(widths) != 1:
            first = next(i for i, r in enumerate(rows) if len(r) != len(rows[0]))
            raise InputError(
                f"Hierarchy {name or source!r}: every row must have the same number of levels; "
                f"row 1 has {len(rows[0])} but row {first + 1} ({rows[first][0]!r}) has "
                f"{len(rows[first])}."
            )
        return cls(np.array(rows, dtype=object), name=name, source=source)

    @classmethod
    def read_arx(cls, path_or_text: str | os.PathLike, name: str = "") -> Hierarchy:
        """Read an ARX hierarchy CSV (a path, or the text itself if it contains a newline)."""
        if isinstance(path_or_text, (str, os.PathLike)) and os.path.exists(str(path_or_text)):
            from dpstudio.engine.io import MAX_HIERARCHY_BYTES, read_small_file

            path = str(path_or_text)
            # a regular file of at most MAX_HIERARCHY_BYTES: never a FIFO or /dev/zero
            what = f"Hierarchy file of column {name!r}" if name else "Hierarchy file"
            raw = read_small_file(path, what=what, max_bytes=MAX_HIERARCHY_BYTES)
            try:
                text = raw.decode("utf-8-sig")
            except UnicodeDecodeError:
                text = raw.decode("latin-1")
            source = path
        elif isinstance(path_or_text, str) and ("\n" in path_or_text or ";" in path_or_text):
            text, source = path_or_text, "<text>"
        else:
            raise ParameterError(f"Hierarchy file not found: {path_or_text}")
        if "\x00" in text[:65536]:
            raise InputError(
                f"Hierarchy {os.path.basename(source)}: this is not a text file "
                "(binary content). Give an ARX hierarchy CSV."
            )
        first = text.lstrip().split("\n", 1)[0].strip().lower().replace(" ", "")
        try:
            if first in ("child,parent", "child;parent"):  # parent-child taxonomy file
                pairs = list(csv.reader(io.StringIO(text), delimiter=first[5]))[1:]
                rows = parent_child_rows(pairs, name or os.path.basename(source))
            else:
                rows = list(csv.reader(io.StringIO(text), delimiter=";"))
        except csv.Error as exc:
            raise InputError(
                f"Hierarchy {os.path.basename(source)}: cannot be read as an ARX hierarchy CSV ({exc})."
            ) from None
        return cls.from_rows(rows, name=name or os.path.basename(source), source=source)

    def write_arx(self, path: str | os.PathLike, *, protect: tuple | list = ()) -> str:
        """Write the hierarchy as an ARX CSV through the one guarded writer (atomic; never over
        ``protect``, e.g. the data file or the hierarchy it was read from).
        """
        from dpstudio.engine.safe_write import atomic_write

        buf = io.StringIO()
        w = csv.writer(buf, delimiter=";", lineterminator="\n")
        for row in self.table:
            w.writerow(list(row))
        text = buf.getvalue()

        def writer(tmp: str) -> None:
            with open(tmp, "w", encoding="utf-8", newline="") as fh:
                fh.write(text)

        return atomic_write(path, writer, protect=protect, what="hierarchy file")

    # ---- validation -----------------------------------------------------
    def _validate(self) -> None:
        t = self.table
        leaves = [str(x) for x in t[:, 0]]
        seen: dict[str, int] = {}
        for i, v in enumerate(leaves):
            if v in seen:
                raise InputError(
                    f"Hierarchy {self.name!r}: value {v!r} appears twice (rows {seen[v] + 1} and {i + 1})."
                )
            seen[v] = i
        for lvl in range(1, t.shape[1]):
            parent: dict[str, str] = {}
            for i in range(t.shape[0]):
                child, par = str(t[i, lvl - 1]), str(t[i, lvl])
                if lvl - 1 == 0:
                    continue
                if parent.setdefault(child, par) != par:
                    raise InputError(
                        f"Hierarchy {self.name!r}: {child!r} (level {lvl - 1}) maps to two parents, "
                        f"{parent[child]!r} and {par!r} (row {i + 1}). A value must have one parent."
                    )

    def check_values(self, values: pd.Series, column: str = "") -> None:
        """Raise naming the first value of ``values`` that is not a leaf."""
        uniq = pd.unique(values.dropna().astype(str))
        missing = [u for u in uniq if u not in self._index]
        if missing:
            rows = np.flatnonzero(values.astype(str).to_numpy() == missing[0])
            raise InputError(
                f"Column {column or self.name!r}: value {missing[0]!r} (row {int(rows[0]) + 1}) is not in "
                f"its hierarchy{(' ' + repr(self.source)) if self.source else ''}"
                + (f" ({len(missing)} values are missing in all)" if len(missing) > 1 else "")
                + ". Add it to the hierarchy file, or let dpstudio build one."
            )

    # ---- queries ----------------------------------------------------------
    @property
    def height(self) -> int:
        """Number of levels including level 0."""
        return int(self.table.shape[1])

    @property
    def leaves(self) -> list[str]:
        return [str(x) for x in self.table[:, 0]]

    def leaf_codes(self, values) -> np.ndarray:
        """Integer leaf index of each value (raises for unknown values)."""
        s = pd.Series(values)
        self.check_values(s)
        return np.fromiter((self._index[str(v)] for v in s.astype(str)), dtype=np.int64, count=len(s))

    def level_codes(self, level: int) -> tuple[np.ndarray, np.ndarray]:
        """(labels at ``level``, leaf -> label index) for integer-coded evaluation."""
        labels, inv = np.unique(self.table[:, level].astype(str), return_inverse=True)
        return labels.astype(object), inv.astype(np.int64)

    def generalize(self, values, level: int) -> np.ndarray:
        return self.table[self.leaf_codes(values), level]

    def parents(self) -> dict[tuple[int, str], tuple[int, str] | None]:
        """Tree view: node (level, label) -> parent node (None for the root(s))."""
        out: dict[tuple[int, str], tuple[int, str] | None] = {}
        h = self.height
        for row in self.table:
            for lvl in range(h):
                node = (lvl, str(row[lvl]))
                out[node] = (lvl + 1, str(row[lvl + 1])) if lvl + 1 < h else None
        return out


def parent_child_rows(pairs, name: str = "") -> list[list[str]]:
    """ARX rows (leaf first, root last) from (child, parent) pairs of a taxonomy tree.

    A parent–child file starts with the header ``child,parent`` (or ``child;parent``); the
    root has an empty parent (or appears only as a parent).  Leaves of unequal depth are
    padded by repeating the leaf label, so that every node keeps one level.  Cycles and
    several roots are refused with a message naming the nodes.
    """
    par: dict[str, str] = {}
    for i, pr in enumerate(pairs):
        pr = [str(x).strip() for x in pr]
        if not any(pr):
            continue
        if len(pr) != 2 or not pr[0]:
            raise InputError(f"Taxonomy {name!r}: line {i + 2} must be 'child,parent'; got {pr!r}.")
        child, parent = pr
        if child in par and par[child] != parent:
            raise InputError(
                f"Taxonomy {name!r}: {child!r} has two parents, {par[child]!r} and "
                f"{parent!r} (line {i + 2}). A taxonomy must be a tree."
            )
        par[child] = parent
    for p in list(par.values()):
        if p and p not in par:
            par[p] = ""
    roots = sorted(c for c, p in par.items() if not p)
    paths = ancestor_paths(par, name)
    if len(roots) != 1:
        raise InputError(
            f"Taxonomy {name!r} must have exactly one root (a node without parent); "
            f"it has {len(roots)}: {', '.join(map(repr, roots[:10]))}. "
            "Add a common top concept (e.g. '*') as their parent."
            if roots
            else f"Taxonomy {name!r} has no root."
        )
    inner = set(p for p in par.values() if p)
    leaves = [c for c in par if c not in inner]
    height = max(len(paths[c]) for c in leaves)
    return [[c] * (height - len(paths[c])) + paths[c] for c in leaves]


def ancestor_paths(par: dict, name: str = "") -> dict[str, list[str]]:
    """Node -> [node, parent, …, root] for a child -> parent map (a falsy parent marks a
    root); raises :class:`InputError` naming the nodes of a cycle.
    """
    paths: dict[str, list[str]] = {}
    for c in par:
        path, seen = [c], {c}
        while par[path[-1]]:
            nxt = par[path[-1]]
            if nxt in seen:
                cyc = path[path.index(nxt) :] + [nxt]
                raise InputError(
                    f"Taxonomy {name!r} has a cycle: {' -> '.join(cyc)}. A taxonomy must be a tree."
                )
            path.append(nxt)
            seen.add(nxt)
        paths[c] = path
    return paths


def load_hierarchy(obj, column: str = "") -> Hierarchy:
    """A :class:`Hierarchy` from an object, a path to an ARX CSV, or a list of rows."""
    if isinstance(obj, Hierarchy):
        return obj
    if isinstance(obj, (str, os.PathLike)):
        return Hierarchy.read_arx(obj, name=column)
    if isinstance(obj, (list, tuple)):
        return Hierarchy.from_rows([list(r) for r in obj], name=column)
    if isinstance(obj, pd.DataFrame):
        return Hierarchy.from_rows(obj.astype(str).values.tolist(), name=column)
    raise ParameterError(
        f"Hierarchy for column {column!r} must be a file path or a Hierarchy; got {type(obj).__name__}."
    )
