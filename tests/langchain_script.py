"""A LangChain agent driven by LangChain's own fake chat model through the budget ladder:
shared by the LangChain tests and their second-process worker."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import tool
from pydantic import Field

from ctxbudget.integrations.langchain import CtxBudgetMiddleware

FACT = "the staging password rotates on Fridays"
FILE = "def charge(card):\n    return gateway.post(card)  # retried on 503\n" * 40
SYSTEM = "You audit code."


class CapturingFake(GenericFakeChatModel):
    """LangChain's ``GenericFakeChatModel`` that keeps every request it is sent: the
    messages and the tools it was bound to (``create_agent`` binds them per call)."""

    calls: list[tuple[list[BaseMessage], list[Any]]] = Field(default_factory=list)
    bound: list[Any] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        self.bound = list(tools)
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.calls.append((list(messages), list(self.bound)))
        return super()._generate(messages, *args, **kwargs)


class Script(Iterator[AIMessage]):
    """Decides each reply from what the model was last shown."""

    def __init__(self) -> None:
        self.model: CapturingFake | None = None
        self.n = 0
        self.handed_off = False
        self.searched = False

    def __next__(self) -> AIMessage:
        assert self.model is not None
        self.n += 1
        messages = self.model.calls[-1][0]
        shown = json.dumps([m.content for m in messages], default=str)
        last = str(messages[-1].content)
        if messages[-1].type == "human" and "Thanks" in last:
            return AIMessage("You are welcome.")
        if "New context window" in shown and not self.searched:
            self.searched = True
            return _call(
                "session_history", {"action": "search", "query": "staging password"}, self.n
            )
        if self.searched and messages[-1].type == "tool":
            return AIMessage("Audit resumed; the fact is recovered.")
        if "Finish the current small unit" in last and not self.handed_off:
            self.handed_off = True
            return AIMessage(
                "",
                tool_calls=[
                    {
                        "id": f"m{self.n}",
                        "name": "memory",
                        "args": {
                            "command": "create",
                            "path": "/memories/session/checkpoint.md",
                            "file_text": "goal: audit\nnext: continue",
                        },
                    },
                    {"id": f"n{self.n}", "name": "new_context", "args": {}},
                ],
            )
        return _call("read_file", {"n": self.n}, self.n)


def _call(name: str, args: dict[str, Any], n: int) -> AIMessage:
    return AIMessage("", tool_calls=[{"id": f"c{n}", "name": name, "args": args}])


@tool
def read_file(n: int) -> str:
    """Read one source file of the billing service."""
    return f"# file {n}\n{FILE}"


def agent(workspace: Path) -> tuple[Any, CtxBudgetMiddleware, CapturingFake]:
    """The agent, its middleware and its model: a small window, so the ladder runs."""
    script = Script()
    model = CapturingFake(messages=script)
    script.model = model
    budget = CtxBudgetMiddleware(
        workspace, model="gpt-4o", context_window=40_000, threshold=0.5, durability="none"
    )
    return (
        create_agent(model, tools=[read_file], system_prompt=SYSTEM, middleware=[budget]),
        budget,
        model,
    )


CONFIG = {"configurable": {"thread_id": "audit-1"}, "recursion_limit": 400}
