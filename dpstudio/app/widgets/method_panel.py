"""Step 3: choose a method (from the registry) and its parameters (a form built from Params)."""

from __future__ import annotations

import html
import sys
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QValidator
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QSlider,
    QSpinBox,
    QTextBrowser,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from dpstudio import engine
from dpstudio.app.state import AppState
from dpstudio.app.widgets.common import Banner, LogSlider
from dpstudio.app.widgets.help_dialog import guarantee_rich
from dpstudio.app.workers import TaskRunner
from dpstudio.engine.guarantee import Guarantee, GuaranteeContext
from dpstudio.engine.random import format_seed, parse_seed, seed_warning

ID_ROLE = Qt.ItemDataRole.UserRole

#: Shown under the guarantee when the records are not ε-DP (issue 8 §5).
REMEDY_TEXT = (
    "The records are not ε-DP as released. Remedies: give the other columns the role "
    "'identifier' (dropped from the release) or protect them too"
)
REMEDY_LAYOUT = (
    ", or set 'release layout' to 'Separate table per attribute' (each protected "
    "attribute in its own independently shuffled table: ε-DP by sequential "
    "composition; the other columns are then not released)."
)

SEED_EXPLANATION = (
    "Keep the seed secret: with it anyone removes the noise. It is stored "
    "only in the private project file. Unpinned, every Protect draws a fresh one."
)

#: The guarantee preview runs the engine's ``prepare`` (a copy of the table): debounced, in a
#: worker thread.
PREVIEW_DEBOUNCE_MS = 300


#: What an optional parameter's field shows when it is not set (empty = not given, as an option
#: left out on the command line).
UNSET_TEXT = "not set"
UNSET_TIP = " Empty (“not set”): not given, as when the option is left out on the command line."


class _OptionalSpinBox(QSpinBox):
    """A spin box whose minimum is the "not set" value; emptying the field sets it."""

    def validate(self, text: str, pos: int) -> object:
        if not text.strip():
            return (QValidator.State.Acceptable, text, pos)
        return super().validate(text, pos)

    def valueFromText(self, text: str) -> int:  # noqa: N802 - Qt naming
        if not text.strip() or text.strip() == self.specialValueText():
            return self.minimum()
        return super().valueFromText(text)


class _OptionalDoubleSpinBox(QDoubleSpinBox):
    """A double spin box whose minimum is the "not set" value; emptying the field sets it."""

    def validate(self, text: str, pos: int) -> object:
        if not text.strip():
            return (QValidator.State.Acceptable, text, pos)
        return super().validate(text, pos)

    def valueFromText(self, text: str) -> float:  # noqa: N802 - Qt naming
        if not text.strip() or text.strip() == self.specialValueText():
            return self.minimum()
        return super().valueFromText(text)


class SeedEdit(QLineEdit):
    """The secret seed of any width, as ``0x…`` hex or decimal text (a QSpinBox holds only
    31 bits).  Hidden like a password unless "Show" is on.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("seed")
        self.setEchoMode(QLineEdit.EchoMode.Password)
        self.setPlaceholderText("0x… (hex) or decimal")
        self.setToolTip(
            "Random seed (secret): the same seed, data and settings give the same "
            "release. Hex (0x…) or decimal, any width; 128 random bits by default. "
            + SEED_EXPLANATION
            + " Never reuse a pinned seed for another "
            "release."
        )

    def value(self) -> int | None:
        """The seed typed in, or None when the text is not a seed."""
        try:
            return parse_seed(self.text())
        except engine.DPStudioError:
            return None

    def setValue(self, seed: int) -> None:  # noqa: N802 - Qt naming, as QSpinBox
        self.setText(format_seed(parse_seed(seed)))


def wipe_risks_of(spec, df, roles: dict, checked: dict, hierarchies) -> list[dict]:
    """:func:`dpstudio.engine.transformation.wipe_risks` for a full-domain generalisation
    (OLA) of the k-quasis; nothing for other methods (Mondrian cuts record by record).
    """
    if not getattr(spec, "generalises", False) or (checked.get("algorithm") or "ola") != "ola":
        return []
    kq = [c for c, r in roles.items() if r == "k-quasi"]
    if not kq or "k" not in checked:
        return []
    from dpstudio.engine.transformation import wipe_risks

    sup = checked.get("suppression")
    return wipe_risks(
        df, kq, k=int(checked["k"]), suppression=0.05 if sup is None else float(sup), hierarchies=hierarchies
    )


def list_methods() -> list[dict]:
    """The registry's method descriptions."""
    from dpstudio.engine.api import methods

    return methods()


def _get_spec(method_id: str):
    from dpstudio.engine.registry import get_method

    return get_method(method_id)


def per_column_text(v: dict) -> str:
    """A per-column parameter's dict as the form's text: one ``COLUMN=TEXT`` per line."""
    return "\n".join(f"{c}={x}" for c, x in v.items())


def parse_per_column_text(text: str) -> dict[str, str] | None:
    """The form's text of a per-column parameter: one ``COLUMN=TEXT`` a line (split at the
    first ``=``; blank lines skipped; a line without ``=`` is a column without text, which the
    engine's check names).  Empty: None (not given).
    """
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        col, _, rest = line.partition("=")
        out[col.strip()] = rest.strip()
    return out or None


class ParamField(QWidget):
    """One parameter editor generated from a registry Param dict."""

    changed = Signal()

    def __init__(self, p: dict, n_records: int = 0, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.p = p
        self.name = p["name"]
        self.kind = p["kind"]
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        tip = p.get("help", "")
        lo, hi = p.get("minimum"), p.get("maximum")
        self.warning = QLabel()
        self.warning.setWordWrap(True)
        self.warning.setStyleSheet("color:#8a5a00;")
        self.warning.hide()
        self.editor: QWidget
        self.slider: QSlider | None = None
        self.optional = False
        if self.kind == "int":
            self.optional = p["default"] is None
            sb = _OptionalSpinBox() if self.optional else QSpinBox()
            sb.setObjectName(f"param_{self.name}")
            low = int(lo) if lo is not None else -(10**9)
            if lo is not None and not p.get("min_inclusive", True):
                low += 1
            high = int(hi) if hi is not None else 10**9
            self._int_limits = (low, high)
            if self.name == "k" and n_records >= 4:
                high = min(high, n_records // 2)
            # an optional int (default None, e.g. t-close-dp's k: "leave empty to use l") gets
            # an "auto" entry below its minimum, so it can be left unset instead of sending
            # the minimum (t-close-dp then failed with k = 1 < b); emptying the field sets it
            if self.optional:
                sb.setRange(low - 1, high)
                sb.setSpecialValueText("auto")
                sb.setValue(low - 1)
                tip = (tip + " " if tip else "") + "Empty (“auto”): not set (the method decides)."
            else:
                sb.setRange(low, high)
                sb.setValue(int(p["default"]))
            sb.valueChanged.connect(self.changed)
            lay.addWidget(sb)
            self.editor = sb
            if self.name == "k":
                sl = QSlider(Qt.Orientation.Horizontal)
                sl.setRange(max(low, 1), max(min(high, 200), max(low, 1) + 1))
                sl.setValue(sb.value())
                sl.setToolTip(tip)
                sl.valueChanged.connect(sb.setValue)
                sb.valueChanged.connect(
                    lambda v, sl=sl: (sl.blockSignals(True), sl.setValue(v), sl.blockSignals(False))
                )
                lay.addWidget(sl, 1)
                self.slider = sl
        elif self.kind == "float":
            # an optional float (default None, e.g. k-eps's confidence c: "empty = off") gets a
            # "not set" entry one step below its minimum, like the optional int: the form sent
            # the minimum before, so every GUI k-eps release was c-confident (issue 11 #5)
            self.optional = p["default"] is None
            sb = _OptionalDoubleSpinBox() if self.optional else QDoubleSpinBox()
            sb.setObjectName(f"param_{self.name}")
            sb.setDecimals(4)
            low = float(lo) if lo is not None else -1e12
            if lo is not None and not p.get("min_inclusive", True):
                low = low + (1e-4 if p.get("log_scale") else 1e-4)
            high = float(hi) if hi is not None else 1e12
            if self.optional:
                sb.setRange(low - 1e-4, high)
                sb.setSpecialValueText(UNSET_TEXT)
                sb.setValue(low - 1e-4)
                tip = (tip + " " if tip else "") + UNSET_TIP.strip()
            else:
                sb.setRange(low, high)
                sb.setValue(float(p["default"]))
            if p.get("log_scale"):
                sb.setStepType(QDoubleSpinBox.StepType.AdaptiveDecimalStepType)
            sb.valueChanged.connect(self.changed)
            lay.addWidget(sb)
            self.editor = sb
            if p.get("log_scale"):
                sl = LogSlider(1e-3, 100.0)
                sl.setToolTip(tip + " (log scale: 0.001 … 100)")
                sl.set_float_value(sb.value())
                sl.valueChangedFloat.connect(lambda v, sb=sb: sb.setValue(float(f"{v:.3g}")))
                sb.valueChanged.connect(sl.set_float_value)
                lay.addWidget(sl, 1)
                self.slider = sl
        elif self.kind == "choice":
            cb = QComboBox()
            cb.setObjectName(f"param_{self.name}")
            labels = p.get("choice_labels") or {}
            for i, c in enumerate(p.get("choices") or []):
                cb.addItem(str(labels.get(c, c)), c)
                w = (p.get("warning") or {}).get(c)
                if w:
                    cb.setItemData(i, w, Qt.ItemDataRole.ToolTipRole)
            i = cb.findData(p["default"])
            cb.setCurrentIndex(max(i, 0))
            cb.currentIndexChanged.connect(self._update_warning)
            cb.currentIndexChanged.connect(self.changed)
            lay.addWidget(cb, 1)
            self.editor = cb
        elif self.kind == "bool":
            ch = QCheckBox()
            ch.setObjectName(f"param_{self.name}")
            ch.setChecked(bool(p["default"]))
            ch.toggled.connect(self.changed)
            lay.addWidget(ch)
            lay.addStretch(1)
            self.editor = ch
        elif self.kind == "per-column":
            # one line per column: COLUMN=TEXT in the parameter's own grammar (a line, not a
            # separator: breaks and merges hold commas)
            te = QPlainTextEdit()
            te.setObjectName(f"param_{self.name}")
            te.setPlaceholderText(f"one column per line: COLUMN={p.get('item_help') or 'TEXT'}")
            te.setTabChangesFocus(True)
            te.setFixedHeight(3 * te.fontMetrics().lineSpacing() + 14)  # three lines
            if isinstance(p["default"], dict):
                te.setPlainText(per_column_text(p["default"]))
            te.textChanged.connect(self.changed)
            lay.addWidget(te, 1)
            self.editor = te
        else:  # mapping / str
            le = QLineEdit()
            le.setObjectName(f"param_{self.name}")
            if self.kind == "mapping":
                le.setPlaceholderText("column=value; column=value")
                if isinstance(p["default"], dict):
                    le.setText("; ".join(f"{k}={v}" for k, v in p["default"].items()))
            elif p["default"] is not None:
                le.setText(str(p["default"]))
            le.editingFinished.connect(self.changed)
            lay.addWidget(le, 1)
            self.editor = le
        self.editor.setToolTip(tip)
        self.setToolTip(tip)
        self._update_warning()

    def set_n_records(self, n_records: int) -> None:
        """Follow a new file's number of records in place (k ≤ n / 2): the form is not
        rebuilt when a file is opened (issue 27.4, the rebuild stalled the window).
        """
        if self.name != "k" or self.kind != "int" or self.optional:
            return
        low, high = self._int_limits
        if n_records >= 4:
            high = min(high, n_records // 2)
        sb = self.editor
        assert isinstance(sb, QSpinBox)
        sb.setRange(low, high)
        if self.slider is not None:
            self.slider.setRange(max(low, 1), max(min(high, 200), max(low, 1) + 1))

    def _update_warning(self) -> None:
        if self.kind != "choice":
            return
        w = (self.p.get("warning") or {}).get(self.editor.currentData())
        self.warning.setText("⚠ " + w if w else "")
        self.warning.setVisible(bool(w))

    def value(self) -> Any:
        e = self.editor
        if self.kind == "int":
            if self.optional and e.value() == e.minimum():
                return None
            return int(e.value())
        if self.kind == "float":
            if self.optional and e.value() == e.minimum():
                return None
            return float(e.value())
        if self.kind == "choice":
            return e.currentData()
        if self.kind == "bool":
            return bool(e.isChecked())
        if self.kind == "per-column":
            return parse_per_column_text(e.toPlainText())
        text = e.text().strip()
        if self.kind == "mapping":
            if not text:
                return None
            out: dict[str, Any] = {}
            for part in text.replace(",", ";").split(";"):
                if "=" in part:
                    k, v = part.split("=", 1)
                    try:
                        out[k.strip()] = float(v)
                    except ValueError:
                        out[k.strip()] = v.strip()
            return out
        return text or None

    def set_value(self, v: Any) -> None:
        e = self.editor
        if v is None:
            if self.kind in ("int", "float") and self.optional:
                e.setValue(e.minimum())
            return
        if self.kind == "int":
            e.setValue(int(v))
        elif self.kind == "float":
            e.setValue(float(v))
        elif self.kind == "choice":
            i = e.findData(v)
            if i >= 0:
                e.setCurrentIndex(i)
        elif self.kind == "bool":
            e.setChecked(bool(v))
        elif self.kind == "mapping" and isinstance(v, dict):
            e.setText("; ".join(f"{k}={x}" for k, x in v.items()))
            self.changed.emit()
        elif self.kind == "per-column":
            if isinstance(v, dict) and parse_per_column_text(e.toPlainText()) != {
                str(c): str(x) for c, x in v.items()
            }:
                e.setPlainText(per_column_text(v))  # (emits changed through textChanged)
        else:
            e.setText(str(v))
            self.changed.emit()


class MethodPanel(QWidget):
    """The method list and its parameter form.  Edits go to ``state.recipe`` (method,
    params, seed); the form shows ``state.recipe`` (it observes ``sig_recipe_changed``).
    """

    sig_protect_requested = Signal()
    """The user asked to run the method with the current parameters."""
    sig_guarantee_changed = Signal(str)
    #: a column to build a hierarchy for (the pre-run warning's link, issue 24 §1)
    sig_build_hierarchy = Signal(str)
    """The guarantee sentence shown changed (the release's own once computed on the data)."""

    def __init__(self, state: AppState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        self.fields: dict[str, ParamField] = {}
        self._form_method: str | None = None  # the method whose form is built
        self._methods = {m["id"]: m for m in list_methods()}
        self._loading = False
        self.guarantee_text = ""
        self.preview_runner = TaskRunner("preview", self)
        self._preview_timer = QTimer(self)
        self._preview_timer.setSingleShot(True)
        self._preview_timer.setInterval(PREVIEW_DEBOUNCE_MS)
        self._preview_timer.timeout.connect(self._start_preview)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        self.list = QListWidget()
        self.list.setObjectName("method_list")
        self.list.setMinimumHeight(120)
        self.list.setMaximumHeight(240)
        # long method names wrap instead of needing a horizontal scroll bar (issue 11 #10)
        self.list.setWordWrap(True)
        self.list.setTextElideMode(Qt.TextElideMode.ElideNone)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setResizeMode(QListWidget.ResizeMode.Adjust)
        self.list.currentItemChanged.connect(self._on_list_current_changed)
        #: until the user picks a method, the panel moves to an applicable one (issue 11)
        self._auto_method = True
        self.list.itemClicked.connect(self._on_list_clicked)
        lay.addWidget(QLabel("<b>Method</b>"))
        lay.addWidget(self.list)
        self.info = QTextBrowser()
        self.info.setOpenExternalLinks(True)
        self.info.setMinimumHeight(90)
        self.info.setMaximumHeight(170)
        lay.addWidget(self.info)
        self.applicable = Banner(self, closable=False)
        lay.addWidget(self.applicable)
        self.param_error = Banner(self, closable=False)
        lay.addWidget(self.param_error)
        self.missing_banner = Banner(self, closable=False)
        self.missing_banner.setObjectName("missing_banner")
        lay.addWidget(self.missing_banner)
        # issue 24 §1: before a run, the k-quasis that will be (or may be) wiped to '*'
        self.wipe_banner = Banner(self, closable=True)
        self.wipe_banner.setObjectName("wipe_banner")
        self.wipe_banner.label.setTextFormat(Qt.TextFormat.RichText)
        self.wipe_banner.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
        self.wipe_banner.label.linkActivated.connect(self._on_wipe_link)
        lay.addWidget(self.wipe_banner)
        self.form_box = QGroupBox("Parameters")
        self.form = QFormLayout(self.form_box)
        self.form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        lay.addWidget(self.form_box)
        self.adv_btn = QToolButton()
        self.adv_btn.setText("▸ Advanced parameters")
        self.adv_btn.setCheckable(True)
        self.adv_btn.setAutoRaise(True)
        self.adv_btn.toggled.connect(self._on_adv_toggled)
        lay.addWidget(self.adv_btn)
        self.adv_box = QGroupBox()
        self.adv_form = QFormLayout(self.adv_box)
        self.adv_box.hide()
        lay.addWidget(self.adv_box)
        self._build_seed_row(lay)
        self.protect_btn = QPushButton("▶  Protect with these parameters")
        self.protect_btn.setObjectName("protect_button")
        self.protect_btn.setToolTip("Run the method on the whole file (Ctrl+R).")
        self.protect_btn.clicked.connect(self.sig_protect_requested)
        self.protect_btn.setMinimumHeight(32)
        lay.addWidget(self.protect_btn)
        lay.addStretch(1)
        self._fill_list()
        state.sig_roles_changed.connect(self.update_applicability)
        state.sig_roles_changed.connect(self._update_info)
        state.sig_input_errors_changed.connect(self._update_seed_msg)
        state.sig_data_changed.connect(self._on_state_data_changed)
        state.sig_recipe_changed.connect(self._on_state_recipe_changed)
        if self.state.recipe.method is None and self.list.count():
            self._select(self._default_method())

    # --- Public API
    def current_method(self) -> str | None:
        it = self.list.currentItem()
        return it.data(ID_ROLE) if it is not None else None

    def select_method(self, method_id: str | None) -> bool:
        """Choose ``method_id`` (a choice: the panel no longer moves to another method)."""
        self._auto_method = False
        return self._select(method_id)

    def _select(self, method_id: str | None) -> bool:
        for i in range(self.list.count()):
            it = self.list.item(i)
            if it.data(ID_ROLE) == method_id:
                self.list.setCurrentItem(it)
                return True
        return False

    def values(self) -> dict:
        """The method's parameters: the state's recipe (the form shows them)."""
        return dict(self.state.recipe.params)

    def set_values(self, params: dict) -> None:
        """Change some parameters of the current method (written to the state; the form
        follows).
        """
        self.state.update_params(**{n: v for n, v in params.items() if n in self.fields})

    def protected_columns(self, method_id: str | None = None) -> list[str]:
        """The columns the method would change under the current roles (data order)."""
        m = self.method_info(method_id)
        if not m or self.state.df is None:
            return []
        protects = set(m.get("protects") or [])
        return [c for c, r in self.state.roles.items() if r in protects]

    def method_info(self, method_id: str | None = None) -> dict | None:
        return self._methods.get(method_id or self.current_method() or "")

    def applicability_error(self) -> str:
        return self.applicable.text()

    def refresh_methods(self) -> None:
        self._methods = {m["id"]: m for m in list_methods()}
        cur = self.current_method()
        self._fill_list()
        self._select(cur or self._default_method())

    # --- Internals
    def _default_method(self) -> str | None:
        return next(
            (mid for mid, m in self._methods.items() if m.get("recommended")), next(iter(self._methods), None)
        )

    def _fill_list(self) -> None:
        self.list.blockSignals(True)
        self.list.clear()
        fam = None
        families = list(dict.fromkeys(m["family"] for m in self._methods.values()))
        ordered = sorted(self._methods.values(), key=lambda m: families.index(m["family"]))
        for m in ordered:
            if m["family"] != fam:
                fam = m["family"]
                h = QListWidgetItem(str(fam).upper())
                h.setFlags(Qt.ItemFlag.NoItemFlags)
                f = h.font()
                f.setBold(True)
                f.setPointSizeF(f.pointSizeF() * 0.85)
                h.setFont(f)
                self.list.addItem(h)
            it = QListWidgetItem("   " + m["name"])
            it.setData(ID_ROLE, m["id"])
            it.setToolTip(m["description"])
            self.list.addItem(it)
        self.list.blockSignals(False)
        if not self._methods:
            self.info.setHtml("<i>No protection method is registered in the engine.</i>")

    def _on_list_current_changed(self, cur, _prev) -> None:
        if cur is None or cur.data(ID_ROLE) is None:
            return
        mid = cur.data(ID_ROLE)
        self._build_form(mid)
        if not self._loading:
            self.state.set_method(mid, self._form_values())
        self.update_applicability()
        self._update_info()

    def _form_values(self) -> dict:
        return {n: f.value() for n, f in self.fields.items()}

    def _show_params(self, params: dict) -> None:
        """Put ``params`` into the form without writing back."""
        self._loading = True
        try:
            for n, v in params.items():
                if n in self.fields:
                    self.fields[n].set_value(v)
        finally:
            self._loading = False

    def _build_form(self, mid: str) -> None:
        for form in (self.form, self.adv_form):
            while form.rowCount():
                form.removeRow(0)
        self.fields = {}
        self._form_method = mid
        m = self._methods[mid]
        n = len(self.state.df) if self.state.df is not None else 0
        n_adv = 0
        for p in m["params"]:
            f = ParamField(p, n_records=n)
            f.changed.connect(self._on_params_changed)
            label = QLabel(p.get("label") or p["name"])
            label.setToolTip(p.get("help", ""))
            label.setBuddy(f.editor)
            target = self.adv_form if p.get("advanced") else self.form
            n_adv += bool(p.get("advanced"))
            target.addRow(label, f)
            target.addRow("", f.warning)
            self.fields[p["name"]] = f
        self.adv_btn.setVisible(n_adv > 0)
        self.form_box.setVisible(len(self.fields) - n_adv > 0)

    def _on_adv_toggled(self, on: bool) -> None:
        self.adv_box.setVisible(on)
        self.adv_btn.setText(("▾" if on else "▸") + " Advanced parameters")

    def _on_params_changed(self) -> None:
        if self._loading:
            return
        self.state.set_params(self._form_values())

    def _build_seed_row(self, lay) -> None:
        row = QHBoxLayout()
        self.seed = SeedEdit()
        self.seed.textChanged.connect(self._on_seed_text)
        self.seed_new = QPushButton("New")
        self.seed_new.setObjectName("seed_new")
        self.seed_new.setToolTip("Draw a new random seed (128 bits of the operating system's entropy).")
        self.seed_new.clicked.connect(self.new_seed)
        self.seed_show = QToolButton()
        self.seed_show.setText("Show")
        self.seed_show.setCheckable(True)
        self.seed_show.setToolTip("Show the seed (to note or pin it). Keep it secret.")
        self.seed_show.toggled.connect(
            lambda on: self.seed.setEchoMode(QLineEdit.EchoMode.Normal if on else QLineEdit.EchoMode.Password)
        )
        self.seed_pin = QCheckBox("Pin")
        self.seed_pin.setObjectName("seed_pin")
        self.seed_pin.setToolTip(
            "Pinned: every run uses this seed (to reproduce a release). "
            "Unpinned: every Protect draws a fresh seed from the operating "
            "system's entropy, so two releases never share noise; the "
            "project records the seed of the current release. Typing a "
            "seed pins it."
        )
        self.seed_pin.toggled.connect(self._on_pin_toggled)
        label = QLabel("Seed (secret):")
        label.setBuddy(self.seed)
        row.addWidget(label)
        row.addWidget(self.seed, 1)
        lay.addLayout(row)
        row2 = QHBoxLayout()  # a second line: the panel is narrow beside the plots
        row2.addWidget(self.seed_pin)
        row2.addStretch(1)
        row2.addWidget(self.seed_show)
        row2.addWidget(self.seed_new)
        lay.addLayout(row2)
        self.seed_explain = QLabel(SEED_EXPLANATION)
        self.seed_explain.setWordWrap(True)
        self.seed_explain.setStyleSheet("color:#555;")
        lay.addWidget(self.seed_explain)
        self.seed_msg = QLabel()
        self.seed_msg.setObjectName("seed_message")
        self.seed_msg.setWordWrap(True)
        self.seed_msg.hide()
        lay.addWidget(self.seed_msg)
        self._seed_note: tuple[int, str] | None = None
        self._sync_seed()

    def new_seed(self) -> None:
        """The "New" button: a fresh seed from OS entropy (unpinned)."""
        self.state.set_input_error("seed", None)
        self.state.new_seed()
        self._sync_seed()

    def _on_pin_toggled(self, on: bool) -> None:
        if not self._loading:
            self.state.set_seed_pinned(on)

    def seed_error(self) -> str:
        """Why the seed text is not a seed ('' when it is one)."""
        try:
            parse_seed(self.seed.text())
        except engine.DPStudioError as exc:
            return str(exc)
        return ""

    def seed_message(self) -> str:
        return self.seed_msg.text() if not self.seed_msg.isHidden() else ""

    def set_seed_note(self, note: str) -> None:
        """A note about the current seed (e.g. a loaded project's weak seed) shown until the
        seed changes.
        """
        self._seed_note = (self.state.recipe.seed, note) if note else None
        self._update_seed_msg()

    def _on_seed_text(self, text: str) -> None:
        if self._loading:
            return
        try:
            v = parse_seed(text)
        except engine.DPStudioError as exc:
            # the state keeps the last valid seed; runs are refused until the text is a seed
            self.state.set_input_error("seed", str(exc))
            self._update_seed_msg()
            return
        self.state.set_input_error("seed", None)
        self.state.set_seed(v)  # a typed seed is pinned
        self._update_seed_msg()

    def _sync_seed(self) -> None:
        """Show the state's seed (unless the field already holds it)."""
        self._loading = True
        try:
            if self.seed.value() != self.state.recipe.seed:
                self.seed.setValue(self.state.recipe.seed)
                self.state.set_input_error("seed", None)
            self.seed_pin.setChecked(bool(self.state.recipe.seed_pinned))
        finally:
            self._loading = False
        self._update_seed_msg()

    def _update_seed_msg(self) -> None:
        err = self.seed_error()
        seed = self.state.recipe.seed
        if err:
            text, color = err + " The last valid seed is kept.", "#b00020"
        elif self._seed_note and self._seed_note[0] == seed:
            text, color = "⚠ " + self._seed_note[1], "#8a5a00"
        else:
            w = seed_warning(seed)
            text, color = ("⚠ Weak seed: " + w + " Press New.") if w else "", "#8a5a00"
        self.seed_msg.setText(text)
        self.seed_msg.setStyleSheet(f"color:{color};")
        self.seed_msg.setVisible(bool(text))

    def _on_list_clicked(self, _item) -> None:
        self._auto_method = False

    def _on_state_data_changed(self) -> None:
        self._auto_method = True  # new data: show an applicable method first
        self._sync_seed()  # new data: a fresh seed
        mid = self.current_method()
        if mid:
            n = len(self.state.df) if self.state.df is not None else 0
            # the same form, every field given by the recipe: only k's limit follows the file
            # (the rebuild was a stall of its own when a large file was opened, issue 27.4)
            if self._form_method == mid and set(self.fields) <= set(self.state.recipe.params):
                for f in self.fields.values():
                    f.set_n_records(n)
            else:
                self._build_form(mid)  # limits depend on the number of records
            self._show_params(self.state.recipe.params)
            self._write_back_form()
        self.update_applicability()
        self._update_info()

    def _on_state_recipe_changed(self) -> None:
        r = self.state.recipe
        if r.method and r.method != self.current_method():
            self._auto_method = False  # chosen elsewhere (a project, a restore, the API)
            self._loading = True
            try:
                self._select(r.method)
            finally:
                self._loading = False
            self.update_applicability()
        self._show_params(r.params)
        self._write_back_form()
        self._sync_seed()
        self._update_info()

    def _write_back_form(self) -> None:
        """The form completes or clamps the recipe's parameters (defaults of missing ones,
        limits): the state gets what the form shows.
        """
        form = self._form_values()
        if self.current_method() == self.state.recipe.method and form != self.state.recipe.params:
            self.state.set_params(form)

    def _update_info(self) -> None:
        """Show the method and its guarantee: at once the sentence from the parameters and
        roles; then (debounced, in a worker: it runs the engine's ``prepare`` on the table)
        exactly the sentence the release will carry.
        """
        m = self.method_info()
        if not m:
            return
        guarantee = m["guarantee"]
        self.param_error.hide()
        self._show_missing()
        self._preview_timer.stop()
        self.preview_runner.cancel()
        try:
            spec = _get_spec(m["id"])
            checked = spec.check_params(self._form_values())
            cols = self.protected_columns()
            # the concrete sentence (names the columns, m, the per-attribute budget) once
            # columns have a role the method protects; the generic one before that
            guarantee = spec.describe(GuaranteeContext.of(checked, attributes=cols)).render()
            if cols and self.state.df is not None:
                from dpstudio.engine.api import preview_guarantee

                g = preview_guarantee(
                    list(self.state.df.columns), m["id"], self.state.active_roles(), **checked
                )
                self._show_info(m, g.render(), self._remedy(g, checked))
                self._preview_timer.start()
                return
        except engine.DPStudioError as exc:
            self.param_error.show_message(str(exc), "error")
        except Exception:  # noqa: BLE001 - fall back to the default sentence
            pass
        self._show_info(m, guarantee, "")

    def preview_pending(self) -> bool:
        """The release's own sentence is still being computed."""
        return self._preview_timer.isActive() or self.preview_runner.busy

    def _start_preview(self) -> None:
        st, m = self.state, self.method_info()
        if st.df is None or not m:
            return
        from dpstudio.engine.api import preview_guarantee

        df, mid, roles = st.df, m["id"], st.active_roles()
        domains, precision = st.active_domains(), st.active_precision()
        hierarchies = st.active_hierarchies() or None
        params = self._form_values()

        def work(_progress, _check_cancel):
            spec = _get_spec(mid)
            checked = spec.check_params(params)
            risks = wipe_risks_of(spec, df, roles, checked, hierarchies)
            g = preview_guarantee(
                list(df.columns),
                mid,
                roles,
                data=df,
                domains=domains,
                precision=precision or None,
                hierarchies=hierarchies,
                **checked,
            )
            return g, checked, risks

        def done(out):
            g, checked, risks = out
            self._show_info(m, g.render(), self._remedy(g, checked))
            self.show_wipe_risks(risks)

        def errored(msg, _details):
            self.param_error.show_message(msg.splitlines()[0], "error")

        self.preview_runner.start(work, finished=done, errored=errored)

    def _show_missing(self) -> None:
        """Before a run: the method refuses the missing values of its columns (issue 24 §4)."""
        from dpstudio.app.controller import missing_refused_message

        try:
            msg = missing_refused_message(self.state)
        except Exception:  # noqa: BLE001 - roles the method cannot take: said by applicability
            msg = ""
        if msg:
            self.missing_banner.show_message("⚠ " + msg, "error")
        else:
            self.missing_banner.hide()

    def show_wipe_risks(self, risks: list[dict]) -> None:
        """The pre-run warning: each k-quasi at risk of '*' in every record, with a link to
        build it a hierarchy.
        """
        if not risks:
            self.wipe_banner.hide()
            return
        lines = []
        for r in risks:
            col = html.escape(r["column"])
            lines.append(
                ("⚠ " if r["reason"] == "certain" else "• ")
                + html.escape(r["text"], quote=False)
                + f" <a href='build:{col}'>Build a hierarchy for {col}…</a>"
            )
        self.wipe_banner.show_message(
            "<br>".join(lines), "warning" if any(r["reason"] == "certain" for r in risks) else "info"
        )

    def _on_wipe_link(self, link: str) -> None:
        if link.startswith("build:"):
            self.sig_build_hierarchy.emit(link[len("build:") :])

    @staticmethod
    def _remedy(g: Guarantee, checked: dict) -> str:
        # scope first when columns released unchanged reveal the grouping (issue 8 §5): the
        # guarantee says so (it holds per attribute only, for reasons a remedy removes)
        if g.narrowed:
            return REMEDY_TEXT + (REMEDY_LAYOUT if "layout" in checked else ".")
        return ""

    def _show_info(self, m: dict, guarantee: str, remedy: str) -> None:
        paper = html.escape(m.get("paper") or "")
        self.info.setHtml(
            f"<b>{html.escape(m['name'])}</b> <span style='color:#777'>({m['id']})</span>"
            f"<p style='margin:4px 0'>{html.escape(m['description'])}</p>"
            f"<div style='margin:4px 0; color:#0b4f8a'><b>Guarantee:</b> {guarantee_rich(guarantee)}</div>"
            + (f"<p style='margin:4px 0; color:#8a5a00'>⚠ {html.escape(remedy)}</p>" if remedy else "")
            + (f"<p style='margin:4px 0; color:#666'><i>Paper:</i> {paper}</p>" if paper else "")
        )
        if guarantee != self.guarantee_text:
            self.guarantee_text = guarantee
            self.sig_guarantee_changed.emit(guarantee)

    def update_applicability(self) -> None:
        st = self.state
        mid = self.current_method()
        reason = ""
        if st.df is not None and mid:
            # with the user's column types: a numeric-only method on a column typed
            # categorical/ordinal is shown not applicable, with the engine's reason (issue 11);
            # a large file's sample mode: also the methods that do not run on Dask (issue 12)
            reason = st.applicability(mid)
        # mark every method in the list
        usable: list[str] = []
        for i in range(self.list.count()):
            it = self.list.item(i)
            oid = it.data(ID_ROLE)
            if oid is None:
                continue
            name = "   " + self._methods[oid]["name"]
            why = ""
            if st.df is not None:
                why = st.applicability(oid)
            if not why:
                usable.append(oid)
            it.setText(name + ("   (not applicable)" if why else ""))
            it.setForeground(Qt.GlobalColor.gray if why else Qt.GlobalColor.black)
            it.setToolTip(self._methods[oid]["description"] + (f"\n\nNot applicable: {why}" if why else ""))
        if reason and self._auto_method and st.df is not None and usable:
            # the user has not chosen yet: show the recommended method if it applies, else the
            # first applicable one in the list, instead of a 'not applicable' default
            rec = self._default_method()
            self._select(rec if rec in usable else usable[0])
            return
        if reason:
            self.applicable.show_message("Cannot run on the current roles: " + reason, "error")
        else:
            self.applicable.hide()
        self.protect_btn.setEnabled(st.df is not None and bool(mid) and not reason)
        self.protect_btn.setToolTip(
            "Run the method on the whole file (Ctrl+R)." + (f"\nNot possible: {reason}" if reason else "")
        )


if __name__ == "__main__":
    import pandas as pd
    from PySide6.QtWidgets import QApplication

    from dpstudio.app.resources import sample_path

    app = QApplication(sys.argv)
    st = AppState()
    st.set_data(pd.read_csv(sample_path()), str(sample_path()))
    w = MethodPanel(st)
    w.resize(420, 700)
    w.show()
    app.exec()
