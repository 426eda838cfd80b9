# Hand-written stub of the Rust extension module; checked by `python -m mypy.stubtest`.
import os
import pathlib
from typing import Any, final

from ctxbudget.history import Row

__all__ = [
    "ADVISORY_HEADROOM",
    "BOUNDARY_SLACK",
    "DEFAULT_CACHE_SIZE",
    "FAILPOINTS",
    "FINAL_ZONE",
    "FRAMING_TOKENS",
    "IMAGE_TOKENS",
    "MIN_THRESHOLD_BP",
    "OFF_BP",
    "OUTPUT_RESERVE_MAX",
    "PDF_MAX_PAGES",
    "PDF_PAGE_TOKENS",
    "REQUEST_TOKENS",
    "WARNING_ADVANCE_MIN",
    "BudgetCore",
    "Encoding",
    "History",
    "SessionHistory",
    "WindowFold",
    "__version__",
    "_arm_failpoint",
    "_panic_for_test",
    "_reset_failpoints",
    "claims_after",
    "encode_rows",
    "encoding_names",
    "model_encoding",
    "threshold_is_off",
]

__version__: str
BOUNDARY_SLACK: int
DEFAULT_CACHE_SIZE: int
FAILPOINTS: bool
ADVISORY_HEADROOM: int
FINAL_ZONE: int
FRAMING_TOKENS: int
IMAGE_TOKENS: int
PDF_MAX_PAGES: int
PDF_PAGE_TOKENS: int
REQUEST_TOKENS: int
MIN_THRESHOLD_BP: int
OFF_BP: int
OUTPUT_RESERVE_MAX: int
WARNING_ADVANCE_MIN: int

@final
class BudgetCore:
    def __new__(
        cls, context_window: int, threshold: float, output_reserve: int | None = None
    ) -> BudgetCore: ...
    def points(self) -> tuple[int, int, int, int, int, int, int]: ...
    def evaluate(
        self,
        projected: int,
        warning: bool,
        handoff: bool,
        final_prompt: bool,
        new_context_offered: bool,
    ) -> tuple[str, bool]: ...

def threshold_is_off(threshold: float) -> bool: ...

@final
class Encoding:
    def __new__(
        cls, name: str, *, cache_size: int = ..., chunk_bytes: int | None = None
    ) -> Encoding: ...
    @staticmethod
    def for_model(model: str, *, cache_size: int = ...) -> Encoding: ...
    @property
    def name(self) -> str: ...
    @property
    def estimate_scale_bp(self) -> int | None: ...
    def count(self, text: str) -> int: ...
    def count_detail(self, text: str) -> tuple[int, bool, int]: ...
    def count_many(self, texts: list[str] | tuple[str, ...]) -> list[int]: ...
    def count_json(self, json_text: str) -> int: ...
    def cache_len(self) -> int: ...
    def clear_cache(self) -> None: ...

def encode_rows(rows: list[Any]) -> bytes: ...
def encoding_names() -> list[str]: ...
def model_encoding(model: str) -> tuple[str, int | None] | None: ...
def _panic_for_test() -> None: ...

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
    def append(
        self, rows: list[Any], if_last_seq: int | None = None
    ) -> tuple[int, int, int, str]: ...
    def rows(self, since_seq: int = 0) -> list[Row]: ...
    def raw_rows(self, since_seq: int = 0) -> list[tuple[int | None, str, bytes]]: ...
    def windows(self) -> str: ...
    def current_window(self) -> str: ...
    def rollover(
        self,
        *,
        rollover_id: str,
        reason: str,
        requested_by: str | None,
        lead_in: str,
        trigger_json: bytes | None,
        figures_json: bytes | None,
        if_last_seq: int | None = None,
    ) -> str: ...
    def clear_soft(self) -> int: ...
    def quarantine(
        self, row_json: bytes, retracts: int | None = None, if_last_seq: int | None = None
    ) -> int: ...
    def rotate(self) -> str: ...
    def receipt(self) -> str: ...
    def recover(self) -> str: ...
    def verify(self) -> str: ...
    def anchor_crc_at(self, offset: int) -> int | None: ...
    @property
    def directory(self) -> pathlib.Path: ...

@final
class SessionHistory:
    def __new__(cls, history: History, *, deadline_seconds: float) -> SessionHistory: ...
    def call_json(self, args_json: str) -> str: ...
    def call(self, args: object) -> dict[str, Any]: ...

@final
class WindowFold:
    """The core's incremental window fold over one store: windows, floor, retractions,
    visible rows, claims, open tool calls, a scheduled ``new_context``, the last user
    message. ``advance()`` reads only the rows appended since its last call (the current
    window's rows on the first call) in one store call, without the GIL."""

    def __new__(cls, history: History) -> WindowFold: ...
    def advance(self) -> tuple[list[Row], bool]:
        """``(new rows, window changed)``."""
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

# Present only in builds with the `failpoints` feature (the development build).
def _arm_failpoint(name: str, action: str) -> None: ...
def _reset_failpoints() -> None: ...
def claims_after(
    kind: str, meta: object, claims: tuple[bool, bool, bool]
) -> tuple[bool, bool, bool]:
    """``(warning, handoff, final)`` plus what one row publishes (the fold's rule)."""
