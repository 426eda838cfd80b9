"""ctxbudget: token-budget context windows for agent backends.

Exact, linear-time token counting over tiktoken's encodings (Rust core, GIL released).
"""

from __future__ import annotations

from ._ctxbudget import __version__
from .errors import (
    CtxBudgetError,
    InvalidJsonError,
    TokenizerError,
    UnknownEncodingError,
    UnknownModelError,
)
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
    "CtxBudgetError",
    "Encoding",
    "InvalidJsonError",
    "TokenCount",
    "TokenizerError",
    "UnknownEncodingError",
    "UnknownModelError",
    "__version__",
    "count_tokens",
    "encoding_for_model",
    "encoding_names",
]
