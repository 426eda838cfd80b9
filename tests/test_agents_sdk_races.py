"""A clear or a pop during an Agents SDK run never brings an item back.

The rule every write of a run obeys: the model-input filter stores only the items that
are new in the run. What the run held before a ``clear_session()`` or a ``pop_item()``
(what it read, what was stored for it) is never written again, however the SDK re-sends
it; items new in the run after it are stored once. Checked under ``Runner.run`` and
``Runner.run_streamed``, with and without ``session=``, with the clear or pop made at
every step of a scripted run: inside the model call, inside a tool, from another task
at a barrier, and from another task racing the run at many points.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

agents = pytest.importorskip("agents")
testing = pytest.importorskip("agents.testing")

from ctxbudget import History, Session  # noqa: E402
from ctxbudget.integrations.agents import AgentsSession  # noqa: E402
from ctxbudget.integrations.agents.items import stored_item  # noqa: E402

MODES = ["run", "streamed"]
STEPS = 4
"""Model calls per run: three tool steps, then the final answer."""
BEFORE = [
    {"role": "user", "content": "before-secret-1 the deploy key is in vault"},
    {"role": "assistant", "content": "before-2 noted"},
]
WATCHDOG = 60.0


def _key(item: Any) -> str:
    plain = item if isinstance(item, dict) else item.model_dump(exclude_unset=True)
    return json.dumps(plain, sort_keys=True, default=str)


def _stored(ws: Path) -> list[tuple[int, str, str]]:
    """(seq, kind, item key) of every row, oldest first (the key is "" for rows that
    carry no SDK item)."""
    out = []
    for row in History.open(ws, durability="none").rows():
        item = stored_item(row)
        out.append((row.seq, row.kind, _key(item) if item is not None else ""))
    return out


class Trial:
    """One scripted run: model calls 1..STEPS-1 call the ``step`` tool, the last one
    answers ``done``; ``trigger(where, k)`` says whether the clear or pop happens there."""

    def __init__(
        self,
        tmp_path: Path,
        *,
        mode: str,
        op: str,
        with_session: bool,
        trigger: Callable[[str, int], Awaitable[None]],
        limit: int | None = None,
    ) -> None:
        self.ws = tmp_path / "ws"
        self.mode = mode
        self.op = op
        self.with_session = with_session
        self.trigger = trigger
        core = Session.open(self.ws, model="gpt-4o", context_window=200_000, durability="none")
        self.session = AgentsSession(core, session_settings={"limit": limit})
        self.popped: list[Any] = []

    async def act(self) -> None:
        """The clear or the pop itself."""
        if self.op == "clear":
            await self.session.clear_session()
        else:
            self.popped.append(await self.session.pop_item())

    async def run(self) -> Any:
        await self.session.add_items(list(BEFORE))

        @agents.function_tool
        async def step(n: int) -> str:
            """One step of the task."""
            await self.trigger("tool", n)
            return f"out-{n}"

        async def respond(call: Any) -> Any:
            k = len(model.calls)
            await self.trigger("model", k)
            if k < STEPS:
                return [testing.function_call("step", {"n": k}, call_id=f"c{k}")]
            return [testing.assistant_message("done", item_id="final")]

        model = testing.ScriptedModel([testing.ModelStep.respond(respond) for _ in range(STEPS)])
        agent = agents.Agent(name="a", instructions="Work.", model=model, tools=[step])
        session = self.session if self.with_session else None
        run_config = self.session.run_config()
        if self.mode == "run":
            return await agents.Runner.run(
                agent, "q-run", session=session, run_config=run_config, max_turns=STEPS + 2
            )
        result = agents.Runner.run_streamed(
            agent, "q-run", session=session, run_config=run_config, max_turns=STEPS + 2
        )
        async for _ in result.stream_events():
            pass
        return result

    async def check(self, result: Any, *, op_done_before_end: bool) -> None:
        assert result.final_output == "done"
        rows = _stored(self.ws)
        counts = Counter(key for _, _, key in rows if key)
        twice = [key for key, n in counts.items() if n > 1]
        assert not twice, f"items stored twice: {twice}"
        shown = [_key(i) for i in await self.session.get_items()]
        if self.op == "clear":
            resets = [seq for seq, kind, _ in rows if kind == "boundary"]
            assert resets, "the clear wrote its boundary"
            floor = resets[-1]
            before = {key for seq, _, key in rows if key and seq < floor}
            after = {key for seq, _, key in rows if key and seq > floor}
            assert not before & after, f"written again after the clear: {before & after}"
            assert not before & set(shown), "an item from before the clear came back"
            assert all(_key(i) not in shown for i in BEFORE)
            found = self.session.session.run_tool(
                "session_history", {"action": "search", "query": "before-secret-1"}
            )
            assert found["ok"] and not found["items"], "searchable above the privacy floor"
        else:
            assert len(self.popped) == 1 and self.popped[0] is not None
            popped = _key(self.popped[0])
            assert counts[popped] == 1, "the popped item was stored again"
            assert popped not in shown, "the popped item came back"
        if op_done_before_end and self.with_session:
            # Items new in the run after the clear or pop are still stored.
            assert any('"text": "done"' in key for key in shown), shown


def _go(coro: Awaitable[None]) -> None:
    async def guarded() -> None:
        await asyncio.wait_for(coro, WATCHDOG)

    asyncio.run(guarded())


CASES = [
    (where, k)
    for where in ("model", "tool", "barrier")
    for k in range(1, STEPS + 1)
    if not (where == "tool" and k == STEPS)
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", ["clear", "pop"])
@pytest.mark.parametrize("with_session", [True, False], ids=["session", "filter_only"])
@pytest.mark.parametrize("where,k", CASES)
@pytest.mark.parametrize("limit", [None, 2])
def test_a_clear_or_pop_at_every_step(
    tmp_path: Path, mode: str, op: str, with_session: bool, where: str, k: int, limit: int | None
) -> None:
    """The clear or the pop at step ``k``: inside the model call (after the filter wrote
    what the SDK had not saved), inside the tool (before the SDK saves the step), or
    from another task while the run waits at a barrier; with the whole window read, and
    with ``session_settings.limit``."""
    trial: Trial
    go = asyncio.Event()
    done = asyncio.Event()

    async def trigger(at: str, n: int) -> None:
        if where == "barrier" and at == "model" and n == k:
            go.set()
            await done.wait()
        elif at == where and n == k:
            await trial.act()

    async def other_task() -> None:
        await go.wait()
        await trial.act()
        done.set()

    async def main() -> None:
        helper = asyncio.create_task(other_task()) if where == "barrier" else None
        result = await trial.run()
        if helper is not None:
            await helper
        await trial.check(result, op_done_before_end=True)

    trial = Trial(
        tmp_path, mode=mode, op=op, with_session=with_session, trigger=trigger, limit=limit
    )
    _go(main())


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", ["clear", "pop"])
def test_a_clear_or_pop_racing_the_run(tmp_path: Path, mode: str, op: str) -> None:
    """Another task makes the clear or the pop after ``j`` turns of the event loop, for
    many ``j``: it lands at whatever point the run has reached (the store's calls run
    in worker threads), before, during or after any write of the run."""
    for j in range(0, 40, 2):

        async def trigger(at: str, n: int) -> None:
            return None

        trial = Trial(tmp_path / f"j{j}", mode=mode, op=op, with_session=True, trigger=trigger)

        async def main(trial: Trial = trial, j: int = j) -> None:
            async def racer() -> None:
                for _ in range(j):
                    await asyncio.sleep(0)
                await trial.act()

            racing = asyncio.create_task(racer())
            result = await trial.run()
            await racing
            await trial.check(result, op_done_before_end=False)

        _go(main())


@pytest.mark.parametrize("mode", MODES)
def test_a_concurrent_read_does_not_replace_the_runs_mark(tmp_path: Path, mode: str) -> None:
    """Another task's ``get_items`` (a UI showing the conversation) in the middle of a
    run, after a clear: the run still knows what it held, and writes none of it again."""
    trial: Trial

    async def trigger(at: str, n: int) -> None:
        if at == "model" and n == 2:
            await trial.act()
            await asyncio.create_task(trial.session.get_items(limit=1))

    trial = Trial(tmp_path, mode=mode, op="clear", with_session=True, trigger=trigger)

    async def main() -> None:
        result = await trial.run()
        await trial.check(result, op_done_before_end=True)

    _go(main())


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_a_resumed_run_writes_only_what_is_new_in_it(
    tmp_path: Path, mode: str, decision: str
) -> None:
    """A run resumed from a ``RunState`` (an approval) after earlier history: the SDK's
    only read in it is a limited tail check, and it sends the whole history its state
    carries (assistant text come back as ``output_text`` parts). Before, the filter
    wrote that history again; now the items are those ``SQLiteSession`` has."""
    prior = [
        {"role": "user", "content": "prior question"},
        {"role": "assistant", "content": "prior answer"},
        {"role": "user", "content": "another"},
        {"role": "assistant", "content": "another answer"},
    ]

    async def flow(session: Any, use_filter: bool) -> list[Any]:
        @agents.function_tool(needs_approval=True)
        def delete_file(path: str) -> str:
            """Delete a file."""
            return f"deleted {path}"

        @agents.function_tool
        def look(n: int) -> str:
            """Look at something."""
            return f"seen {n}"

        await session.add_items(list(prior))
        model = testing.ScriptedModel(
            [
                [testing.function_call("look", {"n": 1}, call_id="l1")],
                [testing.function_call("delete_file", {"path": "a.txt"}, call_id="d1")],
                [testing.function_call("look", {"n": 2}, call_id="l2")],
                [testing.assistant_message("Done.")],
            ]
        )
        agent = agents.Agent(name="a", instructions="Work.", model=model, tools=[delete_file, look])
        rc = session.run_config() if use_filter else None

        async def drive(start: Any) -> Any:
            if mode == "run":
                return await agents.Runner.run(
                    agent, start, session=session, run_config=rc, max_turns=8
                )
            result = agents.Runner.run_streamed(
                agent, start, session=session, run_config=rc, max_turns=8
            )
            async for _ in result.stream_events():
                pass
            return result

        first = await drive("Delete a.txt")
        state = await agents.RunState.from_string(agent, first.to_state().to_string())
        (pending,) = state.get_interruptions()
        getattr(state, decision)(pending)
        await drive(state)
        return await session.get_items()

    async def main() -> tuple[list[Any], list[Any]]:
        reference = await flow(agents.SQLiteSession("ref"), False)
        core = Session.open(tmp_path / "ws", model="gpt-4o", context_window=200_000)
        return reference, await flow(AgentsSession(core), True)

    async def guarded() -> tuple[list[Any], list[Any]]:
        return await asyncio.wait_for(main(), WATCHDOG)

    reference, ours = asyncio.run(guarded())
    assert ours == reference


def test_a_run_mark_keeps_no_session_alive(tmp_path: Path) -> None:
    """The mark a read binds to the task is dropped with its session: a long-lived task
    serving one conversation after another does not keep them all."""
    import gc
    import weakref

    async def main() -> list[weakref.ref[AgentsSession]]:
        refs = []
        for n in range(3):
            core = Session.open(tmp_path / f"ws{n}", model="gpt-4o", durability="none")
            s = AgentsSession(core)
            await s.add_items(list(BEFORE))
            await s.get_items()
            refs.append(weakref.ref(s))
            s.close()
            del s, core
        gc.collect()
        # The task's marks went with their sessions.
        from ctxbudget.integrations.agents.session import _RUN_MARKS

        marks = _RUN_MARKS.get()
        assert marks is not None and len(marks) == 0
        return refs

    refs = asyncio.run(main())
    assert all(r() is None for r in refs)
