"""AppState: the one object the panels observe (style.md §11)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from PySide6.QtCore import QObject, Signal

from dpstudio.app.compute import ColumnStats, column_stats  # noqa: F401 (re-export)
from dpstudio.engine.random import fresh_seed

ROLE_VALUES = ("identifier", "k-quasi", "eps-quasi", "confidential", "other")


@dataclass
class Recipe:
    """Everything that defines a release (saved in the private project file)."""

    method: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    seed: int = field(default_factory=fresh_seed)
    """Secret: 128 bits of OS entropy for every new session and every new data file, unless
    the user pins one.  Only ever written to the owner-only project / recovery file."""


class AppState(QObject):
    """Data, roles, domains, hierarchies, recipe and the last result."""

    sig_data_changed = Signal()
    """A new table was loaded (or cleared); the seed is then a fresh one."""
    sig_roles_changed = Signal()
    """Roles, domains or hierarchies changed."""
    sig_recipe_changed = Signal()
    """Method, parameters or seed changed."""
    sig_result_changed = Signal()
    """A protection run finished (or the result was invalidated)."""
    sig_dirty_changed = Signal(bool)
    """The project has (or no longer has) unsaved changes."""
    sig_types_changed = Signal(str)
    """A column's type was changed by the user (its values in ``df`` converted)."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.df: pd.DataFrame | None = None
        self.path: str | None = None
        self.input_meta: Any = None
        self.read_options: dict = {}
        self.stats: dict[str, ColumnStats] = {}
        self.roles: dict[str, str] = {}
        self.domains: dict[str, tuple[float, float]] = {}
        self.hierarchies: dict[str, Any] = {}  # column -> Hierarchy
        self.hierarchy_sources: dict[str, Any] = {}  # column -> path or {"generated": ...}
        self.types: dict[str, str] = {}  # column -> "numeric" | "text" chosen by the user
        self.recipe = Recipe()
        self.result = None
        self.result_recipe: dict | None = None
        self.evaluation: dict | None = None
        self.project_path: str | None = None
        self.sweep_points: list = []
        self._dirty = False

    # --- Public API
    def set_data(self, df: pd.DataFrame, path: str | None, meta: Any = None,
                 read_options: dict | None = None, roles: dict | None = None,
                 stats: dict[str, ColumnStats] | None = None) -> None:
        """Install a new table (``stats``: precomputed in the loading worker)."""
        self.df = df
        self.path = path
        self.input_meta = meta
        self.read_options = dict(read_options or {})
        self.stats = stats if stats is not None else column_stats(df)
        cols = [str(c) for c in df.columns]
        self.roles = {c: "other" for c in cols}
        if roles:
            self.roles.update({c: r for c, r in roles.items() if c in self.roles})
        self.domains = {}
        self.hierarchies = {}
        self.hierarchy_sources = {}
        self.types = {}
        self.sweep_points = []
        # a new data file is a new project: a fresh secret seed (a project being opened sets
        # its own seed after loading)
        self.recipe.seed = fresh_seed()
        self._clear_result()
        self.sig_data_changed.emit()
        self.sig_roles_changed.emit()
        self.mark_dirty()

    def set_role(self, column: str, role: str) -> None:
        if self.roles.get(column) == role:
            return
        self.roles[column] = role
        self._clear_result()
        self.sig_roles_changed.emit()
        self.mark_dirty()

    def set_roles(self, roles: dict[str, str]) -> None:
        self.roles.update(roles)
        self._clear_result()
        self.sig_roles_changed.emit()
        self.mark_dirty()

    def set_type(self, column: str, kind: str) -> None:
        """Treat ``column`` as ``"numeric"`` or ``"text"`` (converts the loaded values; the
        file is not touched).  Text → numeric refuses, naming the rows, when a value is not a
        number (no value is silently lost); numeric → text keeps 39 as '39'."""
        from dpstudio.engine.errors import InputError, format_rows

        if kind not in ("numeric", "text"):
            raise ValueError(kind)
        s = self.df[column]
        is_num = pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)
        if kind == "numeric" and not is_num:
            conv = pd.to_numeric(s, errors="coerce")
            bad = np.flatnonzero(conv.isna().to_numpy() & s.notna().to_numpy())
            if bad.size:
                raise InputError(
                    f"Column {column!r} cannot be numeric: row(s) {format_rows(bad)} hold text "
                    f"such as {str(s.iloc[bad[0]])!r}. Correct the file (or the decimal mark "
                    "when opening it), or keep the type text.")
            new = conv
        elif kind == "text" and is_num:
            v = s
            if pd.api.types.is_float_dtype(s):
                f = s.to_numpy(dtype=np.float64, na_value=np.nan)
                fin = f[np.isfinite(f)]
                if fin.size and np.all(fin == np.round(fin)) and np.abs(fin).max() < 2**53:
                    v = s.astype("Int64")  # 39.0 -> '39'
            new = v.astype(str).where(s.notna(), np.nan)
        else:
            return
        self.df = self.df.assign(**{column: new})
        self.types[column] = kind
        self.stats[column] = column_stats(self.df[[column]])[column]
        if kind == "text":
            self.domains.pop(column, None)
        self.sweep_points = []
        self._clear_result()
        self.sig_types_changed.emit(column)
        self.sig_roles_changed.emit()
        self.mark_dirty()

    def set_domain(self, column: str, bounds: tuple[float, float] | None) -> None:
        if bounds is None:
            self.domains.pop(column, None)
        else:
            self.domains[column] = (float(bounds[0]), float(bounds[1]))
        self._clear_result()
        self.sig_roles_changed.emit()
        self.mark_dirty()

    def set_hierarchy(self, column: str, hierarchy: Any, source: Any) -> None:
        if hierarchy is None:
            self.hierarchies.pop(column, None)
            self.hierarchy_sources.pop(column, None)
        else:
            self.hierarchies[column] = hierarchy
            self.hierarchy_sources[column] = source
        self._clear_result()
        self.sig_roles_changed.emit()
        self.mark_dirty()

    def set_method(self, method: str | None, params: dict | None = None) -> None:
        self.recipe.method = method
        if params is not None:
            self.recipe.params = dict(params)
        self.sig_recipe_changed.emit()
        self.mark_dirty()

    def set_params(self, params: dict) -> None:
        if params == self.recipe.params:
            return
        self.recipe.params = dict(params)
        self.sig_recipe_changed.emit()
        self.mark_dirty()

    def set_seed(self, seed: int) -> None:
        from dpstudio.engine.random import parse_seed

        seed = parse_seed(seed)  # any width; negative or non-integer refused
        if seed == self.recipe.seed:
            return
        self.recipe.seed = seed
        self.sig_recipe_changed.emit()
        self.mark_dirty()

    def new_seed(self) -> int:
        """Draw a fresh seed from OS entropy (the app's "New" button)."""
        self.set_seed(fresh_seed())
        return self.recipe.seed

    def set_result(self, result: Any, evaluation: dict | None, recipe: dict | None) -> None:
        self.result = result
        self.evaluation = evaluation
        self.result_recipe = recipe
        self.sig_result_changed.emit()

    def active_roles(self) -> dict[str, str]:
        """Roles other than 'other' (what the engine needs)."""
        return {c: r for c, r in self.roles.items() if r != "other"}

    def active_domains(self) -> dict[str, tuple[float, float]]:
        """Domains of columns the engine may protect (never of 'other' columns)."""
        return {c: b for c, b in self.domains.items()
                if self.roles.get(c, "other") not in ("other", "identifier")}

    def active_hierarchies(self) -> dict[str, Any]:
        return {c: h for c, h in self.hierarchies.items()
                if self.roles.get(c, "other") not in ("other", "identifier")}

    @property
    def dirty(self) -> bool:
        return self._dirty

    def mark_dirty(self, dirty: bool = True) -> None:
        if dirty != self._dirty:
            self._dirty = dirty
            self.sig_dirty_changed.emit(dirty)

    # --- Private
    def _clear_result(self) -> None:
        if self.result is not None:
            self.result = None
            self.evaluation = None
            self.result_recipe = None
            self.sig_result_changed.emit()
