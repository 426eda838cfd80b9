"""Several processes acting as separate hosts drive the same PostgreSQL conversations:
appends, rollovers decided from what each host read, session_history pages whose cursors
another host continues. No window is sealed twice, every message is there once, the
seqs are gapless, and cursors are valid across processes."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

from stores import new_conversation_id

from ctxbudget import History

WORKER = Path(__file__).with_name("pg_history_host_worker.py")
HOSTS = 4
STEPS = 60


def test_hosts_share_conversations(pg_url: str, tmp_path: Path) -> None:
    conversations = [new_conversation_id("hosts") for _ in range(3)]
    cursors = tmp_path / "cursors"
    cursors.mkdir()
    hosts = [
        subprocess.Popen(
            [
                sys.executable,
                str(WORKER),
                pg_url,
                ",".join(conversations),
                f"h{i}",
                str(STEPS),
                str(i),
                str(cursors),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(HOSTS)
    ]
    appended = 0
    for p in hosts:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
        appended += int(out)
    assert list(cursors.glob("*.taken-by-*")), "cursors were continued by other hosts"
    messages: Counter[str] = Counter()
    for conversation in conversations:
        h = History.open(pg_url, conversation=conversation)
        rows = list(h.rows())
        assert [r.seq for r in rows] == list(range(1, len(rows) + 1))
        boundaries = [r for r in rows if r.kind == "boundary"]
        ids = Counter(r.meta["rollover_id"] for r in boundaries)
        assert all(n == 1 for n in ids.values()), f"a window was sealed twice: {ids}"
        # Each rollover seals the window its id names, and that window is the one before.
        for b in boundaries:
            assert b.meta["rollover_id"] == f"after-{b.meta['previous_window']}", b.meta
        lead_ins = [r for r in rows if r.kind == "lead_in"]
        assert len(lead_ins) == len(boundaries)
        messages.update(r.parts[0]["text"] for r in rows if r.kind == "message")
        assert h.verify().ok
    assert all(n == 1 for n in messages.values()), "a message is there twice"
    assert len(messages) == appended > 0
