"""Usage anchoring's rules (SPEC §1): what a reply records, when an anchor holds and
when it is dropped, the calibration's bounds, the guard margin, and count endpoints."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget import (
    AsyncSession,
    Budget,
    CountSplit,
    InvalidArgumentError,
    PolicyError,
    Session,
    Usage,
    _ctxbudget,
    usage_of,
)
from ctxbudget.counters import anthropic_counter, gemini_contents, gemini_counter

TOOL = {
    "name": "lookup",
    "description": "Looks a word up.",
    "parameters": {"type": "object", "properties": {"word": {"type": "string"}}},
}


def _open(ws: Path, **options: Any) -> Session:
    options.setdefault("model", "gpt-4o")
    options.setdefault("context_window", 128_000)
    return Session.open(ws, durability="none", **options)


def _answered(s: Session, more: int = 37, text: str = "Sure.") -> int:
    """A user message, its request, and a reply reporting ``more`` tokens above the
    profile's count of that request (a plausible provider figure); returns the figure."""
    s.add_user("Please look into the failing export job.")
    reported = s.prepare().decision.projected + more
    s.add_assistant(text, usage=Usage(reported))
    return reported


# ----- what a reply records ---------------------------------------------------------


def test_a_reply_records_its_usage_bound_to_the_request(tmp_path: Path) -> None:
    s = _open(tmp_path)
    s.add_user("hello")
    turn = s.prepare()
    reported = turn.decision.projected + 21
    s.add_assistant("hi", usage={"prompt_tokens": reported})
    meta = s.view().rows[-1].meta
    assert meta["usage"] == {"input_tokens": reported}
    assert meta["request_tokens"] == turn.decision.projected
    request = meta["request"]
    assert request["profile"] == turn.decision.projected
    assert request["last_seq"] == s.view().rows[0].seq
    assert request["rows"] == 1 and isinstance(request["fp"], str)
    # Another Session over the same workspace reads the same anchor.
    again = _open(tmp_path)
    assert again.view().tokens == s.view().tokens
    assert again.prepare().count.anchored == reported


def test_every_adapter_records_the_providers_usage(tmp_path: Path) -> None:
    from anthropic.types import Message
    from openai.types.chat import ChatCompletion
    from openai.types.responses import Response

    s = _open(tmp_path)
    completion = ChatCompletion.model_validate(
        {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": "gpt-4o",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "ok"},
                }
            ],
            "usage": {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13},
        }
    )
    s.add_user("a")
    s.prepare()
    s.add_assistant_from_openai(completion.choices[0].message, usage=completion.usage)
    assert s.view().rows[-1].meta["usage"] == {"input_tokens": 11}

    response = Response.model_validate(
        {
            "id": "r",
            "object": "response",
            "created_at": 0,
            "model": "gpt-4o",
            "output": [
                {
                    "type": "message",
                    "id": "m",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "ok", "annotations": []}],
                }
            ],
            "parallel_tool_calls": False,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": 22,
                "input_tokens_details": {"cached_tokens": 20, "cache_write_tokens": 0},
                "output_tokens": 1,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 23,
            },
        }
    )
    s.add_user("b")
    s.prepare()
    s.add_assistant_from_openai_responses(response)
    assert s.view().rows[-1].meta["usage"] == {"input_tokens": 22}

    message = Message.model_validate(
        {
            "id": "m",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": "ok"}],
            "stop_reason": "end_turn",
            "usage": {
                "input_tokens": 5,
                "cache_creation_input_tokens": 100,
                "cache_read_input_tokens": 1_000,
                "output_tokens": 1,
            },
        }
    )
    s.add_user("c")
    s.prepare()
    s.add_assistant_from_anthropic(message)
    assert s.view().rows[-1].meta["usage"] == {"input_tokens": 1_105}


def test_usage_shapes_and_bad_usage() -> None:
    assert usage_of({"usageMetadata": {"promptTokenCount": 7}}) == Usage(7)
    assert usage_of({"prompt_token_count": 8}) == Usage(8)
    assert usage_of(None) is None
    assert usage_of({"nothing": 1}) is None
    for bad in ({"prompt_tokens": -1}, {"input_tokens": "12"}, {"input_tokens": True}, 12):
        with pytest.raises(InvalidArgumentError):
            usage_of(bad)


def test_bad_usage_writes_nothing(tmp_path: Path) -> None:
    s = _open(tmp_path)
    s.add_user("a")
    s.prepare()
    before = s.view(refresh=True).last_seq
    with pytest.raises(InvalidArgumentError):
        s.add_assistant("ok", usage={"input_tokens": -5})
    assert s.view(refresh=True).last_seq == before


# ----- when the anchor holds, and when it is dropped --------------------------------


def test_the_next_count_is_the_reported_figure_plus_what_was_appended(tmp_path: Path) -> None:
    s = _open(tmp_path)
    reported = _answered(s)
    s.add_user("And the retries too.")
    turn = s.prepare()
    view = s.view()
    appended = [r for r in view.rows if r.seq > view.rows[0].seq]
    assert turn.count.anchored == reported and turn.count.estimated == 0
    # The exact part is the profile's count of the rows since: the whole profile count
    # minus what the anchored request counted.
    profile = s._state.counting.measure(s._state, s._inputs()).profile
    first_profile = view.rows[1].meta["request"]["profile"]
    assert turn.count.exact == profile - first_profile
    assert len(appended) == 2


@pytest.mark.parametrize(
    "change", ["retraction", "soft_clear", "tools", "system", "context_hook", "hook", "rollover"]
)
def test_a_changed_prefix_drops_the_anchor(tmp_path: Path, change: str) -> None:
    s = _open(tmp_path, context_window=40_000 if change == "rollover" else 128_000)
    _answered(s)
    first_user = s.view().rows[0].seq
    if change == "retraction":
        s.history.append(
            [{"kind": "retraction", "role": "system", "meta": {"retracts": first_user}}]
        )
    elif change == "soft_clear":
        s.history.clear_soft()
    elif change == "tools":
        s.set_request(tools=[TOOL])
    elif change == "system":
        s.set_request(system="You are a different assistant now.")
    elif change == "context_hook":
        s.register_hook(lambda window_id: "Be brief.", context_only=True)
    elif change == "hook":
        s.register_hook(lambda request: request, context_only=False)
    elif change == "rollover":
        # Past the usable limit together, each one fitting a fresh window.
        s.add_user("x " * 16_000)
        s.add_user("y " * 16_000)
    if change != "rollover":
        s.add_user("next")
    turn = s.prepare()
    if change == "rollover":
        assert any(e.startswith("rollover") for e in turn.events)
    assert turn.status == "send"
    assert turn.count.anchored == 0
    assert turn.count.exact == turn.decision.projected


def _ceil_bp(value: int, bp: int) -> int:
    return -(-value * bp // 10_000)


@pytest.mark.parametrize("change", ["tools", "system", "context_hook", "tool_removed"])
def test_an_estimated_familys_figure_holds_for_its_messages_when_only_the_overhead_changed(
    tmp_path: Path, change: str
) -> None:
    """Within a window, a change of tools or system text leaves the messages as they
    were sent: the figure still holds for them, and only the overhead's change is
    estimated (added: estimated; removed: taken off the figure), with the margin kept
    for both estimates (``CountSplit::rebased``)."""
    s = _open(tmp_path, model="claude-sonnet-4-5", tools=[TOOL] if change == "tool_removed" else [])
    reported = _answered(s)
    request = s.view().rows[-1].meta["request"]
    if change in ("tools", "tool_removed"):
        s.set_request(tools=[] if change == "tool_removed" else [TOOL])
    elif change == "system":
        s.set_request(system="You are a different assistant now.")
    else:
        s.register_hook(lambda window_id: "Be brief.", context_only=True)
    s.add_user("next")
    turn = s.prepare()
    now = s._state.counting.measure(s._state, s._inputs())
    _, message_bp, overhead_bp = _ctxbudget.calibration_ratios_bp(s._state.tokens.calibration())
    assert message_bp is not None and overhead_bp is not None
    since = (now.profile - now.overhead) - (request["profile"] - request["overhead"])
    assert since > 0
    change_of_overhead = now.overhead - request["overhead"]
    assert turn.count.exact == 0
    if change == "tool_removed":
        assert change_of_overhead < 0
        deducted = -change_of_overhead * overhead_bp // 10_000
        assert turn.count.anchored == reported - deducted
        assert turn.count.estimated == _ceil_bp(since, message_bp)
        assert turn.count.margin == _ceil_bp(turn.count.estimated + deducted, 500)
    else:
        assert change_of_overhead > 0
        assert turn.count.anchored == reported
        assert turn.count.estimated == _ceil_bp(change_of_overhead, overhead_bp) + _ceil_bp(
            since, message_bp
        )
        assert turn.count.margin == _ceil_bp(turn.count.estimated, 500)
    assert turn.decision.projected == turn.count.total
    # The reply to it anchors the new prefix as usual.
    again = turn.decision.projected + 11
    s.add_assistant("ok", usage=Usage(again))
    s.add_user("and then?")
    assert s.prepare().count.anchored == again


def test_an_overhead_change_keeps_no_anchor_across_what_renders_messages_otherwise(
    tmp_path: Path,
) -> None:
    """The figure holds for the messages only while they render as they did: another
    model (a second host opened with it), a retraction inside the prefix or a reply
    recorded before requests named what renders their messages drop it."""
    s = _open(tmp_path / "a", model="claude-sonnet-4-5")
    _answered(s)
    other = _open(tmp_path / "a", model="claude-opus-4-1")
    other.add_user("next")
    assert other.prepare().count.anchored == 0

    r = _open(tmp_path / "b", model="claude-sonnet-4-5")
    _answered(r)
    first_user = r.view().rows[0].seq
    r.history.append([{"kind": "retraction", "role": "system", "meta": {"retracts": first_user}}])
    r.set_request(tools=[TOOL])
    r.add_user("next")
    assert r.prepare().count.anchored == 0

    o = _open(tmp_path / "c", model="claude-sonnet-4-5")
    o.add_user("hello")
    profile = o.prepare().decision.projected
    m = o._state.counting.measure(o._state, o._inputs())
    # A reply as recorded before requests named what renders their messages.
    request = {
        "profile": m.profile,
        "overhead": m.overhead,
        "last_seq": o.view().last_seq,
        "rows": 1,
        "fp": m.fingerprint,
    }
    o.history.append(
        [
            {
                "kind": "message",
                "role": "assistant",
                "parts": [{"type": "text", "text": "hi"}],
                "meta": {"usage": {"input_tokens": profile}, "request": request},
            }
        ]
    )
    assert o.prepare().count.anchored == profile
    o.set_request(tools=[TOOL])
    o.add_user("next")
    assert o.prepare().count.anchored == 0


def test_a_retraction_after_the_anchored_request_keeps_the_anchor(tmp_path: Path) -> None:
    s = _open(tmp_path)
    reported = _answered(s)
    seq = int(s.add_user("a message taken back"))
    s.history.append([{"kind": "retraction", "role": "system", "meta": {"retracts": seq}}])
    s.add_user("the real question")
    assert s.prepare().count.anchored == reported


def test_a_retracted_reply_falls_back_to_the_anchor_before_it(tmp_path: Path) -> None:
    s = _open(tmp_path)
    reported = _answered(s)
    s.add_user("go on")
    second = s.prepare().decision.projected + 50
    reply = int(s.add_assistant("second", usage=Usage(second)))
    s.history.append([{"kind": "retraction", "role": "system", "meta": {"retracts": reply}}])
    s.add_user("again")
    assert s.prepare().count.anchored == reported


def test_old_rows_without_request_metadata_count_unanchored(tmp_path: Path) -> None:
    s = _open(tmp_path)
    s.add_user("hi")
    # A reply written without a Session: usage alone binds to no request.
    s.history.append(
        [
            {
                "kind": "message",
                "role": "assistant",
                "parts": [{"type": "text", "text": "hello"}],
                "meta": {"usage": {"input_tokens": 9}},
            }
        ]
    )
    s.add_user("and?")
    turn = s.prepare()
    assert turn.count.anchored == 0 and turn.count.exact == turn.decision.projected


# ----- calibration and the guard margin ---------------------------------------------


def test_estimated_families_are_calibrated_within_bounds(tmp_path: Path) -> None:
    s = _open(tmp_path / "a", model="claude-sonnet-4-5")
    s.add_user("hello there")
    estimate = s.prepare().decision.projected
    s.add_assistant("hi", usage=Usage(estimate * 10))  # far beyond the bound
    s.set_request(system="changed")  # no anchor: the calibrated estimate alone
    turn = s.prepare()
    profile = s._state.counting.measure(s._state, s._inputs()).profile
    assert turn.count.estimated <= 2 * profile + 1
    assert turn.count.margin == -(-turn.count.estimated * 500 // 10_000)
    # An exact family is never calibrated.
    e = _open(tmp_path / "b")
    e.add_user("hello there")
    e.prepare()
    e.add_assistant("hi", usage=Usage(1))
    e.set_request(system="changed")
    t = e.prepare()
    assert t.count.estimated == 0 and t.count.margin == 0


def test_the_guard_margin_moves_the_forced_rollover_for_estimates_only() -> None:
    budget = Budget(100_000, 0.7)
    u = budget.usable_limit
    exact = CountSplit(exact=u - 10)
    estimated = CountSplit(estimated=u - 10, margin=_ctxbudget.guard_margin(u - 10))
    assert budget.evaluate(u - 10, count=exact).action.value != "rollover"
    assert budget.evaluate(u - 10, count=estimated).action.value == "rollover"
    with pytest.raises(PolicyError):
        budget.evaluate(5, count=CountSplit(exact=4))


@settings(max_examples=60, deadline=None)
@given(
    reported=st.one_of(st.integers(0, 200_000), st.integers(300, 3_000)),
    texts=st.lists(st.text(min_size=1, max_size=200), min_size=1, max_size=4),
    estimated_family=st.booleans(),
)
def test_anchoring_never_counts_below_the_exact_part(
    tmp_path_factory: pytest.TempPathFactory,
    reported: int,
    texts: list[str],
    estimated_family: bool,
) -> None:
    model = "claude-sonnet-4-5" if estimated_family else "gpt-4o"
    s = _open(tmp_path_factory.mktemp("p"), model=model, context_window=1_000_000)
    s.add_user("start")
    profile = s.prepare().decision.projected
    s.add_assistant("ok", usage=Usage(reported))
    for text in texts:
        s.add_user(text)
    count = s.prepare().count
    assert count.total >= count.exact + count.anchored
    # Only a figure the request could have cost anchors (see the placeholder test below).
    plausible = profile <= 2 * reported and reported <= 2 * profile
    assert count.anchored == (reported if plausible else 0)
    assert count.total >= count.anchored
    if not estimated_family:
        # The exact part is the profile's own count of what was appended.
        assert count.exact > 0


# ----- count endpoints --------------------------------------------------------------


class _Counted:
    def __init__(self, input_tokens: int) -> None:
        self.input_tokens = input_tokens


class FakeAnthropic:
    """Shaped like ``anthropic.Anthropic``: ``messages.count_tokens(**request)``."""

    def __init__(self, tokens: int = 777, fail: bool = False) -> None:
        self.calls: list[dict[str, Any]] = []
        self.threads: list[int] = []
        self.messages = self
        self._tokens, self._fail = tokens, fail

    def count_tokens(self, **kwargs: Any) -> _Counted:
        self.calls.append(kwargs)
        self.threads.append(threading.get_ident())
        if self._fail:
            raise ConnectionError("count endpoint unreachable")
        return _Counted(self._tokens)


class FakeAsyncAnthropic(FakeAnthropic):
    """Shaped like ``anthropic.AsyncAnthropic``."""

    async def count_tokens(self, **kwargs: Any) -> _Counted:  # type: ignore[override]
        return FakeAnthropic.count_tokens(self, **kwargs)


def test_a_count_endpoint_is_an_exact_source_cached_per_request(tmp_path: Path) -> None:
    client = FakeAnthropic(777)
    s = _open(tmp_path, model="claude-sonnet-4-5", counter=anthropic_counter(client))
    s.add_user("hello")
    turn = s.prepare()
    assert turn.count == CountSplit(exact=777)
    call = client.calls[0]
    assert call["model"] == "claude-sonnet-4-5" and call["messages"][0]["role"] == "user"
    s.prepare()
    assert len(client.calls) == 1  # the same request: cached
    s.add_user("more")
    s.prepare()
    assert len(client.calls) == 2


def test_a_failing_count_endpoint_falls_back_with_an_event(tmp_path: Path) -> None:
    s = _open(
        tmp_path, model="claude-sonnet-4-5", counter=anthropic_counter(FakeAnthropic(fail=True))
    )
    s.add_user("hello")
    turn = s.prepare()
    assert "count_endpoint_failed:ConnectionError" in turn.events
    assert turn.count.exact == 0 and turn.count.estimated == turn.decision.projected


def test_async_sessions_count_off_the_event_loop(tmp_path: Path) -> None:
    sync_client, async_client = FakeAnthropic(900), FakeAsyncAnthropic(901)

    async def main() -> tuple[int, int, int]:
        loop_thread = threading.get_ident()
        a = await AsyncSession.open(
            tmp_path / "a", model="claude-sonnet-4-5", counter=anthropic_counter(sync_client)
        )
        await a.add_user("hi")
        t1 = await a.prepare()
        b = await AsyncSession.open(
            tmp_path / "b", model="claude-sonnet-4-5", counter=anthropic_counter(async_client)
        )
        await b.add_user("hi")
        t2 = await b.prepare()
        assert t1.count.exact == 900 and t2.count.exact == 901
        return loop_thread, sync_client.threads[0], len(async_client.calls)

    loop_thread, counted_on, async_calls = asyncio.run(main())
    assert counted_on != loop_thread  # a plain client runs in a worker thread
    assert async_calls == 1


def test_a_plain_session_refuses_an_async_counter_with_an_event(tmp_path: Path) -> None:
    s = _open(tmp_path, model="claude-sonnet-4-5", counter=anthropic_counter(FakeAsyncAnthropic()))
    s.add_user("hi")
    turn = s.prepare()
    assert "count_endpoint_failed:TypeError" in turn.events


def test_the_gemini_counter_sends_contents() -> None:
    class Models:
        def __init__(self) -> None:
            self.kwargs: dict[str, Any] = {}

        def count_tokens(self, **kwargs: Any) -> dict[str, int]:
            self.kwargs = kwargs
            return {"total_tokens": 42}

    class Client:
        models = Models()

    from ctxbudget import CountRequest

    counter = gemini_counter(Client(), "gemini-2.5-pro")
    request = CountRequest(
        "gemini-2.5-pro",
        "Be brief.",
        [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "1", "name": "lookup", "arguments": '{"word": "x"}'}],
            },
            {"role": "tool", "tool_call_id": "1", "name": "lookup", "content": "found"},
        ],
        [TOOL],
    )
    assert counter(request) == {"total_tokens": 42}
    sent = Client.models.kwargs
    assert sent["config"]["system_instruction"] == "Be brief."
    assert sent["config"]["tools"][0]["function_declarations"][0]["name"] == "lookup"
    assert [c["role"] for c in sent["contents"]] == ["user", "model", "user"]
    assert gemini_contents([{"role": "user", "content": ""}]) == []


# ----- the Agents SDK -----------------------------------------------------------------


@pytest.mark.parametrize("mode", ["run", "streamed"])
def test_agents_runs_record_each_model_responses_usage(tmp_path: Path, mode: str) -> None:
    agents = pytest.importorskip("agents")
    testing = pytest.importorskip("agents.testing")
    from agents.usage import Usage as SdkUsage

    from ctxbudget.integrations.agents import AgentsSession

    def step(output: Any, tokens: int) -> Any:
        return testing.ModelStep(
            output=[output], usage=SdkUsage(requests=1, input_tokens=tokens, total_tokens=tokens)
        )

    model = testing.ScriptedModel(
        [
            step(testing.function_call("lookup", {"word": "x"}, call_id="c1"), 161),
            step(testing.assistant_message("Found it."), 172),
            step(testing.assistant_message("Anything else?"), 183),
        ]
    )

    @agents.function_tool
    def lookup(word: str) -> str:
        """Looks a word up."""
        return f"{word}: a letter"

    agent = agents.Agent(name="a", instructions="Be brief.", model=model, tools=[lookup])
    session = AgentsSession.open("u", tmp_path, agent=agent, model="gpt-4o", durability="none")
    seen: list[str] = []

    class HostHooks(agents.RunHooks[Any]):
        async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
            seen.append("llm_end")

        async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
            seen.append("tool_start")

    async def run(text: str) -> None:
        kwargs = {"session": session, "run_config": session.run_config()}
        hooks = session.run_hooks(HostHooks())
        if mode == "run":
            await agents.Runner.run(agent, text, hooks=hooks, **kwargs)
            return
        result = agents.Runner.run_streamed(agent, text, hooks=hooks, **kwargs)
        async for _ in result.stream_events():
            pass

    asyncio.run(run("Look x up."))
    asyncio.run(run("Thanks."))
    replies = [r for r in session.session.view(refresh=True).rows if r.role == "assistant"]
    assert [r.meta.get("usage") for r in replies] == [
        {"input_tokens": 161},
        {"input_tokens": 172},
        {"input_tokens": 183},
    ]
    assert all("request" in r.meta for r in replies)
    assert seen.count("llm_end") == 3 and "tool_start" in seen
    # The last request was anchored on the reply before it.
    assert session.last_turn is not None and session.last_turn.count.anchored == 172


def test_an_implausible_reported_figure_neither_anchors_nor_holds_the_count_down(
    tmp_path: Path,
) -> None:
    """A test double's fixed usage (LiteLLM's mock reports 10 prompt tokens) must not
    become the count: the window still reaches its forced rollover on the profile's
    count, and no part of a count is anchored to the placeholder."""
    s = Session.open(tmp_path / "ws", model="gpt-4o", context_window=16_000, durability="none")
    rolled = False
    for n in range(200):
        s.add_user(f"step {n}: " + "the nightly export failed again " * 40)
        turn = s.prepare()
        if any(e.startswith("rollover") for e in turn.events):
            rolled = True
            break
        assert turn.count.anchored == 0, turn.count
        assert turn.decision.projected >= turn.count.exact > 100
        s.add_assistant("noted", usage={"prompt_tokens": 10})
    assert rolled, "the placeholder usage held the count below the usable limit"
