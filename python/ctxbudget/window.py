"""The current context window, as the core's window fold reads it.

The core (``ctxbudget::transcript::WindowFold``) is the one place that knows what rows
mean for the window they are in: which window is current and which came before, the
privacy floor, which rows are retracted, which rows a request carries, the advisories
already claimed, the tool calls still open, whether ``new_context`` was scheduled and
the last user message. :class:`WindowFold` is its Python face over one store: each
:meth:`WindowFold.advance` reads only the rows appended since the last one (one store
call, the GIL released), so a step costs O(new rows). :class:`~ctxbudget.Session`, its
public :class:`WindowView` and the Agents SDK integration read the window through it;
nothing here decides what a row means.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import _ctxbudget
from .history import AppendResult, History, Row
from .policy import Claims

__all__ = ["Facts", "OpenCall", "WindowChange", "WindowFold", "WindowView"]


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
    """The store's last seq as of the session's last read: the condition
    (``if_last_seq``) for a decision made on this view."""
    floor: int
    """Seq of the newest privacy floor (a soft clear), 0 if none: nothing at or before
    it is ever sent, counted or searched."""
    rows: tuple[Row, ...]
    """The rows of the window a request carries, oldest first: messages, lead-ins,
    advisories and continuations that are not retracted."""
    retracted: frozenset[int]
    """Seqs hidden by retraction rows."""
    claims: Claims
    """Advisories already published in this window."""
    open_calls: tuple[OpenCall, ...]
    """Tool calls of the window without a result, oldest first."""
    new_context_scheduled: bool
    """Whether a ``new_context`` call of this window has its ``scheduled`` result."""
    last_user: Row | None
    """The window's last user message row (retracted or not)."""
    tokens: int
    """Tokens of the next request as the session counts it before unrestricted hooks:
    the request frame, system text, every advertised tool schema and :attr:`rows`."""

    @property
    def settled(self) -> bool:
        """True when every tool call of the window has its result."""
        return not self.open_calls


@dataclass(frozen=True, slots=True)
class WindowChange:
    """What one :meth:`WindowFold.advance` read."""

    reset: bool
    """The current window is another one than before: nothing counted before belongs
    to it."""
    visible: tuple[Row, ...]
    """Rows of the current window read by this step that a request carries."""
    retracts: bool
    """Whether this step read a retraction (rows counted before may be hidden now)."""
    read: bool
    """Whether this step read any row."""


_NOTHING_READ = WindowChange(False, (), False, False)
"""A step that read no row (the common one: a frozen instance, shared)."""

Facts = tuple[str, "str | None", int, Claims, bool, "int | None", int]
"""``(window_id, previous_window_id, last_seq, claims, new_context_requested,
last_user_seq, open_call_count)``: what a decision reads of the fold."""


class WindowFold:
    """The core's window fold over ``history``, with the current window's rows kept as
    :class:`~ctxbudget.Row` objects (each row read once)."""

    __slots__ = ("_calls", "_core", "_facts", "_rows")

    def __init__(self, history: History) -> None:
        self._core = _ctxbudget.WindowFold(history._core)
        self._rows: dict[int, Row] = {}
        self._calls: tuple[OpenCall, ...] | None = ()
        # What the core said since it last read a row, asked in one read (each read of
        # the core takes its lock without the GIL; a decision reads these several times).
        self._facts: Facts | None = None

    @classmethod
    def detached(cls) -> WindowFold:
        """A fold over no store, moved by :meth:`note`: the window state a decision is
        tested on without a store, read by the core's own rule."""
        fold = cls.__new__(cls)
        fold._core = _ctxbudget.WindowFold.detached()
        fold._rows = {}
        fold._calls = ()
        fold._facts = None
        return fold

    def note(self, rows: Sequence[Row]) -> WindowChange:
        """Notes ``rows`` handed in, in order (a :meth:`detached` fold; each row's
        ``window`` as the store would have stamped it)."""
        changed = self._core.note(rows)
        return self._note(list(rows), changed)

    def advance(self) -> WindowChange:
        """Reads the rows appended since the last step (the current window's rows on the
        first) and notes them."""
        rows, changed = self._core.advance()
        return self._note(rows, changed) if rows or changed else _NOTHING_READ

    def append(
        self, rows: Sequence[Mapping[str, Any]], if_last_seq: int | None = None
    ) -> tuple[AppendResult, WindowChange]:
        """Appends ``rows`` as one batch (only if ``if_last_seq`` is still the last seq,
        when given; else :class:`~ctxbudget.ConflictError` and nothing is written), then
        reads and notes what was appended since the last step — this batch included — in
        one store call."""
        appended, read, changed = self._core.append(list(rows), if_last_seq)
        return appended, self._note(read, changed)

    def _note(self, rows: list[Row], changed: bool) -> WindowChange:
        if not rows and not changed:
            return _NOTHING_READ
        self._calls = None
        self._facts = None
        if changed:
            self._rows = {}
        window = self.window_id
        fresh = [r for r in rows if r.window == window]
        for row in fresh:
            self._rows[row.seq] = row
        visible: tuple[Row, ...] = ()
        if fresh:
            # The newest visible seqs are the tail of the fold's list: no new row can
            # be visible beyond the last len(fresh) of them.
            shown = set(self._core.visible_tail(len(fresh)))
            visible = tuple(r for r in fresh if r.seq in shown)
        retracts = any(r.kind == "retraction" for r in rows)
        return WindowChange(changed, visible, retracts, True)

    # ----- reading --------------------------------------------------------------------

    def _read_facts(self) -> Facts:
        window, previous, last_seq, (warning, handoff, final), scheduled, user, calls = (
            self._core.facts
        )
        facts = self._facts = (
            window,
            previous,
            last_seq,
            Claims(warning, handoff, final),
            scheduled,
            user,
            calls,
        )
        if not calls:
            self._calls = ()
        return facts

    def facts(self) -> Facts:
        """What a decision reads of the fold, as one tuple (read from the core once per
        read of rows)."""
        return self._facts or self._read_facts()

    @property
    def window_id(self) -> str:
        return (self._facts or self._read_facts())[0]

    @property
    def previous_window_id(self) -> str | None:
        return (self._facts or self._read_facts())[1]

    @property
    def last_seq(self) -> int:
        return (self._facts or self._read_facts())[2]

    @property
    def floor(self) -> int:
        return self._core.floor_seq

    @property
    def claims(self) -> Claims:
        return (self._facts or self._read_facts())[3]

    @property
    def open_calls(self) -> tuple[OpenCall, ...]:
        if self._calls is None:
            if not (self._facts or self._read_facts())[6]:
                return ()  # set by the read: no call is open
            self._calls = tuple(OpenCall(*c) for c in self._core.open_calls)
        return self._calls

    def is_answered(self, call_id: str) -> bool:
        return self._core.is_answered(call_id)

    def is_retracted(self, seq: int) -> bool:
        return self._core.is_retracted(seq)

    @property
    def new_context_scheduled(self) -> bool:
        return (self._facts or self._read_facts())[4]

    @property
    def last_user(self) -> Row | None:
        seq = (self._facts or self._read_facts())[5]
        return None if seq is None else self._rows.get(seq)

    def opening_row(self) -> Row | None:
        """The boundary row that opened the current window, if it was read (``None``
        in the first window)."""
        window = self.window_id
        if not window.startswith("w:") or window == "w:0":
            return None
        try:
            row = self._rows.get(int(window[2:]))
        except ValueError:
            return None
        return row if row is not None and row.kind == "boundary" else None

    def visible_rows(self) -> list[Row]:
        """The rows of the window a request carries, oldest first."""
        rows = self._rows
        return [rows[s] for s in self._core.visible_seqs if s in rows]

    def view(self, tokens: int) -> WindowView:
        """A snapshot (``tokens``: the request's count, the accounting's figure)."""
        return WindowView(
            window_id=self.window_id,
            previous_window_id=self.previous_window_id,
            last_seq=self.last_seq,
            floor=self.floor,
            rows=tuple(self.visible_rows()),
            retracted=frozenset(self._core.retracted),
            claims=self.claims,
            open_calls=self.open_calls,
            new_context_scheduled=self.new_context_scheduled,
            last_user=self.last_user,
            tokens=tokens,
        )
