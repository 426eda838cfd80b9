"""A Pydantic AI agent driven by Pydantic AI's own ``FunctionModel`` through the budget
ladder: shared by the Pydantic AI tests and their second-process worker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from ctxbudget.integrations.pydantic_ai import CtxBudget

FACT = "the staging password rotates on Fridays"
FILE = "def charge(card):\n    return gateway.post(card)  # retried on 503\n" * 40
INSTRUCTIONS = "You audit code."


class Script:
    """Decides each reply from what the model is sent; keeps every request."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[ModelMessage], AgentInfo, Any]] = []
        self.budget: CtxBudget | None = None
        self.n = 0
        self.handed_off = False
        self.searched = False

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        assert self.budget is not None
        self.calls.append((messages, info, self.budget.last_turn))
        self.n += 1
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        texts = [str(p.content) for p in last.parts if isinstance(p, UserPromptPart)]
        shown = json.dumps(
            [str(getattr(p, "content", "")) for m in messages for p in m.parts], default=str
        )
        if any("Thanks" in t for t in texts):
            return ModelResponse(parts=[TextPart("You are welcome.")])
        if "New context window" in shown and not self.searched:
            self.searched = True
            return _call(
                "session_history", {"action": "search", "query": "staging password"}, self.n
            )
        if self.searched and any(isinstance(p, ToolReturnPart) for p in last.parts):
            return ModelResponse(parts=[TextPart("Audit resumed; the fact is recovered.")])
        if any("Finish the current small unit" in t for t in texts) and not self.handed_off:
            self.handed_off = True
            return ModelResponse(
                parts=[
                    ToolCallPart(
                        "memory",
                        {
                            "command": "create",
                            "path": "/memories/session/checkpoint.md",
                            "file_text": "goal: audit\nnext: continue",
                        },
                        tool_call_id=f"m{self.n}",
                    ),
                    ToolCallPart("new_context", {}, tool_call_id=f"n{self.n}"),
                ]
            )
        return _call("read_file", {"n": self.n}, self.n)


def _call(name: str, args: dict[str, Any], n: int) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"c{n}")])


def agent(workspace: Path) -> tuple[Agent[None, str], CtxBudget, Script]:
    """The agent, its capability and its script: a small window, so the ladder runs."""
    script = Script()
    model = FunctionModel(script, model_name="gpt-4o", profile={"context_window": 40_000})
    budget = CtxBudget(workspace, model=model, threshold=0.5, durability="none")
    script.budget = budget
    agent: Agent[None, str] = Agent(model, instructions=INSTRUCTIONS, capabilities=[budget])

    @agent.tool_plain
    def read_file(n: int) -> str:
        """Read one source file of the billing service."""
        return f"# file {n}\n{FILE}"

    return agent, budget, script
