"""ctxbudget: token-budget context windows for agent backends.

Exact, linear-time token counting over tiktoken's encodings and a crash-safe JSONL
transcript store (Rust core, GIL released).
"""

from __future__ import annotations

from ._ctxbudget import __version__
from .errors import (
    CorruptHistoryError,
    CtxBudgetError,
    HistoryIOError,
    InvalidArgumentError,
    InvalidJsonError,
    InvalidRowError,
    LockTimeoutError,
    TokenizerError,
    UnknownEncodingError,
    UnknownModelError,
)
from .history import (
    AppendResult,
    Durability,
    History,
    Receipt,
    RecoveryReport,
    RotateReport,
    Row,
    RowKind,
    VerifyReport,
    WindowInfo,
)
from .session_history import SessionHistoryTool
from .tokens import (
    BOUNDARY_SLACK,
    DEFAULT_CACHE_SIZE,
    Encoding,
    TokenCount,
    count_tokens,
    encoding_for_model,
    encoding_names,
)

__all__ = [
    "BOUNDARY_SLACK",
    "DEFAULT_CACHE_SIZE",
    "AppendResult",
    "CorruptHistoryError",
    "CtxBudgetError",
    "Durability",
    "Encoding",
    "History",
    "HistoryIOError",
    "InvalidArgumentError",
    "InvalidJsonError",
    "InvalidRowError",
    "LockTimeoutError",
    "Receipt",
    "RecoveryReport",
    "RotateReport",
    "Row",
    "RowKind",
    "SessionHistoryTool",
    "TokenCount",
    "TokenizerError",
    "UnknownEncodingError",
    "UnknownModelError",
    "VerifyReport",
    "WindowInfo",
    "__version__",
    "count_tokens",
    "encoding_for_model",
    "encoding_names",
]
