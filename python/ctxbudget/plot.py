"""``ctxbudget plot``: context usage per step, with the ladder's lines and the rollovers.

Each assistant message is a step, plotted at the size of the request it answered as
:class:`~ctxbudget.Session` measured it for its decisions (the figure it stamps on the
reply, ``meta.request_tokens``: system text, messages and every tool schema, after
hooks). A reply recorded without a session (a host writing rows itself) is estimated
with the session's accounting: the rows of the window the core's window fold carries at
that point (never a retracted or quarantined row) rendered and counted by the same
formula, plus the request overhead the session recorded for that window
(``budget.json``). A quarantine's rejected copy is not a step. The ladder's lines are
those of the budget the workspace's session recorded (``budget.json``, the newest
entry); arguments override it, and a workspace without a record falls back to the
model's defaults. Needs the optional extra ``ctxbudget[plot]``
(matplotlib).
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, replace
from pathlib import Path

from . import _ctxbudget
from .budget_record import BudgetRecord, read_budgets
from .errors import CtxBudgetError
from .history import History, Row
from .policy import Budget
from .session import context_window_for
from .session.accounting import row_messages
from .tokens import Encoding, messages_tokens, request_tokens

__all__ = ["PlotUnavailableError", "UsagePoint", "plot_budget", "plot_usage", "usage_points"]

_PLOT_EXTRA = "plotting needs matplotlib: pip install 'ctxbudget[plot]'"


class PlotUnavailableError(CtxBudgetError, ImportError):
    """matplotlib (the optional extra ``ctxbudget[plot]``) is not installed."""


@dataclass(frozen=True)
class UsagePoint:
    """One step: its index, window and the tokens of its request."""

    step: int
    window_id: str
    tokens: int


def usage_points(history: History, encoding: Encoding) -> list[UsagePoint]:
    """Request size at each step (assistant message), window by window, as the session
    measured it (see the module's docstring)."""
    records = read_budgets(history)
    mode_active = records[-1].mode_active if records else True
    recorded: dict[str, int] = {}
    for record in records:
        recorded.update(record.request_overhead)
    bare = request_tokens(encoding, None, ())
    points: list[UsagePoint] = []
    fold = _ctxbudget.RowFold()
    window: str | None = None
    pending: dict[int, Row] = {}  # the window's rows, counted when first needed
    counted: dict[int, int] = {}
    for row in history.rows():
        if row.window != window:
            window = row.window
            pending.clear()
            counted.clear()
        reply = row.kind == "message" and row.role == "assistant"
        measured = row.meta.get("request_tokens")
        tokens = measured if type(measured) is int else None
        if reply and tokens is None:
            # What the request carried, as the core's fold reads the window so far:
            # never a retracted or quarantined row.
            estimate = 0
            for seq in fold.visible_seqs:
                if seq in pending:
                    messages = row_messages(pending.pop(seq), mode_active=mode_active)
                    counted[seq] = messages_tokens(encoding, messages)
                estimate += counted.get(seq, 0)
            tokens = recorded.get(row.window, bare) + estimate
        fold.note([row])
        pending[row.seq] = row
        # A quarantine's rejected copy is not a reply: the fold does not carry it.
        if reply and tokens is not None and fold.visible_seqs[-1:] == [row.seq]:
            points.append(UsagePoint(len(points) + 1, row.window, tokens))
    return points


def plot_budget(
    workspace: str | os.PathLike[str] | History,
    *,
    model: str | None = None,
    context_window: int | None = None,
    threshold: float | None = None,
) -> tuple[BudgetRecord, bool]:
    """The budget to draw for ``workspace`` (a directory, or a ``History``: a PostgreSQL
    conversation keeps its record in the database): the newest recorded one with any given
    argument overriding its field, and whether a record was found. Without a record the
    model (default ``gpt-4o``) gives the encoding and window, the threshold is 0.7."""
    recorded = read_budgets(workspace)
    if recorded:
        base = recorded[-1]
    else:
        name = model or "gpt-4o"
        base = BudgetRecord(
            since_window="w:0",
            model=name,
            encoding=Encoding.for_model(name).name,
            context_window=context_window_for(name),
            threshold=0.7,
            output_reserve=-1,
        )
    if model is not None and model != base.model:
        base = replace(base, model=model, encoding=Encoding.for_model(model).name)
    if context_window is not None and context_window != base.context_window:
        base = replace(base, context_window=context_window, output_reserve=-1)
    if threshold is not None:
        base = replace(base, threshold=threshold)
    if base.output_reserve < 0:  # the policy's default reserve for this window
        base = replace(base, output_reserve=Budget(base.context_window).output_reserve)
    return base, bool(recorded)


def plot_usage(
    workspace: str | os.PathLike[str] | History,
    output: str | os.PathLike[str],
    *,
    model: str | None = None,
    context_window: int | None = None,
    threshold: float | None = None,
) -> Path:
    """Writes a PNG of context usage per step with the warning, handoff, final and
    usable-limit lines and a marker per rollover (budget: :func:`plot_budget`).
    Raises :class:`PlotUnavailableError` without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PlotUnavailableError(_PLOT_EXTRA) from exc
    record, _ = plot_budget(
        workspace, model=model, context_window=context_window, threshold=threshold
    )
    if isinstance(workspace, History):
        history, name = workspace, workspace.conversation or str(workspace.workspace)
    else:
        history, name = History.open(workspace, recover=False), Path(workspace).name
    points = usage_points(history, Encoding(record.encoding))
    budget = record.budget()
    fig, ax = plt.subplots(figsize=(10, 4.5), dpi=110)
    ax.plot(
        [p.step for p in points],
        [p.tokens for p in points],
        color="#1f77b4",
        lw=1.6,
        label="request tokens",
    )
    for value, label, color, style in (
        (budget.warning_at, "warning", "#e6a700", ":"),
        (budget.handoff_target, "handoff target", "#2ca02c", "--"),
        (budget.final_at, "final prompt", "#d62728", "-."),
        (budget.usable_limit, "usable limit (forced rollover)", "#000000", "-"),
    ):
        if value > 0:
            ax.axhline(value, color=color, ls=style, lw=1, label=f"{label} ({value:,})")
    rollovers = [b.step for a, b in itertools.pairwise(points) if a.window_id != b.window_id]
    for n, step in enumerate(rollovers):
        ax.axvline(
            step - 0.5, color="#9467bd", lw=1, alpha=0.6, label="rollover" if n == 0 else None
        )
    ax.set_xlabel("step")
    ax.set_ylabel("tokens")
    ax.set_title(f"Context usage — {name} ({record.context_window:,}-token window, {budget.label})")
    ax.legend(loc="upper left", fontsize=8)
    ax.set_ylim(0, record.context_window)
    fig.tight_layout()
    out = Path(output)
    fig.savefig(out)
    plt.close(fig)
    return out
