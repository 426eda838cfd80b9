"""The budget a session ran with, kept in its workspace (``<workspace>/budget.json``).

:meth:`Session.open` records the model, encoding, context window, threshold and output
reserve, so that tools reading the workspace later (``ctxbudget plot``,
``ctxbudget history``) draw and describe the ladder the session actually used rather than
a default. The file is small JSON, replaced atomically (write a temporary file, flush it
to disk, rename) and rewritten only when the budget changes. Every budget a workspace has
run with is kept, each with the window it started in, newest last.

A PostgreSQL conversation keeps the same record in the database (``ctxbudget_budgets``,
deleted with the conversation): every function here takes the :class:`~ctxbudget.History`
itself as the location (a workspace's ``History`` means its directory). ``None`` reads
nothing and writes nothing.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, TypeAlias

from ._atomic import atomic_write
from .errors import CtxBudgetError
from .history import History
from .policy import Budget
from .tokens import Encoding

__all__ = [
    "BUDGET_FILE",
    "BudgetRecord",
    "BudgetRecordError",
    "read_budgets",
    "record_budget",
    "record_request_overhead",
    "record_session_budget",
]

BUDGET_FILE = "budget.json"
"""Name of the record inside the workspace directory."""

_FORMAT = 1


class BudgetRecordError(CtxBudgetError, ValueError):
    """``budget.json`` exists but is not a budget record (the message names the file)."""


Location: TypeAlias = "str | os.PathLike[str] | History | None"
"""Where a record lives: a workspace directory, a ``History`` (a PostgreSQL conversation
keeps it in the database, a workspace in its directory), or ``None`` (nowhere)."""


def _resolve(location: Location) -> str | os.PathLike[str] | History | None:
    """A workspace's ``History`` as its directory; anything else as it is."""
    if isinstance(location, History) and location.workspace is not None:
        return location.workspace
    return location


class _SessionLike(Protocol):
    history: History
    mode_active: bool
    model: str
    encoding: Encoding
    budget: Budget

    @property
    def window_id(self) -> str: ...


@dataclass(frozen=True)
class BudgetRecord:
    """One budget a session of the workspace ran with, from window ``since_window`` on."""

    since_window: str
    model: str
    encoding: str
    context_window: int
    threshold: float
    output_reserve: int
    mode_active: bool = True
    """Whether token-budget mode was active (user messages carry their ``[id: N]``)."""
    request_overhead: dict[str, int] = field(default_factory=dict)
    """Tokens of the request frame, system text and advertised tool schemas the session
    counted in each window (by window ID), before host hooks: what ``ctxbudget plot``
    adds to the window's messages."""

    def budget(self) -> Budget:
        """The :class:`~ctxbudget.Budget` this record describes."""
        return Budget(self.context_window, self.threshold, self.output_reserve)

    def describe(self) -> str:
        """One line for people, e.g. ``64,000-token window, Handoff target: 70%, …``."""
        return (
            f"{self.context_window:,}-token window, {self.budget().label}, output reserve "
            f"{self.output_reserve:,}, {self.encoding} ({self.model}), since {self.since_window}"
        )


def read_budgets(workspace: Location) -> list[BudgetRecord]:
    """Every budget recorded in ``workspace`` (a directory or a ``History``), oldest
    first; ``[]`` when none was (written without :class:`~ctxbudget.Session`, or
    ``None``). A record that cannot be parsed raises :class:`BudgetRecordError` naming
    it."""
    workspace = _resolve(workspace)
    if workspace is None:
        return []
    if isinstance(workspace, History):
        stored = workspace._budget_record()
        if stored is None:
            return []
        raw, path = stored.decode("utf-8", "replace"), workspace.location
    else:
        path = str(Path(workspace) / BUDGET_FILE)
        try:
            raw = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
    try:
        data = json.loads(raw)
        return [BudgetRecord(**entry) for entry in data["budgets"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise BudgetRecordError(
            f"{path} is not a budget record ({exc}); delete it to let the next session "
            "write a fresh one"
        ) from exc


def record_budget(
    workspace: Location,
    *,
    model: str,
    encoding: str,
    budget: Budget,
    window: str,
    mode_active: bool = True,
) -> None:
    """Appends the budget to the workspace's record unless it is already the newest
    entry. Called by :meth:`Session.open`; replaces the file atomically. ``None`` (a
    PostgreSQL conversation): nothing is recorded."""
    entry = _entry(
        model=model, encoding=encoding, budget=budget, window=window, mode_active=mode_active
    )
    _update(workspace, entry, None)


def record_session_budget(session: _SessionLike, request_overhead: int | None = None) -> None:
    """Records the budget of an opened session (the one call :class:`Session` makes)
    and, when given, the request overhead of its current window, in one write."""
    entry = _entry(
        model=session.model,
        encoding=session.encoding.name,
        budget=session.budget,
        window=session.window_id,
        mode_active=session.mode_active,
    )
    overhead = None if request_overhead is None else (session.window_id, request_overhead)
    _update(session.history, entry, overhead)


def record_request_overhead(workspace: Location, window: str, tokens: int) -> None:
    """Keeps ``tokens`` as the request overhead of ``window`` in the newest budget entry
    (a session calls it once per window it enters); rewrites the file only on a change.
    ``None`` (a PostgreSQL conversation): nothing is recorded."""
    _update(workspace, None, (window, tokens))


def _entry(
    *, model: str, encoding: str, budget: Budget, window: str, mode_active: bool
) -> BudgetRecord:
    return BudgetRecord(
        since_window=window,
        model=model,
        encoding=encoding,
        context_window=budget.context_window,
        threshold=budget.threshold,
        output_reserve=budget.output_reserve,
        mode_active=mode_active,
    )


def _update(
    workspace: Location,
    entry: BudgetRecord | None,
    overhead: tuple[str, int] | None,
) -> None:
    """Reads the record once, appends ``entry`` unless it is the newest budget already,
    keeps ``overhead`` (window, tokens) in the newest entry, and writes the file only if
    that changed it: opening a session costs one atomic write at most, not one per fact.
    An unreadable record is started afresh when there is a budget to record, else left
    alone (the session's next open writes a fresh one)."""
    workspace = _resolve(workspace)
    if workspace is None:
        return
    try:
        entries = read_budgets(workspace)
    except BudgetRecordError:
        if entry is None:
            return
        entries = []
    changed = False
    if entry is not None and not (entries and _same_budget(entries[-1], entry)):
        entries.append(entry)
        changed = True
    if overhead is not None and entries:
        window, tokens = overhead
        newest = entries[-1]
        if newest.request_overhead.get(window) != tokens:
            overheads = {**newest.request_overhead, window: tokens}
            entries[-1] = replace(newest, request_overhead=overheads)
            changed = True
    if not changed:
        return
    if isinstance(workspace, History):
        workspace._set_budget_record(_encode(entries))
    else:
        atomic_write(Path(workspace) / BUDGET_FILE, _encode(entries))


def _same_budget(a: BudgetRecord, b: BudgetRecord) -> bool:
    ignored = {"since_window": "", "request_overhead": {}}
    return {**asdict(a), **ignored} == {**asdict(b), **ignored}


def _encode(entries: list[BudgetRecord]) -> bytes:
    data: dict[str, Any] = {"format": _FORMAT, "budgets": [asdict(e) for e in entries]}
    return (json.dumps(data, indent=2) + "\n").encode("utf-8")
