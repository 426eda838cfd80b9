"""LiteLLM scenarios, each run in a process of its own by test_litellm.py: importing
LiteLLM makes ctxbudget take model windows from it, which must not leak into the other
tests of a pytest process. LiteLLM's ``mock_response`` answers; nothing is downloaded
(LITELLM_LOCAL_MODEL_COST_MAP)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

import litellm

from ctxbudget import AsyncSession, History, Session, count_messages
from ctxbudget.session import context_window_for

MODEL = "openai/gpt-4o"
FACT = "the staging password rotates on Fridays"
FILE = "def charge(card):\n    return gateway.post(card)  # retried on 503\n" * 40
READ_FILE = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read one source file of the billing service.",
        "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}},
    },
}


class Script:
    """Decides each reply from the request LiteLLM is sent (kept, with what the session
    counted for it)."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, Any], int]] = []
        self.n = 0
        self.handed_off = False
        self.searched = False

    def reply(self, request: dict[str, Any], counted: int) -> dict[str, Any]:
        """``mock_response`` / ``mock_tool_calls`` for the next completion."""
        self.requests.append((request, counted))
        self.n += 1
        messages = request["messages"]
        last = json.dumps(messages[-1].get("content"), default=str)
        shown = json.dumps(messages, default=str)
        if messages[-1]["role"] == "user" and "Thanks" in last:
            return {"mock_response": "You are welcome."}
        if "New context window" in shown and not self.searched:
            self.searched = True
            return self._call("session_history", {"action": "search", "query": "staging password"})
        if self.searched and messages[-1]["role"] == "tool":
            return {"mock_response": "Audit resumed; the fact is recovered."}
        if "Finish the current small unit" in last and not self.handed_off:
            self.handed_off = True
            memo = {
                "command": "create",
                "path": "/memories/session/checkpoint.md",
                "file_text": "goal: audit\nnext: continue",
            }
            return {
                "mock_response": "",
                "mock_tool_calls": [
                    _tool_call(f"m{self.n}", "memory", memo),
                    _tool_call(f"n{self.n}", "new_context", {}),
                ],
            }
        return self._call("read_file", {"n": self.n})

    def _call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        return {"mock_response": "", "mock_tool_calls": [_tool_call(f"c{self.n}", name, args)]}


def _tool_call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def _open(ws: Path) -> Session:
    return Session.open(
        ws, model=MODEL, context_window=40_000, threshold=0.5, tools=[READ_FILE], durability="none"
    )


def _results(s: Session, message: Any) -> list[dict[str, Any]]:
    out = []
    for call in message.tool_calls or ():
        name, args = call.function.name, json.loads(call.function.arguments)
        if name == "read_file":
            output: Any = f"# file {args['n']}\n{FILE}"
        else:
            output = s.run_tool(name, args)
        out.append({"call_id": call.id, "name": name, "output": output})
    return out


def run(s: Session, script: Script, user: list[str]) -> str:
    """The plain loop over LiteLLM: prepare, completion, record, tools."""
    for text in user:
        s.add_user(text)
    while True:
        turn = s.prepare()
        assert turn.status == "send", turn.reason
        request = turn.to_openai_chat()
        response = litellm.completion(
            model=MODEL, **request, **script.reply(request, turn.decision.projected)
        )
        s.add_assistant_from_litellm(response)
        message = response.choices[0].message
        if not message.tool_calls:
            return str(message.content)
        s.add_tool_results(_results(s, message))


async def arun(s: AsyncSession, script: Script, user: list[str]) -> str:
    """The same loop awaited: litellm.acompletion over an AsyncSession."""
    for text in user:
        await s.add_user(text)
    while True:
        turn = await s.prepare()
        assert turn.status == "send", turn.reason
        request = turn.to_openai_chat()
        response = await litellm.acompletion(
            model=MODEL, **request, **script.reply(request, turn.decision.projected)
        )
        await s.add_assistant_from_litellm(response)
        message = response.choices[0].message
        if not message.tool_calls:
            return str(message.content)
        await s.add_tool_results(_results(s.session, message))


def check_ladder(ws: Path, output: str, script: Script) -> None:
    assert "recovered" in output, output
    rows = list(History.open(ws, durability="none").rows())
    stages = [r.meta.get("stage") for r in rows if r.kind == "advisory"]
    assert "warning" in stages and "handoff" in stages, stages
    (boundary,) = [r for r in rows if r.kind == "boundary"]
    assert rows[rows.index(boundary) + 1].kind == "lead_in"
    found = [
        p
        for r in rows
        for p in r.parts
        if p.get("type") == "tool_result" and p.get("name") == "session_history"
    ]
    assert found and FACT in json.dumps(found[-1]["output"])
    assert len(script.requests) > 10
    for request, _ in script.requests:
        names = {t["function"]["name"] for t in request["tools"]}
        assert names == {"read_file", "session_history", "memory", "new_context"}


def count_gaps(script: Script) -> list[int]:
    """For each request: the tokens of what LiteLLM was sent (messages and every tool)
    minus what the session counted for it."""
    return [
        count_messages(request["messages"], request["tools"], model=MODEL) - counted
        for request, counted in script.requests
    ]


def models() -> None:
    """Windows and tokenizers through LiteLLM once it is imported."""
    name = "mistral/mistral-large-latest"
    assert context_window_for(name) == litellm.get_model_info(name)["max_input_tokens"]
    assert context_window_for("openai/gpt-4o") == 128_000


def ladder(ws: Path) -> None:
    """Both loops through the ladder; the count gaps go to ``ws/gaps.json``."""
    models()
    start = [f"Remember: {FACT}.", "Audit."]
    script = Script()
    check_ladder(ws / "sync", run(_open(ws / "sync"), script, start), script)
    ascript = Script()
    output = asyncio.run(arun(AsyncSession(_open(ws / "async")), ascript, start))
    check_ladder(ws / "async", output, ascript)
    (ws / "gaps.json").write_text(json.dumps(count_gaps(script) + count_gaps(ascript)))


def second(ws: Path) -> None:
    s = _open(ws)
    before = len(list(s.history.rows()))
    assert run(s, Script(), ["Thanks!"]) == "You are welcome."
    rows = list(s.history.rows())
    assert [r.role for r in rows[before:]] == ["user", "assistant"], "only the new turn"
    users = Counter(r.parts[0]["text"] for r in rows if r.role == "user" and r.kind == "message")
    assert set(users.values()) == {1}, users


if __name__ == "__main__":
    scenario, where = sys.argv[1], Path(sys.argv[2])
    {"ladder": ladder, "second": second}[scenario](where)
