"""The budget ladder inside a LangChain v1 agent (``create_agent(middleware=[...])``)
and a LangGraph ``create_react_agent(pre_model_hook=...)``, on the same code.

Before every model call the agent's state messages are synced into the conversation's
:class:`~ctxbudget.Session` by their IDs (:meth:`Session.sync_messages`: recorded once,
whichever process runs the thread), the agent's system prompt and every tool the model
is bound to are set as the session's request (so they are counted), ``prepare()`` runs
the ladder, and the model is handed the window — lead-ins, advisories, ``[id: N]``
suffixes — instead of the whole history. The reply is recorded as soon as it arrives,
under the ID the state keeps for it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import BaseMessage, SystemMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import BaseTool, StructuredTool

from ...aio import AsyncSession
from ...session import Session, Turn
from .._common import Conversations, NotSentError
from .messages import keyed, tool_definitions, window_messages, with_ids

if TYPE_CHECKING:
    from langchain.agents.middleware.types import ModelRequest, ModelResponse

__all__ = ["CtxBudgetMiddleware", "thread_id"]


def thread_id() -> str | None:
    """The LangGraph thread the current run belongs to (``configurable.thread_id``),
    ``None`` outside a graph run or without one."""
    from langgraph.config import get_config

    try:
        config = get_config()
    except RuntimeError:
        return None
    found = (config.get("configurable") or {}).get("thread_id")
    return None if found is None else str(found)


def _own_names(session: Session) -> set[str]:
    return {str(t["name"]) for t in session.own_tools}


def _request_parts(
    session: Session, system: str, tools: Sequence[BaseTool | Mapping[str, Any]]
) -> dict[str, Any]:
    """``set_request`` arguments: the agent's system text, its own tools as the host's,
    and which of ctxbudget's tools it offers."""
    own = _own_names(session)
    definitions = tool_definitions(tools)

    def name(d: Mapping[str, Any]) -> Any:
        function = d.get("function")
        return function.get("name") if isinstance(function, Mapping) else d.get("name")

    return {
        "system": system,
        "tools": [d for d in definitions if name(d) not in own],
        "own_tools": [str(name(d)) for d in definitions if name(d) in own],
    }


def _system_text(message: BaseMessage | None) -> str:
    if message is None:
        return ""
    content = message.content
    if isinstance(content, str):
        return content
    return "\n".join(str(p.get("text", "")) if isinstance(p, Mapping) else str(p) for p in content)


def _sent(turn: Turn) -> Turn:
    if turn.status != "send":
        raise NotSentError(turn)
    return turn


class CtxBudgetMiddleware(AgentMiddleware):
    """The budget ladder for LangChain agents, one :class:`~ctxbudget.Session` per
    LangGraph thread.

    ``CtxBudgetMiddleware(workspace, model="gpt-4o")`` takes the options of
    :meth:`Session.open`; each thread's transcript is kept under ``workspace`` (see
    :class:`~ctxbudget.integrations._common.Conversations`). Pass it in
    ``create_agent(middleware=[...])``: it adds ``session_history``, ``memory`` and
    ``new_context`` to the agent's tools. For ``create_react_agent``, pass
    :meth:`pre_model_hook` and :attr:`tools` instead.
    """

    def __init__(self, workspace: str | os.PathLike[str], **options: Any) -> None:
        self.conversations = Conversations(workspace, **options)
        # The keyless conversation, opened now: a bad option fails here, not mid-run,
        # and it gives the tool definitions every conversation shares.
        self._definitions = self.conversations.session(None).own_tools
        self.tools: list[BaseTool] = [self._tool(d) for d in self._definitions]
        self.last_turn: Turn | None = None

    # ----- the three tools -------------------------------------------------------------

    def session(self) -> Session:
        """The current thread's session (the keyless one outside a thread)."""
        return self.conversations.session(thread_id())

    def _tool(self, definition: Mapping[str, Any]) -> BaseTool:
        name = str(definition["name"])

        def call(**arguments: Any) -> str:
            result = self.session().run_tool(name, arguments)
            return json.dumps(result, ensure_ascii=False)

        async def acall(**arguments: Any) -> str:
            _, aio = self.conversations.pair(thread_id())
            return json.dumps(await aio.run_tool(name, arguments), ensure_ascii=False)

        return StructuredTool(
            name=name,
            description=str(definition["description"]),
            args_schema=dict(definition["parameters"]),
            func=call,
            coroutine=acall,
        )

    # ----- the model call ----------------------------------------------------------------

    def _prepare(
        self,
        messages: Sequence[BaseMessage],
        system: str,
        tools: Sequence[BaseTool | Mapping[str, Any]],
    ) -> tuple[Session, Turn, list[BaseMessage]]:
        s = self.session()
        s.sync_messages(keyed(messages))
        s.set_request(**_request_parts(s, system, tools))
        turn = _sent(s.prepare())
        self.last_turn = turn
        _, window = window_messages(turn)
        return s, turn, window

    async def _aprepare(
        self,
        messages: Sequence[BaseMessage],
        system: str,
        tools: Sequence[BaseTool | Mapping[str, Any]],
    ) -> tuple[AsyncSession, Turn, list[BaseMessage]]:
        s, aio = self.conversations.pair(thread_id())
        await aio.sync_messages(keyed(messages))
        await aio.set_request(**_request_parts(s, system, tools))
        turn = _sent(await aio.prepare())
        self.last_turn = turn
        _, window = window_messages(turn)
        return aio, turn, window

    def _override(self, request: ModelRequest[Any], turn: Turn, window: list[Any]) -> Any:
        system = SystemMessage(turn.system) if turn.system else None
        return request.override(messages=window, system_message=system)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        """Runs the ladder and calls the model with the window; records the reply."""
        system = _system_text(request.system_message)
        s, turn, window = self._prepare(request.messages, system, request.tools)
        response = handler(self._override(request, turn, window))
        with_ids(response.result)
        s.sync_messages(keyed(response.result))
        return response

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        """:meth:`wrap_model_call` for ``ainvoke`` and ``astream`` (store I/O and
        counting off the event loop)."""
        system = _system_text(request.system_message)
        aio, turn, window = await self._aprepare(request.messages, system, request.tools)
        response = await handler(self._override(request, turn, window))
        with_ids(response.result)
        await aio.sync_messages(keyed(response.result))
        return response

    # ----- LangGraph's pre-model hook ----------------------------------------------------

    def pre_model_hook(
        self, tools: Sequence[BaseTool | Mapping[str, Any]], *, system_prompt: str = ""
    ) -> Any:
        """A ``pre_model_hook`` for LangGraph's ``create_react_agent``: the same ladder
        over the graph's messages, the model handed the window as
        ``llm_input_messages`` (the system text first). Give it the tools the agent is
        created with (:attr:`tools` included) and the system prompt — passed here, not
        as the agent's ``prompt``, so that it is counted and sent once. The model's reply
        is recorded at the next call (the graph state holds it under its ID)."""
        every = list(tools)

        def hook(state: Mapping[str, Any]) -> dict[str, Any]:
            _, turn, window = self._prepare(state["messages"], system_prompt, every)
            head = [SystemMessage(turn.system)] if turn.system else []
            return {"llm_input_messages": [*head, *window]}

        async def ahook(state: Mapping[str, Any]) -> dict[str, Any]:
            _, turn, window = await self._aprepare(state["messages"], system_prompt, every)
            head = [SystemMessage(turn.system)] if turn.system else []
            return {"llm_input_messages": [*head, *window]}

        return RunnableLambda(hook, afunc=ahook, name="ctxbudget")
