# Hand-written stub of the Rust extension module; checked by `python -m mypy.stubtest`.
import os
import pathlib
from collections.abc import Callable
from typing import Any, final

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
    "Completions",
    "Encoding",
    "History",
    "SessionHistory",
    "__version__",
    "_arm_failpoint",
    "_offload_active",
    "_offload_register",
    "_panic_for_test",
    "_reset_failpoints",
    "encode_rows",
    "encoding_names",
    "fsync",
    "model_encoding",
    "offload_pool",
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
    def rows(self, since_seq: int = 0) -> list[tuple[int | None, str, bytes]]: ...
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

# The I/O pool of the async API (offload.rs; used by _bridge.py).
@final
class Completions:
    def __new__(cls) -> Completions: ...
    def fileno(self) -> int: ...
    def drain(self) -> list[int]: ...
    def resume(self, glet: object, *args: object) -> Any: ...

def _offload_register(wait: Callable[[int], None]) -> None: ...
def offload_pool(max_threads: int | None = None) -> tuple[int, int, int]: ...
def fsync(fd: int) -> None: ...
def _offload_active() -> bool: ...

# Present only in builds with the `failpoints` feature (the development build).
def _arm_failpoint(name: str, action: str) -> None: ...
def _reset_failpoints() -> None: ...
