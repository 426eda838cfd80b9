"""The new_context tool (SPEC §7): once per window, durable, its arguments."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ctxbudget import History, NewContextTool


def test_new_context_once_per_window_and_durable(tmp_path: Path) -> None:
    h = History.open(tmp_path, durability="none")
    tool = NewContextTool(h)
    assert tool.schema("json") == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }
    assert tool.call({}) == {"ok": True, "status": "scheduled"}
    assert tool.call({})["code"] == "already_requested"
    # The persisted tool result is the request: a restarted process sees it.
    h.append(
        [
            {
                "kind": "message",
                "role": "tool",
                "parts": [
                    {
                        "type": "tool_result",
                        "call_id": "c1",
                        "name": "new_context",
                        "output": {"ok": True, "status": "scheduled"},
                    }
                ],
            }
        ]
    )
    restarted = NewContextTool(History.open(tmp_path, durability="none"))
    assert restarted.call("{}")["code"] == "already_requested"
    # A new window may ask again.
    h.rollover(rollover_id="r1", reason="new_context", requested_by="model", lead_in="x")
    assert NewContextTool(h).call(None) == {"ok": True, "status": "scheduled"}


def test_new_context_disabled_and_arguments() -> None:
    assert NewContextTool(offered=False).call({})["code"] == "rollover_disabled"
    tool = NewContextTool()
    assert tool.call({"now": True})["code"] == "invalid_arguments"
    assert tool.call("not json")["code"] == "invalid_arguments"
    assert tool.call("", window_id="w:0")["ok"]
    assert tool.call({}, window_id="w:0")["code"] == "already_requested"
    assert tool.call({}, window_id="w:5")["ok"]
    assert tool.schema("openai")["function"]["strict"] is True


def test_new_context_reads_a_scheduled_result_stored_as_json_text(tmp_path: Path) -> None:
    """The window fold reads the durable request whether the output was stored as an
    object or as its JSON text."""
    h = History.open(tmp_path, durability="none")
    h.append(
        [
            {
                "kind": "message",
                "role": "tool",
                "parts": [
                    {
                        "type": "tool_result",
                        "call_id": "c1",
                        "name": "new_context",
                        "output": '{"ok": true, "status": "scheduled"}',
                    }
                ],
            }
        ]
    )
    assert NewContextTool(h).call({})["code"] == "already_requested"


def _scheduled(output: object, name: str = "new_context") -> dict[str, Any]:
    part = {"type": "tool_result", "call_id": "c1", "name": name, "output": output}
    return {"kind": "message", "role": "tool", "parts": [part], "meta": {}}


def test_requested_in_asks_the_core_fold(tmp_path: Path) -> None:
    """`NewContextTool.requested_in(rows)` stays public and answers with the core fold's
    rule: a `scheduled` result of `new_context` (object or JSON text) in the rows' last
    window; another tool, another status, or a later boundary do not count."""
    assert NewContextTool.requested_in([]) is False
    assert NewContextTool.requested_in([_scheduled({"ok": True, "status": "scheduled"})])
    assert NewContextTool.requested_in([_scheduled('{"ok": true, "status": "scheduled"}')])
    assert not NewContextTool.requested_in([_scheduled({"status": "scheduled"}, "memory")])
    assert not NewContextTool.requested_in([_scheduled({"ok": False, "code": "x"})])
    h = History.open(tmp_path, durability="none")
    h.append([_scheduled({"ok": True, "status": "scheduled"})])
    assert NewContextTool.requested_in(h.rows())
    h.rollover(rollover_id="r1", reason="new_context", requested_by="model", lead_in="x")
    assert not NewContextTool.requested_in(h.rows())
