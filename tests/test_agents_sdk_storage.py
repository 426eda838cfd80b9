"""Each SDK item is stored once: its row's parts hold the text, the tool calls and
results, and the row's metadata only what the parts cannot give back. So a tool result
that fits a row in the SDK's own ``SQLiteSession`` fits one here, and ``get_items()``
returns every item exactly as it was given."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import pytest

agents = pytest.importorskip("agents")
testing = pytest.importorskip("agents.testing")

from ctxbudget import History, Session  # noqa: E402
from ctxbudget.integrations.agents import AgentsSession  # noqa: E402

MODES = ["run", "streamed"]
BIG = 600_000
PNG = "data:image/png;base64," + "iVBORw0KGgo" * 40


def _open(ws: Path) -> AgentsSession:
    core = Session.open(ws, model="gpt-4o", context_window=1_000_000, durability="none")
    return AgentsSession(core)


async def _drive(agent: Any, session: Any, mode: str, run_config: Any = None) -> Any:
    if mode == "run":
        return await agents.Runner.run(
            agent, "read the log", session=session, run_config=run_config, max_turns=4
        )
    result = agents.Runner.run_streamed(
        agent, "read the log", session=session, run_config=run_config, max_turns=4
    )
    async for _ in result.stream_events():
        pass
    return result


@pytest.mark.parametrize("mode", MODES)
def test_a_600k_character_tool_result_fits_as_in_sqlite_session(tmp_path: Path, mode: str) -> None:
    """Before, the result was stored twice in its row (the part and a whole copy of the
    item in its metadata): over the 1 MiB row limit, the run ended with
    ``InvalidRowError`` where ``SQLiteSession`` completed it."""
    log = "".join(f"line {n:06d} ok\n" for n in range(BIG // 15))[:BIG]
    assert len(log) == BIG

    def make_agent() -> Any:
        @agents.function_tool
        def read_log() -> str:
            """The service's log."""
            return log

        model = testing.ScriptedModel(
            [
                testing.ModelStep.respond(
                    lambda call: [testing.function_call("read_log", {}, call_id="c1")]
                ),
                testing.ModelStep.respond(lambda call: [testing.assistant_message("read it")]),
            ]
        )
        return agents.Agent(name="a", instructions="Help.", model=model, tools=[read_log])

    async def main() -> tuple[list[Any], list[Any]]:
        reference = agents.SQLiteSession("ref", str(tmp_path / "ref.db"))
        ref_result = await _drive(make_agent(), reference, mode)
        assert ref_result.final_output == "read it"
        s = _open(tmp_path / "ws")
        result = await _drive(make_agent(), s, mode, s.run_config())
        assert result.final_output == "read it"
        return await reference.get_items(), await s.get_items()

    expected, got = asyncio.run(main())
    assert got == expected
    outputs = [i for i in got if i.get("type") == "function_call_output"]
    assert len(outputs) == 1 and outputs[0]["output"] == log
    # Stored once: the transcript holds the log's text once, not twice.
    chat = (tmp_path / "ws" / "history" / "chat.jsonl").read_text()
    assert chat.count("line 012345 ok") == 1


ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "user-text " * 50},
    {"role": "user", "content": ""},
    {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "part-one " * 40},
            {"type": "input_image", "image_url": PNG, "detail": "auto"},
            {"type": "input_text", "text": "part-two " * 40},
        ],
    },
    {"role": "developer", "content": "developer-text " * 40},
    {"role": "system", "content": [{"type": "input_text", "text": "system-text " * 40}]},
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [
            {"type": "output_text", "text": "answer-text " * 40, "annotations": []},
            {"type": "refusal", "refusal": "refusal-text " * 40},
        ],
    },
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "c1",
        "name": "write",
        "arguments": '{"body":"' + "compact-args " * 40 + '"}',
    },
    {
        "type": "function_call",
        "call_id": "c2",
        "name": "write",
        "arguments": '{"body": "' + "spaced-args " * 40 + '"}',
    },
    {
        "type": "function_call",
        "call_id": "c3",
        "name": "write",
        "arguments": '{ "body" :  "' + "odd-args " * 40 + '" }',
    },
    {"type": "function_call", "call_id": "c4", "name": "write", "arguments": "not-json " * 40},
    {"type": "function_call_output", "call_id": "c1", "output": "tool-output " * 40},
    {
        "type": "function_call_output",
        "call_id": "c2",
        "output": [
            {"type": "input_text", "text": "list-output " * 40},
            {"type": "input_image", "image_url": PNG},
        ],
    },
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "summary-text " * 40}],
        "encrypted_content": "opaque",
    },
    {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"query": "q"}},
    {"role": "user", "content": "ünïcödé ☀ " * 30},
]
MARKERS = [
    "user-text",
    "part-one",
    "part-two",
    "developer-text",
    "system-text",
    "answer-text",
    "refusal-text",
    "compact-args",
    "spaced-args",
    "odd-args",
    "not-json",
    "tool-output",
    "list-output",
    "summary-text",
    "ünïcödé",
]


def test_every_item_comes_back_exactly_and_its_text_is_stored_once(tmp_path: Path) -> None:
    s = _open(tmp_path / "ws")
    given = copy.deepcopy(ITEMS)

    async def main() -> list[Any]:
        await s.add_items(given)
        return await s.get_items()

    got = asyncio.run(main())
    assert got == ITEMS and given == ITEMS
    # A fresh session reads the same items back from the store alone.
    assert asyncio.run(_open(tmp_path / "ws").get_items()) == ITEMS
    chat = (tmp_path / "ws" / "history" / "chat.jsonl").read_text()
    values = [v for line in chat.splitlines() for v in _strings(json.loads(line))]
    for marker in MARKERS:
        holding = [v for v in values if marker in v]
        assert len(holding) == 1, f"{marker!r} is stored {len(holding)} times"
    # The rows still carry what ctxbudget counts and searches.
    rows = list(History.open(tmp_path / "ws", durability="none").rows())
    texts = json.dumps([r.parts for r in rows], ensure_ascii=False)
    for marker in MARKERS:
        assert marker in texts, marker


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def test_rows_of_earlier_transcripts_still_read(tmp_path: Path) -> None:
    """A row written before items were stored once (a whole copy in
    ``meta.agents_item``) gives its item back as it was."""
    item = {
        "id": "m1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "old reply", "annotations": []}],
    }
    History.open(tmp_path / "ws", durability="none").append(
        [
            {
                "kind": "message",
                "role": "assistant",
                "parts": [{"type": "text", "text": "old reply"}],
                "meta": {"agents_item": item},
            }
        ]
    )
    assert asyncio.run(_open(tmp_path / "ws").get_items()) == [item]
