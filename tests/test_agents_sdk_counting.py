"""The Agents SDK integration counts everything the agent sends: the request the budget
decides on is the request the model receives — the agent's instructions (once), its
function tools, its handoffs, its MCP tools and hosted tools — under the real
``Runner.run`` and ``Runner.run_streamed`` with the SDK's scripted model (no network)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

agents = pytest.importorskip("agents")
testing = pytest.importorskip("agents.testing")
mcp_types = pytest.importorskip("mcp.types")

from agents.models.openai_responses import Converter  # noqa: E402

import ctxbudget  # noqa: E402
from ctxbudget import InvalidArgumentError, Session  # noqa: E402
from ctxbudget.integrations.agents import AgentsSession  # noqa: E402

MODES = ["run", "streamed"]
INSTRUCTIONS = "You are the release auditor for the billing service. Cite every file you read."


class FakeMCPServer(agents.mcp.MCPServer):
    """An MCP server in-process: lists one tool, answers its calls, and keeps the list it
    last returned as ``cached_tools``, as the SDK's own servers do."""

    def __init__(self) -> None:
        super().__init__()
        self.listed = 0
        self._last: list[Any] | None = None

    @property
    def name(self) -> str:
        return "docs"

    async def connect(self) -> None:
        pass

    async def cleanup(self) -> None:
        pass

    async def list_tools(self, run_context: Any = None, agent: Any = None) -> list[Any]:
        self.listed += 1
        self._last = [
            mcp_types.Tool(
                name="search_docs",
                description="Search the internal engineering documentation by keyword.",
                inputSchema={
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "description": "Keywords to search for."},
                        "limit": {"type": "integer", "description": "Most results to return."},
                    },
                    "required": ["query"],
                },
            )
        ]
        return list(self._last)

    @property
    def cached_tools(self) -> list[Any] | None:
        return None if self._last is None else list(self._last)

    async def call_tool(self, tool_name: str, arguments: Any, meta: Any = None) -> Any:
        text = f"{tool_name}: 2 pages about {json.dumps(arguments)}"
        return mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=text)])

    async def list_prompts(self) -> Any:
        return mcp_types.ListPromptsResult(prompts=[])

    async def get_prompt(self, name: str, arguments: Any = None) -> Any:
        raise KeyError(name)


@agents.function_tool
def read_file(path: str) -> str:
    """Read one source file of the billing service."""
    return f"# {path}\ndef charge(card):\n    return gateway.post(card)\n"


@agents.function_tool
def list_files(directory: str, recursive: bool = False) -> str:
    """List the files of a directory of the billing service."""
    return "charge.py\nrefund.py"


def _plain(item: Any) -> dict[str, Any]:
    return dict(item) if isinstance(item, dict) else item.model_dump(exclude_unset=True)


def _sent_tools(call: Any) -> list[dict[str, Any]]:
    """The tools of a model call as the Responses API is sent them."""
    out: list[dict[str, Any]] = []
    for tool in call.tools:
        if isinstance(tool, agents.FunctionTool):
            out.append(
                {
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.params_json_schema,
                }
            )
        else:  # a hosted tool: the definition the Responses API is sent
            out.append(dict(Converter._convert_tool(tool)[0]))
    for h in call.handoffs:
        out.append(
            {
                "type": "function",
                "name": h.tool_name,
                "description": h.tool_description,
                "parameters": h.input_json_schema,
            }
        )
    return out


async def _drive(agent: Any, text: str, *, mode: str, session: AgentsSession, rc: Any) -> None:
    if mode == "run":
        await agents.Runner.run(agent, text, session=session, run_config=rc, max_turns=8)
        return
    result = agents.Runner.run_streamed(agent, text, session=session, run_config=rc, max_turns=8)
    async for _ in result.stream_events():
        pass


def _request(call: Any) -> list[dict[str, Any]]:
    """What the model received: the instructions as the system message, then its input."""
    return [{"role": "system", "content": call.system_instructions}, *map(_plain, call.input)]


@pytest.mark.parametrize("mode", MODES)
def test_the_count_covers_everything_the_agent_sends(tmp_path: Path, mode: str) -> None:
    core = Session.open(
        tmp_path / "ws",
        model="gpt-4o",
        context_window=200_000,
        durability="none",
        profile="openai_responses",  # what AgentsSession.open chooses for OpenAI models
    )
    session = AgentsSession(core)
    server = FakeMCPServer()
    fc = testing.function_call
    model = testing.ScriptedModel(
        [
            [testing.assistant_message("Which part of charge.py?")],
            [testing.assistant_message("Then I start with the retries.")],
            [fc("read_file", {"path": "charge.py"}, call_id="c1")],
            [fc("search_docs", {"query": "retries"}, call_id="c2")],
            [testing.assistant_message("charge.py retries on 503.")],
        ]
    )
    billing = agents.Agent(name="billing", instructions="You fix billing bugs.", model=model)
    agent = agents.Agent(
        name="auditor",
        instructions=INSTRUCTIONS,
        model=model,
        tools=[read_file, list_files, agents.WebSearchTool(), *session.tools()],
        handoffs=[billing],
        mcp_servers=[server],
    )
    turns: list[Any] = []

    async def counted(data: Any) -> Any:
        sent = await session.input_filter(data)
        turns.append(session.last_turn)
        return sent

    async def run() -> None:
        rc = agents.RunConfig(call_model_input_filter=counted)
        for text in ("Audit charge.py.", "The whole file.", "Read it and search the docs."):
            await _drive(agent, text, mode=mode, session=session, rc=rc)

    asyncio.run(run())
    model.assert_complete()
    assert len(turns) == len(model.calls) == 5
    sent_names = {t.name for t in model.calls[0].tools}
    assert {"read_file", "list_files", "search_docs", "session_history"} <= sent_names
    # The SDK listed the MCP server once per model call; counting asked it nothing more.
    assert server.listed == 5
    for call in model.calls:
        system = call.system_instructions
        assert system is not None and system.count(INSTRUCTIONS) == 1, "sent once"
        assert INSTRUCTIONS not in json.dumps([_plain(i) for i in call.input])
        assert "web_search" in json.dumps(_sent_tools(call)) and call.handoffs
    # Messages, instructions and every tool: the count is exactly what was sent.
    for turn, call in zip(turns[:2], model.calls[:2], strict=True):
        exact = ctxbudget.count_messages(
            _request(call), _sent_tools(call), model="gpt-4o", profile="openai_responses"
        )
        assert turn.decision.projected == exact
    # Tool-call rounds: the window's calls and results count as the Responses items
    # sent (the openai_responses profile), to the token — but an MCP result given as a
    # list of parts, which the window counts as that list's JSON text (never less).
    for turn, call in zip(turns[2:], model.calls[2:], strict=True):
        sent = _request(call)
        exact = ctxbudget.count_messages(
            sent, _sent_tools(call), model="gpt-4o", profile="openai_responses"
        )
        if any(isinstance(i.get("output"), list) for i in sent):
            assert exact <= turn.decision.projected <= exact + 20
        else:
            assert turn.decision.projected == exact


def test_instructions_passed_as_system_too_are_sent_once(tmp_path: Path) -> None:
    session = AgentsSession.open(
        "user-1", tmp_path / "ws", model="gpt-4o", system=INSTRUCTIONS, durability="none"
    )
    model = testing.ScriptedModel([[testing.assistant_message("Hi.")]])
    agent = agents.Agent(name="auditor", instructions=INSTRUCTIONS, model=model)

    async def run() -> None:
        await agents.Runner.run(agent, "Hi", session=session, run_config=session.run_config())

    asyncio.run(run())
    system = model.calls[0].system_instructions
    assert system is not None and system.count(INSTRUCTIONS) == 1
    assert system.startswith(INSTRUCTIONS + "\n\n")


def test_open_takes_the_model_from_the_agent_and_never_defaults(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="model"):
        AgentsSession.open("user-1", tmp_path / "ws", durability="none")
    agent = agents.Agent(name="a", instructions="Hi.", model="gpt-4o-mini")
    session = AgentsSession.open("user-1", tmp_path / "ws", agent=agent, durability="none")
    assert session.session.model == "gpt-4o-mini"
    explicit = AgentsSession.open(
        "user-2", tmp_path / "ws2", agent=agent, model="gpt-4.1", durability="none"
    )
    assert explicit.session.model == "gpt-4.1"


def test_set_request_replaces_what_is_counted(tmp_path: Path) -> None:
    s = Session.open(tmp_path / "ws", model="gpt-4o", durability="none")
    s.add_user("hello")
    before = s.prepare().decision.projected
    tool = {"name": "lookup", "description": "Look a word up.", "parameters": {"type": "object"}}
    other = {**tool, "name": "define"}
    s.set_request(system="Be brief.", tools=[tool])
    turn = s.prepare()
    assert turn.system.startswith("Be brief.\n\n")
    assert turn.tools[0]["name"] == "lookup"
    with_tool = turn.decision.projected
    assert with_tool > before
    # Same number of tools, different tools: the overhead is counted again.
    s.set_request(tools=[{**other, "description": "Define a word in many words " * 20}])
    assert s.prepare().decision.projected > with_tool
    assert s.prepare().system.startswith("Be brief.\n\n"), "None leaves the system text"
    with pytest.raises(InvalidArgumentError):
        s.set_request(tools=[tool, tool])
    with pytest.raises(InvalidArgumentError):
        s.set_request(tools=[{**tool, "name": "memory"}])
    assert s.prepare().tools[0]["name"] == "define", "a refused change changes nothing"
    s.set_request(system="", tools=[])
    assert s.prepare().decision.projected == before
    # A host that does not offer ctxbudget's tools does not count them.
    own = [t["name"] for t in s.own_tools]
    s.set_request(own_tools=own[:1])
    turn = s.prepare()
    assert [t["name"] for t in turn.tools] == own[:1]
    assert turn.decision.projected < before
    with pytest.raises(InvalidArgumentError, match="does not offer"):
        s.set_request(own_tools=["bogus"])
    s.set_request(own_tools=own)
    assert s.prepare().decision.projected == before


def test_a_hosted_tool_counts_as_its_json_and_is_sent_as_given(tmp_path: Path) -> None:
    hosted = {"type": "web_search", "search_context_size": "medium"}
    s = Session.open(tmp_path / "ws", model="gpt-4o", tools=[hosted], durability="none")
    s.add_user("hello")
    turn = s.prepare()
    assert turn.tools[0] == hosted
    assert turn.decision.projected == ctxbudget.count_messages(
        [{"role": "system", "content": turn.system}, *turn.messages], turn.tools, model="gpt-4o"
    )
    assert turn.to_openai_responses()["tools"][0] == hosted
    assert turn.to_openai_chat()["tools"][0] == hosted


def test_a_name_collision_counts_what_the_sdk_offers(tmp_path: Path) -> None:
    session = AgentsSession(
        Session.open(tmp_path / "ws", model="gpt-4o", context_window=200_000, durability="none")
    )
    model = testing.ScriptedModel([[testing.assistant_message("Hi.")]])
    billing = agents.Agent(name="billing", instructions="You fix billing bugs.", model=model)

    @agents.function_tool(name_override="transfer_to_billing")
    def clash(note: str) -> str:
        """A function tool named like the handoff, with a long description."""
        return note

    agent = agents.Agent(
        name="a", instructions=INSTRUCTIONS, model=model, tools=[clash], handoffs=[billing]
    )
    turns: list[Any] = []

    async def counted(data: Any) -> Any:
        sent = await session.input_filter(data)
        turns.append(session.last_turn)
        return sent

    async def run() -> None:
        await agents.Runner.run(
            agent,
            "Hi",
            session=session,
            run_config=agents.RunConfig(call_model_input_filter=counted),
        )

    asyncio.run(run())
    (call,) = model.calls
    assert not call.tools and len(call.handoffs) == 1, "the SDK keeps the handoff"
    exact = ctxbudget.count_messages(_request(call), _sent_tools(call), model="gpt-4o")
    assert turns[0].decision.projected == exact


def test_dynamic_instructions_are_counted_and_sent_once(tmp_path: Path) -> None:
    session = AgentsSession.open("u", tmp_path / "ws", model="gpt-4o", durability="none")
    model = testing.ScriptedModel([[testing.assistant_message("Hi.")]])

    def instructions(ctx: Any, agent: Any) -> str:
        return f"{INSTRUCTIONS} Today the user is {ctx.context['user']}."

    agent = agents.Agent(name="a", instructions=instructions, model=model, tools=[read_file])

    async def run() -> None:
        await agents.Runner.run(
            agent, "Hi", session=session, context={"user": "Ada"}, run_config=session.run_config()
        )

    asyncio.run(run())
    (call,) = model.calls
    assert call.system_instructions.count("Today the user is Ada.") == 1
    assert session.last_turn is not None
    exact = ctxbudget.count_messages(_request(call), _sent_tools(call), model="gpt-4o")
    assert session.last_turn.decision.projected == exact


def test_async_session_sets_the_request(tmp_path: Path) -> None:
    tool = {"name": "lookup", "description": "Look a word up.", "parameters": {"type": "object"}}

    async def run() -> None:
        s = await ctxbudget.AsyncSession.open(tmp_path / "ws", model="gpt-4o", durability="none")
        await s.add_user("hi")
        await s.set_request(system="Be brief.", tools=[tool], own_tools=[])
        turn = await s.prepare()
        assert turn.system.startswith("Be brief.\n\n")
        assert [t["name"] for t in turn.tools] == ["lookup"]

    asyncio.run(run())
