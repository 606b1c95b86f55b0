"""AppState: the one object the panels observe (style.md §11)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pandas as pd
from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QUndoCommand, QUndoStack

from dpstudio.app.compute import ColumnStats, column_stats  # noqa: F401 (re-export)
from dpstudio.engine.errors import DPStudioError
from dpstudio.engine.random import fresh_seed, parse_seed
from dpstudio.engine.recipe import Recipe

#: The sweep settings of a new session.
DEFAULT_SWEEP = {"ks": "2-10, 12, 15, 20, 25, 30, 40, 50, 75, 100", "epsilons": "0.1, 1, 10", "repeats": 3}

ROLE_VALUES = ("identifier", "k-quasi", "eps-quasi", "confidential", "other", "weight", "household")
#: The column types the user chooses from (the engine's ``roles.TYPES``).
TYPE_VALUES = ("numeric", "integer", "categorical", "ordinal", "date")
#: Older projects (and history entries) said "text" for "treat as categories".
_LEGACY_TYPES = {"text": "categorical"}


def _current_params(params: dict) -> dict:
    """Parameters with old names read as the current ones (an old project's ``shuffle`` is
    ``order``); a value that cannot be read is kept for the engine to refuse in one line.
    """
    from dpstudio.engine.errors import ParameterError
    from dpstudio.engine.registry import legacy_params

    try:
        return legacy_params(params)
    except ParameterError:
        return dict(params)


def new_recipe() -> Recipe:
    """An empty recipe with a fresh secret seed (128 bits of OS entropy), not pinned."""
    return Recipe(seed=fresh_seed(), seed_pinned=False)


class AppState(QObject):
    """The loaded table and the one :class:`~dpstudio.engine.recipe.Recipe` (roles, types,
    domains, precision, hierarchies, method, parameters, seed, sweep settings) and the last
    result.  Panels write only here and observe the signals; nothing else holds a copy.

    ``roles``, ``domains``, ``types``, ``precision``, ``hierarchy_sources``, ``path`` and
    ``read_options`` are views of ``recipe`` (the same objects); ``hierarchies`` holds the
    loaded :class:`~dpstudio.engine.hierarchies.hierarchy.Hierarchy` objects of
    ``recipe.hierarchies``.

    The seed (issue 8): unless the user pins it, every Protect run draws a fresh one
    (:meth:`record_run_seed` stores the seed of the run that made the current release, which
    is what the project file records); a pinned seed is reused and a second, different release
    exported with it is warned about (:meth:`note_export`).
    """

    sig_data_changed = Signal()
    """A new table was loaded (or cleared); the seed is then a fresh one."""
    sig_roles_changed = Signal()
    """Roles, types, domains, precision or hierarchies changed."""
    sig_recipe_changed = Signal()
    """Method, parameters or seed (or its pinning) changed."""
    sig_sweep_changed = Signal()
    """The trade-off sweep settings (k values, ε values, repeats) changed."""
    sig_result_changed = Signal()
    """A protection run finished (or the result was invalidated)."""
    sig_dirty_changed = Signal(bool)
    """The project has (or no longer has) unsaved changes."""
    sig_types_changed = Signal(str)
    """A column's type was changed by the user (its values in ``df`` converted)."""
    sig_input_errors_changed = Signal()
    #: the value labels were switched on or off (issue 24 §3)
    sig_labels_changed = Signal(bool)
    """A field holds text that is not a valid value (or no longer does)."""
    sig_query_ledger_changed = Signal()
    """The query desk's ledger file (``recipe.extra["query_ledger_file"]``) changed."""
    sig_dask_release_changed = Signal()
    """Sample mode (issue 12): a release of the whole file was written on Dask (or cleared)."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.df: pd.DataFrame | None = None
        self.input_meta: Any = None
        #: show the SPSS/Stata value labels instead of the codes (Data, Attributes, Risk,
        #: Release views; issue 24 §3)
        self.show_labels = True
        self.stats: dict[str, ColumnStats] = {}
        self.hierarchies: dict[str, Any] = {}  # column -> Hierarchy (sources in the recipe)
        self.recipe: Recipe = new_recipe()
        self.recipe.sweep = dict(DEFAULT_SWEEP)
        self.input_errors: dict[str, str] = {}
        self.result = None
        self.result_recipe: dict | None = None
        self.evaluation: dict | None = None
        self.project_path: str | None = None
        self.sweep_points: list = []
        #: issue 12: ``df`` is a uniform sample of a file larger than memory --
        #: ``{"path", "bytes", "n_total", "n_sample", "seed"}`` (the seed redraws it: private);
        #: None when ``df`` is the whole file.  Protect/Export then run on the whole file on Dask.
        self.sample_of: dict | None = None
        #: sample mode: the last whole-file release written on Dask (paths, guarantee, records)
        self.dask_release: dict | None = None
        self._dirty = False
        #: undo/redo of role, type, domain, precision and hierarchy edits (issue 11); one
        #: user action = one command (see :meth:`undo_step`); cleared when a file is loaded
        self.undo_stack = QUndoStack(self)
        self._undo_depth = 0
        #: columns as read, kept when a type conversion replaced them in ``df``
        self._loaded: dict[str, pd.Series] = {}
        self._suggested: dict[str, str] = {}

    # --- views of the recipe
    @property
    def path(self) -> str | None:
        return self.recipe.input_path

    @property
    def read_options(self) -> dict:
        return self.recipe.read_options

    @property
    def roles(self) -> dict[str, str]:
        return self.recipe.roles

    @property
    def domains(self) -> dict[str, tuple[float, float]]:
        return self.recipe.domains

    @property
    def types(self) -> dict[str, str]:
        return self.recipe.types

    @property
    def precision(self) -> dict[str, float]:
        return self.recipe.precision

    @property
    def hierarchy_sources(self) -> dict[str, Any]:
        return self.recipe.hierarchies

    # --- Public API
    def set_data(
        self,
        df: pd.DataFrame,
        path: str | None,
        meta: Any = None,
        read_options: dict | None = None,
        roles: dict | None = None,
        stats: dict[str, ColumnStats] | None = None,
        sample_of: dict | None = None,
    ) -> None:
        """Install a new table (``stats``: precomputed in the loading worker).  A new data
        file is a new project: roles, domains, precision, hierarchies and types are reset and
        the seed is a fresh, unpinned one (a project being opened sets its own afterwards).
        """
        self.df = df
        self.input_meta = meta
        self.sample_of = dict(sample_of) if sample_of else None  # issue 12
        self.dask_release = None
        self.stats = stats if stats is not None else column_stats(df)
        r = self.recipe
        r.input_path = path
        r.read_options = dict(read_options or {})
        cols = [str(c) for c in df.columns]
        r.roles = {c: "other" for c in cols}
        if roles:
            r.roles.update({c: v for c, v in roles.items() if c in r.roles})
        r.domains, r.precision, r.hierarchies, r.types = {}, {}, {}, {}
        # the types the file declares (SPSS measure level / format, Stata storage type) are the
        # defaults, shown as "declared in the file" (issue 24 §2); the user may change them
        r.types.update({c: t for c, t in self.declared_types().items() if c in r.roles})
        r.extra.pop("query_ledger_file", None)  # another data set has its own ledger file
        self.hierarchies = {}
        self._loaded, self._suggested = {}, {}
        self.undo_stack.clear()  # edits of another table cannot be undone on this one
        self.sweep_points = []
        self.input_errors = {}
        r.seed, r.seed_pinned, r.seed_releases = fresh_seed(), False, []
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

    def set_type(self, column: str, kind: str | None) -> None:
        """The user's type for ``column``: ``numeric``, ``categorical``, ``ordinal`` or ``date``
        (the engine's types; ``None``: no choice, the suggestion applies in the display only).

        Stored in the recipe, so runs, sweeps and project files get it; numeric-only methods
        refuse a categorical/ordinal quasi-identifier.  Only ``numeric`` changes the loaded
        values: a text column is converted to numbers, refused (naming the rows) when a value
        is not a number, so nothing is silently lost; any other type gives the column back
        exactly as it was read (codes stay codes; nothing is rewritten as text).
        """
        kind = self._check_type(column, kind)
        if kind == self.types.get(column):
            return
        changed = self._apply_type(column, kind)
        self.sweep_points = []
        self._clear_result()
        if changed:
            self.sig_types_changed.emit(column)
        self.sig_roles_changed.emit()
        self.mark_dirty()

    def suggested_type(self, column: str) -> str:
        """The engine's suggestion for ``column`` (:func:`dpstudio.engine.roles.suggest_types`:
        integer columns with at most 20 distinct values are suggested as categorical); computed
        when first asked (a wide file is not scanned up front).
        """
        t = self._suggested.get(column)
        if t is None:
            from dpstudio.engine.roles import suggest_types

            base = self._loaded.get(column)
            col = base if base is not None else self.df[column]
            t = self._suggested[column] = suggest_types(col.to_frame(column))[column]
        return t

    def value_labels(self) -> dict[str, dict]:
        """{column: {code: label}} read with the file, or {} while the labels are off."""
        if not self.show_labels:
            return {}
        return dict(getattr(self.input_meta, "value_labels", None) or {})

    def has_value_labels(self) -> bool:
        return bool(getattr(self.input_meta, "value_labels", None))

    def set_show_labels(self, on: bool) -> None:
        """Value labels on or off in every view (not a project setting: nothing is dirty)."""
        if bool(on) == self.show_labels:
            return
        self.show_labels = bool(on)
        self.sig_labels_changed.emit(self.show_labels)

    def declared_types(self) -> dict[str, str]:
        """{column: type} the input file declares (empty for a CSV)."""
        return dict(getattr(self.input_meta, "declared_types", None) or {})

    def type_origin(self, column: str) -> str:
        """'' (the user's), 'suggested' or 'from the file' (declared in it): where the shown type comes from."""
        t, suggested = self.column_type(column)
        if suggested:
            return "suggested"
        return "from the file" if self.declared_types().get(column) == t else ""

    def column_type(self, column: str) -> tuple[str, bool]:
        """``(type, suggested)``: the user's type, else the suggestion (``suggested`` True)."""
        t = self.types.get(column)
        return (t, False) if t else (self.suggested_type(column), True)

    def _check_type(self, column: str, kind: str | None) -> str | None:
        if kind is None:
            return None
        from dpstudio.engine.roles import normalize_types

        k = _LEGACY_TYPES.get(str(kind).strip().lower(), kind)
        return normalize_types([column], {column: k})[column]

    def _apply_type(self, column: str, kind: str | None) -> bool:
        """Store ``kind`` and make ``df[column]`` follow it; True when the values changed."""
        from dpstudio.engine.errors import InputError, format_rows

        cur = self.df[column]
        base = self._loaded.get(column, cur)
        new = base
        if kind in ("numeric", "integer"):
            is_num = pd.api.types.is_numeric_dtype(base) and not pd.api.types.is_bool_dtype(base)
            if not is_num:
                conv = pd.to_numeric(base, errors="coerce")
                bad = np.flatnonzero(conv.isna().to_numpy() & base.notna().to_numpy())
                if bad.size:
                    raise InputError(
                        f"Column {column!r} cannot be {kind}: row(s) {format_rows(bad)} hold text "
                        f"such as {str(base.iloc[bad[0]])!r}. Correct the file (or the decimal mark "
                        "when opening it), or keep the type categorical."
                    )
                new = conv
        if kind is None:
            self.types.pop(column, None)
        else:
            self.types[column] = kind
        if new is cur:
            return False
        if column not in self._loaded:
            self._loaded[column] = cur
        elif new is base:
            del self._loaded[column]
        self.df = self.df.assign(**{column: new})
        self.stats[column] = column_stats(self.df[[column]])[column]
        return True

    # --- undo (issue 11): one user action = one step
    @contextmanager
    def undo_step(self, text: str) -> Iterator[None]:
        """Record the role/type/domain/precision/hierarchy changes made inside as one undo
        step named ``text`` (nested steps join the outer one; nothing changed: no step).
        """
        if self._undo_depth or self.df is None:
            self._undo_depth += 1
            try:
                yield
            finally:
                self._undo_depth -= 1
            return
        before = self._column_settings()
        self._undo_depth += 1
        try:
            yield
        finally:
            self._undo_depth -= 1
            after = self._column_settings()
            changed = [c for c, v in after.items() if not _same_settings(before.get(c), v)]
            if changed:
                self.undo_stack.push(
                    _ColumnsCommand(
                        self, text, {c: before[c] for c in changed}, {c: after[c] for c in changed}
                    )
                )

    def _column_settings(self) -> dict[str, tuple]:
        r, t, d, p, h, s = (
            self.roles,
            self.types,
            self.domains,
            self.precision,
            self.hierarchies,
            self.hierarchy_sources,
        )
        return {
            c: (r.get(c, "other"), t.get(c), d.get(c), p.get(c), h.get(c), dict(s[c]) if c in s else None)
            for c in r
        }

    def apply_column_settings(self, settings: dict[str, tuple]) -> None:
        """Put the columns' (role, type, domain, precision, hierarchy, source) back, one signal."""
        typed = []
        for c, (role, kind, dom, prec, h, src) in settings.items():
            if c not in self.roles:
                continue
            self.roles[c] = role
            try:
                if kind != self.types.get(c) and self._apply_type(c, kind):
                    typed.append(c)
            except DPStudioError:  # carried over to a file whose values do not fit: skip
                pass
            for dct, v in ((self.domains, dom), (self.precision, prec)):
                if v is None:
                    dct.pop(c, None)
                else:
                    dct[c] = v
            if h is None:
                self.hierarchies.pop(c, None)
                self.hierarchy_sources.pop(c, None)
            else:
                self.hierarchies[c] = h
                self.hierarchy_sources[c] = dict(src or {})
        self.sweep_points = [] if typed else self.sweep_points
        self._clear_result()
        for c in typed:
            self.sig_types_changed.emit(c)
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

    def set_precision(self, column: str, gamma: float | None) -> None:
        """The output grid γ of a noisy numeric column (``None``: the engine's default, 1 for
        integer columns, else from the declared domain).
        """
        if gamma is None:
            if self.precision.pop(column, None) is None:
                return
        else:
            if self.precision.get(column) == float(gamma):
                return
            self.precision[column] = float(gamma)
        self._clear_result()
        self.sig_roles_changed.emit()
        self.mark_dirty()

    def set_hierarchy(self, column: str, hierarchy: Any, source: Any) -> None:
        """``source``: the ARX file's path or ``{"generated": True}``."""
        if hierarchy is None:
            self.hierarchies.pop(column, None)
            self.hierarchy_sources.pop(column, None)
        else:
            self.hierarchies[column] = hierarchy
            self.hierarchy_sources[column] = (
                {"path": str(source)} if isinstance(source, str) else dict(source or {})
            )
        self._clear_result()
        self.sig_roles_changed.emit()
        self.mark_dirty()

    def set_method(self, method: str | None, params: dict | None = None) -> None:
        if method == self.recipe.method and (params is None or params == self.recipe.params):
            return
        self.recipe.method = method
        if params is not None:
            self.recipe.params = _current_params(params)
        self.sig_recipe_changed.emit()
        self.mark_dirty()

    #: The key of the project file that keeps the Method tab's step list (not ``steps``: a
    #: recipe's ``steps`` make ``dpstudio protect --recipe`` run a chain; a project's release
    #: may be a single method while its step list is being built).
    STEP_LIST_KEY = "step_list"

    def step_list(self) -> list[dict]:
        """The Method tab's step list kept in the project ([] when none)."""
        v = self.recipe.extra.get(self.STEP_LIST_KEY)
        return [dict(x) for x in v] if isinstance(v, list) else []

    def set_step_list(self, steps: list[dict]) -> None:
        """Keep the step list in the project (saved with it); observers are told."""
        steps = [dict(x) for x in steps]
        if steps != self.step_list():
            # [] rather than no key: saving keeps the keys of the old file the recipe lacks
            self.recipe.extra[self.STEP_LIST_KEY] = steps
            self.mark_dirty()
        self.sig_recipe_changed.emit()

    def set_params(self, params: dict) -> None:
        """Replace the method's parameters."""
        params = _current_params(params)
        if params == self.recipe.params:
            return
        self.recipe.params = params
        self.sig_recipe_changed.emit()
        self.mark_dirty()

    def update_params(self, **params: Any) -> None:
        """Change some parameters, keep the others."""
        self.set_params({**self.recipe.params, **params})

    def set_seed(self, seed: int, *, pinned: bool | None = True) -> None:
        """Use ``seed`` (any width; negative or non-integer refused).  A seed the user types
        is pinned (reused by every run); ``pinned=None`` keeps the current pinning.
        """
        seed = parse_seed(seed)
        r = self.recipe
        pin = r.seed_pinned if pinned is None else bool(pinned)
        if seed == r.seed and pin == r.seed_pinned:
            return
        if seed != r.seed:
            r.seed_releases = []
        r.seed, r.seed_pinned = seed, pin
        self.sig_recipe_changed.emit()
        self.mark_dirty()

    def set_seed_pinned(self, pinned: bool) -> None:
        self.set_seed(self.recipe.seed, pinned=pinned)

    def new_seed(self) -> int:
        """Draw a fresh seed from OS entropy, not pinned (the app's "New" button): every run
        draws a fresh one again until the user pins one.
        """
        self.set_seed(fresh_seed(), pinned=False)
        return self.recipe.seed

    def run_seed(self) -> int:
        """The seed for a new Protect run: the pinned one, else a fresh one from OS entropy
        (two releases of the same data never share noise).
        """
        return self.recipe.seed if self.recipe.seed_pinned else fresh_seed()

    def record_run_seed(self, seed: int) -> None:
        """The run that made the current release used ``seed``: the project records it."""
        self.set_seed(seed, pinned=None)

    def note_export(self, release_digest: str) -> bool:
        """Record that the release with ``release_digest`` was exported with the current seed.
        True when the seed is pinned and was already used for a *different* exported release
        (the two share noise: the caller warns).
        """
        r = self.recipe
        reused = bool(r.seed_pinned and r.seed_releases and release_digest not in r.seed_releases)
        if release_digest not in r.seed_releases:
            r.seed_releases.append(release_digest)
            self.mark_dirty()
        return reused

    def set_sweep(self, **settings: Any) -> None:
        """The sweep settings: ``ks`` and ``epsilons`` (grid text), ``repeats`` (int)."""
        new = {**self.recipe.sweep, **settings}
        if new == self.recipe.sweep:
            return
        self.recipe.sweep = new
        self.sig_sweep_changed.emit()
        self.mark_dirty()

    def set_input_error(self, key: str, message: str | None) -> None:
        """A field (``key``) holds text that is not a value (``message``) or is fine again
        (``None``); runs are refused while any is set.
        """
        if (self.input_errors.get(key) or None) == (message or None):
            return
        if message:
            self.input_errors[key] = message
        else:
            self.input_errors.pop(key, None)
        self.sig_input_errors_changed.emit()

    def input_error(self) -> str:
        """The first invalid field's message ('' when every field is valid)."""
        return next(iter(self.input_errors.values()), "")

    def sweep_request(self) -> dict:
        """The sweep settings parsed: ``ks``, ``epsilons``, ``repeats`` (ValueError with a
        readable message naming the field).
        """
        from dpstudio.engine.sweeps import parse_grid

        sw = self.recipe.sweep
        try:
            ks = parse_grid(str(sw.get("ks", "")), integer=True, what="")
        except ValueError as exc:
            raise ValueError(f"k values: {exc}") from None
        try:
            eps = parse_grid(str(sw.get("epsilons", "")), what="")
        except ValueError as exc:
            raise ValueError(f"ε values: {exc}") from None
        if not ks:
            raise ValueError("Give at least one k value.")
        n = len(self.df) if self.df is not None else 0
        ks = [k for k in ks if k >= 1 and (n == 0 or k <= n // 2)]
        if not ks:
            raise ValueError(f"No k value in 1 … n/2 = {n // 2}.")
        if any(e <= 0 for e in eps):
            raise ValueError("ε values must be positive.")
        return {"ks": ks, "epsilons": eps or [1.0], "repeats": int(sw.get("repeats", 1))}

    def active_precision(self) -> dict[str, float]:
        """Precisions of columns the engine may protect."""
        return {
            c: g
            for c, g in self.precision.items()
            if self.roles.get(c, "other") not in ("other", "identifier")
        }

    # --- query desk (issue 14): the data set's budget ledger is a file of its own (written at
    # each answer); the project only names it (engine ``query_ledger.PROJECT_KEY``)
    def query_ledger_file(self) -> str | None:
        """The ledger file the user chose for this data set (saved in the project), or None."""
        from dpstudio.engine.query.ledger import PROJECT_KEY

        v = self.recipe.extra.get(PROJECT_KEY)
        return v if isinstance(v, str) and v else None

    def set_query_ledger_file(self, path: str | None) -> None:
        from dpstudio.engine.query.ledger import PROJECT_KEY

        if path:
            self.recipe.extra[PROJECT_KEY] = str(path)
        else:
            self.recipe.extra.pop(PROJECT_KEY, None)
        self.sig_query_ledger_changed.emit()
        self.mark_dirty()

    def legacy_query_ledger(self) -> dict | None:
        """A ledger an older project held inside (moved to its own file by the query desk)."""
        from dpstudio.engine.query.ledger import LEGACY_PROJECT_KEY

        return self.recipe.extra.get(LEGACY_PROJECT_KEY)

    def drop_legacy_query_ledger(self) -> None:
        from dpstudio.engine.query.ledger import LEGACY_PROJECT_KEY

        if self.recipe.extra.pop(LEGACY_PROJECT_KEY, None) is not None:
            self.mark_dirty()

    def applicability(self, method: str | None) -> str:
        """Why ``method`` cannot run on the current roles and types ('' when it can); in sample
        mode (issue 12) also the engine's reason when it does not run on Dask.
        """
        if self.df is None or not method:
            return ""
        from dpstudio.engine import check_applicable

        try:
            check_applicable(self.df, method, self.active_roles(), self.types or None)
        except DPStudioError as exc:
            return str(exc)
        if self.sample_of:
            from dpstudio.app.large_file import dask_refusal

            return dask_refusal(method, self.recipe.params if method == self.recipe.method else {})
        return ""

    def set_dask_release(self, release: dict | None) -> None:
        """Sample mode: the whole-file release just written on Dask."""
        self.dask_release = dict(release) if release else None
        self.sig_dask_release_changed.emit()

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
        return {
            c: b for c, b in self.domains.items() if self.roles.get(c, "other") not in ("other", "identifier")
        }

    def active_hierarchies(self) -> dict[str, Any]:
        return {
            c: h
            for c, h in self.hierarchies.items()
            if self.roles.get(c, "other") not in ("other", "identifier")
        }

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


def _same_settings(a: tuple | None, b: tuple) -> bool:
    if a is None:
        return False
    return a[4] is b[4] and a[:4] == b[:4] and a[5] == b[5]


class _ColumnsCommand(QUndoCommand):
    """One undo step: the changed columns' settings before and after."""

    def __init__(self, state: AppState, text: str, before: dict, after: dict) -> None:
        super().__init__(text)
        self.state, self.before, self.after = state, before, after
        self._done = True  # pushed after the change was made: the first redo() does nothing

    def redo(self) -> None:
        if self._done:
            self._done = False
            return
        self.state.apply_column_settings(self.after)

    def undo(self) -> None:
        self.state.apply_column_settings(self.before)
