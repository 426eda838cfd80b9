"""A reader that is caught up answers "nothing new" from its index without the history
lock while both files' stamps are the ones its index last saw. This races that answer
against another process that appends, rotates and recovers as fast as it can: every read
that starts after the writer acknowledged seq ``S`` must return ``S``, with no gap and no
row twice, whatever the writer was doing between the reader's two ``stat`` calls.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

from ctxbudget import History

_WRITER = textwrap.dedent(
    """
    import sys
    from ctxbudget import History
    h = History.open(sys.argv[1], durability="none")
    n = int(sys.argv[2])
    for i in range(1, n + 1):
        rows = [
            {"kind": "message", "role": "user", "parts": [{"type": "text", "text": f"r{i}.{k}"}]}
            for k in range(1 + i % 3)
        ]
        last = h.append(rows)
        if i % 17 == 0:
            h.rotate()
        print(last.last_seq, flush=True)
    """
)

BATCHES = 600


def test_a_caught_up_reader_sees_every_acknowledged_row(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    reader = History.open(ws, durability="none")
    reader.append([{"kind": "message", "role": "user", "parts": [{"type": "text", "text": "0"}]}])
    seen = [r.seq for r in reader.rows()]
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(ws), str(BATCHES)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None
    stdout = writer.stdout
    acked = [0]  # the last seq the writer acknowledged (its append had returned)

    def drain() -> None:
        for line in stdout:
            acked[0] = int(line)

    drainer = threading.Thread(target=drain)
    drainer.start()
    reads = 0
    try:
        # Read as fast as possible while the writer runs: most reads find nothing new
        # and answer lock-free, racing the writer's appends and rotations.
        while True:
            done = writer.poll() is not None
            before = acked[0]
            new = [r.seq for r in reader.rows(since_seq=seen[-1] + 1)]
            reads += 1
            assert new == list(range(seen[-1] + 1, seen[-1] + 1 + len(new))), (
                f"after seq {seen[-1]} the read returned {new[:5]}…: a gap or a repeat"
            )
            seen += new
            assert seen[-1] >= before, (
                f"seq {before} was acknowledged before the read began, "
                f"yet the read ended at {seen[-1]}"
            )
            if done:
                break
    finally:
        if writer.poll() is None:
            writer.kill()
        writer.wait(timeout=30)
        drainer.join(timeout=30)
    assert writer.stderr is not None
    assert writer.returncode == 0, writer.stderr.read()[-2000:]
    assert reads > BATCHES, "the reads did not overlap the writer"
    assert seen == [r.seq for r in History.open(ws).rows()]
