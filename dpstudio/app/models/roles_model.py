"""The attributes table of step 2 as a model over :class:`~dpstudio.app.state.AppState`.

One row per column of the loaded table: name, role, type, declared domain, output precision,
hierarchy and the live check.  Nothing is held here but the column names and a cache of the
check messages: every cell is read from the state when the view asks for it (only the visible
rows are ever asked), and every edit goes to the state as one undo step.  A 40,000-column file
therefore costs a list of names, not 40,000 widgets (issue 15 "Freezes"); editors are created by
:class:`~dpstudio.app.widgets.roles_delegate.RolesDelegate` for the one cell being edited.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont

from dpstudio.app.state import AppState

ROLE_HELP = {
    "identifier": "Identifier: directly identifies a person (name, ID number, phone). Removed "
    "from every output.",
    "k-quasi": "k-quasi-identifier: could be linked with outside data (age, zip code…). "
    "Protected by the k-anonymity step (microaggregation or generalisation).",
    "eps-quasi": "ε-quasi-identifier: protected by differential-privacy noise (possibly after "
    "microaggregation). Needs a declared domain.",
    "confidential": "Confidential: the sensitive value (income, diagnosis). Kept as is unless "
    "the method protects it too.",
    "other": "Other: released unchanged and not used by the method.",
    "weight": "Sampling weight: released unchanged; the risk models use it (one column).",
    "household": "Household id: used for household risk; not released as is (one column).",
}
ROLE_LABELS = {
    "identifier": "Identifier",
    "k-quasi": "k-quasi-identifier",
    "eps-quasi": "ε-quasi-identifier",
    "confidential": "Confidential",
    "other": "Other",
    "weight": "Sampling weight",
    "household": "Household id",
}
TYPE_HELP = {
    "numeric": "numeric: the values are quantities; masked and measured as numbers (domain bounds apply).",
    "integer": "integer: whole-number quantities (counts, days a week, income bands used as numbers); "
    "noisy values are drawn on the grid of whole numbers (precision 1) and released as integers. "
    "A declaration: the engine never infers it from the values.",
    "categorical": "categorical (nominal): the values are labels or codes (sex = 1/2, region); "
    "numeric-only methods (MDAV, the noise methods) refuse them, so no code such as 1.5 is released.",
    "ordinal": "ordinal: ordered categories (education level); numeric-only methods refuse them.",
    "date": "date: calendar dates (a generated hierarchy is day → month → year → …).",
}
COLS = ["Column", "Role", "Type", "Lower bound", "Upper bound", "Precision", "Hierarchy", "Check"]
C_NAME, C_ROLE, C_TYPE, C_LO, C_HI, C_PREC, C_HIER, C_CHECK = range(8)
HEADER_TIPS = {
    C_ROLE: "What the attribute is: identifier, k-quasi, ε-quasi, confidential, other, sampling "
    "weight or household id. Double-click (or F2) to change; select several rows and use "
    "“Set role of selected” for many at once.",
    C_TYPE: "How the values are compared: numeric, integer, categorical, ordinal or date. Italic: "
    "the engine's suggestion from the data (whole numbers look integer, or categorical with at "
    "most 20 distinct values); it is NOT used until you choose a type, which the project "
    "stores. Numeric-only methods refuse categorical and ordinal columns.",
    C_LO: "Smallest value the attribute can take in the population (public knowledge, not this "
    "file's minimum).",
    C_HI: "Largest value the attribute can take in the population.",
    C_PREC: "Output precision γ of a noisy numeric attribute: noise is drawn on the grid of "
    "multiples of γ and the release carries no finer digits. Empty: the default (1 for columns "
    "whose type you chose integer, else about a millionth of the declared domain's width; "
    "never taken from the values, which would show in every released value).",
    C_HIER: "Generalisation hierarchy / taxonomy (for (k,ε)-anonymity and categorical methods): "
    "click to load an ARX CSV or generate one with the engine's generator.",
    C_CHECK: "Problems found with the current roles, types and domains.",
}
_BAD = QBrush(QColor("#fde2e1"))
_GREY = QBrush(QColor("#777777"))
_LEVEL_COLORS = {"error": "#b00020", "warning": "#8a5a00", "ok": "#2e7d32"}
_LEVEL_BRUSHES = {k: QBrush(QColor(v)) for k, v in _LEVEL_COLORS.items()}
_ITALIC = QFont()
_ITALIC.setItalic(True)
_EDITABLE = (C_ROLE, C_TYPE, C_LO, C_HI, C_PREC)


class RolesModel(QAbstractTableModel):
    """The attributes table.  Reads :class:`AppState`; writes to it only through
    :meth:`setData` (one undo step per edit) and the panel's bulk actions.
    """

    sig_error = Signal(str)
    """An edit was refused (the message names the column and what to do)."""

    def __init__(self, state: AppState, parent: Any = None) -> None:
        super().__init__(parent)
        self.state = state
        self._names: list[str] = []
        self._rows: dict[str, int] = {}
        self._checks: dict[str, tuple[str, str]] = {}
        #: text typed in a bound / precision cell that is not (yet) a value: {(column, cell): text}
        self._pending: dict[tuple[str, int], str] = {}
        state.sig_data_changed.connect(self.reset)
        state.sig_roles_changed.connect(self.refresh)
        state.sig_recipe_changed.connect(self.refresh)  # the method decides what missing values mean
        self.reset()

    # --- Public API
    def reset(self) -> None:
        self.beginResetModel()
        df = self.state.df
        self._names = [str(c) for c in df.columns] if df is not None else []
        self._rows = {n: i for i, n in enumerate(self._names)}
        self._checks = {}
        self._pending = {}
        self.endResetModel()

    def refresh(self) -> None:
        """The state changed: drop cached checks, let the view re-read the visible cells."""
        self._checks = {}
        ie, doms = self.state.input_errors, self.state.domains
        for name, c in list(self._pending):  # the state has a value again (undo, a project)
            if c == C_PREC and not ie.get(f"precision:{name}"):
                del self._pending[(name, c)]
            elif c != C_PREC and not ie.get(f"bounds:{name}") and name in doms:
                del self._pending[(name, c)]
        if self._names:
            self.dataChanged.emit(self.index(0, 0), self.index(len(self._names) - 1, len(COLS) - 1))

    def names(self) -> list[str]:
        return list(self._names)

    def name(self, row: int) -> str:
        return self._names[row]

    def row_of(self, name: str) -> int:
        return self._rows.get(name, -1)

    def check(self, name: str) -> tuple[str, str]:
        """``(message, level)`` of the live check of ``name`` (cached until the state changes)."""
        if (name, C_LO) in self._pending or (name, C_HI) in self._pending:
            if self.state.input_errors.get(f"bounds:{name}"):
                return "bounds must be numbers", "error"
        c = self._checks.get(name)
        if c is None:
            c = self._checks[name] = check_column(self.state, name)
        return c

    def problems(self) -> int:
        """Columns whose check is an error (only columns with a role other than 'other' can be)."""
        st, cache = self.state, self._checks
        return sum(
            1
            for c, r in st.roles.items()
            if r != "other"
            and c in self._rows
            and (cache.get(c) or check_column(st, c, types=False))[1] == "error"
        )

    # --- Qt model API
    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: N802, B008
        return 0 if parent.isValid() else len(self._names)

    def columnCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: N802, B008
        return 0 if parent.isValid() else len(COLS)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:  # noqa: N802
        if orientation != Qt.Orientation.Horizontal:
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            return COLS[section]
        if role == Qt.ItemDataRole.ToolTipRole:
            return HEADER_TIPS.get(section)
        return None

    def flags(self, index: QModelIndex | QPersistentModelIndex) -> Qt.ItemFlag:
        f = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        c = index.column()
        if c in _EDITABLE:
            if c == C_PREC and not self._numeric(self._names[index.row()]):
                return f
            f |= Qt.ItemFlag.ItemIsEditable
        return f

    def data(
        self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if not index.isValid():
            return None
        name, c = self._names[index.row()], index.column()
        st = self.state
        D = Qt.ItemDataRole
        if role == D.DisplayRole:
            return self._display(name, c)
        if role == D.EditRole:
            if c == C_ROLE:
                return st.roles.get(name, "other")
            if c == C_TYPE:
                return st.column_type(name)[0]
            if c in (C_LO, C_HI, C_PREC):
                return self._cell_text(name, c)
            return self._display(name, c)
        if role == D.ToolTipRole:
            return self._tooltip(name, c)
        if role == D.FontRole:
            if c == C_TYPE and st.column_type(name)[1]:
                return _ITALIC
            if c == C_PREC and not self._cell_text(name, c) and self._numeric(name):
                return _ITALIC
            return None
        if role == D.ForegroundRole:
            if c == C_CHECK:
                return _LEVEL_BRUSHES.get(self.check(name)[1], _GREY)
            if c == C_TYPE and st.column_type(name)[1]:
                return _GREY
            if c == C_PREC and not self._cell_text(name, c):
                return _GREY
            if c == C_ROLE and st.roles.get(name, "other") == "other":
                return _GREY
            return None
        if role == D.BackgroundRole:
            if (name, c) in self._pending and self._is_bad(name, c):
                return _BAD
            return None
        if role == D.AccessibleTextRole:
            return self._display(name, c)
        return None

    def setData(
        self, index: QModelIndex | QPersistentModelIndex, value: Any, role: int = Qt.ItemDataRole.EditRole
    ) -> bool:  # noqa: N802
        if not index.isValid() or role != Qt.ItemDataRole.EditRole:
            return False
        name, c = self._names[index.row()], index.column()
        st = self.state
        from dpstudio import engine

        try:
            if c == C_ROLE:
                role_value = str(value)
                if st.roles.get(name) == role_value:
                    return True
                with st.undo_step(f"Role of {name}: {ROLE_LABELS.get(role_value, role_value)}"):
                    st.set_role(name, role_value)
                return True
            if c == C_TYPE:
                kind = None if value in (None, "") else str(value)
                if kind == st.types.get(name):
                    return True
                with st.undo_step(f"Type of {name}: {kind or 'suggested'}"):
                    st.set_type(name, kind)
                return True
            if c in (C_LO, C_HI):
                return self._set_bounds(name, c, str(value or ""))
            if c == C_PREC:
                return self._set_precision(name, str(value or ""))
        except engine.DPStudioError as exc:
            self.sig_error.emit(str(exc))
            self._emit_row(name)
            return False
        return False

    # --- Private
    def _emit_row(self, name: str) -> None:
        r = self._rows.get(name)
        if r is not None:
            self.dataChanged.emit(self.index(r, 0), self.index(r, len(COLS) - 1))

    def _numeric(self, name: str) -> bool:
        s = self.state.stats.get(name)
        return bool(s is not None and s.numeric)

    def _is_bad(self, name: str, c: int) -> bool:
        key = f"precision:{name}" if c == C_PREC else f"bounds:{name}"
        return bool(self.state.input_errors.get(key))

    def _cell_text(self, name: str, c: int) -> str:
        if (name, c) in self._pending:
            return self._pending[(name, c)]
        st = self.state
        if c in (C_LO, C_HI):
            dom = st.domains.get(name)
            return format_exact(dom[0 if c == C_LO else 1]) if dom else ""
        if c == C_PREC:
            return format_exact(st.precision.get(name))
        return ""

    def _display(self, name: str, c: int) -> str:
        st = self.state
        if c == C_NAME:
            return name
        if c == C_ROLE:
            return ROLE_LABELS.get(st.roles.get(name, "other"), "?") + "  ▾"
        if c == C_TYPE:
            t, _suggested = st.column_type(name)
            origin = st.type_origin(name)
            return (f"{t} ({origin})" if origin else t) + "  ▾"
        if c in (C_LO, C_HI):
            return self._cell_text(name, c)
        if c == C_PREC:
            t = self._cell_text(name, c)
            if t or not self._numeric(name):
                return t
            d = default_precision_of(st, name)
            return f"auto: {format_exact(d)}" if d else ""
        if c == C_HIER:
            h = st.hierarchies.get(name)
            return (f"{h.height} levels" if h is not None else "none") + "  ▾"
        if c == C_CHECK:
            return self.check(name)[0]
        return ""

    def _tooltip(self, name: str, c: int) -> str:
        st = self.state
        if c == C_NAME:
            meta = st.input_meta
            label = (getattr(meta, "column_labels", None) or {}).get(name)
            vl = value_labels_of(st, name)
            s = st.stats.get(name)
            tip = f"{name}" + (f": {label}" if label else "") + (f" (pandas {s.dtype})" if s else "")
            if vl:
                shown = list(vl.items())[:12]
                tip += "\nValue labels: " + ", ".join(f"{k} = {v}" for k, v in shown)
                tip += " …" if len(vl) > len(shown) else ""
            return tip
        if c == C_ROLE:
            return f"Role of {name}: " + ROLE_HELP.get(st.roles.get(name, "other"), "")
        if c == C_TYPE:
            t, suggested = st.column_type(name)
            s = st.stats.get(name)
            tip = (
                f"Type of {name}: "
                + TYPE_HELP[t]
                + (" This is the engine's suggestion; choose a type to make it yours." if suggested else "")
            )
            if s is not None and not s.numeric and s.minimum is not None:
                tip += (
                    f" Looks numeric: {s.non_numeric:,} cell(s) are not numbers."
                    if s.non_numeric
                    else " All values are numbers: choose numeric to mask and measure them as numbers."
                )
            return tip
        if c in (C_LO, C_HI):
            return (
                "Declared domain bound (public knowledge), kept exactly as typed. Type a number; "
                "leave both empty for no domain."
            )
        if c == C_PREC:
            return HEADER_TIPS[C_PREC]
        if c == C_HIER:
            h = st.hierarchies.get(name)
            src = st.hierarchy_sources.get(name) or {}
            if h is None:
                return f"Hierarchy of {name}: none. Click to load an ARX hierarchy CSV or generate one."
            where = src.get("path") or ("generated by the engine" if src.get("generated") else "")
            return f"Hierarchy of {name}: {h.height} levels, {len(h.leaves):,} leaves ({where}). Click to change."
        if c == C_CHECK:
            return self.check(name)[0]
        return ""

    def _set_bounds(self, name: str, c: int, text: str) -> bool:
        st = self.state
        self._pending[(name, c)] = text.strip()
        texts = [self._cell_text(name, C_LO).strip(), self._cell_text(name, C_HI).strip()]
        vals = [parse_exact(t) for t in texts]
        bad = [t != "" and v is None for t, v in zip(texts, vals)]
        if any(bad):
            st.set_input_error(
                f"bounds:{name}",
                f"The domain bounds of column {name!r} must be numbers (e.g. 0 and 150000). "
                f"Got {texts[bad.index(True)]!r}.",
            )
            self._checks.pop(name, None)
            self._emit_row(name)
            return True
        st.set_input_error(f"bounds:{name}", None)
        if texts == ["", ""]:
            self._pending.pop((name, C_LO), None)
            self._pending.pop((name, C_HI), None)
            if name in st.domains:
                with st.undo_step(f"Domain of {name}: none"):
                    st.set_domain(name, None)
        elif "" not in texts:
            self._pending.pop((name, C_LO), None)
            self._pending.pop((name, C_HI), None)
            new = (float(vals[0]), float(vals[1]))  # type: ignore[arg-type]
            if st.domains.get(name) != new:
                with st.undo_step(f"Domain of {name}: {texts[0]} … {texts[1]}"):
                    st.set_domain(name, new)
        self._emit_row(name)
        return True

    def _set_precision(self, name: str, text: str) -> bool:
        st = self.state
        t = text.strip()
        v = parse_exact(t)
        if t and (v is None or v <= 0):
            self._pending[(name, C_PREC)] = t
            st.set_input_error(
                f"precision:{name}",
                f"The precision of column {name!r} must be a number > 0 (e.g. 1, 0.01 or 100). Got {t!r}.",
            )
            self._emit_row(name)
            return True
        self._pending.pop((name, C_PREC), None)
        st.set_input_error(f"precision:{name}", None)
        new = v if t else None
        if st.precision.get(name) != new:
            with st.undo_step(f"Precision of {name}: {t or 'auto'}"):
                st.set_precision(name, new)
        self._emit_row(name)
        return True


# --------------------------------------------------------------------------- helpers


def value_labels_of(state: AppState, column: str) -> dict:
    """The SPSS/Stata value labels of ``column`` read with the file ({} when none, or while
    the labels are switched off).
    """
    vl = state.value_labels()
    return dict(vl.get(column) or {})


def label_of(labels: dict, value: Any) -> str | None:
    """The label of ``value`` (codes read as 1.0 match a label keyed 1, and the reverse)."""
    if value in labels:
        return str(labels[value])
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    for k, v in labels.items():
        try:
            if float(k) == f:
                return str(v)
        except (TypeError, ValueError):
            continue
    return None


def default_precision_of(state: AppState, name: str) -> float | None:
    """The engine's default γ for ``name`` (shown greyed in the empty cell): from the declared
    type and domain only, as the engine computes it (never the suggested type).
    """
    from dpstudio.engine.validation import default_precision

    s = state.stats.get(name)
    if s is None or not s.numeric:
        return None
    return default_precision(name, state.domains, state.types)


def missing_note(state: AppState, name: str, n: int) -> tuple[str, str]:
    """The live check's words for ``n`` missing values of ``name`` under the chosen method
    (issue 24 §4): a method that treats a missing key value as matching any value (local
    suppression, the sdcMicro way) keeps them -- a note; with 'drop records with missing
    values' ticked the records are left out -- a warning; a method that refuses them -- an
    error, with what to do in the app's words.
    """
    from dpstudio.engine.registry import get_method

    mid = state.recipe.method
    try:
        spec = get_method(mid) if mid else None
    except Exception:  # noqa: BLE001 - an unknown method id: no method yet
        spec = None
    if spec is not None and spec.missing_matches_any:
        return f"{n:,} missing: {spec.name} treats them as matching any value (as sdcMicro)", "info"
    if spec is not None and (state.recipe.params or {}).get("drop_missing"):
        return f"{n:,} missing: those records are left out of the release", "warning"
    what = spec.name if spec is not None else "most methods"
    return (
        f"{n:,} missing value(s): {what} cannot use them — tick 'drop records with missing "
        "values' (Method, Advanced parameters) or fill them in",
        "error" if spec is not None else "warning",
    )


def check_column(state: AppState, name: str, types: bool = True) -> tuple[str, str]:
    """The live check of one column: ``(message, level)``, level in '', info, ok, warning, error.

    ``types=False``: without the notes on the column's type (they are never errors, and the
    type suggestion reads the column: the problem count of a wide file skips them).
    """
    st = state
    role = st.roles.get(name, "other")
    s = st.stats[name]
    if role == "other":
        return "", ""
    if role == "identifier":
        return "removed from the release", "info"
    msgs = []
    level = "ok"
    if s.missing and role not in ("weight", "household"):
        m, lvl = missing_note(st, name, s.missing)
        msgs.append(m)
        level = lvl
    if s.non_numeric and s.numeric is False and s.minimum is not None:
        msgs.append(f"{s.non_numeric:,} non-numeric cell(s)")
        level = "error"
    dom = st.domains.get(name)
    kind, suggested = st.column_type(name) if types else (st.types.get(name, "numeric"), False)
    if dom is not None:
        lo, hi = dom
        if not lo < hi:
            msgs.append("lower bound must be below the upper bound")
            level = "error"
        elif s.minimum is not None and (s.minimum < lo or s.maximum > hi):  # type: ignore[operator]
            vals = pd.to_numeric(st.df[name], errors="coerce").to_numpy(dtype=float)
            nout = int(np.sum((vals < lo) | (vals > hi)))
            msgs.append(f"{nout:,} value(s) outside [{lo:g}, {hi:g}]")
            level = "error"
    elif s.numeric and kind == "numeric" and role in ("eps-quasi", "k-quasi", "confidential"):
        msgs.append("no domain (DP methods need one)")
        if level == "ok":
            level = "warning"
    if role in ("k-quasi", "eps-quasi") and types:
        if kind in ("categorical", "ordinal") and not suggested:
            msgs.append(f"typed {kind}: methods that average values do not apply")
        elif kind in ("categorical", "ordinal") and s.numeric:
            msgs.append(
                f"looks {kind} ({s.distinct} integer codes): type it {kind} if the codes are labels, "
                "or numeric if they are quantities"
            )
            if level == "ok":
                level = "warning"
        if not s.numeric and name not in st.hierarchies:
            msgs.append("text: needs a hierarchy or a categorical method")
            if level == "ok":
                level = "warning"
    return ("; ".join(msgs) if msgs else "OK"), level


def parse_exact(text: str) -> float | None:
    """The finite number typed (``None`` if it is not one).  Parsed to the nearest double, as
    the engine uses it, with no rounding to display digits.
    """
    t = text.strip().replace("_", "").replace(" ", "")
    if not t:
        return None
    try:
        v = float(t)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def format_exact(v: float | None) -> str:
    """``v`` in the shortest text that reads back as the same double (123456789 stays
    '123456789', 0.1 stays '0.1'; never rounded to 6 digits); '' for ``None``.
    """
    if v is None:
        return ""
    f = float(v)
    if f == int(f) and abs(f) < 1e16:
        return str(int(f))
    return repr(f)
