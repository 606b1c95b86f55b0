"""The Risk view (issue 10): the re-identification risk of the loaded file at a glance, and
of the release next to it after a protection run.

Keys are the k-quasi-identifier columns, the sampling weight and the household id come from
their roles, the confidential columns get l-diversity.  Everything is computed by
:func:`dpstudio.engine.assess_risk` (sdcMicro's figures), off the UI thread and debounced,
whenever roles, types or data change; the release is assessed with the same keys and
sdcMicro's rule for missing key values (a missing value -- e.g. a suppressed one -- matches
any value), so a local-suppression release is judged as sdcMicro judges it.

ARX's prosecutor, journalist and marketer risk are listed with sdcMicro's figures.  SUDA2
(special uniques, sdcMicro's ``suda2``) runs on demand -- it can take long on many keys -- in a
worker thread with progress and cancel, and lists the records with the highest DIS scores and
their minimal sample uniques.

What is shown is computed from the original data: it is for the operator's eyes (and the
private assessment), never for a public file.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from dpstudio import engine
from dpstudio.app import turns
from dpstudio.app.state import AppState
from dpstudio.app.widgets.common import Banner
from dpstudio.app.workers import TaskRunner
from dpstudio.engine.measures.suda2 import suda2
from dpstudio.engine.measures.survey_risk import release_with_household_ids, write_per_record_risk

#: Roles changes are collected for this long before the risk is recomputed.
RISK_DEBOUNCE_MS = 300
#: How many of the riskiest key combinations are listed.
TOP_COMBINATIONS = 25
#: sdcApp's default threshold for "records with individual risk above".
DEFAULT_THRESHOLD = 0.05
#: The missing-value rule (sdcMicro's): a missing key value matches any value.
MISSING_RULE = "any"
#: How many records with the highest DIS scores SUDA2 lists.
TOP_SUDA_RECORDS = 50

ORIGINAL, RELEASE = "original", "release"


# --------------------------------------------------------------------------- pure helpers


@dataclass
class RiskSettings:
    """What :func:`dpstudio.engine.assess_risk` is called with (from the roles)."""

    keys: list[str]
    weight: str | None = None
    household: str | None = None
    sensitive: list[str] = field(default_factory=list)

    def kwargs(self) -> dict:
        return dict(
            weight=self.weight, household=self.household, sensitive=list(self.sensitive), missing=MISSING_RULE
        )


def risk_settings(roles: dict[str, str]) -> RiskSettings:
    """Keys = k-quasi-identifiers, weight / household = their (single) columns, sensitive =
    confidential.  Raises :class:`engine.ParameterError` with a one-line message otherwise.
    """

    def role_value(r: Any) -> str:
        return str(getattr(r, "value", r))

    by = {}
    for c, r in roles.items():
        by.setdefault(role_value(r), []).append(str(c))
    keys = by.get("k-quasi", [])
    if not keys:
        raise engine.ParameterError(
            "No key variables: give the categorical key variables (sex, age, region, …) the "
            "role k-quasi-identifier in the Attributes tab to see the file's risk."
        )
    single = {}
    for role, label in (("weight", "sampling weight"), ("household", "household id")):
        cols = by.get(role, [])
        if len(cols) > 1:
            raise engine.ParameterError(
                f"Only one column can be the {label}; marked: {', '.join(map(repr, cols))}. "
                "Give the others another role."
            )
        single[role] = cols[0] if cols else None
    return RiskSettings(
        keys=keys,
        weight=single["weight"],
        household=single["household"],
        sensitive=by.get("confidential", []),
    )


def riskiest_combinations(df: pd.DataFrame, report: Any, n: int = TOP_COMBINATIONS) -> pd.DataFrame:
    """The ``n`` key combinations with the highest individual risk: key values, ``records``
    (records with exactly these values), ``fk``, ``Fk``, ``risk``.  Records with the same key
    values (missing ones included) share ``fk``, ``Fk`` and the risk.
    """
    keys = list(report.keys)
    t = df[keys].copy().reset_index(drop=True)
    t["fk"] = np.asarray(report.fk)
    t["Fk"] = np.asarray(report.Fk, dtype=np.float64)
    t["risk"] = np.asarray(report.individual_risk, dtype=np.float64)
    g = t.groupby(keys, dropna=False, sort=False)
    out = g.first()
    out["records"] = g.size()
    out = out.reset_index()
    out = out.sort_values(["risk", "fk", "Fk"], ascending=[False, True, True], kind="stable")
    return out.head(n).reset_index(drop=True)[keys + ["records", "fk", "Fk", "risk"]]


def compute_risk(
    df: pd.DataFrame, settings: RiskSettings, release: pd.DataFrame | None = None, check_cancel=lambda: None
) -> dict:
    """Assess the original (and the release, with the same keys): the reports, the riskiest
    combinations and notes on what the release assessment could not use.
    """
    out: dict = {"settings": settings}
    rep = engine.assess_risk(df, settings.keys, **settings.kwargs())
    out[ORIGINAL] = rep
    out[ORIGINAL + "_top"] = riskiest_combinations(df, rep)
    check_cancel()
    if release is not None:
        notes = []
        gone = [k for k in settings.keys if k not in release.columns]
        if gone:
            out["release_error"] = (
                f"The release has no key column(s) {', '.join(gone)}: its "
                "risk cannot be compared with the same keys."
            )
            return out
        kw = settings.kwargs()
        if settings.weight and settings.weight not in release.columns:
            kw["weight"] = None
            notes.append(f"the weight {settings.weight} is not in the release: risk 1/f_k")
        if settings.household and settings.household not in release.columns:
            kw["household"] = None
            notes.append(f"the household id {settings.household} is not released: no household risk")
        elif settings.household and release.attrs.get("households_from_original"):
            notes.append(
                f"household risk: the released records grouped by their original households "
                f"({settings.household} itself is not released)"
            )
        kw["sensitive"] = [s for s in kw["sensitive"] if s in release.columns]
        rrep = engine.assess_risk(release, settings.keys, **kw)
        out[RELEASE] = rrep
        out[RELEASE + "_top"] = riskiest_combinations(release, rrep)
        out["release_notes"] = notes
    return out


def fmt_int(v: Any) -> str:
    return "–" if v is None else f"{int(v):,}"


def fmt_float(v: Any) -> str:
    """Four significant digits (as sdcApp shows them)."""
    return "–" if v is None else f"{float(v):.4g}"


def fmt_share(v: Any) -> str:
    return "–" if v is None else f"{float(v):.4g} ({100 * float(v):.2f} %)"


def figure_rows(rep: Any) -> list[tuple[str, str, str]]:
    """(key, label, text) rows of the figures table for one report."""
    s = rep.individual_risk_summary
    rows = [
        ("records", "Records", fmt_int(rep.records)),
        ("key_combinations", "Key combinations", fmt_int(rep.key_combinations)),
        ("sample_uniques", "Sample uniques (f_k = 1)", fmt_int(rep.sample_uniques)),
        ("records_fk_lt_2", "Records with f_k < 2", fmt_int(rep.records_fk_lt_2)),
        ("records_fk_lt_3", "Records with f_k < 3", fmt_int(rep.records_fk_lt_3)),
        ("records_fk_lt_5", "Records with f_k < 5", fmt_int(rep.records_fk_lt_5)),
        ("global_risk", "Global risk", fmt_share(rep.global_risk)),
        (
            "expected_reidentifications",
            "Expected re-identifications",
            fmt_float(rep.expected_reidentifications),
        ),
    ]
    if rep.household is not None:
        rows.append(
            (
                "household_expected_reidentifications",
                "Expected re-identifications (household)",
                fmt_float(rep.household_expected_reidentifications),
            )
        )
    for k, lab in (
        ("max", "maximum"),
        ("mean", "mean"),
        ("q50", "median"),
        ("q90", "90 % quantile"),
        ("q99", "99 % quantile"),
    ):
        rows.append((f"individual_risk.{k}", f"Individual risk, {lab}", fmt_float(s[k])))
    for col, d in rep.l_diversity.items():
        rows.append(
            (
                f"l_diversity.{col}.distinct_min",
                f"{col}: distinct l-diversity, minimum",
                fmt_int(d["distinct_min"]),
            )
        )
        rows.append((f"l_diversity.{col}.records_l1", f"{col}: records with l = 1", fmt_int(d["records_l1"])))
        rows.append(
            (
                f"l_diversity.{col}.entropy_min",
                f"{col}: entropy l-diversity, minimum",
                fmt_float(d["entropy_min"]),
            )
        )
    rows.extend(reid_rows(rep))
    return rows


def reid_rows(rep: Any) -> list[tuple[str, str, str]]:
    """(key, label, text) rows of ARX's prosecutor / journalist / marketer risk of a report."""
    m = rep.reid_models()
    t = m["threshold"]
    pop = "F_k from the weights" if rep.weight else "F_k = f_k, no weight"
    rows = []
    for model, name in (("prosecutor", "Prosecutor risk (ARX)"), ("journalist", f"Journalist risk ({pop})")):
        d = m[model]
        key = f"reidentification_models.{model}"
        rows += [
            (f"{key}.highest", f"{name}, highest", fmt_float(d["highest"])),
            (f"{key}.average", f"{name}, average", fmt_float(d["average"])),
            (
                f"{key}.share_above_threshold",
                f"{name}, records with risk > {t:g}",
                fmt_share(d["share_above_threshold"]),
            ),
        ]
    rows.append(
        (
            "reidentification_models.marketer.average",
            "Marketer risk (ARX), average",
            fmt_float(m["marketer"]["average"]),
        )
    )
    return rows


def msu_text(df: pd.DataFrame, record: int, msus: list[tuple[str, ...]], labels: dict | None = None) -> str:
    """The MSUs of ``record`` as ``AGE=34, SEX=2; …`` (value labels when the file has them)."""
    labels = labels or {}
    row = df.iloc[record]
    return "; ".join(", ".join(f"{k}={label_value(row[k], labels.get(k))}" for k in t) for t in msus)


def label_value(v: Any, labels: dict | None) -> str:
    """A key value as shown: ``code = label`` when the file has a value label for it;
    ``(missing)`` for a missing value (it matches any value).
    """
    if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA:
        return "(missing)"
    text = f"{v:g}" if isinstance(v, (float, np.floating)) else str(v)
    if labels:
        lab = labels.get(v)
        if lab is None:
            try:
                f = float(v)
                lab = labels.get(int(f)) if f == int(f) else None
                if lab is None:
                    lab = labels.get(f)
            except (TypeError, ValueError, OverflowError):
                lab = None
        if lab is not None:
            return f"{text} = {lab}"
    return text


# --------------------------------------------------------------------------- the panel


class RiskPanel(QWidget):
    """Risk figures, the individual-risk histogram and the riskiest key combinations of the
    loaded file (and of the release, side by side, after Protect).
    """

    sig_updated = Signal()
    """New figures are shown (or cleared)."""

    def __init__(self, state: AppState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        self.result: dict | None = None
        self.runner = TaskRunner("risk", self)
        self._timer = QTimer(self)
        self._draw_gen = 0  # a later _show or a clear drops the drawing left of an earlier one
        self._draw_due = False
        self._timer.setSingleShot(True)
        self._timer.setInterval(RISK_DEBOUNCE_MS)
        self._timer.timeout.connect(self._start)

        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 6, 6, 6)
        self.banner = Banner(self, closable=False)
        lay.addWidget(self.banner)
        self.settings_label = QLabel()
        self.settings_label.setObjectName("risk_settings")
        self.settings_label.setWordWrap(True)
        self.settings_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.settings_label)
        from dpstudio.app.widgets.common import labels_checkbox

        self.labels_cb = labels_checkbox(state, self)
        lay.addWidget(self.labels_cb)
        state.sig_labels_changed.connect(self._on_labels_toggled)
        row = QHBoxLayout()
        row.addWidget(QLabel("Records with individual risk >"))
        self.threshold = QDoubleSpinBox()
        self.threshold.setObjectName("risk_threshold")
        self.threshold.setDecimals(4)
        self.threshold.setRange(0.0, 1.0)
        self.threshold.setSingleStep(0.01)
        self.threshold.setValue(DEFAULT_THRESHOLD)
        self.threshold.setToolTip(
            "sdcApp's threshold: how many records have an individual re-identification risk above this value."
        )
        self.threshold.valueChanged.connect(self._update_threshold)
        row.addWidget(self.threshold)
        self.threshold_label = QLabel("–")
        self.threshold_label.setObjectName("risk_threshold_count")
        row.addWidget(self.threshold_label, 1)
        lay.addLayout(row)

        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setObjectName("risk_splitter")
        self.figures = QTableWidget(0, 3)
        self.figures.setObjectName("risk_figures")
        self.figures.setHorizontalHeaderLabels(["Measure", "Original", "Release"])
        self.figures.verticalHeader().setVisible(False)
        self.figures.verticalHeader().setDefaultSectionSize(22)
        self.figures.setWordWrap(False)
        self.figures.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        hh = self.figures.horizontalHeader()
        hh.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        hh.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        hh.setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        self.figures.setColumnHidden(2, True)
        left = QSplitter(Qt.Orientation.Vertical)
        left.addWidget(self.figures)
        left.addWidget(self._build_suda())
        left.setStretchFactor(0, 3)
        left.setStretchFactor(1, 2)
        self.splitter.addWidget(left)

        right = QSplitter(Qt.Orientation.Vertical)
        self.hist = pg.PlotWidget()
        self.hist.setObjectName("risk_histogram")
        self.hist.setBackground("w")
        self.hist.addLegend(offset=(-5, 5))
        self.hist.showGrid(x=True, y=True, alpha=0.2)
        self.hist.setLabel("bottom", "individual re-identification risk")
        self.hist.setLabel("left", "records")
        self.hist.setMinimumHeight(160)
        right.addWidget(self.hist)
        cw = QWidget()
        cl = QVBoxLayout(cw)
        cl.setContentsMargins(0, 0, 0, 0)
        crow = QHBoxLayout()
        crow.addWidget(QLabel("<b>Riskiest key combinations</b> of"))
        self.combo_source = QComboBox()
        self.combo_source.setObjectName("risk_combo_source")
        self.combo_source.addItem("the original", ORIGINAL)
        self.combo_source.currentIndexChanged.connect(lambda _i: self._fill_combinations())
        crow.addWidget(self.combo_source)
        crow.addStretch(1)
        self.export_button = QPushButton("Export per-record risk…")
        self.export_button.setObjectName("risk_export_per_record")
        self.export_button.setToolTip(
            "Write f_k, F_k and the individual (and household) risk of every record of the file "
            "chosen on the left to a CSV file — private, owner-only (0600): it is computed from "
            "the original records. Same file as `dpstudio risk … --per-record FILE`."
        )
        self.export_button.setEnabled(False)
        self.export_button.clicked.connect(self.export_dialog)
        crow.addWidget(self.export_button)
        cl.addLayout(crow)
        self.combos = QTableWidget(0, 0)
        self.combos.setObjectName("risk_combinations")
        self.combos.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.combos.verticalHeader().setVisible(False)
        self.combos.verticalHeader().setDefaultSectionSize(22)
        cl.addWidget(self.combos, 1)
        right.addWidget(cw)
        right.setStretchFactor(0, 1)
        right.setStretchFactor(1, 1)
        self.splitter.addWidget(right)
        self.splitter.setStretchFactor(0, 2)
        self.splitter.setStretchFactor(1, 3)
        self.splitter.setSizes([540, 620])
        lay.addWidget(self.splitter, 1)

        for sig in (state.sig_data_changed, state.sig_roles_changed, state.sig_result_changed):
            sig.connect(self.schedule)
        for sig in (state.sig_data_changed, state.sig_roles_changed):
            sig.connect(self.clear_suda)
        self._show_message(
            "Open a file and give the key variables the role k-quasi-identifier to see its risk.", "info"
        )
        if state.df is not None:
            self.schedule()

    def _build_suda(self) -> QWidget:
        box = QWidget()
        bl = QVBoxLayout(box)
        bl.setContentsMargins(0, 4, 0, 0)
        row = QHBoxLayout()
        row.addWidget(QLabel("<b>SUDA2</b> special uniques — DisFraction"))
        self.suda_fraction = QDoubleSpinBox()
        self.suda_fraction.setObjectName("suda_dis_fraction")
        self.suda_fraction.setDecimals(4)
        self.suda_fraction.setRange(0.0001, 0.9999)
        self.suda_fraction.setSingleStep(0.01)
        self.suda_fraction.setValue(0.01)
        self.suda_fraction.setToolTip(
            "Sampling fraction of the DIS score (sdcMicro's DisFraction, default 0.01)."
        )
        row.addWidget(self.suda_fraction)
        row.addWidget(QLabel("max MSU size"))
        self.suda_max_size = QSpinBox()
        self.suda_max_size.setObjectName("suda_max_size")
        self.suda_max_size.setRange(0, 62)
        self.suda_max_size.setSpecialValueText("all")
        self.suda_max_size.setToolTip(
            "Largest minimal sample unique searched ('all': every size, as sdcMicro). SUDA2 is "
            "exponential in the number of keys in the worst case; a limit makes it fast and the "
            "scores a lower bound."
        )
        row.addWidget(self.suda_max_size)
        self.suda_button = QPushButton("Compute SUDA2")
        self.suda_button.setObjectName("suda_compute")
        self.suda_button.clicked.connect(self.start_suda)
        row.addWidget(self.suda_button)
        self.suda_cancel = QPushButton("Cancel")
        self.suda_cancel.setObjectName("suda_cancel")
        self.suda_cancel.setEnabled(False)
        self.suda_cancel.clicked.connect(self.cancel_suda)
        row.addWidget(self.suda_cancel)
        self.suda_progress = QProgressBar()
        self.suda_progress.setObjectName("suda_progress")
        self.suda_progress.setRange(0, 1000)
        self.suda_progress.setTextVisible(False)
        self.suda_progress.setMaximumWidth(120)
        row.addWidget(self.suda_progress)
        row.addStretch(1)
        bl.addLayout(row)
        self.suda_label = QLabel("Not computed (on demand: it can take long with many keys).")
        self.suda_label.setObjectName("suda_summary")
        self.suda_label.setWordWrap(True)
        bl.addWidget(self.suda_label)
        self.suda_table = QTableWidget(0, 4)
        self.suda_table.setObjectName("suda_records")
        self.suda_table.setHorizontalHeaderLabels(
            ["record", "DIS score", "SUDA score", "minimal sample uniques"]
        )
        self.suda_table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.suda_table.verticalHeader().setVisible(False)
        self.suda_table.verticalHeader().setDefaultSectionSize(22)
        self.suda_table.horizontalHeader().setSectionResizeMode(3, QHeaderView.ResizeMode.Stretch)
        bl.addWidget(self.suda_table, 1)
        self.suda_result: Any = None
        self.suda_runner = TaskRunner("suda", self)
        self.suda_runner.sig_progress.connect(lambda f: self.suda_progress.setValue(int(1000 * f)))
        self.suda_runner.sig_busy_changed.connect(self._suda_busy)
        return box

    # ------------------------------------------------------------------ SUDA2
    def start_suda(self) -> None:
        """Compute SUDA2 of the loaded file with the keys of its roles (in a worker thread)."""
        st = self.state
        if st.df is None:
            self._show_message("Open a file first: SUDA2 scores its records.", "info")
            return
        try:
            keys = risk_settings(st.roles).keys
        except engine.DPStudioError as exc:
            self._show_message(str(exc), "info")
            return
        df, f = st.df, float(self.suda_fraction.value())
        k = int(self.suda_max_size.value()) or None
        self.suda_label.setText(f"Computing SUDA2 on {len(df):,} records × {len(keys)} keys…")

        def work(progress, check_cancel):
            res = suda2(df, keys, dis_fraction=f, max_size=k, progress=progress, check_cancel=check_cancel)
            return df, res

        def errored(msg, _details):
            self.suda_label.setText("SUDA2 failed.")
            self._show_message(msg.splitlines()[0], "error")

        def cancelled():
            self.suda_label.setText("SUDA2 cancelled.")

        self.suda_runner.start(work, finished=self._show_suda, errored=errored, cancelled=cancelled)

    def cancel_suda(self) -> None:
        if self.suda_runner.busy:
            self.suda_runner.cancel()
            self.suda_label.setText("SUDA2 cancelled.")

    def clear_suda(self) -> None:
        """Forget the SUDA2 result (the data or the roles changed)."""
        self.suda_runner.cancel()
        self.suda_result = None
        self.suda_table.setRowCount(0)
        self.suda_progress.setValue(0)
        self.suda_label.setText("Not computed (on demand: it can take long with many keys).")

    def _suda_busy(self, busy: bool) -> None:
        self.suda_button.setEnabled(not busy)
        self.suda_cancel.setEnabled(busy)

    def _on_labels_toggled(self, _on: bool) -> None:
        self._fill_combinations()
        if getattr(self, "_suda_out", None) is not None:
            self._show_suda(self._suda_out)

    def _show_suda(self, out: tuple) -> None:
        self._suda_out = out
        df, res = out
        self.suda_result = res
        d = res.to_dict()
        lim = "" if res.complete else f" (MSUs of at most {res.max_size} keys: scores are lower bounds)"
        self.suda_label.setText(
            f"{d['records_with_msu']:,} of {len(df):,} records have a minimal sample unique ({d['msus']:,} "
            f"MSUs); DIS score: sum {d['dis_sum']:.4g}, maximum {d['dis_max']:.4g}, "
            f"{d['records_dis_gt_0.1']:,} records above 0.1; DisFraction {res.dis_fraction:g}{lim}."
        )
        labels = self.state.value_labels()
        top = res.top_records(TOP_SUDA_RECORDS)
        self.suda_table.setRowCount(len(top))
        for i, r in enumerate(top):
            cells = (
                f"{r + 1}",
                f"{res.dis[r]:.4g}",
                f"{res.score[r]:g}",
                msu_text(df, r, res.msus_of(r), labels),
            )
            for j, text in enumerate(cells):
                it = QTableWidgetItem(text)
                if j < 3:
                    it.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.suda_table.setItem(i, j, it)
        self.suda_table.resizeColumnToContents(0)

    # ------------------------------------------------------------------ public API
    def schedule(self) -> None:
        """Recompute after a short pause (a burst of role changes runs once)."""
        self.runner.cancel()
        self._timer.start()

    def pending(self) -> bool:
        """Figures are still being computed."""
        return self._timer.isActive() or self.runner.busy or self._draw_due

    def report(self, which: str = ORIGINAL) -> Any:
        """The :class:`~dpstudio.engine.RiskReport` shown (``"original"`` or ``"release"``)."""
        return (self.result or {}).get(which)

    def figure(self, key: str, which: str = ORIGINAL) -> str:
        """The text shown for figure ``key`` (a JSON field name such as ``sample_uniques`` or
        ``individual_risk.max``) in the original or release column.
        """
        col = 1 if which == ORIGINAL else 2
        for r in range(self.figures.rowCount()):
            it = self.figures.item(r, 0)
            if it is not None and it.data(Qt.ItemDataRole.UserRole) == key:
                cell = self.figures.item(r, col)
                return cell.text() if cell is not None else ""
        raise KeyError(key)

    def shows_release(self) -> bool:
        return not self.figures.isColumnHidden(2)

    def export_dialog(self) -> None:
        """Ask for a file name and export the per-record risk of the file chosen in the
        combinations box (the original, or the release after a run).
        """
        which = self.combo_source.currentData() or ORIGINAL
        path, _ = QFileDialog.getSaveFileName(
            self,
            f"Export per-record risk of the {which} (private file, owner-only)",
            f"{which}_risk_per_record.csv",
            "CSV (*.csv)",
        )
        if path:
            self.export_per_record(path, which)

    def export_per_record(self, path: str, which: str = ORIGINAL) -> str | None:
        """Write the per-record risk of ``which`` to ``path`` (private, 0600) with the engine
        function the CLI's ``--per-record`` uses; the written path, or None (message shown).
        """
        rep = self.report(which)
        if rep is None:
            self._show_message(f"No risk figures of the {which} yet: nothing to export.", "warning")
            return None
        protect = tuple(p for p in (getattr(self.state, "path", None),) if p)
        try:
            out = write_per_record_risk(rep, path, protect=protect)
        except (engine.DPStudioError, OSError) as exc:
            self._show_message(f"Export of the per-record risk failed: {exc}", "error")
            return None
        self._show_message(
            f"Per-record risk of the {which} ({rep.records:,} records) written to {out} "
            "(private, owner-only).",
            "ok",
        )
        return out

    # ------------------------------------------------------------------ computing
    def _start(self) -> None:
        st = self.state
        if st.df is None:
            self._clear()
            self._show_message("Open a file to see its risk.", "info")
            return
        try:
            settings = risk_settings(st.roles)
        except engine.DPStudioError as exc:
            self._clear()
            self._show_message(str(exc), "info")
            return
        df, result = st.df, st.result
        self.settings_label.setText(self._settings_text(settings) + " — computing…")

        def work(_progress, check_cancel):
            release = result.data if result is not None else None
            if (
                release is not None
                and settings.household
                and settings.household not in release.columns
                and hasattr(result, "aligned_original")
            ):
                # household risk "after": the released records grouped by their original
                # households (the id itself is not released; this view is the operator's,
                # never published); in the worker: it gathers a whole column (issue 27.4)
                try:
                    release = release_with_household_ids(result, settings.household)
                    release.attrs["households_from_original"] = True
                except (engine.DPStudioError, ValueError):
                    pass
            return compute_risk(df, settings, release, check_cancel)

        def errored(msg, _details):
            self._clear()
            self._show_message(msg.splitlines()[0], "error")

        self.runner.start(work, finished=self._show, errored=errored)

    def _settings_text(self, s: RiskSettings) -> str:
        parts = [
            f"Keys: {', '.join(s.keys)}",
            f"weight: {s.weight}" if s.weight else "no sampling weight (risk 1/f_k)",
        ]
        if s.household:
            parts.append(f"household: {s.household}")
        if s.sensitive:
            parts.append(f"confidential: {', '.join(s.sensitive)}")
        return (
            "; ".join(parts) + ". A missing key value matches any value (sdcMicro's rule); "
            "individual risk: Benedetti–Franconi model as sdcMicro's measure_risk."
        )

    def _clear(self) -> None:
        self._draw_gen += 1  # nothing left to draw of a former result
        self._draw_due = False
        self.result = None
        self.export_button.setEnabled(False)
        self.figures.setRowCount(0)
        self.figures.setColumnHidden(2, True)
        self.combos.setRowCount(0)
        self.combos.setColumnCount(0)
        self.hist.clear()
        self.threshold_label.setText("–")
        self.settings_label.setText("")
        self.sig_updated.emit()

    def _show_message(self, text: str, kind: str) -> None:
        self.banner.show_message(text, kind)

    def _show(self, out: dict) -> None:
        self.result = out
        self.export_button.setEnabled(True)
        orig, rel = out[ORIGINAL], out.get(RELEASE)
        self.settings_label.setText(self._settings_text(out["settings"]))
        if out.get("release_error"):
            self._show_message(out["release_error"], "warning")
        elif rel is not None and out.get("release_notes"):
            self._show_message(
                "Release assessed with the same keys; " + "; ".join(out["release_notes"]) + ".", "info"
            )
        elif rel is not None:
            self._show_message(
                "Before / after: the release assessed with the same keys, weight and missing-value rule.",
                "ok",
            )
        else:
            self.banner.hide()
        rows = figure_rows(orig)
        rel_rows = {k: t for k, _l, t in figure_rows(rel)} if rel is not None else {}
        self.figures.setRowCount(len(rows))
        for i, (key, label, text) in enumerate(rows):
            it = QTableWidgetItem(label)
            it.setData(Qt.ItemDataRole.UserRole, key)
            self.figures.setItem(i, 0, it)
            a = QTableWidgetItem(text)
            a.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            self.figures.setItem(i, 1, a)
            b = QTableWidgetItem(rel_rows.get(key, "–"))
            b.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            self.figures.setItem(i, 2, b)
        self.figures.setColumnHidden(2, rel is None)
        self.combo_source.blockSignals(True)
        was = self.combo_source.currentData()
        self.combo_source.clear()
        self.combo_source.addItem("the original", ORIGINAL)
        if rel is not None:
            self.combo_source.addItem("the release", RELEASE)
            i = self.combo_source.findData(was)
            self.combo_source.setCurrentIndex(max(i, 0))
        self.combo_source.blockSignals(False)
        # the combinations table and the histogram each in a turn of the event loop of its
        # own (issue 27.4: the three in one slot stalled the window ~40 ms after a Protect;
        # dpstudio.app.turns); pending() holds until they are drawn
        self._draw_gen += 1
        gen = self._draw_gen
        self._draw_due = True

        def combinations() -> None:
            if gen == self._draw_gen:
                self._fill_combinations()

        def histogram() -> None:
            if gen == self._draw_gen:
                self._draw_due = False
                self._update_threshold()
                self.sig_updated.emit()

        turns.later(combinations, owner=self, key="combinations")
        turns.later(histogram, owner=self, key="histogram")

    # ------------------------------------------------------------------ drawing
    def _update_threshold(self) -> None:
        out = self.result
        self._draw_hist()
        if not out:
            self.threshold_label.setText("–")
            return
        t = float(self.threshold.value())
        orig = out[ORIGINAL]
        n = orig.records_above(t)
        text = f"original: {n:,} of {orig.records:,} ({100 * n / max(orig.records, 1):.2f} %)"
        rel = out.get(RELEASE)
        if rel is not None:
            m = rel.records_above(t)
            text += f"; release: {m:,} of {rel.records:,} ({100 * m / max(rel.records, 1):.2f} %)"
        self.threshold_label.setText(text)

    def threshold_counts(self) -> tuple[int | None, int | None]:
        """Records above the threshold in the original and the release (None: not shown)."""
        out = self.result or {}
        t = float(self.threshold.value())
        return tuple(out[w].records_above(t) if out.get(w) is not None else None for w in (ORIGINAL, RELEASE))

    def _draw_hist(self) -> None:
        self.hist.clear()
        out = self.result
        if not out:
            return
        reps = [(w, out.get(w)) for w in (ORIGINAL, RELEASE) if out.get(w) is not None]
        hi = max(float(r.individual_risk.max()) for _w, r in reps)
        hi = max(hi, float(self.threshold.value()), 1e-6)
        edges = np.linspace(0.0, hi * 1.0001, 41)
        width = edges[1] - edges[0]
        styles = {ORIGINAL: ((120, 120, 120, 170), "original"), RELEASE: ((31, 119, 180, 170), "release")}
        n = len(reps)
        for i, (w, r) in enumerate(reps):
            counts, _ = np.histogram(r.individual_risk, bins=edges)
            color, name = styles[w]
            x = edges[:-1] + width * (i + 0.5) / n
            self.hist.addItem(
                pg.BarGraphItem(
                    x=x,
                    height=counts,
                    width=width / n * 0.95,
                    brush=pg.mkBrush(color),
                    pen=pg.mkPen(None),
                    name=name,
                )
            )
        line = pg.InfiniteLine(
            pos=float(self.threshold.value()),
            angle=90,
            pen=pg.mkPen((200, 40, 40), width=2, style=Qt.PenStyle.DashLine),
        )
        self.hist.addItem(line)
        legend = self.hist.plotItem.legend
        if legend is not None:
            legend.clear()
            for w, _r in reps:
                color, name = styles[w]
                legend.addItem(pg.BarGraphItem(x=[0], height=[0], width=1, brush=pg.mkBrush(color)), name)
        self.hist.setXRange(0, edges[-1], padding=0.02)

    def _fill_combinations(self) -> None:
        out = self.result
        which = self.combo_source.currentData() or ORIGINAL
        top = (out or {}).get(which + "_top")
        if top is None:
            self.combos.setRowCount(0)
            self.combos.setColumnCount(0)
            return
        keys = list(out["settings"].keys)
        labels = self.state.value_labels()
        rep = out[which]
        heads = keys + [
            "records",
            "f_k",
            "F_k" if rep.weight else "F_k (= f_k, no weight)",
            "individual risk",
        ]
        self.combos.clear()
        self.combos.setColumnCount(len(heads))
        self.combos.setHorizontalHeaderLabels(heads)
        self.combos.setRowCount(len(top))
        for i, row in enumerate(top.itertuples(index=False)):
            vals = list(row)
            for j, k in enumerate(keys):
                self.combos.setItem(i, j, QTableWidgetItem(label_value(vals[j], labels.get(k))))
            for j, v in enumerate(
                (
                    fmt_int(vals[len(keys)]),
                    fmt_int(vals[len(keys) + 1]),
                    f"{float(vals[len(keys) + 2]):,.1f}",
                    fmt_float(vals[len(keys) + 3]),
                )
            ):
                it = QTableWidgetItem(v)
                it.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.combos.setItem(i, len(keys) + j, it)
        self.combos.resizeColumnsToContents()
        self.combos.setToolTip(
            html.escape(
                "f_k: records in the file matching the combination (a missing value matches any "
                "value); F_k: the weighted estimate of matching people in the population."
            )
        )


# --------------------------------------------------------------------------- preview


def _preview(out_png: str | None = None) -> None:  # pragma: no cover - manual look
    import sys

    from PySide6.QtWidgets import QApplication

    from dpstudio.app.resources import FREE1_ROLES, free1_sample_path

    app = QApplication.instance() or QApplication(sys.argv)
    st = AppState()
    path = free1_sample_path()
    st.set_data(pd.read_csv(path), str(path))
    st.set_roles(FREE1_ROLES)
    w = RiskPanel(st)
    w.resize(1280, 720)
    w.show()
    if out_png:

        def grab():
            if w.pending():
                QTimer.singleShot(100, grab)
                return
            app.processEvents()
            w.grab().save(out_png)
            app.quit()

        QTimer.singleShot(100, grab)
    app.exec()


if __name__ == "__main__":  # pragma: no cover
    import sys

    _preview(sys.argv[1] if len(sys.argv) > 1 else None)
