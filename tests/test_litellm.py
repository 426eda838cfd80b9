"""LiteLLM: a plain loop over ``litellm.completion`` / ``acompletion`` answered by
LiteLLM's ``mock_response`` reaches the whole ladder; LiteLLM's model table gives the
windows once the program imports LiteLLM; a second process continues the conversation.

Each scenario runs in a process of its own (``litellm_worker.py``): importing LiteLLM
changes where windows come from, which must not leak into the other tests.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ctxbudget import InvalidArgumentError, Session

# Only looked for, never imported here (see above).
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("litellm") is None, reason="LiteLLM is not installed"
)

WORKER = Path(__file__).with_name("litellm_worker.py")


def _worker(scenario: str, where: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(WORKER), scenario, str(where)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]


@pytest.fixture(scope="module")
def ladder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = tmp_path_factory.mktemp("litellm")
    _worker("ladder", ws)
    return ws


def test_the_ladder_through_completion_and_acompletion(ladder: Path) -> None:
    """Warning, handoff, the model's rollover with its lead-in and the first window's
    fact found through session_history, in both loops; windows from LiteLLM."""
    assert (ladder / "sync" / "history").is_dir() and (ladder / "async" / "history").is_dir()


def test_counts_equal_the_request_litellm_is_sent(ladder: Path) -> None:
    gaps = json.loads((ladder / "gaps.json").read_text())
    assert gaps and set(gaps) == {0}, sorted(set(gaps))


def test_a_second_process_continues_the_conversation(ladder: Path) -> None:
    """The ladder's process ran the first conversation; this one continues it."""
    _worker("second", ladder / "sync")


def test_add_assistant_from_litellm_takes_a_response_or_its_message(tmp_path: Path) -> None:
    """LiteLLM's ModelResponse is OpenAI Chat-shaped: its dict works without LiteLLM."""
    s = Session.open(tmp_path, model="gpt-4o", durability="none")
    s.add_user("hi")
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}
    response = {
        "choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [call]}}]
    }
    s.add_assistant_from_litellm(response)
    assert [c.name for c in s.open_calls] == ["f"]
    s.add_tool_results([{"call_id": "c1", "output": "ok"}])
    s.add_assistant_from_litellm({"role": "assistant", "content": "done"})
    assert s.view().rows[-1].parts == [{"type": "text", "text": "done"}]
    two = {"choices": [response["choices"][0], response["choices"][0]]}
    with pytest.raises(InvalidArgumentError, match="2 choices"):
        s.add_assistant_from_litellm(two)
