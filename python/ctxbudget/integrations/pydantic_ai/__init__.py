"""Pydantic AI integration (``pip install 'ctxbudget[pydantic-ai]'``).

:class:`CtxBudget` is a capability: ``Agent(model, capabilities=[CtxBudget(workspace,
model=model)])`` runs the ladder before every model request (the agent's instructions,
system prompts and every tool counted, the context window from the model's profile),
offers ``session_history``, ``memory`` and ``new_context`` as the agent's tools, and
sends the window instead of the whole history. The history is recorded by its
messages' keys (:meth:`ctxbudget.Session.sync_messages`), so a second process continuing
the conversation (``message_history=``) records nothing twice. Importing this package
imports no Pydantic AI module until :class:`CtxBudget` is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._common import NotSentError

if TYPE_CHECKING:
    from .capability import CtxBudget

__all__ = ["CtxBudget", "NotSentError"]


def __getattr__(name: str) -> Any:
    if name == "CtxBudget":
        from .capability import CtxBudget

        return CtxBudget
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
