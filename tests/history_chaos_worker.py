"""Worker process for the SIGKILL test: appends, rolls over, rotates and recovers at
random, logging each acknowledged batch to its own file after the append returned."""

from __future__ import annotations

import os
import random
import sys

from ctxbudget import History


def main() -> None:
    ws, worker, generation, ack_path = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    rng = random.Random(f"{worker}:{generation}")
    history = History.open(ws, durability="none", lock_timeout=60)
    ack = os.open(ack_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    i = 0
    while True:
        action = rng.random()
        if action < 0.15:
            history.rollover(
                rollover_id=f"{worker}:{generation}:{i}", reason="manual", lead_in="lead"
            )
            history.rotate()
        elif action < 0.2:
            history.recover()
        else:
            k = rng.randint(1, 4)
            rows = [
                {
                    "kind": "message",
                    "role": "user",
                    "parts": [{"type": "text", "text": f"{worker}:{generation}:{i}:{j}/{k}"}],
                    "meta": {"pad": "x" * rng.randint(0, 20_000)},
                }
                for j in range(k)
            ]
            history.append(rows)
            os.write(ack, f"{generation} {i} {k}\n".encode())
        i += 1


if __name__ == "__main__":
    main()
