"""The LangChain integration, driven by ``create_agent`` with LangChain's own fake chat
model: the ladder reaches the agent (warning, handoff, a rollover with its lead-in, a
first-window fact found through ``session_history``) in ``invoke`` and ``ainvoke``; the
counts equal what the model is sent; a second process continues the thread and every
message is recorded once."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain.agents")

from langchain_core.messages import (
    AIMessage,
    HumanMessage,
    ToolMessage,
    messages_from_dict,
    messages_to_dict,
    trim_messages,
)
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_script import CONFIG, FACT, SYSTEM, agent

from ctxbudget import History, count_messages
from ctxbudget.integrations.langchain import token_counter

THREAD = Path("threads") / "audit-1"


def _rows(ws: Path) -> list[Any]:
    return list(History.open(ws / THREAD, durability="none").rows())


def _start(ws: Path) -> dict[str, Any]:
    return {"messages": [HumanMessage(f"Remember: {FACT}."), HumanMessage("Audit billing.")]}


def _check_ladder(ws: Path, result: dict[str, Any], model: Any) -> None:
    assert "recovered" in str(result["messages"][-1].content)
    rows = _rows(ws)
    stages = [r.meta.get("stage") for r in rows if r.kind == "advisory"]
    assert "warning" in stages and "handoff" in stages
    (boundary,) = [r for r in rows if r.kind == "boundary"]
    assert boundary.meta["requested_by"] == "model"
    assert rows[rows.index(boundary) + 1].kind == "lead_in"
    results = [
        p
        for r in rows
        for p in r.parts
        if p.get("type") == "tool_result" and p.get("name") == "session_history"
    ]
    assert results and FACT in json.dumps(results[-1]["output"])
    # The model saw the advisories and the lead-in, and after the rollover not the
    # first window's messages.
    shown = [json.dumps([m.content for m in msgs], default=str) for msgs, _ in model.calls]
    assert any("Finish the current small unit" in s for s in shown)
    last = shown[-1]
    assert "New context window" in last and FACT not in last.split("session_history")[0]
    # Every state message is recorded once, under its ID.
    keys = Counter(str(r.meta["key"]) for r in rows if "key" in r.meta)
    assert set(keys.values()) == {1}
    assert {m.id for m in result["messages"]} <= set(keys)


def test_create_agent_runs_the_ladder(tmp_path: Path) -> None:
    graph, _, model = agent(tmp_path)
    result = graph.invoke(_start(tmp_path), CONFIG)
    _check_ladder(tmp_path, result, model)


def test_create_agent_runs_the_ladder_async(tmp_path: Path) -> None:
    graph, _, model = agent(tmp_path)
    result = asyncio.run(graph.ainvoke(_start(tmp_path), CONFIG))
    _check_ladder(tmp_path, result, model)


def test_counts_equal_the_request_the_model_is_sent(tmp_path: Path) -> None:
    """What ctxbudget counted for each call is what the fake model received: the system
    prompt (with ctxbudget's addition), the window and every tool it was bound to."""
    graph, budget, model = agent(tmp_path)
    counted: list[int] = []
    original = budget._prepare

    def prepare(*args: Any) -> Any:
        s, turn, window = original(*args)
        counted.append(turn.decision.projected)
        return s, turn, window

    budget._prepare = prepare  # type: ignore[method-assign]
    graph.invoke(_start(tmp_path), CONFIG)
    assert len(counted) == len(model.calls) > 10
    for (messages, tools), tokens in zip(model.calls, counted, strict=True):
        assert messages[0].type == "system" and messages[0].content.startswith(SYSTEM)
        names = {convert_to_openai_tool(t)["function"]["name"] for t in tools}
        assert names == {"read_file", "session_history", "memory", "new_context"}
        sent = count_messages(messages, [convert_to_openai_tool(t) for t in tools], model="gpt-4o")
        assert sent == tokens


def _first_process(ws: str, out: str) -> None:
    from langchain_script import CONFIG as config
    from langchain_script import agent as make

    graph, _, _ = make(Path(ws))
    result = graph.invoke(
        {"messages": [HumanMessage(f"Remember: {FACT}."), HumanMessage("Audit billing.")]},
        config,
    )
    Path(out).write_text(json.dumps(messages_to_dict(result["messages"])))


def test_a_second_process_continues_the_thread(tmp_path: Path) -> None:
    """Process one runs a turn and keeps the thread's state (as a checkpointer would);
    process two restores it and continues the thread: nothing is recorded twice."""
    state = tmp_path / "state.json"
    ctx = multiprocessing.get_context("spawn")
    p = ctx.Process(target=_first_process, args=(str(tmp_path), str(state)))
    p.start()
    p.join(timeout=300)
    assert p.exitcode == 0
    before = len(_rows(tmp_path))
    held = messages_from_dict(json.loads(state.read_text()))
    graph, _, _ = agent(tmp_path)
    result = graph.invoke({"messages": [*held, HumanMessage("Thanks!")]}, CONFIG)
    assert result["messages"][-1].content == "You are welcome."
    rows = _rows(tmp_path)
    keys = Counter(str(r.meta["key"]) for r in rows if "key" in r.meta)
    assert set(keys.values()) == {1}, "every message recorded exactly once"
    assert {m.id for m in result["messages"]} == set(keys)
    new = [r for r in rows if r.seq > rows[before - 1].seq and r.kind == "message"]
    assert [r.role for r in new] == ["user", "assistant"], "only the new turn was recorded"


def test_token_counter_counts_langchain_messages() -> None:
    msgs: list[Any] = [HumanMessage("hi")]
    for n in range(20):
        msgs += [
            AIMessage("", tool_calls=[{"id": f"c{n}", "name": "f", "args": {"n": n}}]),
            ToolMessage("x " * 10, tool_call_id=f"c{n}"),
        ]
    count = token_counter("gpt-4o")
    assert count([HumanMessage("hi")]) == count_messages(
        [{"role": "user", "content": "hi"}], model="gpt-4o"
    )
    per_pair = count(msgs[1:3]) - 3  # one request frame (3 tokens) per call
    kept = trim_messages(msgs, max_tokens=10 * per_pair + 3, token_counter=count, strategy="last")
    assert len(kept) == 20


@pytest.mark.parametrize("entry", ["invoke", "ainvoke"])
def test_react_agent_pre_model_hook_runs_the_ladder(tmp_path: Path, entry: str) -> None:
    import warnings

    from langchain_script import CapturingFake as Fake
    from langchain_script import Script, read_file

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated for create_agent
        from langgraph.prebuilt import create_react_agent

        from ctxbudget.integrations.langchain import CtxBudgetMiddleware

        script = Script()
        model = Fake(messages=script)
        script.model = model
        budget = CtxBudgetMiddleware(
            tmp_path, model="gpt-4o", context_window=40_000, threshold=0.5, durability="none"
        )
        tools = [read_file, *budget.tools]
        graph = create_react_agent(
            model, tools, pre_model_hook=budget.pre_model_hook(tools, system_prompt=SYSTEM)
        )
    if entry == "invoke":
        result = graph.invoke(_start(tmp_path), CONFIG)
    else:
        result = asyncio.run(graph.ainvoke(_start(tmp_path), CONFIG))
    assert "recovered" in str(result["messages"][-1].content)
    rows = _rows(tmp_path)
    assert {"warning", "handoff"} <= {r.meta.get("stage") for r in rows if r.kind == "advisory"}
    assert any(r.kind == "lead_in" for r in rows)
    assert model.calls[-1][0][0].content.startswith(SYSTEM)
    keys = Counter(str(r.meta["key"]) for r in rows if "key" in r.meta)
    assert set(keys.values()) == {1}
