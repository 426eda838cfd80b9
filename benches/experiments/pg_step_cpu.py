"""CPU time per agent step of ``benches/pg_steps.py``, client and server apart: where a
step's CPU goes when the machine is CPU-bound (steps/s then follow CPU per step).

    python benches/experiments/pg_step_cpu.py [--api store|session] STORE...

STORE is ``pg``, ``pg-socket`` or ``file``. Needs the server that ``scripts/pg-cluster
start`` printed (``CTXBUDGET_PG_URL``, ``CTXBUDGET_PG_CLUSTER``) and is run on the same
machine as it. Each store runs twice, 200 conversations from 4 processes with 10 and then
50 steps each; the difference of the two runs' CPU, divided by the difference of their
steps, is the CPU of one step without the set-up (prefill, opening, process start).
Client CPU is this process and its children (the worker processes); server CPU is every
process of the cluster (the postmaster's reaped backends included). Other work on the
machine does not count in either, but a backend still running when a run ends counts in
the next: read differences under ~0.1 ms as noise. Timing only: it never fails.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pg_steps

CONVERSATIONS, PROCESSES, FEW, MANY = 200, 4, 10, 50
TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: str) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def server_cpu(postmaster: int) -> float:
    """Seconds of CPU of the cluster: the postmaster's own and its reaped children's
    (ended backends), plus its live children's."""
    total = 0.0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        fields = _stat(pid)
        if fields is None:
            continue
        if int(pid) == postmaster:
            total += sum(int(x) for x in fields[11:15]) / TICK
        elif int(fields[1]) == postmaster:
            total += (int(fields[11]) + int(fields[12])) / TICK
    return total


def client_cpu() -> float:
    """Seconds of CPU of this process and its reaped children."""
    mine = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return mine.ru_utime + mine.ru_stime + children.ru_utime + children.ru_stime


def one_run(store: str, steps: int, api: str, postmaster: int) -> tuple[float, float, float]:
    """(server CPU s, client CPU s, steps/s) of one run."""
    server, client = server_cpu(postmaster), client_cpu()
    result = pg_steps.run(store, CONVERSATIONS, PROCESSES, steps, api)
    return server_cpu(postmaster) - server, client_cpu() - client, result["steps_per_s"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api", choices=("store", "session"), default="store")
    parser.add_argument("stores", nargs="+", choices=("pg", "pg-socket", "file"))
    args = parser.parse_args()
    cluster = os.environ.get("CTXBUDGET_PG_CLUSTER")
    if not cluster:
        print("CTXBUDGET_PG_CLUSTER is not set: start a server with scripts/pg-cluster start")
        return 0
    postmaster = int((Path(cluster) / "data" / "postmaster.pid").read_text().split()[0])
    steps = CONVERSATIONS * (MANY - FEW)
    print("| API | store | server CPU / step | client CPU / step | steps/s (10, 50 steps) |")
    print("|---|---|---|---|---|")
    for store in args.stores:
        few = one_run(store, FEW, args.api, postmaster)
        many = one_run(store, MANY, args.api, postmaster)
        server = (many[0] - few[0]) / steps * 1e3
        client = (many[1] - few[1]) / steps * 1e3
        print(
            f"| {args.api} | {store} | {server:.3f} ms | {client:.3f} ms | "
            f"{few[2]:,.0f} / {many[2]:,.0f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
