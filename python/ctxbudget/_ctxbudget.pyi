# Hand-written stub of the Rust extension module; checked by `python -m mypy.stubtest`.
import os
import pathlib
from collections.abc import Callable, Iterable
from typing import Any, Literal, final

from ctxbudget.history import ReceiptCheck, Row

__all__ = [
    "ADVISORY_HEADROOM",
    "CALIBRATION_MAX_BP",
    "CALIBRATION_MIN_BP",
    "CALL_TOKENS",
    "DEFAULT_CACHE_SIZE",
    "ESTIMATE_MARGIN_BP",
    "FAILPOINTS",
    "FINAL_ZONE",
    "FUNCTIONS_TOKENS",
    "FUNCTION_TOKENS",
    "MEMORY_CHECKPOINT_MAX",
    "MEMORY_FILE_MAX",
    "MEMORY_NAME_MAX",
    "MEMORY_PATH_MAX",
    "MESSAGE_TOKENS",
    "MIN_THRESHOLD_BP",
    "NAME_TOKENS",
    "NOTICE",
    "OFF_BP",
    "OTHER_MEDIA_TOKENS",
    "OUTPUT_RESERVE_MAX",
    "PART_TYPES",
    "PDF_MAX_PAGES",
    "PDF_PAGE_TEXT_TOKENS",
    "PROFILES",
    "REPLY_TOKENS",
    "ROLES",
    "ROW_KINDS",
    "SESSION_HISTORY_DESCRIPTION",
    "SESSION_HISTORY_NOT_STRICT",
    "WARNING_ADVANCE_MIN",
    "AppendResult",
    "BudgetCore",
    "Completions",
    "Database",
    "DeleteReport",
    "Encoding",
    "FileRecovery",
    "FileReport",
    "FileState",
    "FileVerify",
    "History",
    "NoDetail",
    "PgMemoryFiles",
    "PostgresVerify",
    "PruneReport",
    "Receipt",
    "RecoveryReport",
    "RotateReport",
    "RowCounts",
    "RowFold",
    "SessionHistoryTool",
    "Stamp",
    "StoreState",
    "VerifyReport",
    "WindowFold",
    "WindowInfo",
    "__version__",
    "_arm_failpoint",
    "_offload_active",
    "_offload_register",
    "_panic_for_test",
    "_reset_failpoints",
    "anchor_plausible",
    "calibration_head",
    "calibration_ratios_bp",
    "claims_of_rows",
    "context_window",
    "count_split",
    "encode_rows",
    "encoding_names",
    "fsync",
    "guard_margin",
    "image_size",
    "image_tokens",
    "model_encoding",
    "offload_pool",
    "pdf_page_count",
    "pdf_tokens",
    "pg_ddl",
    "profile_for_model",
    "render_tools",
    "session_history_parameters",
    "threshold_is_off",
]

__version__: str
DEFAULT_CACHE_SIZE: int
FAILPOINTS: bool
ADVISORY_HEADROOM: int
FINAL_ZONE: int
PDF_MAX_PAGES: int
PDF_PAGE_TEXT_TOKENS: int
PROFILES: list[str]
# The row vocabulary, from the core's transcript layer (the one rule table).
ROW_KINDS: list[str]
ROLES: list[str]
PART_TYPES: list[str]
MIN_THRESHOLD_BP: int
OFF_BP: int
NOTICE: str
SESSION_HISTORY_DESCRIPTION: str
SESSION_HISTORY_NOT_STRICT: list[str]
OTHER_MEDIA_TOKENS: int
MESSAGE_TOKENS: int
NAME_TOKENS: int
REPLY_TOKENS: int
CALL_TOKENS: int
FUNCTIONS_TOKENS: int
FUNCTION_TOKENS: int
OUTPUT_RESERVE_MAX: int
WARNING_ADVANCE_MIN: int
# The memory files' limits, from the core (both stores of the memory tool).
MEMORY_CHECKPOINT_MAX: int
MEMORY_FILE_MAX: int
MEMORY_NAME_MAX: int
MEMORY_PATH_MAX: int

@final
class BudgetCore:
    def __new__(
        cls, context_window: int, threshold: float, output_reserve: int | None = None
    ) -> BudgetCore: ...
    def points(self) -> tuple[int, int, int, int, int, int, int, int]: ...
    def effective_threshold_bp(self) -> int: ...
    def enabled(self) -> bool: ...
    def evaluate(
        self,
        projected: int,
        warning: bool,
        handoff: bool,
        final_prompt: bool,
        new_context_offered: bool,
        margin: int = 0,
    ) -> tuple[str, bool]: ...

def threshold_is_off(threshold: float) -> bool: ...

# Usage anchoring (the core's `ctxbudget::anchor`).
CALIBRATION_MIN_BP: int
CALIBRATION_MAX_BP: int
ESTIMATE_MARGIN_BP: int

def count_split(
    anchor: int | None,
    since: int,
    overhead: int,
    messages: int,
    estimated_family: bool,
    sums: tuple[int, int, int, int, int, int, int],
    overhead_was: int | None = None,
) -> tuple[int, int, int, int]: ...
def guard_margin(estimated: int) -> int: ...
def anchor_plausible(reported: int, profile: int) -> bool: ...
def calibration_ratios_bp(
    sums: tuple[int, int, int, int, int, int, int],
) -> tuple[int | None, int | None, int | None]: ...
def calibration_head(reported: int, estimated: int, overhead: int) -> tuple[int, int, int]: ...

@final
class Encoding:
    def __new__(
        cls, name: str, *, cache_size: int = ..., chunk_bytes: int | None = None
    ) -> Encoding: ...
    @staticmethod
    def for_model(model: str, *, cache_size: int = ...) -> Encoding: ...
    @staticmethod
    def from_file(path: str | os.PathLike[str], *, cache_size: int = ...) -> Encoding: ...
    @staticmethod
    def from_dir(dir: str | os.PathLike[str], *, cache_size: int = ...) -> Encoding: ...
    @staticmethod
    def for_model_in(
        root: str | os.PathLike[str], model: str, *, cache_size: int = ...
    ) -> Encoding: ...
    @property
    def has_chat_template(self) -> bool: ...
    def render_chat(
        self,
        messages: list[Any],
        tools: list[Any] | None,
        add_generation_prompt: bool,
        extra: dict[str, Any] | None,
    ) -> str: ...
    def count_chat(
        self, messages: list[Any], tools: list[Any] | None, extra: dict[str, Any] | None
    ) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def estimate_scale_bp(self) -> int | None: ...
    def count(self, text: str) -> int: ...
    def count_detail(self, text: str) -> tuple[int, bool]: ...
    def count_many(self, texts: list[str] | tuple[str, ...]) -> list[int]: ...
    def count_json(self, json_text: str) -> int: ...
    def count_request(
        self, system: str | None, messages: list[Any], tools: list[Any], profile: str
    ) -> int: ...
    def count_messages(self, messages: list[Any], profile: str) -> int: ...
    def cache_len(self) -> int: ...
    def clear_cache(self) -> None: ...

def encode_rows(rows: list[Any]) -> bytes: ...
def encoding_names() -> list[str]: ...
def model_encoding(model: str) -> tuple[str, int | None] | None: ...
def context_window(model: str) -> tuple[int, str, str, str] | str: ...
def render_tools(tools: list[Any]) -> str: ...
def session_history_parameters() -> dict[str, Any]: ...
def profile_for_model(model: str) -> str: ...
def pdf_page_count(data: bytes | bytearray | str) -> int | str: ...
def pdf_tokens(pages: int, profile: str) -> int: ...
def image_size(data: bytes | bytearray | str) -> tuple[str, int, int] | str: ...
def image_tokens(size: tuple[int, int] | None, *, provider: str, detail: str = ...) -> int: ...

@final
class History:
    @staticmethod
    def open(
        workspace: str | os.PathLike[str],
        *,
        durability: str,
        lock_timeout: float,
        max_row_bytes: int,
        recover: bool = True,
    ) -> History: ...
    @staticmethod
    def open_memory(name: str, *, max_row_bytes: int) -> History: ...
    @staticmethod
    def open_postgres(
        url: str,
        *,
        conversation: str,
        max_row_bytes: int,
        cursor_key: str | None = None,
        create: bool = True,
    ) -> History: ...
    def append(self, rows: list[Any], if_last_seq: int | None = None) -> AppendResult: ...
    def rows(self, since_seq: int = 0) -> list[Row]: ...
    def raw_rows(self, since_seq: int = 0) -> list[tuple[int | None, str, bytes]]: ...
    def windows(self) -> list[WindowInfo]: ...
    def current_window(self) -> str: ...
    def rollover(
        self,
        *,
        rollover_id: str,
        reason: str,
        requested_by: str | None,
        lead_in: str | Callable[[str, str], str],
        trigger_json: bytes | None,
        figures_json: bytes | None,
        if_last_seq: int | None = None,
    ) -> str: ...
    def clear_soft(self, if_last_seq: int | None = None) -> int: ...
    def quarantine(
        self, row_json: bytes, retracts: int | None = None, if_last_seq: int | None = None
    ) -> int: ...
    def quarantine_seq(self, seq: int, if_last_seq: int | None = None) -> int: ...
    def budget_record(self) -> bytes | None: ...
    def set_budget_record(self, record: bytes) -> None: ...
    def prune(
        self,
        *,
        keep_windows: int | None = None,
        older_than: float | None = None,
        below_floor: bool = False,
    ) -> PruneReport: ...
    @staticmethod
    def delete_workspace(
        workspace: str | os.PathLike[str], *, lock_timeout: float
    ) -> DeleteReport: ...
    @staticmethod
    def delete_postgres(url: str, *, conversation: str) -> DeleteReport: ...
    @staticmethod
    def delete_memory(name: str, *, memory_files: int, other_files: int) -> DeleteReport: ...
    def rotate(self) -> RotateReport: ...
    def state(self) -> StoreState: ...
    def recover(self) -> RecoveryReport: ...
    def verify(self) -> VerifyReport: ...
    def anchor_crc_at(self, offset: int) -> int | None: ...
    @property
    def directory(self) -> pathlib.Path | None: ...
    @property
    def conversation(self) -> str | None: ...

@final
class PgMemoryFiles:
    """The memory files of a PostgreSQL conversation (rows, no file-system path). A
    refusal raises ``InvalidArgumentError`` with the memory tool's ``code``."""

    def __new__(cls, history: History) -> PgMemoryFiles: ...
    @property
    def conversation(self) -> str: ...
    def read(self, path: str) -> bytes: ...
    def entries(self, path: str) -> list[tuple[str, bool, int]]:
        """``(path, is_dir, size)`` directly in the directory ``path``."""
    def write(self, path: str, content: bytes) -> None: ...
    def update(self, path: str, edit: Callable[[bytes], bytes]) -> None: ...
    def delete(self, path: str) -> None: ...
    def rename(self, old_path: str, new_path: str) -> None: ...

@final
class SessionHistoryTool:
    def __new__(cls, history: History, *, deadline_seconds: float) -> SessionHistoryTool: ...
    def call_json(self, args_json: str) -> str: ...
    def call(self, args: object) -> dict[str, Any]: ...

# The store's results and reports: frozen, compared by value, `to_dict()` for JSON.
@final
class AppendResult:
    """What an append committed."""

    @property
    def first_seq(self) -> int: ...
    @property
    def last_seq(self) -> int: ...
    @property
    def epoch(self) -> int: ...
    @property
    def window(self) -> str: ...
    def to_dict(self) -> dict[str, Any]: ...

@final
class WindowInfo:
    """One contiguous run of a context window."""

    @property
    def window_id(self) -> str: ...
    @property
    def boundary_kind(self) -> str: ...
    @property
    def first_seq(self) -> int: ...
    @property
    def item_count(self) -> int: ...
    def to_dict(self) -> dict[str, Any]: ...

@final
class Stamp:
    """Identity, size and timestamps of a file."""

    @property
    def dev(self) -> int: ...
    @property
    def ino(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def mtime_ns(self) -> int: ...
    @property
    def ctime_ns(self) -> int: ...
    def to_dict(self) -> dict[str, Any]: ...

@final
class Receipt:
    """The append receipt (``history/receipt.json``)."""

    @property
    def version(self) -> int: ...
    @property
    def epoch(self) -> int: ...
    @property
    def state(self) -> str: ...
    @property
    def seq(self) -> int: ...
    @property
    def committed_end(self) -> int: ...
    @property
    def anchor_crc(self) -> int: ...
    @property
    def chat(self) -> Stamp | None: ...
    @property
    def archive(self) -> Stamp | None: ...
    @property
    def floor(self) -> int:
        """Seq of the newest privacy floor ever written (kept outside the rows too)."""
    def to_dict(self) -> dict[str, Any]: ...

@final
class RotateReport:
    """What ``History.rotate`` moved to the archive."""

    @property
    def rows(self) -> int: ...
    @property
    def bytes(self) -> int: ...
    @property
    def epoch(self) -> int | None: ...
    def to_dict(self) -> dict[str, Any]: ...

@final
class DeleteReport:
    """What ``History.delete`` removed for good."""

    @property
    def existed(self) -> bool: ...
    @property
    def rows(self) -> int: ...
    @property
    def bytes(self) -> int: ...
    @property
    def memory_files(self) -> int: ...
    @property
    def recovered_files(self) -> int: ...
    @property
    def other_files(self) -> int: ...
    def to_dict(self) -> dict[str, Any]: ...

@final
class PruneReport:
    """What ``History.prune`` removed for good."""

    @property
    def rows(self) -> int: ...
    @property
    def bytes(self) -> int: ...
    @property
    def kept_from(self) -> int: ...
    @property
    def floor_seq(self) -> int: ...
    @property
    def epoch(self) -> int | None: ...
    def to_dict(self) -> dict[str, Any]: ...

@final
class Database:
    @staticmethod
    def open(
        url: str,
        *,
        pool_size: int,
        pool_timeout: float,
        connect_timeout: float,
        reconnect_for: float,
        statement_timeout: float | None,
        lock_timeout: float | None,
        schema: str | None,
        migrate: bool,
        cursor_key: str | None,
    ) -> Database: ...
    def migrate(self) -> tuple[int, int]: ...
    def schema_version(self) -> int: ...
    def history(self, conversation: str, *, max_row_bytes: int, create: bool = True) -> History: ...
    def delete(self, conversation: str) -> DeleteReport: ...
    def prune(
        self,
        conversation: str,
        *,
        keep_windows: int | None = None,
        older_than: float | None = None,
        below_floor: bool = False,
    ) -> PruneReport: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    @property
    def pool_size(self) -> int: ...
    @property
    def schema(self) -> str | None: ...

def pg_ddl(schema: str | None = None) -> str: ...

@final
class FileReport:
    """Findings of a full check of one transcript file."""

    @property
    def bytes(self) -> int: ...
    @property
    def batches(self) -> int: ...
    @property
    def rows(self) -> int: ...
    @property
    def legacy_rows(self) -> int: ...
    @property
    def malformed_lines(self) -> int: ...
    @property
    def torn_bytes(self) -> int: ...
    @property
    def damage(self) -> tuple[int, int, str] | None: ...
    def to_dict(self) -> dict[str, Any]: ...

@final
class NoDetail:
    """A store with nothing to add to the common part of a report."""

    @property
    def kind(self) -> Literal["postgres", "log"]:
        """``postgres`` (a PostgreSQL conversation) or ``log`` (a byte log: the in-memory
        store)."""
    def to_dict(self) -> dict[str, Any]: ...

@final
class FileState:
    """What only a workspace's files say about the state: the receipt as stored."""

    @property
    def kind(self) -> Literal["file"]: ...
    @property
    def receipt(self) -> Receipt | None:
        """``history/receipt.json``, or ``None`` when it is missing or unreadable."""
    def to_dict(self) -> dict[str, Any]: ...

@final
class StoreState:
    """A store's epoch, last seq and floor of one moment (``History.state``)."""

    @property
    def epoch(self) -> int | None:
        """The epoch cursors are bound to; ``None`` while nothing vouches for one (nothing
        written yet, or a workspace whose receipt is missing or unreadable)."""
    @property
    def last_seq(self) -> int: ...
    @property
    def floor_seq(self) -> int: ...
    @property
    def detail(self) -> FileState | NoDetail: ...
    def to_dict(self) -> dict[str, Any]: ...

@final
class RowCounts:
    """Rows of one part of a transcript (live or archived)."""

    @property
    def rows(self) -> int:
        """Committed rows that read back as rows."""
    @property
    def malformed(self) -> int:
        """Stored rows (a workspace's lines) that do not: kept, skipped by readers."""
    def to_dict(self) -> dict[str, Any]: ...

@final
class FileVerify:
    """What only the file store's check finds: each file's bytes, batches, torn tail and
    damage, and the receipt against the files."""

    @property
    def kind(self) -> Literal["file"]: ...
    @property
    def chat(self) -> FileReport: ...
    @property
    def archive(self) -> FileReport: ...
    @property
    def receipt(self) -> ReceiptCheck:
        """``stable`` (it vouches for these files), ``copied`` (a copy or restored backup
        holding exactly what it vouches for: ok), ``stale``, ``pending``, ``malformed`` or
        ``missing``."""
    def to_dict(self) -> dict[str, Any]: ...

@final
class PostgresVerify:
    """What only a PostgreSQL conversation's check finds."""

    @property
    def kind(self) -> Literal["postgres"]: ...
    @property
    def rows_past_last_seq(self) -> int:
        """Rows stored past the conversation's last seq (inserted by hand)."""
    def to_dict(self) -> dict[str, Any]: ...

@final
class VerifyReport:
    """What ``History.verify`` found: the common part every store fills, and ``detail``,
    what only this kind of store checked."""

    @property
    def ok(self) -> bool: ...
    @property
    def epoch(self) -> int | None: ...
    @property
    def last_seq(self) -> int: ...
    @property
    def floor_seq(self) -> int: ...
    @property
    def live(self) -> RowCounts:
        """The rows new rows join (a workspace's ``chat.jsonl``)."""
    @property
    def archive(self) -> RowCounts:
        """The rows ``rotate`` archived (a workspace's ``chat-archive.jsonl``)."""
    @property
    def seq_violations(self) -> int:
        """Rows whose seq is not above every seq before them (archive, then live); for a
        PostgreSQL conversation or the in-memory store also gaps, and for a PostgreSQL
        conversation seqs missing at the tail (rows deleted by hand) and rows past its last
        seq."""
    @property
    def first_seq_violation(self) -> str | None: ...
    @property
    def detail(self) -> FileVerify | PostgresVerify | NoDetail: ...
    def to_dict(self) -> dict[str, Any]: ...

@final
class FileRecovery:
    """What only the file store's recovery does."""

    @property
    def kind(self) -> Literal["file"]: ...
    @property
    def chat_torn_bytes(self) -> int: ...
    @property
    def archive_torn_bytes(self) -> int: ...
    @property
    def moved_to(self) -> list[str]: ...
    @property
    def rotation_rolled_back_bytes(self) -> int: ...
    @property
    def damage(self) -> str | None: ...
    def to_dict(self) -> dict[str, Any]: ...

@final
class RecoveryReport:
    """What ``History.recover`` did."""

    @property
    def changed(self) -> bool: ...
    @property
    def epoch(self) -> int | None: ...
    @property
    def detail(self) -> FileRecovery | NoDetail: ...
    def to_dict(self) -> dict[str, Any]: ...

@final
class WindowFold:
    """The core's incremental window fold over one store: windows, floor, retractions,
    visible rows, claims, open tool calls, a scheduled ``new_context``, the last user
    message. ``advance()`` reads only the rows appended since its last call (the current
    window's rows on the first call) in one store call, without the GIL."""

    def __new__(cls, history: History) -> WindowFold: ...
    @staticmethod
    def detached() -> WindowFold:
        """A fold over no store: it notes the rows handed to ``note()``."""
    def note(self, rows: Iterable[object]) -> bool:
        """Notes ``rows`` (``Row`` objects or dicts) in order; ``window changed``."""
    def advance(self) -> tuple[list[Row], bool]:
        """``(new rows, window changed)``."""
    def append(
        self, rows: list[Any], if_last_seq: int | None = None
    ) -> tuple[AppendResult, list[Row], bool]:
        """Appends ``rows`` (conditional on ``if_last_seq``), then reads what was
        appended since the last call, in one store call: ``(appended, new rows, window
        changed)``."""
    @property
    def window_id(self) -> str: ...
    @property
    def previous_window_id(self) -> str | None: ...
    @property
    def window_kind(self) -> str:
        """``root``, ``rollover`` or ``reset``."""
    @property
    def window_first_seq(self) -> int | None: ...
    @property
    def last_seq(self) -> int:
        """The store's last seq as of the last ``advance()``: the ``if_last_seq`` of a
        decision made on these rows."""
    @property
    def floor_seq(self) -> int: ...
    @property
    def retracted(self) -> list[int]: ...
    def is_retracted(self, seq: int) -> bool: ...
    @property
    def visible_seqs(self) -> list[int]:
        """Rows of the current window a request carries (messages, lead-ins,
        advisories, continuations; not retracted), in order."""
    def visible_tail(self, n: int) -> list[int]:
        """The last ``n`` of :attr:`visible_seqs` (all of them if fewer)."""
    @property
    def item_count(self) -> int: ...
    @property
    def claims(self) -> tuple[bool, bool, bool]:
        """``(warning, handoff, final)`` advisories published in the current window."""
    @property
    def open_calls(self) -> list[tuple[str, str, Any, int]]:
        """``(call_id, name, arguments, seq)`` of calls without a result, oldest first."""
    def is_answered(self, call_id: str) -> bool: ...
    @property
    def new_context_requested(self) -> bool: ...
    @property
    def last_user_seq(self) -> int | None: ...
    @property
    def facts(
        self,
    ) -> tuple[str, str | None, int, tuple[bool, bool, bool], bool, int | None, int]:
        """``(window_id, previous_window_id, last_seq, claims, new_context_requested,
        last_user_seq, open_call_count)`` in one read."""

@final
class RowFold:
    """The core's window fold over rows handed in (no store): what
    ``NewContextTool.requested_in`` and ``ctxbudget plot``'s estimate read."""

    def __new__(cls) -> RowFold: ...
    def note(self, rows: Iterable[object]) -> None:
        """Notes ``rows`` (``Row`` objects or dicts) in order; unknown rows are skipped."""
    @property
    def window_id(self) -> str: ...
    @property
    def visible_seqs(self) -> list[int]:
        """Rows of the current window a request carries (not retracted, not
        quarantined), in order."""
    @property
    def new_context_requested(self) -> bool: ...

def claims_of_rows(
    rows: Iterable[object], claims: tuple[bool, bool, bool]
) -> tuple[bool, bool, bool]:
    """``(warning, handoff, final)`` plus what ``rows`` publish (the fold's rule)."""

# The I/O pool of the async API (offload.rs; used by _bridge.py).
@final
class Completions:
    def __new__(cls) -> Completions: ...
    def fileno(self) -> int: ...
    def drain(self) -> list[int]: ...
    def ticket(self) -> int: ...
    def post(self, id: int) -> None: ...
    def resume(self, glet: object, *args: object) -> Any: ...

def _offload_register(wait: Callable[[int], None]) -> None: ...
def offload_pool(max_threads: int | None = None) -> tuple[int, int, int]: ...
def fsync(fd: int) -> None: ...
def _offload_active() -> bool: ...

# Present only in builds with the `failpoints` feature (the development build).
def _arm_failpoint(name: str, action: str) -> None: ...
def _reset_failpoints() -> None: ...
def _panic_for_test() -> None: ...
