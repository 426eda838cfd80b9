"""The Pydantic AI integration, driven by an ``Agent`` on Pydantic AI's own
``FunctionModel``: the ladder reaches the agent (warning, handoff, a rollover with its
lead-in, a first-window fact found through ``session_history``) in ``run_sync`` and
``run``; the counts equal what the model is sent (instructions and every tool
included); a second process continues the conversation and every message is recorded
once."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_ai_script import FACT, INSTRUCTIONS, agent

from ctxbudget import History, InvalidArgumentError, count_messages
from ctxbudget.integrations.pydantic_ai import CtxBudget
from ctxbudget.integrations.pydantic_ai.messages import as_chat, keyed, tool_definitions

PROMPT = f"Remember: {FACT}. Then audit the billing service."


def _rows(ws: Path, conversation: str) -> list[Any]:
    return list(History.open(ws / "threads" / conversation, durability="none").rows())


def _check(ws: Path, result: Any, script: Any) -> None:
    assert "recovered" in str(result.output)
    rows = _rows(ws, result.conversation_id)
    stages = [r.meta.get("stage") for r in rows if r.kind == "advisory"]
    assert "warning" in stages and "handoff" in stages
    (boundary,) = [r for r in rows if r.kind == "boundary"]
    assert boundary.meta["requested_by"] == "model"
    assert rows[rows.index(boundary) + 1].kind == "lead_in"
    found = [
        p
        for r in rows
        for p in r.parts
        if p.get("type") == "tool_result" and p.get("name") == "session_history"
    ]
    assert found and FACT in json.dumps(found[-1]["output"])
    last, _, _ = script.calls[-1]
    assert FACT not in json.dumps([str(p) for m in last[:-1] for p in m.parts])
    keys = Counter(str(r.meta["key"]) for r in rows if "key" in r.meta)
    assert set(keys.values()) == {1}
    assert {k.key for k in keyed(result.all_messages())} == set(keys)


def test_agent_runs_the_ladder(tmp_path: Path) -> None:
    graph, _, script = agent(tmp_path)
    _check(tmp_path, graph.run_sync(PROMPT), script)


def test_agent_runs_the_ladder_async(tmp_path: Path) -> None:
    graph, _, script = agent(tmp_path)
    _check(tmp_path, asyncio.run(graph.run(PROMPT)), script)


def test_counts_equal_the_request_the_model_is_sent(tmp_path: Path) -> None:
    graph, _, script = agent(tmp_path)
    graph.run_sync(PROMPT)
    assert len(script.calls) > 10
    for messages, info, turn in script.calls:
        assert info.instructions and info.instructions.startswith(INSTRUCTIONS)
        tools = tool_definitions([*info.function_tools, *info.output_tools])
        assert {t["name"] for t in tools} == {
            "read_file",
            "session_history",
            "memory",
            "new_context",
        }
        chat = [{"role": "system", "content": info.instructions}]
        chat += [m for _, m in as_chat(messages)]
        assert count_messages(chat, tools, model="gpt-4o") == turn.decision.projected


def test_the_window_comes_from_the_model_profile(tmp_path: Path) -> None:
    from pydantic_ai.models.function import FunctionModel

    _, budget, _ = agent(tmp_path)
    assert budget.conversations.session(None).budget.context_window == 40_000
    bare = FunctionModel(lambda m, i: None, model_name="gpt-4o")  # type: ignore[arg-type,return-value]
    if bare.profile.get("context_window") is None:
        with pytest.raises(InvalidArgumentError, match="context_window"):
            CtxBudget(tmp_path / "other", model=bare)


def _first_process(ws: str, out: str) -> None:
    from pydantic_ai_script import agent as make

    graph, _, _ = make(Path(ws))
    Path(out).write_bytes(graph.run_sync(PROMPT).all_messages_json())


def test_a_second_process_continues_the_conversation(tmp_path: Path) -> None:
    state = tmp_path / "history.json"
    ctx = multiprocessing.get_context("spawn")
    p = ctx.Process(target=_first_process, args=(str(tmp_path), str(state)))
    p.start()
    p.join(timeout=300)
    assert p.exitcode == 0
    held = ModelMessagesTypeAdapter.validate_json(state.read_bytes())
    graph, _, _ = agent(tmp_path)
    result = graph.run_sync("Thanks!", message_history=held)
    assert result.output == "You are welcome."
    rows = _rows(tmp_path, result.conversation_id)
    keys = Counter(str(r.meta["key"]) for r in rows if "key" in r.meta)
    assert set(keys.values()) == {1}, "every message recorded exactly once"
    assert {k.key for k in keyed(result.all_messages())} == set(keys)
