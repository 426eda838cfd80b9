"""Four processes append, roll over, rotate and recover while being SIGKILLed at
random, at least 200 times: kills land inside ``rotate()`` and ``recover()`` as well as
appends. Afterwards ``verify()`` is ok, seqs are unique and increasing across archive
and chat, and every acknowledged batch is present exactly once, whole.
"""

from __future__ import annotations

import random
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

from history_helpers import spawn_worker

from ctxbudget import History

WORKERS = 4
KILLS = 200
MAX_SECONDS = 240.0
WORKER = Path(__file__).with_name("history_chaos_worker.py")


def _spawn(ws: Path, worker: int, generation: int, acks: Path) -> subprocess.Popen[bytes]:
    return spawn_worker(WORKER, ws, worker, generation, acks)


def test_sigkill_during_appends_rotations_and_recoveries(tmp_path: Path) -> None:
    ws, acks = tmp_path / "ws", tmp_path / "acks"
    ws.mkdir()
    acks.mkdir()
    rng = random.Random(4321)
    generations = dict.fromkeys(range(WORKERS), 0)
    procs = {w: _spawn(ws, w, 0, acks) for w in range(WORKERS)}
    kills = 0
    started = time.monotonic()
    try:
        time.sleep(1.0)  # let the workers import and build some history first
        while kills < KILLS and time.monotonic() - started < MAX_SECONDS:
            time.sleep(rng.uniform(0.0, 0.12))
            w = rng.randrange(WORKERS)
            if procs[w].poll() is None:
                procs[w].send_signal(signal.SIGKILL)
                kills += 1
            procs[w].wait()
            err = procs[w].stderr.read().decode() if procs[w].stderr else ""
            assert "Traceback" not in err, f"worker {w} failed: {err[-3000:]}"
            generations[w] += 1
            procs[w] = _spawn(ws, w, generations[w], acks)
    finally:
        for p in procs.values():
            p.send_signal(signal.SIGKILL)
            p.wait()
    assert kills >= KILLS, f"only {kills} kills in {MAX_SECONDS} s"

    history = History.open(ws)  # recovers whatever the last kill left behind
    report = history.verify()
    assert report.ok, report
    assert report.seq_violations == 0, report
    rows = list(history.rows())
    seqs = [r.seq for r in rows]
    assert seqs == sorted(set(seqs)), "seqs unique and increasing across archive and chat"

    texts = Counter(
        r.parts[0]["text"]
        for r in rows
        if r.kind == "message" and r.parts and "/" in r.parts[0].get("text", "")
    )
    assert all(n == 1 for n in texts.values()), [t for t, n in texts.items() if n > 1][:5]
    for w in range(WORKERS):
        log = acks / f"{w}.log"
        if not log.exists():
            continue
        for line in log.read_text().splitlines():
            gen, i, k = line.split()
            for j in range(int(k)):
                text = f"{w}:{gen}:{i}:{j}/{k}"
                assert texts[text] == 1, f"acknowledged row {text} present {texts[text]} times"
