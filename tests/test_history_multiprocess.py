"""Four processes append concurrently while being SIGKILLed at random.

Afterwards every acknowledged batch is present exactly once, whole, in order, and
never interleaved with another batch; no partial batch is visible; seqs increase.
"""

from __future__ import annotations

import random
import signal
import subprocess
import time
from collections import defaultdict
from pathlib import Path

from history_helpers import file_verify, spawn_worker

from ctxbudget import History

WORKERS = 4
MIN_KILLS = 10
MIN_ACKED = 50
# A bound on a hung run only: the loop ends as soon as enough kills landed on workers
# that had acknowledged batches, however slow the machine is.
MAX_SECONDS = 180.0
WORKER = Path(__file__).with_name("history_worker.py")


def _spawn(ws: Path, worker: int, generation: int, acks: Path) -> subprocess.Popen[bytes]:
    return spawn_worker(WORKER, ws, worker, generation, acks)


def test_concurrent_appends_survive_sigkill(tmp_path: Path) -> None:
    ws, acks = tmp_path / "ws", tmp_path / "acks"
    ws.mkdir()
    acks.mkdir()
    rng = random.Random(1234)
    generations = dict.fromkeys(range(WORKERS), 0)
    procs = {w: _spawn(ws, w, 0, acks) for w in range(WORKERS)}
    kills = 0
    spawned = dict.fromkeys(range(WORKERS), time.monotonic())

    def acked_lines(w: int) -> list[str]:
        log = acks / f"{w}.log"
        return log.read_text().splitlines() if log.exists() else []

    def acked_in_generation(w: int) -> bool:
        return any(line.split()[:1] == [str(generations[w])] for line in acked_lines(w))

    started = time.monotonic()
    try:
        while time.monotonic() - started < MAX_SECONDS:
            total = sum(len(acked_lines(w)) for w in range(WORKERS))
            if kills >= MIN_KILLS and total >= MIN_ACKED:
                break
            time.sleep(rng.uniform(0.02, 0.25))
            w = rng.randrange(WORKERS)
            # Kill a worker mid-append, not mid-import: only once this generation has
            # acknowledged a batch (or, on a stalled machine, after 10 s).
            if not acked_in_generation(w) and time.monotonic() - spawned[w] < 10:
                continue
            procs[w].send_signal(signal.SIGKILL)
            procs[w].wait()
            kills += 1
            generations[w] += 1
            procs[w] = _spawn(ws, w, generations[w], acks)
            spawned[w] = time.monotonic()
    finally:
        for p in procs.values():
            p.send_signal(signal.SIGKILL)
            p.wait()
    for w, p in procs.items():
        err = p.stderr.read().decode() if p.stderr else ""
        assert "Error" not in err or "Killed" in err, f"worker {w} failed: {err[-2000:]}"

    history = History.open(ws)  # recovers whatever the last kill left behind
    rows = list(history.rows())
    seqs = [r.seq for r in rows]
    assert seqs == sorted(set(seqs)), "seqs strictly increase"

    # Group rows by batch; each batch must be contiguous, whole and in order.
    batches: dict[tuple[str, str, str], list[tuple[int, int, int]]] = defaultdict(list)
    order: list[tuple[str, str, str]] = []
    for pos, row in enumerate(rows):
        worker, gen, i, jk = row.parts[0]["text"].split(":")
        j, k = (int(x) for x in jk.split("/"))
        key = (worker, gen, i)
        if not batches[key]:
            order.append(key)
        batches[key].append((pos, j, k))
    for key, members in batches.items():
        positions = [p for p, _, _ in members]
        k = members[0][2]
        assert [j for _, j, _ in members] == list(range(k)), f"{key} is partial or reordered"
        assert positions == list(range(positions[0], positions[0] + k)), f"{key} interleaved"

    acked = 0
    for w in range(WORKERS):
        log = acks / f"{w}.log"
        lines = log.read_text().splitlines() if log.exists() else []
        for line in lines:
            parts = line.split()
            if len(parts) != 3:
                continue  # a kill can tear the ack line itself
            gen, i, k = parts
            members = batches.get((str(w), gen, i))
            assert members is not None, f"acknowledged batch {w}:{gen}:{i} is missing"
            assert len(members) == int(k)
            acked += 1
    assert kills >= MIN_KILLS, f"only {kills} kills happened in {MAX_SECONDS} s"
    assert acked >= MIN_ACKED, f"only {acked} batches were acknowledged in {MAX_SECONDS} s"
    assert len(order) == len(batches), "each batch appears once"
    assert file_verify(history.verify()).chat.damage is None
    recovered = ws / "history" / "recovered"
    moved = list(recovered.glob("*")) if recovered.exists() else []
    print(f"{kills} kills, {acked} acked batches, {len(rows)} rows, {len(moved)} torn tails moved")
