"""The crash-safe transcript store: typed API over the Rust core.

Every append is one all-or-nothing batch, durable (``fdatasync``) before it returns,
costing O(batch) however long the transcript is. Readers never see half a batch; a torn
tail left by a crash is moved to ``history/recovered/`` on the next open, never deleted.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from . import _ctxbudget, _memory_backend
from ._redact import redact
from .errors import InvalidArgumentError

if TYPE_CHECKING:
    from .database import Database

__all__ = [
    "AppendResult",
    "DeleteReport",
    "Durability",
    "FileRecovery",
    "FileReport",
    "FileState",
    "FileVerify",
    "History",
    "NoDetail",
    "PostgresVerify",
    "PruneReport",
    "Receipt",
    "ReceiptCheck",
    "RecoveryReport",
    "Role",
    "RotateReport",
    "Row",
    "RowCounts",
    "RowKind",
    "Stamp",
    "StoreState",
    "VerifyReport",
    "WindowInfo",
]

DEFAULT_LOCK_TIMEOUT = 10.0
DEFAULT_MAX_ROW_BYTES = 1 << 20


class Durability(str, Enum):
    """How hard the store works to make a write survive power loss."""

    FSYNC = "fsync"
    """``fdatasync`` every append (default)."""
    NONE = "none"
    """No syncing: crash-consistent but not power-safe (tests, benchmarks that say so)."""


class RowKind(str, Enum):
    """Kinds of transcript rows: the core's vocabulary (``_ctxbudget.ROW_KINDS``, which a
    test keeps equal to this enum)."""

    MESSAGE = "message"
    BOUNDARY = "boundary"
    LEAD_IN = "lead_in"
    ADVISORY = "advisory"
    CONTINUATION = "continuation"
    REJECTED = "rejected"
    RETRACTION = "retraction"


class Role(str, Enum):
    """Who a transcript row speaks for (:attr:`Row.role`): the core's vocabulary
    (``_ctxbudget.ROLES``, which a test keeps equal to this enum)."""

    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    TOOL = "tool"


@dataclass(frozen=True, slots=True)
class Row:
    """A committed transcript row."""

    seq: int
    id: str
    kind: str
    role: str
    window: str
    parts: list[dict[str, Any]]
    meta: dict[str, Any]
    ts: str | None


# The store's results and reports are defined once, in Rust (frozen classes with
# read-only attributes, ``==``, ``repr()`` and ``to_dict()``), and exported here under
# the names they always had.
AppendResult = _ctxbudget.AppendResult
WindowInfo = _ctxbudget.WindowInfo
Stamp = _ctxbudget.Stamp
Receipt = _ctxbudget.Receipt
RotateReport = _ctxbudget.RotateReport
DeleteReport = _ctxbudget.DeleteReport
PruneReport = _ctxbudget.PruneReport
FileReport = _ctxbudget.FileReport
# State and health: a common part every store fills, and a ``detail`` that is one class
# per kind of store (its ``kind`` says which), so code reading a file-only figure
# narrows to the file store's class first (docs/decisions.md, "Neutral health reports").
StoreState = _ctxbudget.StoreState
FileState = _ctxbudget.FileState
RowCounts = _ctxbudget.RowCounts
VerifyReport = _ctxbudget.VerifyReport
FileVerify = _ctxbudget.FileVerify
PostgresVerify = _ctxbudget.PostgresVerify
RecoveryReport = _ctxbudget.RecoveryReport
FileRecovery = _ctxbudget.FileRecovery
NoDetail = _ctxbudget.NoDetail

ReceiptCheck = Literal["missing", "malformed", "pending", "stable", "copied", "stale"]
"""A workspace's receipt against its files, as :meth:`History.verify` found it
(:attr:`FileVerify.receipt`)."""


_SEQ_MAX = 2**64 - 1
"""The largest seq the store can hold (an unsigned 64-bit integer)."""


def _check_seq(seq: int | None) -> int | None:
    if seq is None:
        return None
    if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq <= _SEQ_MAX:
        raise InvalidArgumentError(f"a seq must be an int from 0 to {_SEQ_MAX}, got {seq!r}")
    return seq


POSTGRES_SCHEMES = ("postgresql://", "postgres://")
"""URL prefixes that name a PostgreSQL store instead of a workspace directory."""
MEMORY_SCHEME = "memory:"
"""Prefix of ``memory:NAME``, an in-memory store of this process (a directory whose name
starts so is opened as ``./memory:…``)."""

BackendKind = Literal["file", "postgres", "memory"]
"""The stores a :class:`History` can be: a workspace's files, a PostgreSQL conversation,
an in-memory store of the process."""


def backend_of(target: object) -> BackendKind:
    """Which store ``target`` names: the one place that reads a target's scheme (every
    opener, ``History.delete``, the CLI and the integrations ask it). A new backend is
    its module plus one arm here and in :meth:`History.open` / :meth:`History.delete`."""
    if isinstance(target, str) and target.startswith(MEMORY_SCHEME):
        return "memory"
    if is_database_url(target):
        return "postgres"
    return "file"


ACCEPTED_URLS = "postgresql://user@host:port/database (or postgres://…)"
"""The database URLs ctxbudget accepts, as messages name them."""

# Anything that starts like a URL (`scheme:/`, two letters or more so that no drive letter
# counts; a path object has its `//` folded to `/`) or like a libpq connection string
# (`host=…`, `dbname=…`) is never taken for a directory name.
_URL_LIKE = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+):/")
_CONNINFO_LIKE = re.compile(
    r"\s*(host|hostaddr|port|dbname|user|password|passfile|service|sslmode|sslpassword)"
    r"\s*=",
    re.IGNORECASE,
)


def is_database_url(target: object) -> bool:
    """True if ``target`` is a ``postgresql://`` (or ``postgres://``) URL: the only
    strings that name a PostgreSQL store. See :func:`url_problem` for the others that
    look like one."""
    return isinstance(target, str) and target.startswith(POSTGRES_SCHEMES)


def url_problem(target: object) -> str | None:
    """Why ``target`` cannot be used although it looks like a URL or a connection
    string (``postgresql+asyncpg://…``, ``mysql://…``, ``host=… dbname=…``), redacted;
    ``None`` for a supported ``postgresql://`` URL or anything that is a plain path.
    Such a string is an error everywhere, never a directory named after it."""
    if is_database_url(target) or not isinstance(target, (str, os.PathLike)):
        return None
    text = os.fspath(target)
    if not isinstance(text, str):
        return None
    shown = redact(text)
    if text != text.strip() and url_problem(text.strip()) is None and "://" in text:
        return f"{shown!r} has spaces around the URL: remove them"
    url = _URL_LIKE.match(text.lstrip())
    if url is not None:
        scheme = url.group(1)
        base, plus, driver = scheme.partition("+")
        if base.lower() not in ("postgresql", "postgres"):
            advice = ""
        elif plus:
            advice = f"; drop +{driver} (ctxbudget connects with its own driver): {base}://…"
        else:
            advice = f"; write the scheme in lower case: {base.lower()}://…"
        return (
            f"{shown!r} is a {scheme}: URL, which ctxbudget does not take: give a "
            f"PostgreSQL URL {ACCEPTED_URLS}{advice}, or a workspace directory (prefix "
            "./ to a directory's name that really starts like a URL)"
        )
    if _CONNINFO_LIKE.match(text):  # (the pattern allows leading spaces)
        return (
            f"{shown!r} is a libpq key=value connection string, which ctxbudget does not "
            f"take: give a PostgreSQL URL {ACCEPTED_URLS} with the parameters after '?' "
            "(e.g. postgresql://app@db/app?sslmode=require), or a workspace directory"
        )
    return None


def workspace_path(target: str | os.PathLike[str]) -> Path:
    """The workspace directory ``target`` names. Raises
    :class:`~ctxbudget.InvalidArgumentError` for a PostgreSQL URL (it names no directory)
    and for anything :func:`url_problem` refuses, so that no URL, password included,
    ever becomes a directory."""
    problem = url_problem(target)
    if problem is None and is_database_url(target):
        problem = (
            f"{redact(str(target))!r} names a PostgreSQL database, not a workspace "
            "directory: open the conversation with History.open(url, conversation=…) "
            "and pass that History instead"
        )
    if problem is not None:
        raise InvalidArgumentError(problem)
    return Path(target)


def _check_max_row_bytes(max_row_bytes: object) -> None:
    if isinstance(max_row_bytes, bool) or not isinstance(max_row_bytes, int):
        raise TypeError(f"max_row_bytes must be int, got {type(max_row_bytes).__name__}")
    if max_row_bytes <= 0:
        raise ValueError(f"max_row_bytes must be positive, got {max_row_bytes}")


class History:
    """A conversation's transcript store: a workspace's ``<workspace>/history/``, or a
    conversation in a PostgreSQL database shared by every host.

    Open it with :meth:`open`. Safe to share between threads; any number of processes
    (and, with PostgreSQL, hosts) may open the same conversation: writes serialize on
    ``history/lock`` or on the conversation's row lock.
    """

    __slots__ = ("_core", "_memory_name", "_workspace")

    def __init__(
        self, core: _ctxbudget.History, workspace: Path | None, memory_name: str | None = None
    ) -> None:
        self._core = core
        self._workspace = workspace
        self._memory_name = memory_name

    @classmethod
    def open(
        cls,
        workspace: str | os.PathLike[str] | Database,
        *,
        conversation: str | None = None,
        durability: Durability | str = Durability.FSYNC,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        max_row_bytes: int = DEFAULT_MAX_ROW_BYTES,
        recover: bool = True,
        cursor_key: str | None = None,
        create: bool = True,
    ) -> History:
        """Opens (creating ``history/``) the store of ``workspace``, or, when
        ``workspace`` is a ``postgresql://`` URL, the conversation ``conversation`` of
        that database (created if new; the schema is created or migrated on the first
        connection of the process, safely when many hosts start at once).

        A torn tail or an interrupted rotation left by a crash is recovered first, unless
        ``recover=False`` (inspection: nothing is changed until the first write).
        Raises :class:`~ctxbudget.LockTimeoutError` if another process holds the lock
        longer than ``lock_timeout`` seconds.

        With PostgreSQL, ``session_history`` cursors are signed with ``cursor_key``, else
        ``CTXBUDGET_CURSOR_KEY``, else a key kept in the database, so a cursor minted on
        one host pages on another; the URL's ``sslmode`` (``require``, ``verify-full``…)
        is honoured. Connection failures raise :class:`~ctxbudget.DatabaseError`.
        ``create=False`` (readers, the CLI) opens only a conversation that exists: one
        that does not is an :class:`~ctxbudget.InvalidArgumentError` and nothing is
        created.

        Any other string that looks like a URL (``postgresql+asyncpg://…``,
        ``mysql://…``) or a libpq ``host=… dbname=…`` string is an
        :class:`~ctxbudget.InvalidArgumentError` (see :func:`url_problem`), never a
        directory named after it; no message shows a password.

        ``"memory:NAME"`` opens the in-memory store ``NAME`` of this process: every
        ``History`` opened with that name shares its rows, nothing outlives the process
        (tests, short-lived agents). It behaves as the other stores do, ``session_history``
        included; ``rotate`` has nothing to move and ``durability``, ``lock_timeout`` and
        ``recover`` do not apply.
        """
        from .database import Database

        if isinstance(workspace, Database):
            _check_max_row_bytes(max_row_bytes)
            if cursor_key is not None:
                raise InvalidArgumentError(
                    "cursor_key= belongs to Database.open when a Database is given"
                )
            if not isinstance(conversation, str) or not conversation:
                raise InvalidArgumentError(
                    "a Database holds many conversations: name one with conversation='…' "
                    "(1 to 256 bytes, e.g. your chat or thread id)"
                )
            core = workspace._core.history(
                conversation, max_row_bytes=max_row_bytes, create=bool(create)
            )
            return cls(core, None)
        # The same arguments are checked for either store: a typo fails on both.
        try:
            mode = Durability(durability).value
        except ValueError:
            raise InvalidArgumentError(
                f"durability must be one of {[d.value for d in Durability]}, got {durability!r}"
            ) from None
        if not lock_timeout >= 0:
            raise ValueError(f"lock_timeout must be >= 0 seconds, got {lock_timeout!r}")
        _check_max_row_bytes(max_row_bytes)
        kind = backend_of(workspace)
        if kind == "memory":
            return cls._open_memory(
                str(workspace)[len(MEMORY_SCHEME) :],
                conversation=conversation,
                cursor_key=cursor_key,
                max_row_bytes=max_row_bytes,
            )
        if kind == "postgres":
            return cls._open_database(
                str(workspace),
                conversation=conversation,
                max_row_bytes=max_row_bytes,
                cursor_key=cursor_key,
                create=create,
            )
        path = workspace_path(workspace)  # a URL-like string is refused, never a directory
        if conversation is not None or cursor_key is not None:
            raise InvalidArgumentError(
                "conversation= and cursor_key= apply to a postgresql:// store; a workspace "
                "directory holds one conversation — open another directory for another"
            )
        core = _ctxbudget.History.open(
            path,
            durability=mode,
            lock_timeout=float(lock_timeout),
            max_row_bytes=max_row_bytes,
            recover=bool(recover),
        )
        return cls(core, path)

    @classmethod
    def _open_memory(
        cls,
        name: str,
        *,
        conversation: str | None,
        cursor_key: str | None,
        max_row_bytes: int,
    ) -> History:
        if not name:
            raise InvalidArgumentError(
                "an in-memory store needs a name: History.open('memory:NAME') (every History "
                "opened with one name in this process shares its rows)"
            )
        if conversation is not None or cursor_key is not None:
            raise InvalidArgumentError(
                "conversation= and cursor_key= apply to a postgresql:// store; an in-memory "
                "store holds one conversation — open another name for another"
            )
        return cls(_ctxbudget.History.open_memory(name, max_row_bytes=max_row_bytes), None, name)

    @classmethod
    def _open_database(
        cls,
        url: str,
        *,
        conversation: str | None,
        max_row_bytes: int,
        cursor_key: str | None,
        create: bool,
    ) -> History:
        if not isinstance(conversation, str) or not conversation:
            raise InvalidArgumentError(
                "a postgresql:// store holds many conversations: name one with "
                "conversation='…' (1 to 256 bytes, e.g. your chat or thread id)"
            )
        if cursor_key is not None and not isinstance(cursor_key, str):
            raise TypeError(f"cursor_key must be str, got {type(cursor_key).__name__}")
        core = _ctxbudget.History.open_postgres(
            url,
            conversation=conversation,
            max_row_bytes=max_row_bytes,
            cursor_key=cursor_key,
            create=bool(create),
        )
        return cls(core, None)

    @property
    def workspace(self) -> Path | None:
        """The workspace directory; ``None`` for a PostgreSQL conversation or an in-memory
        store."""
        return self._workspace

    @property
    def backend(self) -> BackendKind:
        """Which store this is (:func:`backend_of` of what it was opened with)."""
        if self._memory_name is not None:
            return "memory"
        return "file" if self._workspace is not None else "postgres"

    @property
    def memory_name(self) -> str | None:
        """``NAME`` of an in-memory store (``memory:NAME``); ``None`` for the others."""
        return self._memory_name

    @property
    def conversation(self) -> str | None:
        """The PostgreSQL conversation's id; ``None`` for a workspace directory."""
        return self._core.conversation

    @property
    def is_database(self) -> bool:
        """True for a PostgreSQL conversation."""
        return self.backend == "postgres"

    @property
    def location(self) -> str:
        """Where the transcript lives, for messages: the workspace directory, or
        ``postgresql conversation '<id>'`` (redacted: it is shown in messages and
        reprs)."""
        if self._memory_name is not None:
            return f"{MEMORY_SCHEME}{self._memory_name}"
        if self._workspace is None:
            return redact(f"postgresql conversation {self._core.conversation!r}")
        return redact(str(self._workspace))

    @property
    def directory(self) -> Path | None:
        """``<workspace>/history``; ``None`` for a PostgreSQL conversation or an in-memory
        store."""
        d = self._core.directory
        return None if d is None else Path(d)

    def append(
        self, rows: Sequence[Mapping[str, Any]], *, if_last_seq: int | None = None
    ) -> AppendResult:
        """Appends ``rows`` (dicts with ``kind``, ``role``, ``parts``, ``meta``) as one
        atomic, durable batch. Raises :class:`~ctxbudget.InvalidRowError` naming the row
        and field of anything malformed; nothing is written then.

        ``if_last_seq=n`` makes the append conditional: it commits only if seq ``n`` is
        still the last row (``0``: the store is empty), checked under the same hold of
        the lock as the write; otherwise :class:`~ctxbudget.ConflictError` and nothing
        is written. Use it to apply a decision made on the rows up to ``n``."""
        if type(rows) is not list:
            if isinstance(rows, Mapping):
                raise TypeError("append() takes a list of rows; wrap a single row in a list")
            rows = list(rows)
        return self._core.append(rows, _check_seq(if_last_seq))

    def rows(self, *, since_seq: int = 0) -> Iterator[Row]:
        """Every committed row, archive first, then chat — or only those from the first
        row whose seq is at least ``since_seq``. Malformed lines are skipped."""
        if isinstance(since_seq, bool) or not isinstance(since_seq, int) or since_seq < 0:
            raise InvalidArgumentError(f"since_seq must be a non-negative int, got {since_seq!r}")
        yield from self._core.rows(since_seq)

    def windows(self) -> list[WindowInfo]:
        """Contiguous window runs, oldest first."""
        return self._core.windows()

    @property
    def current_window(self) -> str:
        """ID of the window new rows go to (``w:0`` or ``w:<boundary seq>``)."""
        return self._core.current_window()

    def rollover(
        self,
        *,
        rollover_id: str,
        reason: str,
        lead_in: str | Callable[[str, str], str],
        requested_by: str | None = None,
        trigger: Mapping[str, Any] | None = None,
        figures: Mapping[str, Any] | None = None,
        if_last_seq: int | None = None,
    ) -> str:
        """Seals the current window: boundary row, lead-in row and ``trigger`` (a
        message or continuation row) in one batch. Idempotent per ``rollover_id``.
        Returns the new window ID. ``if_last_seq`` makes it conditional, as for
        :meth:`append`.

        ``lead_in`` is the lead-in's text, or a callable
        ``(window_id, previous_window_id) -> str`` that the store calls under its lock
        with the IDs this rollover really writes, so the lead-in can never name another
        window than its own (an exception it raises aborts the rollover, nothing is
        written)."""
        return self._core.rollover(
            rollover_id=rollover_id,
            reason=reason,
            requested_by=requested_by,
            lead_in=lead_in,
            trigger_json=None if trigger is None else _ctxbudget.encode_rows([trigger]),
            figures_json=None if figures is None else _ctxbudget.encode_rows([figures])[1:-1],
            if_last_seq=_check_seq(if_last_seq),
        )

    def clear_soft(self, *, if_last_seq: int | None = None) -> int:
        """``/clear --soft``: a reset boundary, the privacy floor. Returns its seq.
        ``if_last_seq`` makes it conditional, as for :meth:`append`."""
        return self._core.clear_soft(_check_seq(if_last_seq))

    def quarantine(
        self,
        row: Mapping[str, Any],
        *,
        retracts: int | None = None,
        if_last_seq: int | None = None,
    ) -> int:
        """Stores a rejected request as an empty assistant row with the original inside
        ``meta.rejected``; it is never sent to a provider. Returns its seq.

        ``retracts=seq`` retracts the row that carried the request in the same batch;
        ``if_last_seq`` (which needs ``retracts``) makes it conditional, as for
        :meth:`append`."""
        if if_last_seq is not None and retracts is None:
            raise InvalidArgumentError(
                "quarantine(if_last_seq=...) needs retracts=<seq of the quarantined row>"
            )
        return self._core.quarantine(
            _ctxbudget.encode_rows([row]), _check_seq(retracts), _check_seq(if_last_seq)
        )

    def quarantine_seq(self, seq: int, *, if_last_seq: int | None = None) -> int:
        """Quarantines stored row ``seq`` (a message or continuation): its retraction
        and a quarantine row holding its content, read and written under one hold of
        the lock as one batch — a crash leaves both or neither. ``if_last_seq`` makes
        it conditional, as for :meth:`append`. Returns the quarantine row's seq."""
        if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
            raise InvalidArgumentError(f"seq must be a positive int, got {seq!r}")
        return self._core.quarantine_seq(seq, _check_seq(if_last_seq))

    def prune(
        self,
        *,
        keep_windows: int | None = None,
        older_than: float | timedelta | None = None,
        below_floor: bool = False,
    ) -> PruneReport:
        """Removes sealed windows for good, oldest first; the current window always stays.

        ``keep_windows=N`` keeps the N newest sealed windows; ``older_than`` (seconds or a
        ``timedelta``) removes the sealed windows whose newest row is older;
        ``below_floor=True`` removes everything below the privacy floor (a soft clear
        followed by a purge). Criteria combine (the furthest cut wins). The floor is never
        lowered, windows keep their ids and seqs, and every cursor minted before answers
        ``history_changed``. A workspace's prune rotates first and rewrites the archive;
        ``history/recovered/`` is left as it is (:meth:`delete` removes it)."""
        if keep_windows is not None and (
            isinstance(keep_windows, bool) or not isinstance(keep_windows, int) or keep_windows < 0
        ):
            raise InvalidArgumentError(f"keep_windows must be an int >= 0, got {keep_windows!r}")
        if isinstance(older_than, timedelta):
            older_than = older_than.total_seconds()
        if older_than is not None and (
            isinstance(older_than, bool)
            or not isinstance(older_than, (int, float))
            or not older_than >= 0
        ):
            raise InvalidArgumentError(f"older_than must be seconds >= 0, got {older_than!r}")
        if keep_windows is None and older_than is None and not below_floor:
            raise InvalidArgumentError(
                "prune needs a criterion: keep_windows=, older_than= or below_floor=True"
            )
        return self._core.prune(
            keep_windows=keep_windows,
            older_than=None if older_than is None else float(older_than),
            below_floor=bool(below_floor),
        )

    @staticmethod
    def delete(
        workspace: str | os.PathLike[str] | Database,
        *,
        conversation: str | None = None,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    ) -> DeleteReport:
        """Deletes a conversation for good and reports what was removed.

        A workspace: its ``history/`` (rows, receipt, lock, ``recovered/`` tails),
        ``memories/`` and ``budget.json`` (and the directory, if nothing else is left),
        after a writer in progress finishes (up to ``lock_timeout`` seconds). A
        ``postgresql://`` URL or a :class:`~ctxbudget.Database` with ``conversation=``:
        its rows, memory files and counters, in one transaction. A writer still holding
        it gets :class:`~ctxbudget.ConversationDeletedError` on its next write, never a
        half-deleted conversation; opening the name again starts an empty one."""
        from .database import Database

        if isinstance(workspace, Database):
            return workspace.delete(conversation or "")
        kind = backend_of(workspace)
        if kind == "memory":
            name = str(workspace)[len(MEMORY_SCHEME) :]
            if not name or conversation is not None:
                raise InvalidArgumentError(
                    "deleting an in-memory store takes its 'memory:NAME' alone (it holds "
                    "one conversation)"
                )
            return _memory_backend.delete(name)
        if kind == "postgres":
            if not isinstance(conversation, str) or not conversation:
                raise InvalidArgumentError(
                    "deleting from a postgresql:// store needs conversation='…'"
                )
            return _ctxbudget.History.delete_postgres(str(workspace), conversation=conversation)
        path = workspace_path(workspace)
        if conversation is not None:
            raise InvalidArgumentError(
                "conversation= applies to a postgresql:// store; a workspace holds one"
            )
        if not lock_timeout >= 0:
            raise ValueError(f"lock_timeout must be >= 0 seconds, got {lock_timeout!r}")
        return _ctxbudget.History.delete_workspace(path, lock_timeout=float(lock_timeout))

    def _budget_record(self) -> bytes | None:
        """The budget record a PostgreSQL conversation or an in-memory store keeps (a
        workspace's is its ``budget.json``)."""
        if self._memory_name is not None:
            return _memory_backend.extras(self._memory_name).budget_record
        return self._core.budget_record()

    def _set_budget_record(self, record: bytes) -> None:
        if self._memory_name is not None:
            store = _memory_backend.extras(self._memory_name)
            with store.lock:
                store.budget_record = bytes(record)
            return
        self._core.set_budget_record(record)

    def rotate(self) -> RotateReport:
        """Moves closed windows to ``chat-archive.jsonl`` (a new epoch)."""
        return self._core.rotate()

    def state(self) -> StoreState:
        """Epoch, last seq and floor of one moment. For a workspace, ``detail`` is a
        :class:`FileState` holding the append receipt (``None`` when it is missing or
        unreadable); other stores have nothing to add (:class:`NoDetail`)."""
        return self._core.state()

    def recover(self) -> RecoveryReport:
        """Repairs what a crash left. A workspace: moves torn tails to ``recovered/``,
        completes an interrupted rotation and re-establishes a stable receipt
        (``detail`` is a :class:`FileRecovery`). PostgreSQL and the in-memory store have
        nothing to repair and report their epoch. Idempotent."""
        return self._core.recover()

    def verify(self) -> VerifyReport:
        """A full check; changes nothing. Every store reports its rows (live and
        archived, malformed ones apart), last seq, floor and epoch, and whether seqs are
        unique and increasing. ``detail`` holds what only this kind of store checks: a
        workspace's :class:`FileVerify` (every commit CRC of both files, torn tails,
        damage, including an acknowledged batch that is missing or fails its check, and
        the receipt), a PostgreSQL conversation's :class:`PostgresVerify` (rows past its
        last seq).

        A workspace's ``detail.receipt`` is ``"copied"`` (and ``ok`` true) for a copied
        or restored workspace whose files hold exactly what the receipt vouches for; the
        next write or :meth:`recover` adopts it under a new epoch (docs/format.md,
        *Receipt*)."""
        return self._core.verify()

    def anchor_crc_at(self, offset: int) -> int | None:
        """CRC recorded by the commit line ending at byte ``offset`` of chat.jsonl."""
        return self._core.anchor_crc_at(offset)

    def __repr__(self) -> str:
        return f"History({self.location!r})"
