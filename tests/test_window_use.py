"""Window use at the limit (issue 27), gpt-4o's 128k window: a chat agent, a coding agent
and an agent with 20 tool schemas run with scripted replies until their forced
rollover, each request measured by the OpenAI cookbook's formula — the provider's count
here (tests/request_corpus.py). Goals: at most 1% of the window left unused at the
usable limit (the last request the window sent, by the provider's count, is within 1%
of the window of the usable limit), and each advisory arriving within 1 percentage point
of its configured point (70% for the handoff, by the provider's count)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from request_corpus import CHATS, CODE_OUTPUT, LOG_OUTPUT, Case, cookbook, tool

from ctxbudget import Session

WINDOW = 128_000
THRESHOLD = 0.7


def _chat_steps() -> Iterator[tuple[str, str]]:
    lines = [t for turns in CHATS.values() for t in turns]
    for n in itertools.count():
        ask = " ".join(lines[(n + k) % len(lines)] for k in range(4))
        yield ask, " ".join(lines[(n + k + 5) % len(lines)] for k in range(6))


def _run(agent: str, ws: Path) -> tuple[list[tuple[str, int, int]], int]:
    """Steps until the forced rollover: (events, projected, provider's count) per sent
    request of the first window, and the usable limit."""
    tools = [tool(i) for i in range(20)] if agent == "20 tools" else []
    if agent == "coding":
        tools = [tool(i) for i in (0, 1, 2, 3, 4, 5)]
    s = Session.open(ws, model="gpt-4o", threshold=THRESHOLD, durability="none", tools=tools)
    steps: list[tuple[str, int, int]] = []
    chat = _chat_steps()
    s.add_user("Help me with the payments service; I will ask as we go.")
    for n in itertools.count():
        turn = s.prepare()
        if any(e.startswith("rollover") for e in turn.events):
            return steps, turn.decision.usable_limit
        assert turn.status == "send", turn
        real = -1  # measured where the goals look: advisories and the limit's approach
        if turn.events or turn.decision.projected >= turn.decision.usable_limit - 4_096:
            sent = turn.to_openai_chat()
            real = cookbook(Case("step", "tools", sent["messages"], sent.get("tools") or []))
        steps.append((",".join(turn.events), turn.decision.projected, real))
        if agent == "chat" or n % 5 == 4:
            ask, answer = next(chat)
            s.add_assistant(answer)
            s.add_user(ask)
            continue
        name = tools[n % len(tools)]["function"]["name"]
        s.add_assistant(None, [{"id": f"c{n}", "name": name, "arguments": {"path": f"f{n}.py"}}])
        output = CODE_OUTPUT if n % 2 else LOG_OUTPUT
        s.add_tool_results([{"call_id": f"c{n}", "name": name, "output": output}])
    raise AssertionError("unreachable")


@pytest.mark.parametrize("agent", ["chat", "coding", "20 tools"])
def test_the_window_is_used_to_its_limit_and_advisories_arrive_on_time(
    tmp_path: Path, agent: str
) -> None:
    steps, usable = _run(agent, tmp_path / "ws")
    # The last request of the window, by the provider's count, reaches the usable limit
    # but for at most 1% of the window.
    _, _, last_real = steps[-1]
    unused = (usable - last_real) / WINDOW
    assert unused <= 0.01, (agent, usable, last_real)
    assert last_real < usable + 0.01 * WINDOW  # and never beyond it by more
    # The handoff advisory arrives at 70% of the window, by the provider's count.
    handoffs = [real for events, _, real in steps if "advisory:handoff" in events]
    assert handoffs, [e for e, _, _ in steps if e]
    assert abs(handoffs[0] / WINDOW - THRESHOLD) <= 0.01, (agent, handoffs[0])
    warnings = [real for events, _, real in steps if "advisory:warning" in events]
    assert warnings and abs(warnings[0] / WINDOW - (THRESHOLD - 0.1)) <= 0.01, (agent, warnings)


def report(agent: str, tmp: Path) -> dict[str, Any]:
    """The figures of one agent (benches print them)."""
    steps, usable = _run(agent, tmp)
    first = {
        kind: next((real for e, _, real in steps if f"advisory:{kind}" in e), None)
        for kind in ("warning", "handoff", "final")
    }
    return {
        "agent": agent,
        "steps": len(steps),
        "unused": (usable - steps[-1][2]) / WINDOW,
        **{k: (v / WINDOW if v else None) for k, v in first.items()},
    }
