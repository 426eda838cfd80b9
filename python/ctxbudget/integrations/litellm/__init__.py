"""LiteLLM integration (``pip install 'ctxbudget[litellm]'``).

A LiteLLM loop is the plain loop: ``Session.open(workspace, model="openai/gpt-4o")``
(LiteLLM's model names resolve; when the program has imported LiteLLM, its
``get_model_info`` gives the context window and its provider routing the tokenizer's
model name, with ctxbudget's own table as the fallback — see :mod:`.models`),
``litellm.completion(model=..., **turn.to_openai_chat())``, then
:meth:`ctxbudget.Session.add_assistant_from_litellm` with the response. Importing
ctxbudget never imports LiteLLM.
"""

from __future__ import annotations

from .models import litellm_model, litellm_window

__all__ = ["litellm_model", "litellm_window"]
