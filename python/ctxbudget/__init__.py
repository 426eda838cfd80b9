"""ctxbudget: token-budget context windows for agent backends.

Exact, linear-time token counting over tiktoken's encodings and a crash-safe JSONL
transcript store (Rust core, GIL released).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._ctxbudget import __version__
from .errors import (
    ConflictError,
    ConversationDeletedError,
    CorruptHistoryError,
    CtxBudgetError,
    DatabaseClosedError,
    DatabaseError,
    HistoryIOError,
    InternalError,
    InvalidArgumentError,
    InvalidJsonError,
    InvalidRowError,
    LockTimeoutError,
    LoopAffinityError,
    MediaError,
    MessageChangedError,
    PolicyError,
    SchemaNotMigratedError,
    SettingsError,
    TokenizerError,
    UnknownEncodingError,
    UnknownModelError,
)
from .tokens import (
    DEFAULT_CACHE_SIZE,
    MESSAGE_TOKENS,
    Encoding,
    TokenCount,
    count_messages,
    count_tokens,
    encoding_for_model,
    encoding_names,
)

# What the package exports beyond errors and counting is imported on first use (PEP 562):
# `import ctxbudget` then costs the counting layer only, not the session, async and tool
# layers (about 0.3 s of imports), so a process that only counts starts fast. Name -> the
# submodule defining it (None: the name is that submodule).
_LAZY: dict[str, str | None] = {
    "prompts": None,
    "AsyncSession": "aio",
    "Database": "database",
    "AppendResult": "history",
    "DeleteReport": "history",
    "Durability": "history",
    "FileReport": "history",
    "History": "history",
    "PruneReport": "history",
    "Receipt": "history",
    "RecoveryReport": "history",
    "Role": "history",
    "RotateReport": "history",
    "Row": "history",
    "RowKind": "history",
    "Stamp": "history",
    "VerifyReport": "history",
    "WindowInfo": "history",
    "ImageSize": "media",
    "image_size": "media",
    "image_tokens": "media",
    "Action": "policy",
    "Budget": "policy",
    "Claims": "policy",
    "CountSplit": "policy",
    "Decision": "policy",
    "Capabilities": "prompts",
    "DEFAULT_PROMPTS": "prompts",
    "PromptContext": "prompts",
    "Prompts": "prompts",
    "CountRequest": "session",
    "INTERRUPTED_OUTPUT": "session",
    "KeyedMessage": "session",
    "OpenCall": "session",
    "PendingCount": "session",
    "RequestCounter": "session",
    "RequestHook": "session",
    "Session": "session",
    "SyncReport": "session",
    "Turn": "session",
    "SessionHistoryTool": "session_history",
    "Settings": "settings",
    "Strategy": "settings",
    "MemoryTool": "tools",
    "NewContextTool": "tools",
    "RuleAction": "tools",
    "ToolPolicy": "tools",
    "ToolRule": "tools",
    "Usage": "usage",
    "usage_of": "usage",
    "WindowView": "window",
}

if TYPE_CHECKING:
    from . import prompts
    from .aio import AsyncSession
    from .database import Database
    from .history import (
        AppendResult,
        DeleteReport,
        Durability,
        FileReport,
        History,
        PruneReport,
        Receipt,
        RecoveryReport,
        Role,
        RotateReport,
        Row,
        RowKind,
        Stamp,
        VerifyReport,
        WindowInfo,
    )
    from .media import ImageSize, image_size, image_tokens
    from .policy import Action, Budget, Claims, CountSplit, Decision
    from .prompts import DEFAULT_PROMPTS, Capabilities, PromptContext, Prompts
    from .session import (
        INTERRUPTED_OUTPUT,
        CountRequest,
        KeyedMessage,
        OpenCall,
        PendingCount,
        RequestCounter,
        RequestHook,
        Session,
        SyncReport,
        Turn,
    )
    from .session_history import SessionHistoryTool
    from .settings import Settings, Strategy
    from .tools import MemoryTool, NewContextTool, RuleAction, ToolPolicy, ToolRule
    from .usage import Usage, usage_of
    from .window import WindowView


def __getattr__(name: str) -> Any:
    try:
        module = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'ctxbudget' has no attribute {name!r}") from None
    loaded = importlib.import_module(f".{module or name}", __name__)
    value = loaded if module is None else getattr(loaded, name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "DEFAULT_CACHE_SIZE",
    "DEFAULT_PROMPTS",
    "INTERRUPTED_OUTPUT",
    "MESSAGE_TOKENS",
    "Action",
    "AppendResult",
    "AsyncSession",
    "Budget",
    "Capabilities",
    "Claims",
    "ConflictError",
    "ConversationDeletedError",
    "CorruptHistoryError",
    "CountRequest",
    "CountSplit",
    "CtxBudgetError",
    "Database",
    "DatabaseClosedError",
    "DatabaseError",
    "Decision",
    "DeleteReport",
    "Durability",
    "Encoding",
    "FileReport",
    "History",
    "HistoryIOError",
    "ImageSize",
    "InternalError",
    "InvalidArgumentError",
    "InvalidJsonError",
    "InvalidRowError",
    "KeyedMessage",
    "LockTimeoutError",
    "LoopAffinityError",
    "MediaError",
    "MemoryTool",
    "MessageChangedError",
    "NewContextTool",
    "OpenCall",
    "PendingCount",
    "PolicyError",
    "PromptContext",
    "Prompts",
    "PruneReport",
    "Receipt",
    "RecoveryReport",
    "RequestCounter",
    "RequestHook",
    "Role",
    "RotateReport",
    "Row",
    "RowKind",
    "RuleAction",
    "SchemaNotMigratedError",
    "Session",
    "SessionHistoryTool",
    "Settings",
    "SettingsError",
    "Stamp",
    "Strategy",
    "SyncReport",
    "TokenCount",
    "TokenizerError",
    "ToolPolicy",
    "ToolRule",
    "Turn",
    "UnknownEncodingError",
    "UnknownModelError",
    "Usage",
    "VerifyReport",
    "WindowInfo",
    "WindowView",
    "__version__",
    "count_messages",
    "count_tokens",
    "encoding_for_model",
    "encoding_names",
    "image_size",
    "image_tokens",
    "prompts",
    "usage_of",
]
