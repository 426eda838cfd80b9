"""Usage anchoring against a provider whose tokenizer ctxbudget does not have (issue 27).

A scripted provider counts each request with Mistral's open-weight tekken tokenizer
(shipped inside the ``mistral-common`` wheel, counted by its own code) and its own
framing, standing in for a private tokenizer: ctxbudget estimates the family
(``claude-*``: cl100k × 1.3) and learns only from the usage each reply reports. Over
more than a thousand steps with tool calls, rollovers, retractions, tool changes, a
restart and a second host, ctxbudget's count must stay within 1% of the provider's at
p99 (0.1% at p50) when only rows were appended since the last reply, and within 3%
right after a rollover or a change of tools — every one of them.
"""

from __future__ import annotations

import json
import random
import statistics
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from stores import StoreUnderTest

from ctxbudget import Durability, Session, Turn

STEPS = 1_100
WINDOW = 32_000
MODEL = "claude-sonnet-4-5"


@pytest.fixture(scope="module")
def tekken() -> Any:
    import mistral_common
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    data = Path(mistral_common.__file__).parent / "data"
    return Tekkenizer.from_file(str(sorted(data.glob("tekken_*.json"))[-1]))


class ScriptedProvider:
    """Counts what it is sent (Anthropic's request shape) with its own tokenizer and
    framing: 5 tokens per message, 4 per content block, 7 per tool definition, 9 for
    the system prompt, 3 per request."""

    def __init__(self, tokenizer: Any) -> None:
        self._tok = tokenizer
        self._counts: dict[str, int] = {}

    def _n(self, text: str) -> int:
        # Remembered per text: a conversation resends the same messages every step.
        count = self._counts.get(text)
        if count is None:
            count = self._counts[text] = len(self._tok.encode(text, bos=False, eos=False))
        return count

    def count(self, request: Mapping[str, Any]) -> int:
        total = 3
        system = request.get("system")
        if system:
            total += 9 + self._n(str(system))
        for tool in request.get("tools") or ():
            total += 7 + self._n(json.dumps(tool, ensure_ascii=False))
        for message in request.get("messages") or ():
            total += 5
            content = message["content"]
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            for block in blocks:
                total += 4
                kind = block.get("type")
                if kind == "text":
                    total += self._n(block["text"])
                elif kind == "tool_use":
                    total += self._n(block["name"]) + self._n(json.dumps(block["input"]))
                elif kind == "tool_result":
                    inner = block.get("content")
                    total += self._n(inner if isinstance(inner, str) else json.dumps(inner))
                else:
                    total += self._n(json.dumps(block))
        return total


def _corpus() -> list[str]:
    """Realistic text of several kinds — prose, code, logs — that does not change with
    this repository: paragraphs of a few standard-library modules."""
    import argparse
    import dataclasses
    import inspect
    import logging
    import textwrap

    texts = []
    for module in (argparse, dataclasses, logging, textwrap, json):
        source = inspect.getsource(module)
        texts.extend(p for p in source.split("\n\n") if len(p) > 40)
    return texts


def _snippet(rng: random.Random, corpus: Sequence[str], paragraphs: int) -> str:
    start = rng.randrange(len(corpus) - paragraphs)
    return "\n\n".join(corpus[start : start + paragraphs])


TOOLS_A = [
    {
        "name": "read_file",
        "description": "Reads a file of the project and returns its text.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "Path in the repo."}},
            "required": ["path"],
        },
    },
    {
        "name": "run_tests",
        "description": "Runs the test suite (or the tests matching a pattern) and returns the log.",
        "parameters": {
            "type": "object",
            "properties": {
                "pattern": {"type": "string"},
                "verbose": {"type": "boolean", "description": "Print every test."},
            },
        },
    },
]
TOOLS_B = [
    *TOOLS_A,
    {
        "name": "search_code",
        "description": "Searches the code base for a regular expression; returns matching lines.",
        "parameters": {
            "type": "object",
            "properties": {
                "regex": {"type": "string"},
                "max_results": {"type": "integer", "minimum": 1, "maximum": 200},
            },
            "required": ["regex"],
        },
    },
]


def _reply(
    turn: Turn, provider: ScriptedProvider, text: str, calls: list[dict[str, Any]]
) -> dict[str, Any]:
    """The Anthropic ``Message`` (as a dict) the provider answers ``turn`` with."""
    content: list[dict[str, Any]] = []
    if text:
        content.append({"type": "text", "text": text})
    content.extend(
        {"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["arguments"]}
        for c in calls
    )
    return {
        "role": "assistant",
        "content": content,
        "usage": {"input_tokens": provider.count(turn.to_anthropic()), "output_tokens": 50},
    }


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _conversation(
    where: Path | StoreUnderTest,
    provider: ScriptedProvider,
    seed: int,
    steps: int = STEPS,
    log: list[tuple[str, str]] | None = None,
) -> Iterator[tuple[str, Turn, int, Session]]:
    """Runs the scripted conversation in a workspace (or the store under test), yielding
    each sent turn with its category and the provider's count of what it sends."""
    rng = random.Random(seed)
    corpus = _corpus()
    location: dict[str, Any]
    if isinstance(where, StoreUnderTest):
        location = where.session_location()
    else:
        location = {"workspace": where, "durability": Durability.NONE}

    def open_session(tools: list[dict[str, Any]]) -> Session:
        return Session.open(
            **location,
            model=MODEL,
            context_window=WINDOW,
            system="You are a careful coding agent working on a Rust and Python project.",
            tools=tools,
        )

    tools = TOOLS_A
    hosts = [open_session(tools)]
    s = hosts[0]
    pending = "since"
    replied = False
    calls_made = 0
    count = 0
    while count < steps:
        roll = rng.random()
        if roll < 0.02 and replied:
            # A change of tools: the anchor's prefix changed.
            tools = TOOLS_B if tools is TOOLS_A else TOOLS_A
            for h in hosts:
                h.set_request(tools=tools)
            pending = "tools"
        elif roll < 0.04 and replied:
            # A restart: a new Session object over the same workspace counts the same,
            # with the same calibration (derived from the transcript alone).
            before, calibration = s.view(refresh=True).tokens, s._state.tokens.calibration()
            hosts[0] = s = open_session(tools)
            assert s.view().tokens == before
            assert s._state.tokens.calibration() == calibration
            if log is not None:
                log.append(("restart", s.window_id))
        elif roll < 0.06 and replied:
            # A second host appends to the same conversation and serves the next step.
            before, calibration = s.view(refresh=True).tokens, s._state.tokens.calibration()
            if len(hosts) == 1:
                hosts.append(open_session(tools))
            s = hosts[1] if s is hosts[0] else hosts[0]
            assert s.view(refresh=True).tokens == before
            assert s._state.tokens.calibration() == calibration
            if log is not None:
                log.append(("second_host", s.window_id))
        s.add_user(_snippet(rng, corpus, rng.randint(1, 3)))
        if rng.random() < 0.04 and replied:
            # A retraction inside the prefix: an earlier user message is taken back.
            users = [
                r for r in s.view(refresh=True).rows if r.kind == "message" and r.role == "user"
            ]
            if len(users) > 2:
                target = users[rng.randrange(len(users) - 1)]
                s.history.append(
                    [{"kind": "retraction", "role": "system", "meta": {"retracts": target.seq}}]
                )
                pending = "retraction"
        while True:
            turn = s.prepare()
            assert turn.status == "send", turn.reason
            if any(e.startswith("rollover") for e in turn.events):
                pending = "rollover"
            category = pending if replied else "first"
            yield category, turn, provider.count(turn.to_anthropic()), s
            count += 1
            pending = "since"
            calls: list[dict[str, Any]] = []
            if rng.random() < 0.5:
                calls_made += 1
                name = rng.choice([t["name"] for t in tools])
                calls = [
                    {
                        "id": f"c{calls_made}",
                        "name": name,
                        "arguments": {"path": f"src/{calls_made}.rs"},
                    }
                ]
            text = _snippet(rng, corpus, 1) if rng.random() < 0.7 or not calls else ""
            s.add_assistant_from_anthropic(_reply(turn, provider, text, calls))
            replied = True
            if not calls:
                break
            s.add_tool_results(
                [
                    {
                        "call_id": c["id"],
                        "name": c["name"],
                        "output": _snippet(rng, corpus, rng.randint(1, 6)),
                    }
                    for c in calls
                ]
            )


def _errors(
    where: Path, provider: ScriptedProvider, seed: int
) -> tuple[dict[str, list[float]], dict[str, int]]:
    """Each category's relative errors over the scripted conversation of ``seed``, and
    how many of its requests counted nothing as anchored."""
    errors: dict[str, list[float]] = {}
    unanchored: dict[str, int] = {}
    for category, turn, truth, _ in _conversation(where, provider, seed=seed):
        errors.setdefault(category, []).append(abs(turn.decision.projected - truth) / truth)
        assert turn.count.total == turn.decision.projected
        unanchored[category] = unanchored.get(category, 0) + (turn.count.anchored == 0)
    return errors, unanchored


# Seed 30 is left out only because it changes tools once (the test wants two); its
# errors are within the bounds too. Seed 41 has the worst change of tools of seeds
# 27-60 (3.1% while a change of tools dropped the anchor; see docs/decisions.md).
@pytest.mark.parametrize("seed", [27, 28, 29, 31, 41])
def test_anchored_counts_follow_a_provider_with_an_unknown_tokenizer(
    tmp_path: Path, tekken: Any, seed: int
) -> None:
    provider = ScriptedProvider(tekken)
    errors, unanchored = _errors(tmp_path, provider, seed)
    unanchored_since = unanchored.get("since", 0)
    summary = {
        k: (len(v), round(100 * statistics.median(v), 3), round(100 * _pct(v, 0.99), 3))
        for k, v in errors.items()
    }
    print("category: (steps, p50 %, p99 %)", summary)
    assert sum(len(v) for v in errors.values()) >= 1_000
    assert len(errors["rollover"]) >= 3, summary
    assert len(errors["tools"]) >= 2, summary
    assert unanchored_since == 0, summary
    since = errors["since"]
    assert statistics.median(since) <= 0.001, summary
    assert _pct(since, 0.99) <= 0.01, summary
    changed = errors["rollover"] + errors["tools"]
    assert max(changed) <= 0.03, summary
    # A change of tools keeps the figure for the messages (estimated: the overhead's
    # change only).
    assert unanchored.get("tools", 0) == 0, summary


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(27, 61))
def test_every_seed_stays_within_3_percent_after_a_rollover_or_a_change_of_tools(
    tmp_path: Path, tekken: Any, seed: int
) -> None:
    """The bound right after a changed prefix, over 34 seeds of the scripted
    conversation (about 400 rollovers and 330 changes of tools; the fast test runs
    five of the seeds)."""
    errors, unanchored = _errors(tmp_path, ScriptedProvider(tekken), seed)
    changed = errors.get("rollover", []) + errors.get("tools", [])
    assert changed and max(changed) <= 0.03, {
        k: round(100 * max(v), 2) for k, v in errors.items() if k in ("rollover", "tools")
    }
    # A change of tools keeps the figure for the messages: it never counts unanchored.
    assert unanchored.get("tools", 0) == 0


def test_a_restart_and_a_second_host_continue_the_calibration(
    store: StoreUnderTest, tekken: Any
) -> None:
    """On either store: a new Session (a restart) and a second Session over the same
    conversation count every request the same as the session before them (asserted
    inside the conversation), with the calibration carried across rollovers."""
    provider = ScriptedProvider(tekken)
    log: list[tuple[str, str]] = []
    errors: dict[str, list[float]] = {}
    for category, turn, truth, _ in _conversation(store, provider, seed=31, steps=300, log=log):
        errors.setdefault(category, []).append(abs(turn.decision.projected - truth) / truth)
    # Both after a rollover, where the calibration comes from the boundary row.
    switched_after_a_rollover = {kind for kind, window in log if window != "w:0"}
    assert switched_after_a_rollover == {"restart", "second_host"}, log
    assert statistics.median(errors["since"]) <= 0.001
    assert errors["rollover"] and max(errors["rollover"] + errors.get("tools", [])) <= 0.03
