"""ctxbudget: token-budget context windows for agent backends.

Exact, linear-time token counting over tiktoken's encodings and a crash-safe JSONL
transcript store (Rust core, GIL released).
"""

from __future__ import annotations

from . import prompts
from ._ctxbudget import __version__
from .aio import AsyncSession
from .database import Database
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
from .history import (
    AppendResult,
    DeleteReport,
    Durability,
    FileReport,
    History,
    PruneReport,
    Receipt,
    RecoveryReport,
    RotateReport,
    Row,
    RowKind,
    Stamp,
    VerifyReport,
    WindowInfo,
)
from .media import ImageSize, image_size, image_tokens
from .policy import Action, Budget, Claims, Decision
from .prompts import DEFAULT_PROMPTS, Capabilities, PromptContext, Prompts
from .session import (
    INTERRUPTED_OUTPUT,
    KeyedMessage,
    OpenCall,
    RequestHook,
    Session,
    SyncReport,
    Turn,
)
from .session_history import SessionHistoryTool
from .settings import Settings, Strategy
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
from .tools import MemoryTool, NewContextTool, RuleAction, ToolPolicy, ToolRule
from .window import WindowView

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
    "PolicyError",
    "PromptContext",
    "Prompts",
    "PruneReport",
    "Receipt",
    "RecoveryReport",
    "RequestHook",
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
]
