"""What a provider reported it counted for a request (SPEC §1, usage anchoring).

Every provider reply reports the input tokens of the request it answered.
:meth:`Session.add_assistant(..., usage=...) <ctxbudget.Session.add_assistant>` records
that figure durably with the reply (``meta.usage``), bound to the request the session
prepared (``meta.request``), and the next request's count starts from it. :func:`usage_of`
reads the providers' own usage objects and dicts:

- OpenAI Chat Completions: ``completion.usage.prompt_tokens``;
- OpenAI Responses and the Agents SDK: ``usage.input_tokens`` (cached tokens included);
- Anthropic Messages: ``input_tokens + cache_creation_input_tokens +
  cache_read_input_tokens`` (Anthropic reports the cached parts apart);
- Gemini: ``usageMetadata.promptTokenCount`` (REST) or
  ``usage_metadata.prompt_token_count`` (the ``google-genai`` SDK).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import InvalidArgumentError

__all__ = ["Usage", "usage_of"]


@dataclass(frozen=True, slots=True)
class Usage:
    """Input tokens a provider counted for one request."""

    input_tokens: int
    """Every input token the provider counted, cache reads and writes included."""

    def __post_init__(self) -> None:
        value = self.input_tokens
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidArgumentError(
                f"usage input_tokens must be a non-negative int, got {value!r}"
            )

    def to_meta(self) -> dict[str, int]:
        """The row metadata that records it (``meta.usage``)."""
        return {"input_tokens": self.input_tokens}


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)


def _count(obj: Any, key: str) -> int | None:
    value = _get(obj, key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgumentError(f"usage field {key!r} must be a non-negative int, got {value!r}")
    return value


_NESTED = ("usage", "usage_metadata", "usageMetadata")


def usage_of(value: object) -> Usage | None:
    """The :class:`Usage` a provider's usage object, usage dict or whole reply reports;
    ``None`` for ``None`` or a reply without usage. A usage whose figures are not
    non-negative ints is an :class:`~ctxbudget.InvalidArgumentError`."""
    if value is None or isinstance(value, Usage):
        return value
    if isinstance(value, (str, bytes, int, float)):
        raise InvalidArgumentError(
            f"usage must be a provider's usage object or dict (or ctxbudget.Usage), "
            f"got {type(value).__name__}"
        )
    prompt = _count(value, "prompt_tokens")
    if prompt is not None:  # OpenAI Chat Completions
        return Usage(prompt)
    gemini = _count(value, "promptTokenCount")
    if gemini is None:
        gemini = _count(value, "prompt_token_count")
    if gemini is not None:  # Gemini (REST or google-genai)
        return Usage(gemini)
    base = _count(value, "input_tokens")
    if base is not None:  # Anthropic (cache parts apart), OpenAI Responses, Agents SDK
        written = _count(value, "cache_creation_input_tokens") or 0
        read = _count(value, "cache_read_input_tokens") or 0
        return Usage(base + written + read)
    for key in _NESTED:
        nested = _get(value, key)
        if nested is not None and nested is not value:
            return usage_of(nested)
    return None
