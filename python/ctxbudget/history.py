"""The crash-safe transcript store: typed API over the Rust core.

Every append is one all-or-nothing batch, durable (``fdatasync``) before it returns,
costing O(batch) however long the transcript is. Readers never see half a batch; a torn
tail left by a crash is moved to ``history/recovered/`` on the next open, never deleted.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from . import _ctxbudget
from .errors import InvalidArgumentError

__all__ = [
    "AppendResult",
    "Durability",
    "FileReport",
    "History",
    "Receipt",
    "RecoveryReport",
    "RotateReport",
    "Row",
    "RowKind",
    "Stamp",
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
    """Kinds of transcript rows."""

    MESSAGE = "message"
    BOUNDARY = "boundary"
    LEAD_IN = "lead_in"
    ADVISORY = "advisory"
    CONTINUATION = "continuation"
    REJECTED = "rejected"
    RETRACTION = "retraction"


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


@dataclass(frozen=True, slots=True)
class AppendResult:
    """What an append committed."""

    first_seq: int
    last_seq: int
    epoch: int
    window: str


@dataclass(frozen=True, slots=True)
class WindowInfo:
    """One contiguous run of a context window."""

    window_id: str
    boundary_kind: str
    first_seq: int
    item_count: int


@dataclass(frozen=True, slots=True)
class Stamp:
    """Identity, size and timestamps of a file."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int


@dataclass(frozen=True, slots=True)
class Receipt:
    """The append receipt (``history/receipt.json``)."""

    version: int
    epoch: int
    state: str
    seq: int
    committed_end: int
    anchor_crc: int
    chat: Stamp | None
    archive: Stamp | None
    floor: int = 0
    """Seq of the newest privacy floor ever written (kept outside the rows too)."""


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What :meth:`History.recover` did."""

    changed: bool
    chat_torn_bytes: int
    archive_torn_bytes: int
    moved_to: list[str]
    rotation_completed_bytes: int
    epoch: int | None
    damage: str | None
    rotation_rolled_back_bytes: int = 0


@dataclass(frozen=True, slots=True)
class RotateReport:
    """What :meth:`History.rotate` moved to the archive."""

    rows: int
    bytes: int
    epoch: int | None


@dataclass(frozen=True, slots=True)
class FileReport:
    """Findings of a full check of one transcript file."""

    bytes: int
    batches: int
    rows: int
    legacy_rows: int
    malformed_lines: int
    torn_bytes: int
    damage: tuple[int, int, str] | None


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """What :meth:`History.verify` found."""

    ok: bool
    receipt: str
    chat: FileReport
    archive: FileReport
    seq_violations: int = 0
    """Rows whose seq is not above every seq before them (archive, then chat)."""
    first_seq_violation: str | None = None
    floor_seq: int = 0


def _stamp(raw: Mapping[str, int] | None) -> Stamp | None:
    return None if raw is None else Stamp(**raw)


def _file_report(raw: Mapping[str, Any]) -> FileReport:
    damage = raw["damage"]
    return FileReport(**{**raw, "damage": None if damage is None else tuple(damage)})


def _check_seq(seq: int | None) -> int | None:
    if seq is None:
        return None
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
        raise InvalidArgumentError(f"a seq must be a non-negative int, got {seq!r}")
    return seq


class History:
    """A workspace's transcript store: ``<workspace>/history/``.

    Open it with :meth:`open`. Safe to share between threads; any number of processes
    may open the same workspace (they serialize on ``history/lock``).
    """

    __slots__ = ("_core", "_workspace")

    def __init__(self, core: _ctxbudget.History, workspace: Path) -> None:
        self._core = core
        self._workspace = workspace

    @classmethod
    def open(
        cls,
        workspace: str | os.PathLike[str],
        *,
        durability: Durability | str = Durability.FSYNC,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        max_row_bytes: int = DEFAULT_MAX_ROW_BYTES,
        recover: bool = True,
    ) -> History:
        """Opens (creating ``history/``) the store of ``workspace``.

        A torn tail or an interrupted rotation left by a crash is recovered first, unless
        ``recover=False`` (inspection: nothing is changed until the first write).
        Raises :class:`~ctxbudget.LockTimeoutError` if another process holds the lock
        longer than ``lock_timeout`` seconds.
        """
        try:
            mode = Durability(durability).value
        except ValueError:
            raise InvalidArgumentError(
                f"durability must be one of {[d.value for d in Durability]}, got {durability!r}"
            ) from None
        if not lock_timeout >= 0:
            raise ValueError(f"lock_timeout must be >= 0 seconds, got {lock_timeout!r}")
        if isinstance(max_row_bytes, bool) or not isinstance(max_row_bytes, int):
            raise TypeError(f"max_row_bytes must be int, got {type(max_row_bytes).__name__}")
        if max_row_bytes <= 0:
            raise ValueError(f"max_row_bytes must be positive, got {max_row_bytes}")
        path = Path(workspace)
        core = _ctxbudget.History.open(
            path,
            durability=mode,
            lock_timeout=float(lock_timeout),
            max_row_bytes=max_row_bytes,
            recover=bool(recover),
        )
        return cls(core, path)

    @property
    def workspace(self) -> Path:
        """The workspace directory."""
        return self._workspace

    @property
    def directory(self) -> Path:
        """``<workspace>/history``."""
        return Path(self._core.directory)

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
        first, last, epoch, window = self._core.append(rows, _check_seq(if_last_seq))
        return AppendResult(first_seq=first, last_seq=last, epoch=epoch, window=window)

    def rows(self, *, since_seq: int = 0) -> Iterator[Row]:
        """Every committed row, archive first, then chat — or only those from the first
        row whose seq is at least ``since_seq``. Malformed lines are skipped."""
        if isinstance(since_seq, bool) or not isinstance(since_seq, int) or since_seq < 0:
            raise InvalidArgumentError(f"since_seq must be a non-negative int, got {since_seq!r}")
        yield from self._core.rows(since_seq)

    def windows(self) -> list[WindowInfo]:
        """Contiguous window runs, oldest first."""
        return [WindowInfo(**w) for w in json.loads(self._core.windows())]

    @property
    def current_window(self) -> str:
        """ID of the window new rows go to (``w:0`` or ``w:<boundary seq>``)."""
        return self._core.current_window()

    def rollover(
        self,
        *,
        rollover_id: str,
        reason: str,
        lead_in: str,
        requested_by: str | None = None,
        trigger: Mapping[str, Any] | None = None,
        figures: Mapping[str, Any] | None = None,
        if_last_seq: int | None = None,
    ) -> str:
        """Seals the current window: boundary row, lead-in row and ``trigger`` (a
        message or continuation row) in one batch. Idempotent per ``rollover_id``.
        Returns the new window ID. ``if_last_seq`` makes it conditional, as for
        :meth:`append`."""
        return self._core.rollover(
            rollover_id=rollover_id,
            reason=reason,
            requested_by=requested_by,
            lead_in=lead_in,
            trigger_json=None if trigger is None else _ctxbudget.encode_rows([trigger]),
            figures_json=None if figures is None else _ctxbudget.encode_rows([figures])[1:-1],
            if_last_seq=_check_seq(if_last_seq),
        )

    def clear_soft(self) -> int:
        """``/clear --soft``: a reset boundary, the privacy floor. Returns its seq."""
        return self._core.clear_soft()

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

    def rotate(self) -> RotateReport:
        """Moves closed windows to ``chat-archive.jsonl`` (a new epoch)."""
        return RotateReport(**json.loads(self._core.rotate()))

    def receipt(self) -> Receipt | None:
        """The append receipt, or ``None`` when it is missing or unreadable."""
        raw = json.loads(self._core.receipt())
        if not isinstance(raw, dict):
            return None
        files = raw.pop("files")
        raw.pop("rotation", None)
        return Receipt(**raw, chat=_stamp(files["chat"]), archive=_stamp(files["archive"]))

    def recover(self) -> RecoveryReport:
        """Moves torn tails to ``recovered/``, completes an interrupted rotation and
        re-establishes a stable receipt. Idempotent."""
        raw = json.loads(self._core.recover())
        raw["moved_to"] = [str(p) for p in raw["moved_to"]]
        return RecoveryReport(**raw)

    def verify(self) -> VerifyReport:
        """Checks every commit CRC of both files, torn tails, damage (including an
        acknowledged batch that is missing or fails its check), that seqs are unique and
        increasing across archive and chat, and the receipt. Changes nothing."""
        raw = json.loads(self._core.verify())
        return VerifyReport(
            ok=raw["ok"],
            receipt=raw["receipt"],
            chat=_file_report(raw["chat"]),
            archive=_file_report(raw["archive"]),
            seq_violations=raw["seq_violations"],
            first_seq_violation=raw["first_seq_violation"],
            floor_seq=raw["floor_seq"],
        )

    def anchor_crc_at(self, offset: int) -> int | None:
        """CRC recorded by the commit line ending at byte ``offset`` of chat.jsonl."""
        return self._core.anchor_crc_at(offset)

    def __repr__(self) -> str:
        return f"History({str(self._workspace)!r})"
