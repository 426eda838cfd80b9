"""The current context window, read incrementally from the transcript.

:class:`WindowFold` is the one reading of what rows mean for the window they are in:
which window is current and which came before, the privacy floor, which rows are
retracted or are bookkeeping (never sent), the advisories already claimed, the tool
calls still open, whether ``new_context`` was scheduled and the last user message. Each
:meth:`WindowFold.advance` reads only the rows given to it, so a step costs O(new rows).
:class:`~ctxbudget.Session`, its public :class:`WindowView`, ``ctxbudget plot``, the
Agents SDK integration and :meth:`Claims.from_rows <ctxbudget.Claims.from_rows>` all
read the window through it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .history import Row
from .policy import Claims

__all__ = ["OpenCall", "WindowChange", "WindowFold", "WindowView"]

_BOOKKEEPING_KINDS = frozenset({"boundary", "rejected", "retraction"})


@dataclass(frozen=True)
class OpenCall:
    """A tool call of the current window that has no result yet."""

    id: str
    name: str
    arguments: Any
    seq: int
    """The seq of the assistant row that made the call."""


@dataclass(frozen=True)
class WindowView:
    """A read-only snapshot of the current window (:meth:`Session.view
    <ctxbudget.Session.view>`): what the next request is built from.

    Snapshots do not change; ask the session for a new one after it reads new rows.
    """

    window_id: str
    previous_window_id: str | None
    """The window before this one, from its boundary row (``None`` in the first)."""
    last_seq: int
    """The last seq the session has read (of any window)."""
    floor: int
    """Seq of the newest privacy floor (a soft clear), 0 if none: nothing at or before
    it is ever sent, counted or searched."""
    rows: tuple[Row, ...]
    """The window's visible rows, oldest first: not retracted, and not bookkeeping
    (boundaries, retractions, quarantined requests)."""
    retracted: frozenset[int]
    """Seqs of the window's rows hidden by retraction rows."""
    claims: Claims
    """Advisories already published in this window."""
    open_calls: tuple[OpenCall, ...]
    """Tool calls of the window without a result, oldest first."""
    answered: frozenset[str]
    """IDs of the window's tool calls that have a result."""
    new_context_scheduled: bool
    """Whether a ``new_context`` call of this window has its ``scheduled`` result."""
    last_user: Row | None
    """The window's last user message row (visible or not)."""
    tokens: int
    """Tokens of the next request as the session counts it before hooks: the request
    frame, system text, every advertised tool schema and the visible rows."""

    @property
    def settled(self) -> bool:
        """True when every tool call of the window has its result."""
        return not self.open_calls


@dataclass(frozen=True, slots=True)
class WindowChange:
    """What one :meth:`WindowFold.advance` changed."""

    reset: bool
    """A new window began: nothing read before ``added`` belongs to it."""
    added: tuple[Row, ...]
    """Rows of the current window read by this step, oldest first (bookkeeping too)."""
    retracted: tuple[int, ...]
    """Seqs of the current window that this step's retractions hid."""


def is_bookkeeping(row: Row) -> bool:
    """Whether ``row`` is never sent or shown: a boundary, a retraction or a quarantined
    request (kind ``rejected``, or any row carrying ``meta.rejected``, SPEC §5)."""
    return row.kind in _BOOKKEEPING_KINDS or "rejected" in row.meta


def _is_scheduled(output: object) -> bool:
    if isinstance(output, str):
        try:
            output = json.loads(output)
        except ValueError:
            return False
    return isinstance(output, Mapping) and output.get("status") == "scheduled"


def schedules_new_context(part: Mapping[str, Any]) -> bool:
    """Whether a part is the persisted ``scheduled`` result of a ``new_context`` call."""
    return (
        part.get("type") == "tool_result"
        and part.get("name") == "new_context"
        and _is_scheduled(part.get("output"))
    )


def claims_with(claims: Claims, row: Row | Mapping[str, Any]) -> Claims:
    """``claims`` plus the advisory ``row`` publishes (``meta.stage``; older rows marked
    ``meta.final: true`` count as the final prompt). Other rows change nothing."""
    if isinstance(row, Mapping):
        kind, meta = row.get("kind"), row.get("meta")
    else:
        kind, meta = getattr(row, "kind", None), getattr(row, "meta", None)
    if kind != "advisory" or not isinstance(meta, Mapping):
        return claims
    stage = meta.get("stage")
    if stage == "final" or meta.get("final") is True:
        return Claims(claims.warning, claims.handoff, True)
    if stage == "handoff":
        return Claims(claims.warning, True, claims.final)
    if stage == "warning":
        return Claims(True, claims.handoff, claims.final)
    return claims


class WindowFold:
    """The incremental state of the current window (see the module's docstring).

    ``start(window_id, first_seq, floor)`` positions it at a window's first row without
    reading earlier ones; :meth:`advance` reads the rows that follow, in order.
    """

    __slots__ = (
        "_answered",
        "_claims",
        "_last_user",
        "_open",
        "_previous",
        "_retracted",
        "_rows",
        "_scheduled",
        "floor",
        "last_seq",
        "window_id",
    )

    def __init__(self) -> None:
        self.window_id = "w:0"
        self.last_seq = 0
        self.floor = 0
        self._clear()

    def _clear(self) -> None:
        self._rows: list[Row] = []
        self._retracted: set[int] = set()
        self._open: dict[str, OpenCall] = {}
        self._answered: set[str] = set()
        self._claims = Claims()
        self._scheduled = False
        self._last_user: Row | None = None
        self._previous: str | None = None

    def start(self, window_id: str, first_seq: int, floor: int = 0) -> None:
        """Forgets everything and waits for the rows of ``window_id`` from ``first_seq``
        (``floor``: the newest privacy floor before them, as the store's receipt keeps it)."""
        self._clear()
        self.window_id = window_id
        self.last_seq = max(first_seq - 1, 0)
        self.floor = floor

    def advance(self, rows: Iterable[Row]) -> WindowChange:
        """Reads ``rows`` (those after :attr:`last_seq`, in order)."""
        reset = False
        added: list[Row] = []
        retracted: list[int] = []
        for row in rows:
            if row.kind == "boundary":
                self._clear()
                reset, added, retracted = True, [], []
                prev = row.meta.get("previous_window")
                self._previous = prev if isinstance(prev, str) else None
                if row.meta.get("boundary_kind") == "reset":
                    self.floor = row.seq
            self.window_id = row.window
            self.last_seq = max(self.last_seq, row.seq)
            self._rows.append(row)
            added.append(row)
            self._note(row, retracted)
        return WindowChange(reset, tuple(added), tuple(retracted))

    def _note(self, row: Row, retracted: list[int]) -> None:
        if row.kind == "retraction":
            target = row.meta.get("retracts")
            if isinstance(target, int) and not isinstance(target, bool):
                if target not in self._retracted:
                    retracted.append(target)
                self._retracted.add(target)
            return
        if row.kind == "advisory":
            self._claims = claims_with(self._claims, row)
        elif row.kind == "message" and row.role == "user":
            self._last_user = row
        if is_bookkeeping(row):
            return
        for p in row.parts:
            kind = p.get("type")
            if kind == "tool_call":
                call_id = str(p.get("id"))
                self._open[call_id] = OpenCall(
                    call_id, str(p.get("name")), p.get("arguments"), row.seq
                )
            elif kind == "tool_result":
                call_id = str(p.get("call_id"))
                self._open.pop(call_id, None)
                self._answered.add(call_id)
                if not self._scheduled and schedules_new_context(p):
                    self._scheduled = True

    # ----- reading --------------------------------------------------------------------

    def visible(self, row: Row) -> bool:
        """Whether a row of this window is sent: not retracted, not bookkeeping."""
        return row.seq not in self._retracted and not is_bookkeeping(row)

    @property
    def previous_window_id(self) -> str | None:
        return self._previous

    @property
    def claims(self) -> Claims:
        return self._claims

    @property
    def open_calls(self) -> list[OpenCall]:
        return list(self._open.values())

    @property
    def answered(self) -> frozenset[str]:
        return frozenset(self._answered)

    def is_answered(self, call_id: str) -> bool:
        return call_id in self._answered

    @property
    def new_context_scheduled(self) -> bool:
        return self._scheduled

    @property
    def last_user(self) -> Row | None:
        return self._last_user

    def is_retracted(self, seq: int) -> bool:
        return seq in self._retracted

    @property
    def rows(self) -> list[Row]:
        """Every row of the window read so far, bookkeeping and retracted ones too."""
        return list(self._rows)

    def visible_rows(self) -> list[Row]:
        return [r for r in self._rows if self.visible(r)]

    def view(self, tokens: int) -> WindowView:
        """A snapshot (``tokens``: the request's count, the accounting's figure)."""
        return WindowView(
            window_id=self.window_id,
            previous_window_id=self._previous,
            last_seq=self.last_seq,
            floor=self.floor,
            rows=tuple(self.visible_rows()),
            retracted=frozenset(self._retracted),
            claims=self._claims,
            open_calls=tuple(self._open.values()),
            answered=frozenset(self._answered),
            new_context_scheduled=self._scheduled,
            last_user=self._last_user,
            tokens=tokens,
        )


def claims_of(rows: Iterable[Row | Mapping[str, Any]], start: Claims | None = None) -> Claims:
    """Claims published by advisory ``rows`` (of one window), added to ``start``."""
    claims = start if start is not None else Claims()
    for row in rows:
        claims = claims_with(claims, row)
    return claims
