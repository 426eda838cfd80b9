"""AgentsSession behaves like the Agents SDK's own sessions (SQLiteSession is the
reference), under ``Runner.run`` and ``Runner.run_streamed``, with the SDK's scripted
model (no network). Where ctxbudget adds to what the model sees (item IDs on user
messages, its system text, advisories, rollover lead-ins) the comparison removes exactly
those additions; docs/guide-agents-sdk.md lists every deliberate difference."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import re
import threading
import time
import zlib
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest

agents = pytest.importorskip("agents")
testing = pytest.importorskip("agents.testing")

from agents.memory import SessionSettings  # noqa: E402
from openai.types.responses import ResponseReasoningItem  # noqa: E402
from openai.types.responses.response_reasoning_item import Summary  # noqa: E402

from ctxbudget import Session  # noqa: E402
from ctxbudget.integrations.agents import (  # noqa: E402
    AgentsSession,
    NotSentError,
    SessionClosedError,
)
from ctxbudget.media import pdf_tokens  # noqa: E402

MODES = ["run", "streamed"]
ID_SUFFIX = re.compile(r"\n\n\[id: \d+\]$")
PNG = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 64).decode()
PDF_2_PAGES = base64.b64encode(
    b"%PDF-1.4\n1 0 obj << /Type /Pages /Count 2 >> endobj\n"
    b"2 0 obj << /Type /Page >> endobj\n3 0 obj << /Type /Page >> endobj\n%%EOF"
).decode()


# ----- helpers --------------------------------------------------------------------------


def _open(tmp_path: Path, name: str = "ws", **kw: Any) -> AgentsSession:
    window = kw.pop("context_window", 200_000)
    core = Session.open(tmp_path / name, model="gpt-4o", context_window=window, durability="none")
    return AgentsSession(core, **kw)


async def _drive(
    agent: Any, input: Any, *, mode: str, session: Any, run_config: Any = None, **kw: Any
) -> Any:
    if mode == "run":
        return await agents.Runner.run(
            agent, input, session=session, run_config=run_config, max_turns=12, **kw
        )
    result = agents.Runner.run_streamed(
        agent, input, session=session, run_config=run_config, max_turns=12, **kw
    )
    async for _ in result.stream_events():
        pass
    return result


def _plain(item: Any) -> dict[str, Any]:
    return dict(item) if isinstance(item, dict) else item.model_dump(exclude_unset=True)


def _without_ids(items: Any) -> list[dict[str, Any]]:
    """Model input minus ctxbudget's ``[id: N]`` suffixes on user messages."""
    out = []
    for raw in items:
        item = copy.deepcopy(_plain(raw))
        if item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str):
                item["content"] = ID_SUFFIX.sub("", content)
            elif isinstance(content, list):
                for part in reversed(content):
                    if part.get("type") == "input_text":
                        part["text"] = ID_SUFFIX.sub("", part["text"])
                        break
        out.append(item)
    return out


def _reply(text: str) -> list[Any]:
    return [testing.assistant_message(text, item_id=f"msg_{zlib.crc32(text.encode()):08x}")]


def _reasoning(text: str) -> Any:
    return ResponseReasoningItem(
        id="rs_1", type="reasoning", summary=[Summary(text=text, type="summary_text")]
    )


@agents.function_tool
def read_file(n: int) -> str:
    """Read one numbered file."""
    return f"contents of file {n}"


def _agent(model: Any, tools: list[Any] | None = None, **kw: Any) -> Any:
    return agents.Agent(
        name="helper", instructions="Be brief.", model=model, tools=tools or [read_file], **kw
    )


def _sqlite() -> Any:
    return agents.SQLiteSession("reference")


def _calls(model: Any) -> list[list[dict[str, Any]]]:
    return [_without_ids(c.input) for c in model.calls]


# ----- the scripted multi-turn run, against SQLiteSession --------------------------------


async def _scenario(session: Any, mode: str, *, use_filter: bool) -> tuple[Any, list[Any]]:
    fc = testing.function_call
    steps: list[Any] = [
        _reply("Hello!"),
        [fc("read_file", {"n": 1}, call_id="c1")],
        _reply("File 1 read."),
        [fc("read_file", {"n": 2}, call_id="c2"), fc("read_file", {"n": 3}, call_id="c3")],
        _reply("Files 2 and 3 read."),
        _reply("A tiny PNG."),
        [_reasoning("the user wants a plan"), *_reply("Plan: step 1.")],
        testing.ModelStep.raise_error(ConnectionError("connection error: reset by peer")),
        _reply("Recovered after a retry."),
        _reply("Popped and asked again."),
    ]
    model = testing.ScriptedModel(steps)
    retry = agents.ModelRetrySettings(
        max_retries=2,
        backoff={"initial_delay": 0, "max_delay": 0, "jitter": False},
        policy=agents.retry_policies.network_error(),
    )
    agent = _agent(model, model_settings=agents.ModelSettings(retry=retry))
    run_config = session.run_config() if use_filter else None
    inputs: list[Any] = [
        "Hi",
        "Read file 1",
        "Read files 2 and 3",
        [
            {"role": "developer", "content": "Answer in one line."},
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "What is in this image?"},
                    {"type": "input_image", "image_url": PNG, "detail": "auto"},
                ],
            },
        ],
        "Make a plan",
        "Are you there? ünïcödé ✓ '; DROP TABLE agent_messages; --",
    ]
    for user_input in inputs:
        await _drive(agent, user_input, mode=mode, session=session, run_config=run_config)
    popped = await session.pop_item()
    assert popped is not None and popped.get("role") == "assistant"
    await _drive(agent, "Once more", mode=mode, session=session, run_config=run_config)
    model.assert_complete()
    return model, await session.get_items()


@pytest.mark.parametrize("mode", MODES)
def test_scripted_run_gives_the_model_what_sqlite_session_gives(tmp_path: Path, mode: str) -> None:
    async def run() -> None:
        ref_model, ref_items = await _scenario(_sqlite(), mode, use_filter=False)
        ours = _open(tmp_path)
        model, items = await _scenario(ours, mode, use_filter=True)
        assert _calls(model) == _calls(ref_model)
        assert items == ref_items
        # Every user message was sent with its item ID; the system text was added.
        for call in model.calls:
            assert call.system_instructions.startswith("Be brief.\n\n")
            users = [_plain(i) for i in call.input if _plain(i).get("role") == "user"]
            assert users
            assert all("[id: " in json.dumps(u) for u in users)
        plain_model, plain_items = await _scenario(_open(tmp_path, "plain"), mode, use_filter=False)
        assert _calls(plain_model) == _calls(ref_model)
        assert plain_items == ref_items

    asyncio.run(run())


@pytest.mark.parametrize("mode", MODES)
def test_each_turn_input_is_stored_once(tmp_path: Path, mode: str) -> None:
    async def run() -> None:
        ours, ref = _open(tmp_path), _sqlite()
        for session in (ours, ref):
            steps = []
            for n in range(9):
                steps += [[testing.function_call("read_file", {"n": n}, call_id=f"c{n}")]]
                steps += [_reply(f"done {n}")]
            model = testing.ScriptedModel(steps)
            rc = session.run_config() if session is ours else None
            for n in range(9):
                await _drive(_agent(model), f"turn {n}", mode=mode, session=session, run_config=rc)
        items = await ours.get_items()
        assert len(items) == 36
        assert items == await ref.get_items()
        assert [i["content"] for i in items if i.get("role") == "user"] == [
            f"turn {n}" for n in range(9)
        ]

    asyncio.run(run())


@pytest.mark.parametrize("mode", MODES)
def test_a_repeated_message_is_stored_each_time(tmp_path: Path, mode: str) -> None:
    async def run() -> list[list[Any]]:
        stored = []
        for s in (_open(tmp_path), _sqlite()):
            model = testing.ScriptedModel([_reply("Sure?"), _reply("Done.")])
            rc = s.run_config() if isinstance(s, AgentsSession) else None
            for _ in range(2):
                await _drive(_agent(model), "yes", mode=mode, session=s, run_config=rc)
            assert _without_ids(model.calls[1].input)[-1] == {"role": "user", "content": "yes"}
            assert len(model.calls[1].input) == 3
            stored.append(await s.get_items())
        return stored

    ours, ref = asyncio.run(run())
    assert ours == ref and len(ours) == 4


@pytest.mark.parametrize("mode", MODES)
def test_a_failed_model_call_keeps_the_input_like_sqlite(tmp_path: Path, mode: str) -> None:
    async def run() -> list[list[Any]]:
        stored = []
        for s in (_open(tmp_path), _sqlite()):
            model = testing.ScriptedModel([testing.ModelStep.raise_error(RuntimeError("boom"))])
            rc = s.run_config() if isinstance(s, AgentsSession) else None
            with pytest.raises(RuntimeError, match="boom"):
                await _drive(_agent(model), "Hi", mode=mode, session=s, run_config=rc)
            stored.append(await s.get_items())
        return stored

    ours, ref = asyncio.run(run())
    assert ours == ref


# ----- media parts -----------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_non_text_parts_reach_the_model_and_count_as_media(tmp_path: Path, mode: str) -> None:
    text_only = {"role": "user", "content": [{"type": "input_text", "text": "Describe these."}]}
    with_media = copy.deepcopy(text_only)
    with_media["content"] += [
        {"type": "input_image", "image_url": PNG, "detail": "auto"},
        {"type": "input_file", "filename": "spec.pdf", "file_data": PDF_2_PAGES},
    ]

    async def projected(name: str, item: dict[str, Any]) -> tuple[int, Any]:
        session = _open(tmp_path, name)
        model = testing.ScriptedModel([_reply("Seen.")])
        await _drive(
            _agent(model), [item], mode=mode, session=session, run_config=session.run_config()
        )
        assert session.last_turn is not None
        return session.last_turn.decision.projected, model.calls[0].input

    async def run() -> None:
        base, _ = await projected("text", text_only)
        tokens, sent = await projected("media", with_media)
        (user,) = [_plain(i) for i in sent]
        kinds = [p["type"] for p in user["content"]]
        assert kinds == ["input_text", "input_image", "input_file"]
        assert user["content"][1]["image_url"] == PNG
        assert user["content"][2]["file_data"] == PDF_2_PAGES
        # The image's header is unreadable: its detail level's maximum (auto: 8 tiles).
        # + 2 PDF pages by OpenAI's rule: text (3,000) and the page image (at most 1,445).
        assert tokens - base == 85 + 8 * 170 + pdf_tokens(2, profile="openai_responses")
        assert pdf_tokens(2, profile="openai_responses") == 2 * (3_000 + 1_445)

    asyncio.run(run())


# ----- limits and session_settings -------------------------------------------------------


def _history() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "first"},
        {"type": "function_call", "call_id": "a", "name": "read_file", "arguments": '{"n":1}'},
        {"type": "function_call_output", "call_id": "a", "output": "one"},
        {"role": "assistant", "content": "read one"},
        {"role": "user", "content": "second"},
        {"type": "function_call", "call_id": "b", "name": "read_file", "arguments": '{"n":2}'},
        {"type": "function_call_output", "call_id": "b", "output": "two"},
        {"role": "assistant", "content": "read two"},
    ]


def test_get_items_limit_zero_and_session_settings(tmp_path: Path) -> None:
    async def run() -> None:
        ours = _open(tmp_path, session_settings=SessionSettings(limit=3))
        ref = agents.SQLiteSession("r", session_settings=SessionSettings(limit=3))
        for s in (ours, ref):
            await s.add_items(_history())
        for limit in (None, 0, 1, 3, 8, 50, -1):
            assert await ours.get_items(limit) == await ref.get_items(limit), limit
        assert len(await ours.get_items()) == 3
        assert await ours.get_items(limit=0) == []
        as_dict = _open(tmp_path, "dict", session_settings={"limit": 2})
        assert as_dict.session_settings == SessionSettings(limit=2)

    asyncio.run(run())


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("where", ["session", "run_config"])
@pytest.mark.parametrize("limit", [0, 2, 3, 5])
def test_limit_reaches_the_model_with_tool_pairs_kept(
    tmp_path: Path, mode: str, where: str, limit: int
) -> None:
    settings = SessionSettings(limit=limit)

    async def run() -> None:
        sent = []
        for name in ("ref", "ours"):
            if name == "ref":
                s: Any = agents.SQLiteSession(
                    "r", session_settings=settings if where == "session" else None
                )
                rc = agents.RunConfig(session_settings=settings if where == "run_config" else None)
            else:
                s = _open(tmp_path, session_settings=settings if where == "session" else None)
                kw = {"session_settings": settings} if where == "run_config" else {}
                rc = s.run_config(**kw)
            await s.add_items(_history())
            call = testing.function_call("read_file", {"n": 3}, call_id="c")
            model = testing.ScriptedModel([[call], _reply("ok")])
            await _drive(_agent(model), "third", mode=mode, session=s, run_config=rc)
            sent.append(_calls(model))
        assert sent[1] == sent[0]
        first, second = sent[1]
        assert first[-1] == {"role": "user", "content": "third"}
        assert len(first) <= limit + 1
        assert second[: len(first)] == first, "the run's own items are never trimmed"

    asyncio.run(run())


@pytest.mark.parametrize("mode", MODES)
def test_a_call_left_by_a_stopped_process_is_resolved_before_the_next_input(
    tmp_path: Path, mode: str
) -> None:
    """A deliberate difference: a call whose result never came because the process
    stopped mid-step. SQLiteSession keeps the bare call (the SDK leaves it out of the
    model input); ctxbudget, reopened, records an interrupted result right after the
    call and before the next input, so the pair stays whole and the model learns that
    the call may or may not have run."""
    stopped = [
        {"role": "user", "content": "delete it"},
        {"type": "function_call", "call_id": "x", "name": "read_file", "arguments": "{}"},
    ]

    async def run() -> tuple[list[Any], list[Any]]:
        await _open(tmp_path).add_items(stopped)  # ... and that process stops here
        resumed = _open(tmp_path)
        model = testing.ScriptedModel([_reply("ok")])
        rc = resumed.run_config()
        await _drive(_agent(model), "never mind", mode=mode, session=resumed, run_config=rc)
        return _calls(model), await resumed.get_items()

    (sent,), stored = asyncio.run(run())
    resolution = sent[2]
    assert resolution["type"] == "function_call_output" and resolution["call_id"] == "x"
    assert json.loads(resolution["output"])["code"] == "interrupted"
    assert sent == [*stopped, resolution, {"role": "user", "content": "never mind"}]
    assert stored[:4] == sent


@pytest.mark.parametrize("mode", MODES)
def test_an_unanswered_stored_call_is_not_replayed(tmp_path: Path, mode: str) -> None:
    interrupted = [
        {"role": "user", "content": "delete it"},
        {"type": "reasoning", "id": "rs_9", "summary": []},
        {"type": "function_call", "call_id": "x", "name": "read_file", "arguments": "{}"},
    ]

    async def run() -> list[Any]:
        seen = []
        for s in (_sqlite(), _open(tmp_path)):
            await s.add_items(interrupted)
            model = testing.ScriptedModel([_reply("ok")])
            rc = s.run_config() if isinstance(s, AgentsSession) else None
            await _drive(_agent(model), "never mind", mode=mode, session=s, run_config=rc)
            seen.append((_calls(model), await s.get_items()))
        return seen

    ref, ours = asyncio.run(run())
    assert ours == ref
    assert ours[0][0] == [interrupted[0], {"role": "user", "content": "never mind"}]


# ----- pop_item: exactly the last item get_items shows ----------------------------------


def test_pop_item_after_add_user(tmp_path: Path) -> None:
    async def run() -> None:
        s = _open(tmp_path)
        await s.add_items([{"role": "user", "content": "from the SDK"}])
        s.session.add_user("from ctxbudget")
        assert (await s.get_items())[-1] == {"role": "user", "content": "from ctxbudget"}
        assert await s.pop_item() == {"role": "user", "content": "from ctxbudget"}
        assert await s.get_items() == [{"role": "user", "content": "from the SDK"}]
        assert await s.pop_item() == {"role": "user", "content": "from the SDK"}
        assert await s.pop_item() is None and await s.get_items() == []

    asyncio.run(run())


def test_pop_item_of_a_native_row_with_several_items(tmp_path: Path) -> None:
    async def run() -> None:
        s = _open(tmp_path)
        s.session.add_assistant("Reading.", [{"id": "k1", "name": "read_file", "arguments": {}}])
        shown = await s.get_items()
        assert [i.get("type", i.get("role")) for i in shown] == ["assistant", "function_call"]
        assert (await s.pop_item())["call_id"] == "k1"
        assert await s.get_items() == [{"role": "assistant", "content": "Reading."}]

    asyncio.run(run())


@pytest.mark.parametrize("mode", MODES)
def test_pop_item_after_a_rollover(tmp_path: Path, mode: str) -> None:
    async def run() -> None:
        s = _open(tmp_path)
        steps = [[testing.function_call("new_context", {}, call_id="n1")], _reply("after")]
        model = testing.ScriptedModel(steps)
        agent = _agent(model, tools=s.tools())
        await _drive(agent, [_image_message()], mode=mode, session=s, run_config=s.run_config())
        assert s.session.previous_window_id is not None, "the model's new_context rolled over"
        shown = await s.get_items()
        for item in shown:
            assert item.get("content") not in ("", []), item
        while shown:
            assert await s.pop_item() == shown[-1]
            shown = shown[:-1]
            assert await s.get_items() == shown
        assert await s.pop_item() is None

    asyncio.run(run())


def _image_message() -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "input_image", "image_url": PNG}]}


@pytest.mark.parametrize("mode", MODES)
def test_rollover_repeats_the_users_own_item(tmp_path: Path, mode: str) -> None:
    async def run() -> None:
        s = _open(tmp_path, context_window=6_000)
        await s.add_items([{"role": "user", "content": "x " * 1_500}])
        await s.add_items([{"role": "assistant", "content": "y " * 1_500}])
        await s.add_items([_image_message()])
        model = testing.ScriptedModel([_reply("fresh")])
        await _drive(_agent(model), [], mode=mode, session=s, run_config=s.run_config())
        assert s.session.previous_window_id is not None, "forced rollover at the limit"
        sent = [_plain(i) for i in model.calls[0].input]
        assert sent[0]["content"].startswith("New context window")  # the lead-in
        assert sent[1] == _image_message()  # the continuation: the user's image, whole
        shown = await s.get_items()
        assert shown[1:] == [_image_message(), _plain(_reply("fresh")[0])]
        assert await s.pop_item() == shown[-1]
        assert await s.pop_item() == _image_message()
        assert await s.get_items() == shown[:1]

    asyncio.run(run())


def test_pop_item_skips_a_rejected_input(tmp_path: Path) -> None:
    async def run() -> None:
        s = _open(tmp_path, context_window=4_000)
        model = testing.ScriptedModel([_reply("small")])
        await _drive(_agent(model), "small", mode="run", session=s, run_config=s.run_config())
        before = await s.get_items()
        with pytest.raises(NotSentError) as info:
            await _drive(
                _agent(testing.ScriptedModel([])),
                "huge " * 5_000,
                mode="run",
                session=s,
                run_config=s.run_config(),
            )
        assert info.value.turn.status == "reject"
        assert await s.get_items() == before
        assert await s.pop_item() == before[-1]
        assert await s.get_items() == before[:-1]

    asyncio.run(run())


# ----- SDK session conventions -----------------------------------------------------------


def test_sdk_session_conventions(tmp_path: Path) -> None:
    async def run() -> None:
        async with AgentsSession.open("user-123", tmp_path / "ws", model="gpt-4o") as s:
            assert s.session_id == "user-123"
            assert s.session_settings == SessionSettings()
            assert isinstance(s, agents.memory.Session)
            model = testing.ScriptedModel([_reply("Hello!")])
            result = await agents.Runner.run(_agent(model), "Hi", session=s)
            assert result.final_output == "Hello!"
        for call in (
            s.get_items(),
            s.add_items([{"role": "user", "content": "x"}]),
            s.pop_item(),
            s.clear_session(),
        ):
            with pytest.raises(SessionClosedError, match="closed"):
                await call
        again = AgentsSession.open("user-123", tmp_path / "ws", model="gpt-4o")
        assert [i.get("role") for i in await again.get_items()] == ["user", "assistant"]
        again.close()

    asyncio.run(run())


def test_store_io_runs_off_the_event_loop(tmp_path: Path) -> None:
    """Every read of the store the session makes runs off the loop's thread: in the
    session's worker thread (``_bridge.run_off_loop``), never on the loop."""
    import threading

    s = _open(tmp_path)
    bridged: list[bool] = []
    sync = s.session._sync
    loop_thread = threading.current_thread()  # asyncio.run() runs the loop here

    def spy(full: bool = False) -> None:
        bridged.append(threading.current_thread() is not loop_thread)
        sync(full)

    s.session._sync = spy  # type: ignore[method-assign]

    async def run() -> None:
        model = testing.ScriptedModel([[testing.function_call("read_file", {"n": 1}, call_id="c")]])
        model.extend([_reply("ok")])
        await _drive(_agent(model), "Hi", mode="streamed", session=s, run_config=s.run_config())
        await s.pop_item()
        await s.clear_session()

    asyncio.run(run())
    assert bridged and all(bridged)


async def _max_stall(work: Awaitable[Any]) -> float:
    """The longest the event loop went without running a 1 ms ticker while ``work`` ran."""
    stall = 0.0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal stall
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            stall = max(stall, now - last)
            last = now

    tick = asyncio.create_task(ticker())
    try:
        await work
    finally:
        done.set()
        await tick
    return stall


def test_fifty_sessions_share_one_event_loop(tmp_path: Path) -> None:
    sessions = [_open(tmp_path, f"ws{n}") for n in range(50)]

    async def one(s: AgentsSession, n: int) -> None:
        for k in range(10):
            await s.add_items([{"role": "user", "content": f"{n}:{k}"}])
            await s.get_items(limit=3)
        await s.pop_item()

    async def run() -> float:
        work = asyncio.gather(*(one(s, n) for n, s in enumerate(sessions)))
        return await _max_stall(work)

    stall = asyncio.run(run())
    # The figure is reported, not asserted (benches/test_bench_async_agents.py measures it).
    print(f"longest event-loop stall with 50 AgentsSessions: {stall * 1000:.1f} ms")
    for n, s in enumerate(sessions):
        items = asyncio.run(s.get_items())
        assert [i["content"] for i in items] == [f"{n}:{k}" for k in range(9)]


def test_one_session_from_many_threads(tmp_path: Path) -> None:
    s = _open(tmp_path)

    def worker(n: int) -> None:
        async def go() -> None:
            for k in range(5):
                await s.add_items([{"role": "user", "content": f"{n}.{k}"}])

        asyncio.run(go())

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    items = asyncio.run(s.get_items())
    assert sorted(i["content"] for i in items) == sorted(
        f"{n}.{k}" for n in range(4) for k in range(5)
    )


# ----- behaviours that already agreed (kept agreeing) ------------------------------------


def test_basic_unicode_and_injection_round_trip(tmp_path: Path) -> None:
    items = [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi there!"},
        {"role": "user", "content": "ünïcödé 🙂 中文 — \u200b"},
        {"role": "user", "content": "'; DROP TABLE agent_messages; -- \" \\ \n\t"},
        {"role": "user", "content": '{"json": "inside", "n": [1, 2]}'},
    ]

    async def run() -> None:
        ours, ref = _open(tmp_path), _sqlite()
        for s in (ours, ref):
            await s.add_items(items[:2])
            await s.add_items(items[2:])
        assert await ours.get_items() == await ref.get_items() == items
        assert await ours.get_items(2) == await ref.get_items(2)

    asyncio.run(run())


def test_pop_order_and_clear(tmp_path: Path) -> None:
    async def run() -> None:
        ours, ref = _open(tmp_path), _sqlite()
        for s in (ours, ref):
            await s.add_items([{"role": "user", "content": str(n)} for n in range(4)])
        for _ in range(5):
            assert await ours.pop_item() == await ref.pop_item()
        assert await ours.get_items() == [] == await ref.get_items()
        await ours.add_items([{"role": "user", "content": "again"}])
        await ours.clear_session()
        assert await ours.get_items() == []

    asyncio.run(run())


@pytest.mark.parametrize("mode", MODES)
def test_session_input_callback(tmp_path: Path, mode: str) -> None:
    def keep_last_two(history: list[Any], new: list[Any]) -> list[Any]:
        return history[-2:] + new

    async def run() -> None:
        sent, stored = [], []
        for s in (_sqlite(), _open(tmp_path)):
            await s.add_items(_history())
            model = testing.ScriptedModel([_reply("ok")])
            rc = agents.RunConfig(session_input_callback=keep_last_two)
            await _drive(_agent(model), "third", mode=mode, session=s, run_config=rc)
            sent.append(_calls(model))
            stored.append(await s.get_items())
        assert sent[0] == sent[1]
        assert stored[0] == stored[1]

    asyncio.run(run())


@pytest.mark.parametrize("mode", MODES)
def test_session_input_callback_with_the_filter_stores_what_sqlite_stores(
    tmp_path: Path, mode: str
) -> None:
    def new_first(history: list[Any], new: list[Any]) -> list[Any]:
        return new + history[-3:]

    async def run() -> None:
        stored = []
        for s in (_sqlite(), _open(tmp_path)):
            await s.add_items(_history())
            call = testing.function_call("read_file", {"n": 3}, call_id="c")
            model = testing.ScriptedModel([[call], _reply("ok")])
            kw = {"session_input_callback": new_first}
            rc = s.run_config(**kw) if isinstance(s, AgentsSession) else agents.RunConfig(**kw)
            await _drive(_agent(model), "third", mode=mode, session=s, run_config=rc)
            stored.append(await s.get_items())
        assert stored[0] == stored[1]

    asyncio.run(run())


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_human_in_the_loop_with_rehydration(tmp_path: Path, mode: str, decision: str) -> None:
    @agents.function_tool(needs_approval=True)
    def delete_file(path: str) -> str:
        """Delete a file."""
        return f"deleted {path}"

    async def flow(session: Any, use_filter: bool) -> tuple[Any, list[Any]]:
        model = testing.ScriptedModel(
            [[testing.function_call("delete_file", {"path": "a.txt"}, call_id="d1")]]
        )
        model.extend([_reply("Done.")])
        agent = _agent(model, tools=[delete_file])
        rc = session.run_config() if use_filter else None
        first = await _drive(agent, "Delete a.txt", mode=mode, session=session, run_config=rc)
        assert first.interruptions
        state = await agents.RunState.from_string(agent, first.to_state().to_string())
        (pending,) = state.get_interruptions()
        getattr(state, decision)(pending)
        await _drive(agent, state, mode=mode, session=session, run_config=rc)
        return model, await session.get_items()

    async def run() -> None:
        ref_model, ref_items = await flow(_sqlite(), False)
        model, items = await flow(_open(tmp_path), True)
        assert items == ref_items
        assert _calls(model) == _calls(ref_model)

    asyncio.run(run())


@pytest.mark.parametrize("mode", MODES)
def test_handoff_to_another_agent(tmp_path: Path, mode: str) -> None:
    async def run() -> list[Any]:
        seen = []
        for s in (_sqlite(), _open(tmp_path)):
            second = testing.ScriptedModel([_reply("B here.")])
            b = agents.Agent(name="b", instructions="B.", model=second)
            first = testing.ScriptedModel(
                [[testing.function_call("transfer_to_b", {}, call_id="h")]]
            )
            a = agents.Agent(name="a", instructions="A.", model=first, handoffs=[b])
            rc = s.run_config() if isinstance(s, AgentsSession) else None
            result = await _drive(a, "Hi", mode=mode, session=s, run_config=rc)
            assert result.final_output == "B here."
            seen.append((_calls(first), _calls(second), await s.get_items()))
        return seen

    ref, ours = asyncio.run(run())
    assert ours == ref


@pytest.mark.parametrize("mode", MODES)
def test_reasoning_ids_omitted_as_the_run_config_asks(tmp_path: Path, mode: str) -> None:
    earlier = [
        {"role": "user", "content": "plan"},
        {"id": "rs_0", "type": "reasoning", "summary": [{"type": "summary_text", "text": "hm"}]},
        {"role": "assistant", "content": "ok"},
    ]

    async def run() -> list[Any]:
        seen = []
        for s in (_sqlite(), _open(tmp_path)):
            await s.add_items(earlier)
            call = testing.function_call("read_file", {"n": 1}, call_id="c")
            model = testing.ScriptedModel([[_reasoning("read it"), call], _reply("done")])
            kw = {"reasoning_item_id_policy": "omit"}
            rc = s.run_config(**kw) if isinstance(s, AgentsSession) else agents.RunConfig(**kw)
            await _drive(_agent(model), "Hi", mode=mode, session=s, run_config=rc)
            seen.append((_calls(model), await s.get_items()))
        return seen

    ref, ours = asyncio.run(run())
    assert ours == ref
    assert "rs_0" not in json.dumps(ours[0])


@agents.input_guardrail
async def _always_trips(_ctx: Any, _agent: Any, _input: Any) -> Any:
    return agents.GuardrailFunctionOutput(output_info=None, tripwire_triggered=True)


@pytest.mark.parametrize("mode", MODES)
def test_input_guardrail_tripwire(tmp_path: Path, mode: str) -> None:
    async def run() -> list[Any]:
        stored = []
        for s in (_sqlite(), _open(tmp_path)):
            model = testing.ScriptedModel([_reply("never sent")])
            agent = _agent(model, input_guardrails=[_always_trips])
            rc = s.run_config() if isinstance(s, AgentsSession) else None
            with pytest.raises(agents.InputGuardrailTripwireTriggered):
                await _drive(agent, "Hi", mode=mode, session=s, run_config=rc)
            stored.append(await s.get_items())
        return stored

    ref, ours = asyncio.run(run())
    assert ours == ref


def test_soft_cancel_after_turn(tmp_path: Path) -> None:
    async def run() -> list[list[Any]]:
        stored = []
        for s in (_open(tmp_path), _sqlite()):
            call = testing.function_call("read_file", {"n": 1}, call_id="c1")
            model = testing.ScriptedModel([[call], _reply("never reached")])
            rc = s.run_config() if isinstance(s, AgentsSession) else None
            result = agents.Runner.run_streamed(_agent(model), "Hi", session=s, run_config=rc)
            async for event in result.stream_events():
                if event.type == "run_item_stream_event":
                    result.cancel(mode="after_turn")
            stored.append(await s.get_items())
        return stored

    ours, ref = asyncio.run(run())
    assert ours == ref
    kinds = [i.get("type", i.get("role")) for i in ours]
    assert kinds == ["user", "function_call", "function_call_output"]


def test_encrypted_session_over_agents_session(tmp_path: Path) -> None:
    encrypt = pytest.importorskip("agents.extensions.memory.encrypt_session")

    async def run() -> None:
        inner = _open(tmp_path)
        s = encrypt.EncryptedSession("e", inner, encryption_key="k" * 32)
        items = [{"role": "user", "content": "secret"}, {"role": "assistant", "content": "ok"}]
        await s.add_items(items)
        assert await s.get_items() == items
        assert await s.pop_item() == items[-1]
        assert await s.get_items() == items[:1]
        raw = json.dumps(await inner.get_items())
        assert "secret" not in raw

    asyncio.run(run())
