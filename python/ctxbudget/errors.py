"""The exceptions ctxbudget raises, rooted at :class:`CtxBudgetError`.

Each class also derives from the builtin that fits it, so ``except ValueError`` keeps
working for callers that do not know ctxbudget. The Rust binding raises these very
classes (it looks them up here), so there is one hierarchy for both layers.
"""

from __future__ import annotations

__all__ = [
    "CtxBudgetError",
    "InvalidJsonError",
    "TokenizerError",
    "UnknownEncodingError",
    "UnknownModelError",
]


class CtxBudgetError(Exception):
    """Base class of every error raised by ctxbudget."""


class UnknownEncodingError(CtxBudgetError, ValueError):
    """The encoding name is not one ctxbudget ships.

    Attributes: ``name`` (what was asked for), ``known`` (the valid names).
    """

    name: str
    known: list[str]


class UnknownModelError(CtxBudgetError, ValueError):
    """No tokenizer is known for the model; pass an explicit encoding instead.

    Attribute: ``model``.
    """

    model: str


class InvalidJsonError(CtxBudgetError, ValueError):
    """Input to ``count_json`` is not valid JSON (or not JSON-serializable).

    Attributes: ``line`` and ``column`` (1-based) when the text failed to parse.
    """

    line: int
    column: int


class TokenizerError(CtxBudgetError, RuntimeError):
    """The tokenizer could not produce a count (a bug: please report the input).

    Raised instead of crashing the interpreter or guessing from characters.
    """
