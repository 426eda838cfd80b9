"""The window state a :class:`~ctxbudget.Session` keeps between calls, as one object, and
the inputs a decision takes besides it.

:class:`WindowState` is what the session has read and counted: the core's window fold,
the window's token accounting, the request snapshot (system text and tools as the host
set them), the count-endpoint cache and what was last sent. :class:`Inputs` is the rest a
decision depends on (the budget, the prompts, the capabilities, the host's settings and
hooks of this call). :func:`ctxbudget.session.decide.decide` is a function of the two;
only the session writes, and only it moves the state forward (:meth:`WindowState.read`
and :meth:`WindowState.append`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple

from ..history import AppendResult
from ..policy import Budget
from ..prompts import Capabilities, Prompts
from ..window import WindowChange, WindowFold
from .accounting import Requests, WindowTokens
from .anchoring import Counting, Sent
from .types import RequestHook

__all__ = ["Inputs", "OpenCallPolicy", "WindowState"]

OpenCallPolicy = Literal["interrupt", "wait"]
"""What :meth:`Session.prepare` does with calls a stopped process left open."""


class Inputs(NamedTuple):
    """What a decision takes besides the window state (a tuple: built on every step)."""

    budget: Budget
    prompts: Prompts
    capabilities: Capabilities
    model: str
    system_prompt: str
    """The host's system text (ctxbudget's window addition follows it)."""
    mode_active: bool
    open_calls: OpenCallPolicy
    hooks: tuple[RequestHook, ...] = ()
    """The request hooks of this call (a snapshot: a retry reuses them)."""


class WindowState:
    """The session's reading of its window: the fold (:attr:`fold`), its token
    accounting (:attr:`tokens`), the request snapshot (:attr:`requests`), the
    count-endpoint cache and events (:attr:`counting`), the request last sent
    (:attr:`sent`), the user messages already checked against a fresh window
    (:attr:`fresh_checked`) and the calls a stopped process left open
    (:attr:`left_open`).

    A decision only reads it; :meth:`read` and :meth:`append` move it forward. Tests
    build one over a fold and accounting of their own, with no store."""

    __slots__ = (
        "counting",
        "fold",
        "fresh_checked",
        "left_open",
        "requests",
        "sent",
        "tokens",
    )

    def __init__(
        self,
        fold: WindowFold,
        tokens: WindowTokens,
        requests: Requests,
        counting: Counting,
        *,
        sent: Sent | None = None,
        fresh_checked: set[int] | None = None,
        left_open: frozenset[str] = frozenset(),
    ) -> None:
        self.fold = fold
        self.tokens = tokens
        self.requests = requests
        self.counting = counting
        self.sent = sent
        """The last request ``prepare`` sent (the reply's stamp)."""
        self.fresh_checked: set[int] = set() if fresh_checked is None else fresh_checked
        self.left_open = left_open

    def read(self) -> WindowChange:
        """Reads the rows appended since the last step (by anyone) and counts them."""
        change = self.fold.advance()
        if change.read:
            self.tokens.apply(change, self.fold)
        return change

    def append(
        self, rows: Sequence[Mapping[str, Any]], if_last_seq: int | None = None
    ) -> tuple[AppendResult, WindowChange]:
        """Appends ``rows`` as one batch (conditional on ``if_last_seq`` when given) and
        reads what was appended since the last step, this batch included: one store
        call."""
        appended, change = self.fold.append(rows, if_last_seq)
        self.note(change)
        return appended, change

    def note(self, change: WindowChange) -> None:
        """Counts what a fold step read."""
        if change.read:
            self.tokens.apply(change, self.fold)
