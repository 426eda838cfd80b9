"""The budget ladder as a Pydantic AI capability (``Agent(capabilities=[budget])``).

Before every model request the run's message history is synced into the conversation's
:class:`~ctxbudget.Session` by the messages' keys (recorded once, whichever process runs
the conversation), the agent's instructions, system prompts and every tool the request
offers (function and output tools) are set as the session's request so they are
counted, ``prepare()`` runs the ladder, and the model is sent the window instead of the
whole history, with the session's system text as its instructions. The reply is
recorded as it arrives. The persistent history Pydantic AI keeps is left as it is.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import InstructionPart, ModelResponse
from pydantic_ai.models import Model, ModelRequestContext
from pydantic_ai.tools import RunContext, Tool
from pydantic_ai.toolsets import FunctionToolset

from ...aio import AsyncSession
from ...errors import InvalidArgumentError
from ...session import Turn
from .._common import Conversations, NotSentError
from .messages import keyed, system_text, tool_definitions, window_messages

__all__ = ["CtxBudget"]


def _budget_options(model: Model | str, options: dict[str, Any]) -> dict[str, Any]:
    """``Session.open`` options for ``model``: its name, and its profile's context window
    unless one is given."""
    if isinstance(model, str):
        return {"model": model, **options}
    out = {"model": model.model_name, **options}
    if "context_window" not in out:
        window = model.profile.get("context_window")
        if window is None:
            raise InvalidArgumentError(
                f"Pydantic AI's profile of {model.model_name!r} names no context window: "
                "pass context_window= (and encoding= for a model ctxbudget has no "
                "tokenizer for)"
            )
        out["context_window"] = int(window)
    return out


@dataclasses.dataclass(init=False)
class CtxBudget(AbstractCapability[Any]):
    """ctxbudget's ladder and tools for a Pydantic AI agent, one
    :class:`~ctxbudget.Session` per conversation (Pydantic AI's ``conversation_id``).

    ``CtxBudget(workspace, model=model)`` takes the agent's model (a Pydantic AI
    ``Model``, whose profile gives the context window, or a model name) and the options
    of :meth:`Session.open`; pass it in ``Agent(capabilities=[...])``.
    """

    conversations: Conversations
    last_turn: Turn | None

    def __init__(
        self, workspace: str | os.PathLike[str], *, model: Model | str, **options: Any
    ) -> None:
        self.conversations = Conversations(workspace, **_budget_options(model, options))
        # Opened now: a bad option fails here, and it gives the tool definitions.
        self._definitions = self.conversations.session(None).own_tools
        self.last_turn = None

    def _aio(self, ctx: RunContext[Any]) -> AsyncSession:
        return self.conversations.pair(ctx.conversation_id)[1]

    def get_toolset(self) -> FunctionToolset[Any]:
        """``session_history``, ``memory`` and ``new_context`` as the agent's tools."""

        def make(definition: dict[str, Any]) -> Tool[Any]:
            name = str(definition["name"])

            async def call(ctx: RunContext[Any], **arguments: Any) -> str:
                result = await self._aio(ctx).run_tool(name, arguments)
                return json.dumps(result, ensure_ascii=False)

            tool: Tool[Any] = Tool.from_schema(
                call,
                name=name,
                description=str(definition["description"]),
                json_schema=dict(definition["parameters"]),
                takes_ctx=True,
            )
            return tool

        return FunctionToolset([make(d) for d in self._definitions])

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        aio = self._aio(ctx)
        history = request_context.messages
        params = request_context.model_request_parameters
        await aio.sync_messages(keyed(history))
        offered = tool_definitions([*params.function_tools, *params.output_tools])
        own = {str(d["name"]) for d in self._definitions}
        instructions = [p.content for p in params.instruction_parts or ()]
        await aio.set_request(
            system=system_text(history, instructions),
            tools=[t for t in offered if t["name"] not in own],
            own_tools=[t["name"] for t in offered if t["name"] in own],
        )
        turn = await aio.prepare()
        self.last_turn = turn
        if turn.status != "send":
            raise NotSentError(turn)
        parts = [InstructionPart(turn.system)] if turn.system else None
        return dataclasses.replace(
            request_context,
            messages=window_messages(turn),
            model_request_parameters=dataclasses.replace(params, instruction_parts=parts),
        )

    async def after_model_request(
        self,
        ctx: RunContext[Any],
        *,
        request_context: ModelRequestContext,
        response: ModelResponse,
    ) -> ModelResponse:
        await self._aio(ctx).sync_messages(keyed([response]))
        return response
