"""One answer (or preview) of the Query desk, run off the UI thread (:class:`AnswerJob`).

The panel (:mod:`dpstudio.app.widgets.query_panel`) builds the job on the UI thread from its
form (the request, the planning facts, the ledger file to lock); the job's :meth:`AnswerJob.work`
runs in the panel's :class:`~dpstudio.app.workers.TaskRunner` and does what ``dpstudio query
--ledger`` does: under the ledger file's lock, the budget check, the draw and the ledger write,
so that the file holds the answer's ε before the answer leaves the worker.  The job records what
the UI thread shows afterwards (the accuracy, the mechanism chosen, whether ε was spent).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from dpstudio.engine import query as qd
from dpstudio.engine.query import ledger as ql


@dataclass
class AnswerJob:
    """The state of one answer: filled on the UI thread, run by :meth:`work` in the worker.

    ``req``: the panel's request (:meth:`QueryPanel.build_request` or ``build_multi_request``);
    ``plan``: n_total, bounds, delta and groups (public planning facts); ``path``: the ledger
    file (None: a preview, nothing is spent); ``new_total``: the total budget of a ledger
    created by this answer; ``dataset``: (name, SHA-256) of the data the ledger belongs to.
    """

    df: pd.DataFrame
    req: dict[str, Any]
    plan: dict[str, Any]
    path: str | None = None
    new_total: float | None = None
    dataset: tuple[str, str] = ("", "")
    accuracy: dict | None = None
    chosen: str | None = None
    spent: bool = False  # on file: a cancel from now on only hides the answer

    def choose(self) -> str:
        """The mechanism: the office's choice, or ``auto``'s (the accuracy of every mechanism
        is kept for the panel); multicomponent queries are answered by refinement.
        """
        req = self.req
        mech = req.get("mechanism") or "refinement"
        if req["multi"] is not None or mech == "refinement":
            return "refinement"
        acc = qd.assess(
            req["query"],
            req["epsilon"],
            prior=req["prior"],
            n_total=self.plan["n_total"],
            bounds=self.plan["bounds"],
            delta=self.plan["delta"],
            groups=self.plan["groups"],
            only=None if mech == "auto" else mech,
        )
        self.accuracy = acc
        return acc["auto"] if mech == "auto" else mech

    def answer_with(self, ledger: ql.BudgetLedger | None, check_cancel) -> qd.QueryAnswer | None:
        """Draw the answer (charged to ``ledger`` when one is given); None for the preview of a
        noise mechanism (its accuracy only: nothing is drawn).
        """
        check_cancel()  # the last moment a cancel stops the answer: nothing was spent
        req, df = self.req, self.df
        chosen = self.chosen = self.choose()
        if req["multi"] is not None:
            return qd.refine_multicomponent(
                df,
                req["query"],
                req["prior"],
                req["epsilon"],
                mode=req["multi"]["mode"],
                distance=req["multi"]["distance"],
                ledger=ledger,
                requester=req["requester"],
            )
        if chosen == "refinement":
            ans = qd.refine_query(
                df,
                req["query"],
                req["prior"],
                req["epsilon"],
                req["kind"],
                ledger=ledger,
                groups=req["groups"],
                requester=req["requester"],
            )
            ans.accuracy = self.accuracy
            return ans
        if ledger is None:  # a preview of a noise answer: the accuracy only, nothing drawn
            return None
        return qd.answer_query(
            df,
            req["query"],
            req["epsilon"],
            mechanism=chosen,
            prior=req["prior"],
            bounds=self.plan["bounds"],
            groups=self.plan["groups"],
            delta=self.plan["delta"],
            ledger=ledger,
            requester=req["requester"],
        )

    def work(self, progress, check_cancel) -> tuple[qd.QueryAnswer | None, bool]:
        """The worker's task: (answer, whether its ε was spent)."""
        if self.path is None:
            return self.answer_with(None, check_cancel), False
        name, sha = self.dataset
        # the CLI's lock and code: budget check, draw and ledger write under one OS lock;
        # the file holds the answer's ε before the answer leaves this function
        with ql.locked_ledger(
            self.path, total=self.new_total, dataset=name, digest=sha, check_cancel=check_cancel
        ) as ledger:
            if (
                self.new_total is not None
                and ledger.on_file
                and ledger.total_exact != ql.eps_fraction(self.new_total)
            ):
                raise qd.ParameterError(
                    f"The ledger {self.path} was created meanwhile with a total budget of {ledger.total:g} "
                    f"(not {self.new_total:g}): look at it and answer again."
                )
            ans = self.answer_with(ledger, check_cancel)
            self.spent = True
            return ans, True
