"""The OpenAI Agents SDK integration, driven by the real ``agents.Runner`` with the SDK's
own scripted model (no network), through a handoff request and a model-requested rollover."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

agents = pytest.importorskip("agents")
testing = pytest.importorskip("agents.testing")

from ctxbudget import History, Session  # noqa: E402
from ctxbudget.integrations.agents import AgentsSession  # noqa: E402

FACT = "the staging password rotates on Fridays"
FILE = "def charge(card):\n    return gateway.post(card)  # retried on 503\n" * 40


def _last_user_text(call: Any) -> str:
    for item in reversed(call.input):
        item = item if isinstance(item, dict) else item.model_dump()
        if item.get("role") == "user":
            content = item.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


class Script:
    """Decides each model reply from what the model is shown."""

    def __init__(self) -> None:
        self.n = 0
        self.handed_off = False
        self.searched = False

    def __call__(self, call: Any) -> Any:
        self.n += 1
        last = _last_user_text(call)
        shown = json.dumps(call.input, default=str)
        fc = testing.function_call
        if "New context window" in shown and not self.searched:
            self.searched = True
            return [
                fc(
                    "session_history",
                    {"action": "search", "query": "staging password"},
                    call_id=f"c{self.n}",
                )
            ]
        if self.searched:
            return [testing.assistant_message("Audit resumed; the fact is recovered.")]
        if "Finish the current small unit" in last and not self.handed_off:
            self.handed_off = True
            return [
                fc(
                    "memory",
                    {
                        "command": "create",
                        "path": "/memories/session/checkpoint.md",
                        "file_text": "goal: audit\nnext: continue",
                    },
                    call_id=f"m{self.n}",
                ),
                fc("new_context", {}, call_id=f"n{self.n}"),
            ]
        return [fc("read_file", {"n": self.n}, call_id=f"r{self.n}")]


def test_runner_through_handoff_and_rollover(tmp_path: Path) -> None:
    session = Session.open(
        tmp_path / "ws", model="gpt-4o", context_window=40_000, threshold=0.5, durability="none"
    )
    sdk_session = AgentsSession(session)

    @agents.function_tool
    def read_file(n: int) -> str:
        """Read one source file of the billing service."""
        return f"# file {n}\n{FILE}"

    script = Script()
    model = testing.ScriptedModel([testing.ModelStep.respond(script) for _ in range(80)])
    agent = agents.Agent(
        name="auditor",
        instructions="You audit code.",
        model=model,
        tools=[read_file, *sdk_session.tools()],
    )

    async def run() -> Any:
        await sdk_session.add_items([{"role": "user", "content": f"Remember: {FACT}."}])
        return await agents.Runner.run(
            agent,
            "Audit the billing service.",
            session=sdk_session,
            run_config=sdk_session.run_config(),
            max_turns=80,
        )

    result = asyncio.run(run())
    assert "recovered" in str(result.final_output)

    rows = list(History.open(tmp_path / "ws", durability="none").rows())
    stages = [r.meta.get("stage") for r in rows if r.kind == "advisory"]
    assert "handoff" in stages
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
    cp = tmp_path / "ws" / "memories" / "session" / "checkpoint.md"
    assert cp.read_text().startswith("goal: audit")
    # The model saw the advisory, the lead-in and [id: N] suffixes through the filter.
    shown = [json.dumps(c.input, default=str) for c in model.calls]
    assert any("Finish the current small unit" in s for s in shown)
    assert any("[id: " in s for s in shown)


def test_session_protocol_is_append_only(tmp_path: Path) -> None:
    session = Session.open(
        tmp_path / "ws", model="gpt-4o", context_window=64_000, durability="none"
    )
    s = AgentsSession(session)

    async def run() -> None:
        await s.add_items([{"role": "user", "content": "one"}, {"role": "user", "content": "two"}])
        assert [i["content"] for i in await s.get_items()] == ["one", "two"]
        assert (await s.pop_item()) == {"role": "user", "content": "two"}
        assert [i["content"] for i in await s.get_items()] == ["one"]
        assert [i["content"] for i in await s.get_items(limit=1)] == ["one"]
        await s.clear_session()
        assert await s.get_items() == []

    asyncio.run(run())
    rows = list(History.open(tmp_path / "ws", durability="none").rows())
    kinds = [r.kind for r in rows]
    assert kinds == ["message", "message", "retraction", "boundary"], "nothing rewritten"
    assert rows[-1].meta["boundary_kind"] == "reset"


def test_an_add_items_cancelled_in_flight_finishes_its_write_then_raises(
    tmp_path: Path,
) -> None:
    """Cancelled while its append waits for the store, ``add_items`` neither returns at
    once (the write would still be running behind the caller's back) nor drops the
    write: the items are stored, then the task ends with ``CancelledError``."""
    import fcntl

    ws = tmp_path / "ws"
    s = AgentsSession(Session.open(ws, model="gpt-4o", durability="none"), "s")

    async def main() -> tuple[bool, bool, list[str]]:
        with open(ws / "history" / "lock", "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            task = asyncio.create_task(
                s.add_items([{"role": "user", "content": "cancelled mid-write"}])
            )
            await asyncio.sleep(0.05)  # the append waits for the store's lock
            task.cancel()
            await asyncio.wait({task}, timeout=0.2)
            ended_while_writing = task.done()
            fcntl.flock(lock, fcntl.LOCK_UN)
        await asyncio.wait({task})
        return ended_while_writing, task.cancelled(), _texts(ws)

    ended_while_writing, cancelled, texts = asyncio.run(main())
    assert not ended_while_writing
    assert cancelled
    assert texts == ["cancelled mid-write"]
    assert [i["content"] for i in asyncio.run(s.get_items())] == ["cancelled mid-write"]


def _texts(ws: Path) -> list[str]:
    return [
        p["text"]
        for r in History.open(ws).rows()
        if r.kind == "message"
        for p in r.parts
        if p.get("type") == "text"
    ]


@pytest.mark.parametrize("kind", ["plain", "async"])
def test_a_count_endpoint_is_called_off_the_event_loop(tmp_path: Path, kind: str) -> None:
    """The filter's ``prepare()`` counts with the session's count endpoint as an
    ``AsyncSession`` does: a plain callable in a worker thread (never on the loop's
    thread, which its network call would block), a coroutine function awaited."""
    import threading

    threads: list[int] = []

    def plain(request: Any) -> int:
        threads.append(threading.get_ident())
        return 4321

    async def awaited(request: Any) -> int:
        return plain(request)

    counter = plain if kind == "plain" else awaited
    s = AgentsSession.open("s", tmp_path / "ws", model="gpt-4o", counter=counter)

    async def main() -> int:
        model = testing.ScriptedModel([[testing.assistant_message("ok")]])
        agent = agents.Agent(name="a", model=model)
        await agents.Runner.run(agent, "Hi", session=s, run_config=s.run_config())
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert s.last_turn is not None and s.last_turn.count.exact == 4321
    assert threads and (loop_thread not in threads) == (kind == "plain")
