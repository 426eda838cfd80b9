"""``ctxbudget demo``: scripted agents (no network) on a small window.

A *cooperative* agent writes its checkpoint when warned, saves it and calls
``new_context`` at the handoff request, then after the lead-in reads its checkpoint and
finds a fact from the first window with ``session_history``. A *stubborn* agent ignores
every advisory, gets the final prompt, and is rolled over at the usable limit. Each step
is printed (tokens, % of usable, stage, events) and a summary table closes the run; the
workspace stays on disk for ``History`` and ``SessionHistoryTool`` to open.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .history import Durability
from .session import Session, Turn

__all__ = ["DemoResult", "run_agent"]

FACT = "the deploy key lives in vault/prod-7731"
TASK = (
    "Audit the billing services one file at a time and report risky retry logic. "
    f"Note for later: {FACT}."
)
_FILE = (
    "def send_batch(client, invoices):\n"
    "    for chunk in chunks(invoices, 4):\n"
    "        resp = client.post('/v2/invoices', json=chunk, timeout=10)  # retries resend\n"
    "        resp.raise_for_status()\n"
)


@dataclass
class DemoResult:
    """What one scripted agent run did."""

    agent: str
    steps: int = 0
    windows: list[str] = field(default_factory=list)
    rollovers_requested: int = 0
    rollovers_forced: int = 0
    advisories: dict[str, int] = field(
        default_factory=lambda: {"warning": 0, "handoff": 0, "final": 0}
    )
    checkpoint_reads: int = 0
    fact_recovered: bool = False
    seconds: float = 0.0
    peak_percent: float = 0.0


class _Agent:
    """Deterministic stand-in for a model: decides the next assistant message."""

    def __init__(self, cooperative: bool) -> None:
        self.cooperative = cooperative
        self.n = 0
        self.after_rollover = False
        self.checkpointed_stage: str | None = None

    def reply(self, turn: Turn) -> tuple[str | None, list[dict[str, Any]]]:
        self.n += 1
        kinds = [m.get("kind") for m in turn.messages]
        stage = None
        for m in reversed(turn.messages):
            if m.get("kind") == "advisory":
                stage = (
                    "final"
                    if "nearly exhausted" in m["content"]
                    else (
                        "handoff" if "Finish the current small unit" in m["content"] else "warning"
                    )
                )
                break
        if self.cooperative and "lead_in" in kinds and self.after_rollover:
            self.after_rollover = False
            return "Reading my checkpoint, then the earlier window.", [
                self._call(
                    "memory", {"command": "view", "path": "/memories/session/checkpoint.md"}
                ),
                self._call("session_history", {"action": "search", "query": "deploy key"}),
            ]
        if self.cooperative and stage and self.checkpointed_stage != f"{turn.window_id}:{stage}":
            self.checkpointed_stage = f"{turn.window_id}:{stage}"
            checkpoint = (
                f"goal: audit billing retries\nprogress: {self.n} files read\n"
                f"requests: {turn.window_id} item 1 (audit task)\nnext: continue the audit"
            )
            calls = [
                self._call(
                    "memory",
                    {
                        "command": "create",
                        "path": "/memories/session/checkpoint.md",
                        "file_text": checkpoint,
                    },
                )
            ]
            if stage in ("handoff", "final"):
                calls.append(self._call("new_context", {}))
                self.after_rollover = True
            return f"Saving my checkpoint ({stage}).", calls
        return None, [self._call("read_file", {"path": f"billing/module_{self.n:03d}.py"})]

    def _call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"id": f"call_{self.n}_{name}", "name": name, "arguments": arguments}


def run_agent(
    workspace: Path,
    *,
    agent: str,
    context_window: int,
    steps: int,
    out: Callable[[str], None] = print,
) -> DemoResult:
    """Runs one scripted agent for ``steps`` provider requests in a fresh workspace."""
    if workspace.exists():
        shutil.rmtree(workspace)
    session = Session.open(
        workspace,
        model="gpt-4o",
        context_window=context_window,
        threshold=0.7,
        system="You are a careful code auditor.",
        durability=Durability.FSYNC,
    )
    result = DemoResult(agent=agent, windows=[session.window_id])
    bot = _Agent(cooperative=agent == "cooperative")
    session.add_user(TASK)
    start = time.perf_counter()
    out(
        f"\n== {agent} agent — window {context_window:,} tokens, usable limit "
        f"{session.budget.usable_limit:,}, {session.budget.label} =="
    )
    out(f"{'step':>4}  {'window':<8} {'tokens':>7} {'usable':>6}  {'stage':<9} events")
    for step in range(1, steps + 1):
        turn = session.prepare()
        result.steps = step
        d = turn.decision
        result.peak_percent = max(result.peak_percent, d.percent_used)
        for ev in turn.events:
            if ev.startswith("advisory:"):
                result.advisories[ev.split(":", 1)[1]] += 1
            if ev.startswith("rollover:"):
                result.windows.append(turn.window_id)
                forced = any(
                    m.get("kind") == "lead_in" and "usable limit" in m["content"]
                    for m in turn.messages
                )
                if forced:
                    result.rollovers_forced += 1
                else:
                    result.rollovers_requested += 1
        out(
            f"{step:>4}  {turn.window_id:<8} {d.projected:>7,} {d.percent_used:>5.1f}%  "
            f"{d.action.value:<9} {', '.join(turn.events) or '-'}"
        )
        if turn.status != "send":
            out(f"      status {turn.status}: {turn.reason}")
            break
        text, calls = bot.reply(turn)
        session.add_assistant(text, calls)
        results = []
        for call in calls:
            if call["name"] == "read_file":
                output: Any = f"# {call['arguments']['path']}\n" + _FILE * 30
            else:
                output = session.run_tool(call["name"], call["arguments"])
                if call["name"] == "memory" and call["arguments"].get("command") == "view":
                    result.checkpoint_reads += int(bool(output.get("ok")))
                if call["name"] == "session_history":
                    found = FACT in json.dumps(output)
                    result.fact_recovered = result.fact_recovered or found
                    out(f"      session_history found the first window's fact: {found}")
            results.append({"call_id": call["id"], "name": call["name"], "output": output})
        session.add_tool_results(results)
    result.seconds = time.perf_counter() - start
    return result


def summary_table(results: list[DemoResult]) -> str:
    """A small table of what each agent run did."""
    header = (
        "agent",
        "steps",
        "windows",
        "asked",
        "forced",
        "warn",
        "handoff",
        "final",
        "fact found",
        "peak",
        "time",
    )
    rows = [
        (
            r.agent,
            str(r.steps),
            str(len(r.windows)),
            str(r.rollovers_requested),
            str(r.rollovers_forced),
            str(r.advisories["warning"]),
            str(r.advisories["handoff"]),
            str(r.advisories["final"]),
            "yes" if r.fact_recovered else "no",
            f"{r.peak_percent:.0f}%",
            f"{r.seconds:.2f} s",
        )
        for r in results
    ]
    widths = [max(len(x[i]) for x in [header, *rows]) for i in range(len(header))]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return "\n".join([line(header), *(line(r) for r in rows)])
