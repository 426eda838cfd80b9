"""Model names and context windows as LiteLLM knows them.

Consulted only when the program has imported LiteLLM (it is in ``sys.modules``):
ctxbudget never imports it itself, since importing it costs seconds. Then a model's
context window is LiteLLM's ``max_input_tokens`` for it (``litellm.get_model_info``),
and a model whose tokenizer ctxbudget cannot tell from its full name is looked up by the
name LiteLLM sends to its provider (``litellm.get_llm_provider``). Anything LiteLLM does
not know falls back to ctxbudget's own table.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["litellm_model", "litellm_window"]

_SERVER_DECIDES = ("ollama", "ollama_chat")
"""Providers whose server decides the window (its ``num_ctx``): LiteLLM's figure for
them is a guess, so ctxbudget asks for ``context_window`` instead."""


def _litellm() -> Any:
    return sys.modules.get("litellm")


def litellm_window(model: str) -> int | None:
    """LiteLLM's input window for ``model``, or ``None`` (LiteLLM not imported, the
    model unknown to it, or a provider whose server decides)."""
    litellm = _litellm()
    if litellm is None or model.split("/", 1)[0] in _SERVER_DECIDES:
        return None
    try:
        info = litellm.get_model_info(model)
    except Exception:  # LiteLLM raises its own errors (and more) for unmapped models
        return None
    window = info.get("max_input_tokens") or info.get("max_tokens")
    return window if isinstance(window, int) and window > 0 else None


def litellm_model(model: str) -> str | None:
    """The name LiteLLM sends ``model`` to its provider under (``openai/gpt-4o`` ->
    ``gpt-4o``), or ``None``."""
    litellm = _litellm()
    if litellm is None:
        return None
    try:
        name = litellm.get_llm_provider(model)[0]
    except Exception:  # not a name LiteLLM can route
        return None
    return name if isinstance(name, str) and name and name != model else None
