"""``ctxbudget demo``: scripted agents (no network) on a small window, told as a story.

A *cooperative* agent writes its checkpoint when warned, saves it and calls
``new_context`` at the handoff request, then after the lead-in reads its checkpoint and
finds a fact from the first window with ``session_history``. A *stubborn* agent ignores
every advisory, gets the final prompt, and is rolled over at the usable limit.

By default only the steps where something happens are printed, each with a sentence on
what happened and why; ``verbose`` prints every step. The run closes with a summary table
and the commands to look at the workspaces it leaves on disk.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .history import Durability
from .policy import Budget
from .session import Session, Turn

__all__ = ["DemoResult", "run_agent", "run_demo", "summary_table"]

MODEL = "gpt-4o"
THRESHOLD = 0.7
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
    """The largest request as a percentage of the context window."""


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


def _pct(tokens: int, window: int) -> str:
    return f"{tokens * 100 / window:.1f}%"


def _ladder(b: Budget) -> list[str]:
    w = b.context_window
    return [
        f"The budget ladder of a {w:,}-token window ({b.label}):",
        f"  {b.warning_at:>7,} tokens ({_pct(b.warning_at, w):>6})  warning: "
        "an advisory suggests writing a checkpoint",
        f"  {b.handoff_target:>7,} tokens ({_pct(b.handoff_target, w):>6})  handoff: "
        "finish the unit, save the checkpoint, call new_context",
        f"  {b.final_at:>7,} tokens ({_pct(b.final_at, w):>6})  final prompt: "
        "the window is nearly exhausted",
        f"  {b.usable_limit:>7,} tokens ({_pct(b.usable_limit, w):>6})  usable limit "
        f"(window minus {b.output_reserve:,} reserved for the reply): forced rollover",
        "Each row: the step, the window it ran in, the request's exact size in tokens and "
        "the share of the window it uses.",
        "A window ID such as w:67 names a context window by the transcript item it starts "
        "at (w:0 is the first).",
    ]


_STAGE_TEXT = {
    "warning": "warning advisory: the agent is told the window is filling up",
    "handoff": "handoff request: finish the current unit, checkpoint, call new_context",
    "final": "final prompt: the window is nearly exhausted",
}


def _first_sentence(text: str) -> str:
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


def _story(turn: Turn, calls: Sequence[dict[str, Any]], forced: bool, usable: int) -> list[str]:
    """Sentences for one step: what ctxbudget did, then what the agent did."""
    lines = []
    for ev in turn.events:
        kind, _, arg = ev.partition(":")
        if kind == "advisory":
            lines.append(_STAGE_TEXT.get(arg, ev))
        elif kind == "rollover":
            lines.append(
                f"forced rollover at the usable limit ({usable:,}): the agent is moved to "
                f"window {arg}"
                if forced
                else f"rollover, as the agent asked: window {arg} starts"
            )
            lead_in = next((m for m in turn.messages if m.get("kind") == "lead_in"), None)
            if lead_in is not None:
                lines.append(f'  lead-in: "{_first_sentence(lead_in["content"])} …"')
        else:
            lines.append(ev)
    names = [c["name"] for c in calls]
    advised = any(e.startswith("advisory:") for e in turn.events)
    if "new_context" in names:
        lines.append("  agent: saves its checkpoint and calls new_context")
    elif "session_history" in names:
        lines.append("  agent: reads its checkpoint, searches earlier windows for the deploy key")
    elif "memory" in names:
        lines.append("  agent: writes its checkpoint to /memories/session/checkpoint.md")
    elif advised:
        lines.append("  agent: ignores it and reads the next file")
    elif forced:
        lines.append("  agent: never wrote a checkpoint; it carries on from the lead-in alone")
    return lines


def run_agent(
    workspace: Path,
    *,
    agent: str,
    context_window: int,
    steps: int,
    out: Callable[[str], None] = print,
    verbose: bool = False,
) -> DemoResult:
    """Runs one scripted agent for ``steps`` provider requests in a fresh workspace,
    printing the steps where something happens (every step with ``verbose``)."""
    if workspace.exists():
        shutil.rmtree(workspace)
    session = Session.open(
        workspace,
        model=MODEL,
        context_window=context_window,
        threshold=THRESHOLD,
        system="You are a careful code auditor.",
        durability=Durability.FSYNC,
    )
    result = DemoResult(agent=agent, windows=[session.window_id])
    bot = _Agent(cooperative=agent == "cooperative")
    session.add_user(TASK)
    start = time.perf_counter()
    usable = session.budget.usable_limit
    hidden: list[int] = []  # token counts of the steps not shown since the last one
    seen: set[tuple[str, ...]] = set()  # stories told already: a repeat gets one line

    def show(step: int, turn: Turn, lines: list[str]) -> None:
        if hidden:
            out(
                f"{'':>4}  … {len(hidden)} step(s) reading files, the request growing "
                f"{hidden[0]:,} → {hidden[-1]:,} tokens"
            )
            hidden.clear()
        d = turn.decision
        first, *rest = lines or ["reads the next file"]
        out(
            f"{step:>4}  {turn.window_id:<6} {d.projected:>7,} "
            f"{_pct(d.projected, context_window):>6}  {first}"
        )
        for line in rest:
            out(f"{'':>4}  {'':<6} {'':>7} {'':>6}  {line}")

    out(f"{'step':>4}  {'window':<6} {'tokens':>7} {'used':>6}  what happened")
    for step in range(1, steps + 1):
        turn = session.prepare()
        result.steps = step
        d = turn.decision
        result.peak_percent = max(result.peak_percent, d.projected * 100 / context_window)
        forced = False
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
        if turn.status != "send":
            show(step, turn, [f"status {turn.status}: {turn.reason}"])
            break
        text, calls = bot.reply(turn)
        session.add_assistant(text, calls)
        lines = ["the task arrives, with a fact to recall later: " + FACT] if step == 1 else []
        lines += _story(turn, calls, forced, usable)
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
                    lines.append(
                        f"  session_history: found {FACT!r} in an earlier window"
                        if found
                        else "  session_history: the fact was not found"
                    )
            results.append({"call_id": call["id"], "name": call["name"], "output": output})
        session.add_tool_results(results)
        told = tuple(re.sub(r"w:\d+", "w:N", line) for line in lines)
        if lines and not verbose and told in seen:
            lines = [lines[0] + " (as before)"]
        seen.add(told)
        if verbose or lines or step == steps:
            show(step, turn, lines)
        else:
            hidden.append(d.projected)
    result.seconds = time.perf_counter() - start
    return result


_INTRO = {
    "cooperative": "the cooperative agent heeds every advisory",
    "stubborn": "the stubborn agent ignores every advisory",
}


def run_demo(
    root: Path,
    *,
    agents: Sequence[str],
    context_window: int,
    steps: int,
    verbose: bool = False,
    out: Callable[[str], None] = print,
) -> int:
    """The whole ``ctxbudget demo`` story: the ladder, each agent's interesting steps, a
    summary and the commands to try next. Returns the exit status (0)."""
    out(
        "ctxbudget demo: scripted agents (no model, no network) fill a context window one "
        "file at a time.\nctxbudget counts every request exactly before it is sent and "
        "steps in at each rung of its budget ladder."
    )
    results = []
    for n, agent in enumerate(agents):
        ws = root / agent
        if n == 0:  # the same ladder for every agent
            out("")
            for line in _ladder(Budget(context_window, THRESHOLD)):
                out(line)
        shown = "every step" if verbose else "events only; --verbose shows every step"
        out(f"\n== {_INTRO.get(agent, agent)} ({shown}) ==")
        results.append(
            run_agent(
                ws,
                agent=agent,
                context_window=context_window,
                steps=steps,
                out=out,
                verbose=verbose,
            )
        )
    out("\nSummary (asked = rollovers requested with new_context; forced = at the usable limit)")
    out(summary_table(results))
    first = shlex.quote(str(root / agents[0]))
    last = shlex.quote(str(root / agents[-1]))
    commands = [
        (f"ctxbudget history list {first}", "the windows"),
        (f"ctxbudget history search {first} 'deploy key'", "what session_history finds"),
        (f"ctxbudget history items {first} --window w:0", "the first window, item by item"),
        (f"ctxbudget plot {last} -o usage.png", "usage per step (pip install 'ctxbudget[plot]')"),
    ]
    width = max(len(c) for c, _ in commands)
    out("\nThe workspaces stay on disk. Try next:")
    for command, what in commands:
        out(f"  {command:<{width}}  # {what}")
    return 0


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
        "peak (of window)",
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
            f"{r.peak_percent:.1f}%",
            f"{r.seconds:.2f} s",
        )
        for r in results
    ]
    widths = [max(len(x[i]) for x in [header, *rows]) for i in range(len(header))]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return "\n".join([line(header), *(line(r) for r in rows)])
