"""``ctxbudget plot``: context usage per step, with the ladder's lines and the rollovers.

Usage is rebuilt from the transcript: each assistant message is a step, and the request
at that step is the window's visible rows so far, counted with the model's encoding plus
the framing allowances (system text and tool schemas are not stored, so they are not in
the figure). Needs the optional extra ``ctxbudget[plot]`` (matplotlib).
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from pathlib import Path

from .history import History
from .policy import Budget
from .session import FRAMING_TOKENS
from .tokens import Encoding

__all__ = ["UsagePoint", "plot_usage", "usage_points"]


@dataclass(frozen=True)
class UsagePoint:
    """One step: its index, window and the tokens of its request."""

    step: int
    window_id: str
    tokens: int


def usage_points(history: History, encoding: Encoding) -> list[UsagePoint]:
    """Request size at each step (assistant message), window by window."""
    points: list[UsagePoint] = []
    hidden: set[int] = set()
    total, window, step = 1, "w:0", 0
    for row in history.rows():
        if row.kind == "boundary":
            total, window = 1, row.window
            continue
        if row.kind == "retraction" and isinstance(row.meta.get("retracts"), int):
            hidden.add(int(row.meta["retracts"]))
            continue
        if row.kind == "rejected" or row.seq in hidden:
            continue
        if row.role == "assistant" and row.kind == "message":
            step += 1
            points.append(UsagePoint(step, window, total))
        text = "\n".join(
            str(p.get("text") or p.get("output") or p.get("arguments") or "") for p in row.parts
        )
        total += FRAMING_TOKENS + encoding.count(text)
    return points


def plot_usage(
    workspace: str | os.PathLike[str],
    output: str | os.PathLike[str],
    *,
    model: str = "gpt-4o",
    context_window: int = 128_000,
    threshold: float = 0.7,
) -> Path:
    """Writes a PNG of context usage per step with the warning, handoff, final and
    usable-limit lines and a marker per rollover."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the extra
        raise RuntimeError("plotting needs matplotlib: pip install 'ctxbudget[plot]'") from exc
    history = History.open(workspace, recover=False)
    points = usage_points(history, Encoding.for_model(model))
    budget = Budget(context_window, threshold)
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
    ax.set_title(f"Context usage — {Path(workspace).name} ({budget.label})")
    ax.legend(loc="upper left", fontsize=8)
    ax.set_ylim(0, context_window)
    fig.tight_layout()
    out = Path(output)
    fig.savefig(out)
    plt.close(fig)
    return out
