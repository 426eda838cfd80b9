"""AsyncSession: the same Session logic on the event loop's thread, every blocking core
call on the binding's I/O pool; many concurrent conversations; one conversation shared by
tasks; cancellation, errors, threads and descriptors."""

from __future__ import annotations

import asyncio
import contextvars
import fcntl
import gc
import os
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

import ctxbudget
from ctxbudget import AsyncSession, History, Session, _bridge, _ctxbudget, aio
from ctxbudget.errors import CtxBudgetError, HistoryIOError, InvalidArgumentError

OUTPUT = "def charge(card):\n    return gateway.post(card)\n" * 30


def _fake_model(turn: Any, n: int) -> tuple[str | None, list[dict[str, Any]]]:
    """Reads files until the handoff advisory, then hands off."""
    if {"advisory:handoff", "advisory:final"} & set(turn.events):
        return "Saving.", [{"id": f"n{n}", "name": "new_context", "arguments": {}}]
    return None, [{"id": f"r{n}", "name": "read_file", "arguments": {"n": n}}]


async def _conversation(ws: Path) -> list[str]:
    s = await AsyncSession.open(
        ws, model="gpt-4o", context_window=40_000, threshold=0.5, durability="none"
    )
    await s.add_user("Audit the billing code.")
    events: list[str] = []
    for n in range(200):
        turn = await s.prepare()
        events += turn.events
        if turn.window_id != "w:0":
            return events
        text, calls = _fake_model(turn, n)
        await s.add_assistant(text, calls)
        results = []
        for c in calls:
            if c["name"] == "new_context":
                output = await s.run_tool(c["name"], c["arguments"])
            else:
                output = OUTPUT
            results.append({"call_id": c["id"], "name": c["name"], "output": output})
        await s.add_tool_results(results)
    raise AssertionError("never handed off")


@contextmanager
def _store_locked(ws: Path) -> Iterator[None]:
    """Holds the store's lock as another process would: appends wait for it."""
    with open(ws / "history" / "lock", "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _user_texts(ws: Path) -> list[str]:
    return [
        r.parts[0]["text"]
        for r in History.open(ws).rows()
        if r.kind == "message" and r.role == "user"
    ]


def test_concurrent_async_conversations_hand_off(tmp_path: Path) -> None:
    async def main() -> list[list[str]]:
        return await asyncio.gather(*(_conversation(tmp_path / f"ws{i}") for i in range(20)))

    all_events = asyncio.run(main())
    for i, events in enumerate(all_events):
        assert events.count("advisory:warning") == 1 and events.count("advisory:handoff") == 1
        assert "advisory:final" not in events
        (b,) = [r for r in History.open(tmp_path / f"ws{i}").rows() if r.kind == "boundary"]
        assert b.meta["requested_by"] == "model"


def test_a_step_runs_no_python_thread_but_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts: list[str] = []

    def no_start(self: threading.Thread) -> None:
        attempts.append(f"thread {self.name}")
        raise AssertionError("a Python thread was started")

    def no_executor(self: Any, *args: Any) -> Any:
        attempts.append("executor")
        raise AssertionError("the loop's executor was used")

    monkeypatch.setattr(threading.Thread, "start", no_start)
    monkeypatch.setattr(asyncio.BaseEventLoop, "run_in_executor", no_executor)
    hook_threads: list[int] = []
    jobs_before = _ctxbudget.offload_pool()[2]
    threads_before = set(threading.enumerate())

    async def main() -> int:
        s = await AsyncSession.open(tmp_path / "ws", context_window=64_000)  # fsync'ed
        s.register_hook(
            lambda w: hook_threads.append(threading.get_ident()) or "", context_only=True
        )
        await s.add_user("hi")
        await s.prepare()
        await s.add_assistant(None, [{"id": "c1", "name": "memory", "arguments": {}}])
        created = await s.run_tool(
            "memory", {"command": "create", "path": "/memories/notes.md", "file_text": "x"}
        )
        found = await s.run_tool("session_history", {"action": "search", "query": "hi"})
        await s.add_tool_results([{"call_id": "c1", "name": "memory", "output": created}])
        assert created["ok"] and found["ok"], (created, found)
        assert set(threading.enumerate()) == threads_before
        await aio.count_messages([{"role": "user", "content": "hi"}], model="gpt-4o")
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert attempts == []
    assert hook_threads and set(hook_threads) == {loop_thread}
    # The waiting happened in the pool: opening, every append, read and scan, the fsyncs
    # of the memory write.
    assert _ctxbudget.offload_pool()[2] - jobs_before >= 10


def test_the_loop_runs_while_an_append_waits(tmp_path: Path) -> None:
    """An append that waits for the store's lock (held by "another process") must not
    hold the loop: the task that releases the lock runs meanwhile."""

    async def main() -> list[str]:
        s = await AsyncSession.open(tmp_path / "ws", context_window=64_000, durability="none")
        order: list[str] = []
        with _store_locked(tmp_path / "ws"):
            append = asyncio.create_task(s.add_user("waits for the lock"))
            for _ in range(20):
                await asyncio.sleep(0.005)
            order.append("loop ran" if not append.done() else "append done")
        await append
        order.append("append done")
        return order

    # If the append blocked the loop, the lock would never be released here and the
    # append would fail with LockTimeoutError after 10 s.
    assert asyncio.run(main()) == ["loop ran", "append done"]


def test_calls_on_one_conversation_apply_in_the_order_awaited(tmp_path: Path) -> None:
    async def main() -> None:
        s = await AsyncSession.open(tmp_path / "ws", context_window=400_000, durability="none")
        await asyncio.gather(*(s.add_user(f"m{i}") for i in range(60)))

    asyncio.run(main())
    assert _user_texts(tmp_path / "ws") == [f"m{i}" for i in range(60)]


def test_tasks_sharing_one_conversation(tmp_path: Path) -> None:
    async def main() -> Any:
        s = await AsyncSession.open(tmp_path / "ws", context_window=400_000, durability="none")

        async def worker(w: int) -> None:
            for i in range(25):
                await s.add_user(f"task {w} message {i}")
                await s.prepare()

        await asyncio.gather(*(worker(w) for w in range(8)))
        return await s.prepare()

    turn = asyncio.run(main())
    fresh = Session.open(tmp_path / "ws", context_window=400_000, durability="none").prepare()
    ids = [m["item_id"] for m in turn.messages]
    assert len(ids) == len(set(ids)) == 200
    assert turn.messages == fresh.messages
    assert turn.decision.projected == fresh.decision.projected


def test_cancelled_mid_append_the_append_completes_and_is_seen(tmp_path: Path) -> None:
    ws = tmp_path / "ws"

    async def main() -> tuple[Any, list[str]]:
        s = await AsyncSession.open(ws, context_window=64_000, durability="none")
        await s.add_user("first")
        with _store_locked(ws):
            in_flight = asyncio.create_task(s.add_user("in flight"))
            queued = asyncio.create_task(s.add_user("queued behind it"))
            await asyncio.sleep(0.05)
            assert not in_flight.done()
            in_flight.cancel()
            queued.cancel()
            await asyncio.sleep(0.05)
            assert not in_flight.done(), "a cancelled call waits for its write to end"
        outcomes = await asyncio.gather(in_flight, queued, return_exceptions=True)
        turn = await s.prepare()
        return outcomes, [m["content"].split("\n\n")[0] for m in turn.messages]

    outcomes, seen = asyncio.run(main())
    assert all(isinstance(o, asyncio.CancelledError) for o in outcomes)
    # The write in flight completed and the session's next call reflects it; the call
    # that was only waiting for its turn never ran.
    assert _user_texts(ws) == ["first", "in flight"]
    assert seen == ["first", "in flight"]


def test_calls_whose_jobs_finished_wake_one_a_turn_and_cancelled_ones_still_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no share per turn, each loop turn wakes one call whose job finished; the
    others wait, oldest first. Calls cancelled while they wait so (their writes are
    done) raise CancelledError once their calls end, and their writes are seen."""
    monkeypatch.setattr(_bridge, "_SLICE", 0.0)
    n = aio.io_threads()[0]  # one pool thread for each append (more would outlive the test)

    async def main() -> tuple[list[object], int]:
        loop = asyncio.get_running_loop()
        sessions = [
            await AsyncSession.open(tmp_path / f"ws{i}", context_window=64_000, durability="none")
            for i in range(n)
        ]
        with ExitStack() as held:  # every append waits in the pool for its store's lock
            for i in range(n):
                held.enter_context(_store_locked(tmp_path / f"ws{i}"))
            calls = [asyncio.create_task(s.add_user(f"m{i}")) for i, s in enumerate(sessions)]
            await asyncio.sleep(0.1)
            assert not any(c.done() for c in calls)
        time.sleep(0.5)  # (on the loop: so the appends all finish before its next turn)
        bridge = _bridge._bridges[loop]
        for _ in range(3):  # the turn that drains the finished jobs (or the next)
            await asyncio.sleep(0)
            due = len(bridge.due)
            if due:
                break
        for task in calls:
            task.cancel()
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
        assert not bridge.due
        return outcomes, due

    outcomes, due = asyncio.run(main())
    assert due >= n - 2, "the finished calls were woken together"
    # Those woken before the cancellation (one a turn) returned; the rest raise it.
    assert all(isinstance(o, (str, asyncio.CancelledError)) for o in outcomes)
    assert sum(isinstance(o, asyncio.CancelledError) for o in outcomes) >= due
    assert [_user_texts(tmp_path / f"ws{i}") for i in range(n)] == [[f"m{i}"] for i in range(n)]


@pytest.mark.skipif(not _ctxbudget.FAILPOINTS, reason="needs a build with fail points")
def test_errors_propagate_unchanged(tmp_path: Path) -> None:
    async def main() -> None:
        s = await AsyncSession.open(tmp_path / "ws", context_window=64_000, durability="none")
        await s.add_assistant(None, [{"id": "c1", "name": "read_file", "arguments": {}}])
        await s.add_tool_results([{"call_id": "c1", "name": "read_file", "output": "x"}])
        with pytest.raises(InvalidArgumentError, match="already has a result"):
            await s.add_tool_results([{"call_id": "c1", "name": "read_file", "output": "y"}])
        _ctxbudget._arm_failpoint("append.open", "error:28")
        try:
            with pytest.raises(HistoryIOError) as err:
                await s.add_user("the disk is full")
        finally:
            _ctxbudget._reset_failpoints()
        assert err.value.errno == 28
        # A panic on a pool thread becomes the binding's typed error on the loop, and
        # the pool goes on working.
        with pytest.raises(CtxBudgetError, match="deliberate test panic"):
            await _bridge.run(_ctxbudget._panic_for_test)
        await s.add_user("after the errors")

    asyncio.run(main())
    assert _user_texts(tmp_path / "ws") == ["after the errors"]


def test_loops_release_their_descriptors_and_threads_stay_bounded(tmp_path: Path) -> None:
    async def step(i: int) -> None:
        s = await AsyncSession.open(tmp_path / f"ws{i}", context_window=64_000)
        await asyncio.gather(s.add_user("hi"), s.prepare())

    asyncio.run(step(0))
    gc.collect()
    threads_before = set(threading.enumerate())
    before = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    for i in range(1, 12):
        asyncio.run(step(i))
    gc.collect()
    if before is not None:
        assert len(os.listdir("/proc/self/fd")) == before
    max_threads, running, _ = _ctxbudget.offload_pool()
    # At most the bound; none is fine too: a pool thread idle for IDLE_EXIT (2 s) ends,
    # which a loaded machine reaches between the last step and this line.
    assert running <= max_threads
    assert set(threading.enumerate()) == threads_before


def test_event_loops_in_several_threads(tmp_path: Path) -> None:
    errors: list[BaseException] = []

    def worker(t: int) -> None:
        async def main() -> None:
            await asyncio.gather(*(_conversation(tmp_path / f"t{t}-{i}") for i in range(3)))

        try:
            asyncio.run(main())
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for t in range(3):
        for i in range(3):
            assert any(r.kind == "boundary" for r in History.open(tmp_path / f"t{t}-{i}").rows())


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_gets_its_own_pool(tmp_path: Path) -> None:
    async def steps(ws: Path) -> int:
        s = await AsyncSession.open(ws, context_window=64_000, durability="none")
        await s.add_user("hi")
        return (await s.prepare()).decision.projected

    parent = asyncio.run(steps(tmp_path / "parent"))  # the pool now has a thread
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit status
        code = 1
        try:
            code = 0 if asyncio.run(steps(tmp_path / "child")) == parent else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert _user_texts(tmp_path / "child") == ["hi"]


def test_count_messages_and_encodings_awaited() -> None:
    messages = [{"role": "user", "content": "Fix the nightly export"}]
    tools = [{"name": "read", "description": "Reads", "parameters": {"type": "object"}}]

    async def main() -> tuple[int, ctxbudget.Encoding, ctxbudget.Encoding]:
        n = await aio.count_messages(messages, tools, model="gpt-4o")
        return n, await aio.load_encoding("cl100k_base"), await aio.load_encoding(model="gpt-4o")

    n, by_name, by_model = asyncio.run(main())
    assert n == ctxbudget.count_messages(messages, tools, model="gpt-4o")
    assert (by_name.name, by_model.name) == ("cl100k_base", "o200k_base")
    with pytest.raises(ctxbudget.UnknownModelError):
        asyncio.run(aio.load_encoding(model="no-such-model"))


def test_long_counts_run_on_the_pool_short_ones_in_place() -> None:
    enc = ctxbudget.Encoding("o200k_base")
    text = "for item in batch:\n    total += price(item)\n" * 400  # 17 KiB
    tool = {"name": "t", "description": text, "parameters": {"type": "object"}}
    expected = (enc.count(text), enc.count_many([text, "x"]), enc.count_json(tool))
    before = _ctxbudget.offload_pool()[2]

    async def main() -> tuple[tuple[int, list[int], int], int]:
        long = (
            await _bridge.run(enc.count, text),
            await _bridge.run(enc.count_many, [text, "x"]),
            await _bridge.run(enc.count_json, tool),
        )
        return long, await _bridge.run(enc.count, "short")

    long, short = asyncio.run(main())
    assert long == expected and short == enc.count("short")
    assert _ctxbudget.offload_pool()[2] - before == 3


def test_wraps_only_sessions() -> None:
    with pytest.raises(TypeError, match="wraps a Session"):
        AsyncSession(object())  # type: ignore[arg-type]


def _pool_jobs() -> int:
    return _ctxbudget.offload_pool()[2]


def test_fold_reads_and_history_tool_calls_run_on_the_pool(tmp_path: Path) -> None:
    """The window fold's read of new rows and a session_history call are blocking core
    calls: inside an awaited call each is one pool job, never a wait on the loop."""
    history = History.open(tmp_path / "ws", durability="none")
    history.append([{"kind": "message", "role": "user", "parts": [{"type": "text", "text": "a"}]}])
    fold = _ctxbudget.WindowFold(history._core)
    tool = ctxbudget.SessionHistoryTool(history)

    async def main() -> tuple[int, int]:
        before = _pool_jobs()
        rows, _ = await _bridge.run(fold.advance)
        after_advance = _pool_jobs()
        found = await _bridge.run(tool.call, {"action": "search", "query": "a"})
        assert len(rows) == 1 and found["ok"], (rows, found)
        return after_advance - before, _pool_jobs() - after_advance

    assert asyncio.run(main()) == (1, 1)


def test_a_callable_lead_in_runs_on_the_loop_thread_never_on_the_pool(tmp_path: Path) -> None:
    """The core calls a lead-in callable under its lock; that Python code must run on
    the thread of the awaited call (the loop's), not on a GIL-free pool thread."""
    history = History.open(tmp_path / "ws", durability="none")
    history.append([{"kind": "message", "role": "user", "parts": [{"type": "text", "text": "a"}]}])
    called_on: list[int] = []

    def lead_in(window_id: str, previous: str) -> str:
        called_on.append(threading.get_ident())
        return f"continuing {window_id} after {previous}"

    async def main() -> tuple[str, int]:
        window = await _bridge.run(
            history.rollover, rollover_id="r1", reason="new_context", lead_in=lead_in
        )
        return window, threading.get_ident()

    window, loop_thread = asyncio.run(main())
    assert called_on == [loop_thread]
    texts = [r.parts[0]["text"] for r in history.rows() if r.kind == "lead_in"]
    assert texts == [f"continuing {window} after w:0"]


def test_view_awaited(tmp_path: Path) -> None:
    async def main() -> None:
        s = await AsyncSession.open(tmp_path / "ws", durability="none")
        await s.add_user("hi")
        Session.open(tmp_path / "ws", durability="none").add_user("from another writer")
        stale = await s.view()
        fresh = await s.view(refresh=True)
        assert fresh == s.session.view()
        assert len(fresh.rows) == len(stale.rows) + 1

    asyncio.run(main())


_REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")


def test_calls_run_in_the_awaiting_tasks_context_variables(tmp_path: Path) -> None:
    """A hook sees the context variables of the task that awaited the call (as with
    asyncio.to_thread), and what a call sets stays in that call."""

    async def main() -> tuple[list[str], str, str]:
        s = await AsyncSession.open(tmp_path / "ws", context_window=64_000, durability="none")
        seen: list[str] = []

        def hook(window_id: str) -> str:
            seen.append(_REQUEST_ID.get())
            return ""

        s.register_hook(hook, context_only=True)
        await s.add_user("hi")

        async def request(rid: str) -> None:
            _REQUEST_ID.set(rid)
            await s.prepare()

        await asyncio.gather(request("a"), request("b"))
        await _bridge.run(_REQUEST_ID.set, "set inside a call")
        inside_later = await _bridge.run(_REQUEST_ID.get)
        return seen, _REQUEST_ID.get(), inside_later

    seen, outside, inside_later = asyncio.run(main())
    assert sorted(set(seen)) == ["a", "b"]
    assert outside == "-" and inside_later == "-"


def test_a_finished_call_is_not_kept_alive_by_the_bridge(tmp_path: Path) -> None:
    """Calls run in reused runner greenlets; an idle runner holds nothing of the call it
    ran (its arguments, its result), few runners serve many calls, and they go with
    their loop."""

    class Payload:
        pass

    def runners() -> int:
        """Runners alive (other tests' loops that are still open keep theirs)."""
        gc.collect()
        return sum(isinstance(o, _bridge._Runner) for o in gc.get_objects())

    before = runners()

    async def main() -> tuple[list[weakref.ref[Payload]], int]:
        refs: list[weakref.ref[Payload]] = []

        def make(arg: Payload) -> Payload:
            refs.append(weakref.ref(arg))
            out = Payload()
            refs.append(weakref.ref(out))
            return out

        for _ in range(50):
            await _bridge.run(make, Payload())
        await asyncio.gather(*(_bridge.run(make, Payload()) for _ in range(8)))
        return refs, runners()

    refs, during = asyncio.run(main())
    assert len(refs) == 116 and all(r() is None for r in refs)
    assert 1 <= during - before <= 8
    assert runners() == before


def test_keyboard_interrupt_in_a_call_stops_the_loop_as_it_would_unbridged() -> None:
    def interrupt() -> None:
        raise KeyboardInterrupt

    async def main() -> None:
        await _bridge.run(interrupt)

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(main())

    async def after() -> int:
        return await _bridge.run(lambda: 7)

    assert asyncio.run(after()) == 7
