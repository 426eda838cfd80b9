"""LangChain and LangGraph integration (``pip install 'ctxbudget[langchain]'``).

- :class:`CtxBudgetMiddleware` — ``create_agent(model, tools, middleware=[budget])``:
  the ladder before every model call (the agent's system prompt and every tool it is
  bound to counted), ``session_history``, ``memory`` and ``new_context`` as the agent's
  tools, the window handed to the model instead of the whole history, one
  :class:`~ctxbudget.Session` per LangGraph thread. Its :meth:`~CtxBudgetMiddleware.
  pre_model_hook` does the same for LangGraph's ``create_react_agent``.
- :func:`token_counter` — a ``token_counter`` for ``trim_messages`` that counts
  LangChain messages as ctxbudget counts a request.

The state's messages are recorded by their IDs (:meth:`ctxbudget.Session.sync_messages`),
so a second process continuing the same thread records nothing twice. Importing this
package imports no LangChain module until :class:`CtxBudgetMiddleware` is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._common import NotSentError
from .messages import keyed, token_counter

if TYPE_CHECKING:
    from .middleware import CtxBudgetMiddleware, thread_id

__all__ = ["CtxBudgetMiddleware", "NotSentError", "keyed", "thread_id", "token_counter"]


def __getattr__(name: str) -> Any:
    if name in ("CtxBudgetMiddleware", "thread_id"):
        from . import middleware

        return getattr(middleware, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
