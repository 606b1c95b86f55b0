"""The Query desk's plots (office only): the prior, the refined distribution and Laplace noise
of the same ε (thesis Figures 5.5–5.6, the Laplace density analytic), a noise answer's response
and interval, and the prior drawn with the mouse.  :class:`QueryPlots` is the base class of
:class:`~dpstudio.app.widgets.query_panel.QueryPanel`, which builds the widgets these methods
draw on (``plot``, ``legend``, ``view_combo``, ``stats_label``, the prior's form).
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, QPointF, Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QWidget

from dpstudio.engine import query as qd
from dpstudio.engine.errors import DPStudioError

DRAW_BINS = 20  # bins of a prior drawn with the mouse (fewer when the grid is smaller)
OFFICE_ONLY = (
    "OFFICE ONLY — the refined distribution reveals the true answer; never send "
    "it (nor this plot) to the researcher."
)


def laplace_density(x: np.ndarray, center: float, scale: float) -> np.ndarray:
    """Density of Laplace(center, scale) at ``x`` (analytic)."""
    return np.exp(-np.abs(np.asarray(x, dtype=np.float64) - center) / scale) / (2.0 * scale)


def laplace_in_range(center: float, scale: float, lo: float, hi: float) -> float:
    """P(center + Laplace(0, scale) ∈ [lo, hi]) for lo ≤ center ≤ hi (analytic)."""
    return 1.0 - 0.5 * math.exp(-(center - lo) / scale) - 0.5 * math.exp(-(hi - center) / scale)


class QueryPlots(QWidget):
    """The plot methods of the Query panel (see the module notes)."""

    # ------------------------------------------------------------------ plots
    def _x(self, support: list, categorical: bool | None = None) -> tuple[np.ndarray, list | None]:
        cat = self.categorical() if categorical is None else categorical
        if (
            support
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in support)
            and not cat
        ):
            return np.asarray(support, dtype=np.float64), None
        return np.arange(len(support), dtype=np.float64), [str(v) for v in support]

    def _clear_plot(
        self, support: list, categorical: bool | None = None, label: str | None = None
    ) -> tuple[np.ndarray, list | None]:
        self.plot.clear()
        self.legend.clear()
        self.plot.enableAutoRange()
        x, labels = self._x(support, categorical)
        ax = self.plot.getAxis("bottom")
        if labels is not None:
            ax.setTicks([list(zip(x.tolist(), labels))] if len(labels) <= 40 else None)
        else:
            ax.setTicks(None)
        self.plot.setLabel("bottom", label or self.query_string())
        return x, labels

    def _plot_prior(self, prior: qd.Prior) -> None:
        sup = [v.item() if isinstance(v, np.generic) else v for v in prior.support.values()]
        x, labels = self._clear_plot(sup)
        self._curve(x, prior.probabilities(), "prior", "#7f7f7f", labels is not None, 0)
        self.stats_label.setText(
            "The prior alone (data independent). Preview or Answer draws the refined distribution."
        )

    # ------------------------------------------------------------------ drawing the prior
    def _draw_range(self) -> tuple[float, float, int]:
        """(lower, upper, bins) of the drawn histogram: the declared numeric range."""
        if self.categorical():
            raise qd.ParameterError("Draw: a categorical answer's prior is typed (VALUE=P,…), not drawn.")
        try:
            sup = qd.parse_range(self.range_spec())
        except (DPStudioError, ValueError):
            raise qd.ParameterError("Draw: declare the range's LOWER and UPPER first.") from None
        if not isinstance(sup, qd.NumericRange):
            raise qd.ParameterError("Draw: declare a numeric range LOWER and UPPER first.")
        return sup.lo, sup.hi, max(1, min(DRAW_BINS, sup.size))

    def _on_draw_toggled(self, on: bool) -> None:
        self.plot.setMouseEnabled(x=not on, y=not on)
        if on:
            try:
                _lo, _hi, n = self._draw_range()
            except DPStudioError as exc:
                self.error_label.setText(str(exc))
                self.draw_check.setChecked(False)
                return
            if self.drawn is None or len(self.drawn) != n:
                self.drawn = [0.5] * n
            self._apply_drawn()
        self._validate()

    def draw_at(self, x: float, y: float) -> bool:
        """Set the drawn bin under ``x`` (plot units) to height ``y`` (0-1, relative)."""
        try:
            lo, hi, n = self._draw_range()
        except DPStudioError as exc:
            self.error_label.setText(str(exc))
            return False
        if self.drawn is None or len(self.drawn) != n:
            self.drawn = [0.5] * n
        b = int(min(max(math.floor((x - lo) / (hi - lo) * n), 0), n - 1))
        self.drawn[b] = round(min(max(float(y), 0.0), 1.0), 3)
        self._apply_drawn()
        return True

    def _apply_drawn(self) -> None:
        """Write the drawn bins as the histogram prior's parameters (visible and editable)."""
        lo, hi, n = self._draw_range()
        assert self.drawn is not None
        edges = [lo + (hi - lo) * i / n for i in range(n)] + [hi]
        spec = ",".join(f"{e:.10g}" for e in edges) + ":" + ",".join(f"{w:g}" for w in self.drawn)
        self.prior_combo.setCurrentText("histogram")
        self.prior_edit.setText(spec)

    def _plot_drawn(self) -> None:
        try:
            lo, hi, n = self._draw_range()
        except DPStudioError:
            return
        if self.drawn is None or len(self.drawn) != n:
            return
        self.plot.clear()
        self.legend.clear()
        self.plot.getAxis("bottom").setTicks(None)
        wdt = (hi - lo) / n
        xs = np.array([lo + wdt * (i + 0.5) for i in range(n)])
        self.plot.addItem(
            pg.BarGraphItem(
                x=xs, height=self.drawn, width=wdt * 0.95, brush="#9ecae1", pen="#3182bd", name="drawn prior"
            )
        )
        self.plot.setXRange(lo, hi, padding=0.02)
        self.plot.setYRange(0, 1.05, padding=0)
        self.stats_label.setText(
            "Drawing the prior: press and drag on the plot to set each bin's relative height; it is "
            "normalised (a bin's weight shared by its grid points). Untick to see it against the refined "
            "distribution."
        )

    def eventFilter(self, obj: QObject, ev: QEvent) -> bool:  # noqa: N802 - Qt API
        if (
            self.draw_check.isChecked()
            and obj is self.plot.viewport()
            and ev.type() in (QEvent.Type.MouseButtonPress, QEvent.Type.MouseMove)
            and isinstance(ev, QMouseEvent)
            and ev.buttons() & Qt.MouseButton.LeftButton
        ):
            scene = self.plot.mapToScene(ev.position().toPoint())
            pt = self.plot.getPlotItem().vb.mapSceneToView(QPointF(scene))
            self.draw_at(pt.x(), pt.y())
            return True
        return super().eventFilter(obj, ev)

    def _curve(self, x, y, name, color, bars, slot) -> None:
        if bars:
            w = 0.28
            self.plot.addItem(
                pg.BarGraphItem(x=x + (slot - 1) * w, height=y, width=w, brush=color, name=name)
            )
        else:
            self.plot.plot(x, np.asarray(y, dtype=np.float64), pen=pg.mkPen(color, width=2), name=name)

    def plot_answer(self, ans: qd.QueryAnswer, preview: bool = False) -> None:
        """Prior, refined (office only) and Laplace of the same ε (analytic density × step), for
        the group or component chosen in the Plot box (marginals of a joint answer).  A noise
        answer has no refined distribution: the plot shows the response and its interval.
        """
        if ans.mechanism != "refinement":
            self._plot_noise(ans)
            return
        self._plotted = (ans, preview)
        names = (
            [f"component {i + 1}: {c}" for i, c in enumerate(ans.components)]
            if ans.components is not None
            else ([f"group {g}" for g in ans.groups] if ans.groups is not None else [ans.query])
        )
        self.view_combo.blockSignals(True)
        self.view_combo.clear()
        self.view_combo.addItems(names)
        self.view_combo.blockSignals(False)
        self.view_combo.setEnabled(len(names) > 1)
        self._plot_view(ans, 0, preview)

    def _plot_noise(self, ans: qd.QueryAnswer) -> None:
        self._plotted = None
        self.plot.clear()
        self.legend.clear()
        self.view_combo.clear()
        self.view_combo.setEnabled(False)
        resp = ans.response if isinstance(ans.response, list) else [ans.response]
        itv = ans.interval if isinstance(ans.interval, list) else [ans.interval]
        stats = [f"Answered by {ans.mechanism} noise (no refined distribution to show)."]
        for i, (r, iv) in enumerate(zip(resp, itv)):
            label = ans.groups[i] if ans.groups else ""
            if iv is not None:
                stats.append(
                    f"{label + ': ' if label else ''}response {r}, interval 95 % [{iv[0]:g}, {iv[1]:g}]"
                )
                try:
                    self.plot.plot([iv[0], iv[1]], [i, i], pen=pg.mkPen("#1f77b4", width=3))
                    self.plot.plot([float(r)], [i], pen=None, symbol="o", symbolBrush="#2ca02c")
                except (TypeError, ValueError):
                    pass
            else:
                stats.append(f"{label + ': ' if label else ''}response {r}")
        notes = (" Office note: " + "; ".join(ans.notes)) if ans.notes else ""
        self.stats_label.setText(
            " · ".join(stats) + (" " + ans.interval_note if ans.interval_note else "") + notes
        )

    def _replot_view(self, k: int) -> None:
        plotted = getattr(self, "_plotted", None)
        if plotted is not None and k >= 0:
            self._plot_view(plotted[0], k, plotted[1])

    def _laplace_delta(self, ans: qd.QueryAnswer, k: int, support) -> tuple[float | None, str]:
        """Δ of the Laplace curve: the office's value if typed, else the engine's sensitivity of
        the statistic (:func:`dpstudio.engine.query.laplace_sensitivity`) for view ``k``.
        """
        text = self.delta_edit.text().strip()
        if text:
            try:
                d = float(text)
                if math.isfinite(d) and d > 0:
                    return d, "Δ as typed"
            except ValueError:
                pass
        try:
            parsed = qd.parse_any(ans.query)
        except DPStudioError:
            return None, ""
        q = parsed.components[k] if isinstance(parsed, qd.MultiQuery) else parsed
        n = ans.records[k] if isinstance(ans.records, list) else ans.records
        try:  # only the bounds matter: the grid's default step
            vals = [float(v) for v in support]
            sup = qd.NumericRange(min(vals), max(vals))
        except (TypeError, ValueError, DPStudioError):
            return None, ""
        dom = self.state.domains.get(q.column) if q.column else None
        df = self.state.df
        return qd.laplace_sensitivity(
            q.agg, sup, n=n, n_total=None if df is None else len(df), value_range=dom
        )

    def _plot_view(self, ans: qd.QueryAnswer, k: int, preview: bool) -> None:
        if ans.components is not None:  # multicomponent: marginals of component k
            support, prior_probs, refined = ans.support[k], ans.prior_probs[k], ans.refined[k]
            tv, resp = ans.true_value[k], ans.response[k]
            cat_sup = (
                isinstance(self.components[k]["prior"].support, qd.CategoricalRange)
                if k < len(self.components)
                else False
            )
        else:
            support, prior_probs = ans.support, ans.prior_probs
            refined = ans.refined[k] if ans.groups is not None else ans.refined
            tv = ans.true_value[k] if ans.groups is not None else ans.true_value
            resp = ans.response[k] if ans.groups is not None else ans.response
            cat_sup = self.categorical()
        item = self.view_combo.itemText(k)
        label = f"{ans.query} · {item}" if ans.groups is not None else (item or ans.query)
        x, labels = self._clear_plot(support, cat_sup, label)
        cat = labels is not None
        self._curve(x, prior_probs, "prior", "#7f7f7f", cat, 0)
        self._curve(x, refined, "refined (office only)", "#d62728", cat, 1)
        stats = []
        if ans.mode == "joint":
            stats.append("joint answer: the curves are this component's marginals")
        try:
            f = None if tv is None or cat else float(tv)
        except (TypeError, ValueError):
            f = None
        if f is not None and len(x) > 1:
            lo, hi = float(x[0]), float(x[-1])
            f = min(max(f, lo), hi)
            step = float(x[1] - x[0])
            delta, why = self._laplace_delta(ans, k, support)
            eps_k, lap_note = ans.epsilon, ""
            if ans.components is not None:  # Laplace on a vector: the ε shared by the components
                eps_k = ans.epsilons[k] if ans.epsilons else ans.epsilon / len(ans.components)
                lap_note = f", ε/{len(ans.components)}" if not ans.epsilons else ", εi"
            if delta is not None and delta > 0:
                b = delta / eps_k
                self.plot.plot(
                    x,
                    laplace_density(x, f, b) * step,
                    pen=pg.mkPen("#1f77b4", width=2, style=Qt.PenStyle.DashLine),
                    name=f"Laplace, same ε (Δ = {delta:.4g}{lap_note})",
                )
                p_in = laplace_in_range(f, b, lo, hi)
                stats.append(
                    f"Laplace ({why}) b = Δ/ε = {b:.4g}: variance {2 * b * b:.4g}, "
                    f"P(answer in range) = {p_in:.3f}"
                )
            elif why:
                stats.append(f"Laplace not drawn: {why}.")
            r = np.asarray(refined, dtype=np.float64)
            var = float(np.sum(r * (x - f) ** 2))
            stats.append(f"refined: variance around the true answer {var:.4g}, P(in range) = 1")
            self.plot.addItem(pg.InfiniteLine(f, pen=pg.mkPen("#d62728", width=1, style=Qt.PenStyle.DotLine)))
        elif cat:
            stats.append("Laplace noise does not apply to a categorical answer.")
        else:
            stats.append("No true answer (empty filter): the response is a draw from the prior.")
        if not preview:
            if not cat:
                xr = float(resp)
            else:
                xr = float(support.index(resp)) if resp in support else None
            if xr is not None:
                self.plot.addItem(
                    pg.InfiniteLine(
                        xr, pen=pg.mkPen("#2ca02c", width=2), label="answer sent", labelOpts={"position": 0.9}
                    )
                )
        head = "Preview — nothing answered, nothing spent. " if preview else ""
        notes = (" Office note: " + "; ".join(ans.notes)) if ans.notes else ""
        self.stats_label.setText(head + " · ".join(stats) + notes)
