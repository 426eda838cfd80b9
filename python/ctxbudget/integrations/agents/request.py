"""What the Agents SDK sends for an agent besides its input: every tool the model is
offered (function tools, MCP tools, handoffs, hosted tools) as definitions ctxbudget
counts, and the name of the model the agent runs on.

The SDK lists an agent's tools itself just before the model-input filter runs, but does
not hand them to the filter; :func:`agent_tools` lists them again by the SDK's own rules
(enablement, MCP schema conversion and naming, handoff rendering, name collisions). An
MCP server is not asked twice for one model call: its ``cached_tools`` (the list the SDK
fetched moments ago, which the SDK's own servers keep) is used; only a server that keeps
no list is asked again.
"""

from __future__ import annotations

import inspect
from typing import Any

from ...errors import InvalidArgumentError

__all__ = ["agent_tools", "model_of"]


async def agent_tools(agent: Any, context: Any) -> list[dict[str, Any]]:
    """The tools the SDK sends with a model call of ``agent`` (run with ``context``), in
    the SDK's order, as neutral definitions (a hosted tool as its JSON definition)."""
    from agents import tool as agents_tool
    from agents.run_context import RunContextWrapper

    run_context = RunContextWrapper(context=context)
    mcp = await _mcp_tools(agent, run_context) if agent.mcp_servers else []
    enabled = [t for t in agent.tools if await _enabled(t, run_context, agent)]
    handoffs = await _handoffs(agent, run_context)
    listed = [*mcp, *enabled]
    # The SDK drops a tool-search tool that has no deferred tools to search.
    prune = getattr(agents_tool, "prune_orphaned_tool_search_tools", None)
    tools = [_definition(t) for t in (prune(listed) if prune is not None else listed)]
    offered = [
        {
            "name": h.tool_name,
            "description": h.tool_description,
            "parameters": h.input_json_schema,
            "strict": h.strict_json_schema,
        }
        for h in handoffs
    ]
    return _without_collisions(tools, offered)


def _without_collisions(
    tools: list[dict[str, Any]], handoffs: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """What the SDK offers when names collide (its ``"warn"`` policy; under ``"error"``
    the run stopped before the filter): the last handoff of a name, else its last tool."""
    winner: dict[str, int] = {}
    every = [*tools, *handoffs]
    for n, d in enumerate(every):
        name = d.get("name")
        if isinstance(name, str):
            winner[name] = n  # handoffs come last, so the last one wins
    return [
        d
        for n, d in enumerate(every)
        if not isinstance(d.get("name"), str) or winner[d["name"]] == n
    ]


def model_of(agent: Any) -> str:
    """The model name ``agent`` runs on, as the SDK resolves it: ``agent.model`` (a name,
    or a model object's ``model``), else the SDK's default model. An
    :class:`~ctxbudget.InvalidArgumentError` when a model object names none."""
    from agents.models import get_default_model

    model = agent.model
    if model is None:
        return str(get_default_model())
    if isinstance(model, str):
        return model
    name = getattr(model, "model", None)
    if isinstance(name, str) and name:
        return name
    raise InvalidArgumentError(
        f"cannot tell which model agent {agent.name!r} runs on ({type(model).__name__} "
        f"names none): pass model= (and context_window= for a model ctxbudget does not "
        f"know) to AgentsSession.open"
    )


async def _enabled(tool: Any, run_context: Any, agent: Any) -> bool:
    """Whether the SDK offers ``tool`` now (only function tools can be switched off)."""
    from agents import FunctionTool

    if not isinstance(tool, FunctionTool):
        return True
    attr = tool.is_enabled
    if isinstance(attr, bool):
        return attr
    result = attr(run_context, agent)
    return bool(await result if inspect.isawaitable(result) else result)


async def _handoffs(agent: Any, run_context: Any) -> list[Any]:
    """The agent's enabled handoffs, as the SDK builds them for a model call."""
    from agents import Agent, Handoff, handoff

    out = []
    for item in agent.handoffs:
        h = (
            item
            if isinstance(item, Handoff)
            else handoff(item)
            if isinstance(item, Agent)
            else None
        )
        if h is None:
            continue
        attr = h.is_enabled
        if not isinstance(attr, bool):
            result = attr(run_context, agent)
            attr = bool(await result if inspect.isawaitable(result) else result)
        if attr:
            out.append(h)
    return out


async def _mcp_tools(agent: Any, run_context: Any) -> list[Any]:
    """The agent's MCP tools converted by the SDK (strict schemas, server-prefixed names
    as the agent's ``mcp_config`` says), each server's list read without a second call
    when it keeps one."""
    listed = agent.clone(mcp_servers=[_listed_server(s) for s in agent.mcp_servers])
    return list(await listed.get_mcp_tools(run_context))


def _listed_server(server: Any) -> Any:
    """``server`` answering ``list_tools`` from the list the SDK last fetched (its
    ``cached_tools``, through the server's own tool filter), or by asking it when it
    keeps no list."""
    from agents.mcp import MCPServer

    class Listed(MCPServer):
        @property
        def name(self) -> str:
            return str(server.name)

        async def list_tools(self, run_context: Any = None, agent: Any = None) -> Any:
            cached = server.cached_tools
            if cached is None:
                return await server.list_tools(run_context, agent)
            apply_filter = getattr(server, "_apply_tool_filter", None)
            if getattr(server, "tool_filter", None) is not None and apply_filter is not None:
                return await apply_filter(cached, run_context, agent)
            return cached

        async def connect(self) -> None:
            raise NotImplementedError

        async def cleanup(self) -> None:
            raise NotImplementedError

        async def call_tool(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

        async def list_prompts(self) -> Any:
            raise NotImplementedError

        async def get_prompt(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    return Listed()


def _definition(tool: Any) -> dict[str, Any]:
    """A tool as the model is offered it: a function tool as its name, description and
    parameters; any other (hosted) tool as the JSON definition the SDK sends for it."""
    from agents import FunctionTool

    if isinstance(tool, FunctionTool):
        return {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.params_json_schema,
            "strict": tool.strict_json_schema,
        }
    try:
        from agents.models.openai_responses import Converter

        definition, _ = Converter._convert_tool(tool)
        return dict(definition)
    except Exception:  # a tool this SDK's Responses converter does not render
        return {"type": getattr(tool, "type", None) or type(tool).__name__}
