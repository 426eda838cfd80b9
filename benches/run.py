"""Run the benchmarks and print the side-by-side ratio tables (Markdown).

    python benches/run.py            # full run: the figures in benches/README.md
    python benches/run.py --short    # CI: smaller corpus, fewer rounds, same tables

Benchmarks print; they never fail on timing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _run_pytest(short: bool, out: Path, extra: list[str]) -> None:
    env = dict(os.environ, CTXBUDGET_BENCH_SHORT="1" if short else "0")
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        str(HERE),
        "-q",
        "-p",
        "no:cacheprovider",
        f"--benchmark-json={out}",
        "--benchmark-disable-gc",
        "--benchmark-columns=min,median,rounds",
        "--benchmark-sort=name",
        "--benchmark-min-rounds=3" if short else "--benchmark-min-rounds=5",
        "--benchmark-max-time=0.5" if short else "--benchmark-max-time=2.0",
        *extra,
    ]
    subprocess.run(cmd, check=True, env=env, cwd=HERE.parent)


def _mib_s(nbytes: int, seconds: float) -> str:
    return f"{nbytes / seconds / 2**20:,.1f}"


def _tables(data: dict[str, Any]) -> str:
    by_measure: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for b in data["benchmarks"]:
        info = b["extra_info"]
        key = info["impl"] + (f"@{info['mib']}" if "mib" in info else "")
        by_measure[info["measure"]][key] = {"stats": b["stats"], **info}

    lines: list[str] = []
    scans = [b for b in data["benchmarks"] if b["extra_info"].get("group") == "scan"]
    latencies = [b for b in data["benchmarks"] if b["extra_info"].get("group") == "latency"]
    if scans:
        lines += _scan_table(scans)
        lines.append("")
    if latencies:
        lines += ["| call | p50 | p99 |", "|---|---|---|"]
        for b in latencies:
            info = b["extra_info"]
            lines.append(
                f"| {info['measure']} | {_duration(info['p50'])} | {_duration(info['p99'])} |"
            )
        lines.append("")
    appends = [b for b in data["benchmarks"] if b["extra_info"].get("group") == "append"]
    opens = [b for b in data["benchmarks"] if b["extra_info"].get("group") == "open"]
    if appends:
        lines += _append_table(appends, opens)
        lines.append("")
    warm = [b for b in data["benchmarks"] if b["extra_info"].get("group") == "append-warm"]
    if warm:
        lines += _warm_table(warm)
        lines.append("")
    for b in data["benchmarks"]:
        if "table" in b["extra_info"]:  # benches that build their own table (PostgreSQL)
            lines += [f"{b['extra_info']['measure']}:", "", b["extra_info"]["table"], ""]
    lines += [
        "| measure | ctxbudget | baseline | ratio (baseline time / ctxbudget time) |",
        "|---|---|---|---|",
    ]
    for measure, impls in by_measure.items():
        if measure.startswith(("pathological", "recount", "append", "open", "no-match")) or (
            "tiktoken" not in impls
        ):
            continue
        ours = next(v for k, v in impls.items() if k.startswith("ctxbudget"))
        base = impls["tiktoken"]
        t_ours, t_base = ours["stats"]["median"], base["stats"]["median"]
        lines.append(
            f"| {measure} | {_mib_s(ours['bytes'], t_ours)} MiB/s | tiktoken "
            f"{_mib_s(base['bytes'], t_base)} MiB/s | **{t_base / t_ours:.2f}×** |"
        )

    for measure, impls in by_measure.items():
        if not measure.startswith("recount"):
            continue
        cold = impls["cold count"]["stats"]["median"]
        warm = impls["recount after append"]["stats"]["median"]
        lines += [
            "",
            "| recount of a 200-message request (~300 KiB) after appending one | median |",
            "|---|---|",
            f"| cold count (cache empty) | {cold * 1e3:.3f} ms |",
            f"| recount after append (200 cached + 1 new) | {warm * 1e3:.3f} ms |",
            f"| recount / cold | **{warm / cold * 100:.1f}%** |",
        ]

    patho = {m: v for m, v in by_measure.items() if m.startswith("pathological")}
    if patho:
        lines += [
            "",
            "| input (o200k_base) | MiB | ctxbudget s/MiB | exact? | tiktoken s/MiB |",
            "|---|---|---|---|---|",
        ]
        for measure, impls in patho.items():
            per_mib = []
            sizes = sorted({v["mib"] for v in impls.values()})
            for mib in sizes:
                ours = impls.get(f"ctxbudget@{mib}")
                theirs = impls.get(f"tiktoken@{mib}")
                ours_cell, exact_cell = "-", "-"
                if ours:
                    exact_cell = "exact" if ours.get("exact") else "upper bound"
                    spm = ours["stats"]["min"] / mib
                    per_mib.append(spm)
                    ours_cell = f"{spm:.3f}"
                theirs_cell = "-"
                if theirs:
                    outcome = json.loads(theirs.get("outcome", "{}"))
                    if "seconds" in outcome:
                        theirs_cell = f"{outcome['seconds'] / mib:.3f}"
                    else:
                        theirs_cell = f"fails: {outcome.get('failure', '?')}"
                label = measure.removeprefix("pathological ").removesuffix(", o200k_base")
                lines.append(f"| {label} | {mib} | {ours_cell} | {exact_cell} | {theirs_cell} |")
            if len(per_mib) > 1:
                spread = max(per_mib) / min(per_mib)
                lines.append(f"| {label}: slowest / fastest s/MiB | | **{spread:.2f}×** | | |")
    return "\n".join(lines)


def _duration(seconds: float) -> str:
    return f"{seconds * 1e6:.2f} µs" if seconds < 1e-3 else f"{seconds * 1e3:.3f} ms"


def _scan_table(scans: list[dict[str, Any]]) -> list[str]:
    by_impl = {b["extra_info"]["impl"]: b for b in scans}
    ours = by_impl.get("ctxbudget")
    lines = [
        "| no-match search over a full 2 MiB / 500-row budget | median | ratio to ctxbudget |",
        "|---|---|---|",
    ]
    for impl, b in by_impl.items():
        median = b["stats"]["median"]
        ratio = f"**{median / ours['stats']['median']:.1f}×**" if ours else "-"
        lines.append(f"| {impl} | {median * 1e3:.3f} ms | {ratio} |")
    return lines


def _warm_table(appends: list[dict[str, Any]]) -> list[str]:
    cells: dict[tuple[int, int], dict[str, dict[str, float]]] = defaultdict(dict)
    for b in appends:
        info = b["extra_info"]
        cells[(info["mib"], info["batch"])][info["impl"]] = info
    lines = [
        "| transcript, after 2,000 rows | batch | ctxbudget p50 / p99 ms | SQLite WAL p50 / p99 "
        "ms | bare write p50 / p99 ms | ctxbudget ÷ SQLite | bare ÷ SQLite | ctxbudget − bare |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (mib, batch), impls in sorted(cells.items()):
        ours, sqlite, bare = impls.get("ctxbudget"), impls.get("sqlite"), impls.get("bare")
        if not (ours and sqlite and bare):
            continue

        def cell(info: dict[str, float]) -> str:
            return f"{info['p50'] * 1e3:.3f} / {info['p99'] * 1e3:.3f}"

        lines.append(
            f"| {mib} MiB | {batch} | {cell(ours)} | {cell(sqlite)} | {cell(bare)} | "
            f"**{ours['p50'] / sqlite['p50']:.2f}×** | {bare['p50'] / sqlite['p50']:.2f}× | "
            f"{(ours['p50'] - bare['p50']) * 1e6:.0f} µs |"
        )
    return lines


def _append_table(appends: list[dict[str, Any]], opens: list[dict[str, Any]]) -> list[str]:
    cells: dict[tuple[int, int, str], dict[str, dict[str, float]]] = defaultdict(dict)
    for b in appends:
        info = b["extra_info"]
        cells[(info["mib"], info["batch"], info["durability"])][info["impl"]] = info

    def ms(info: dict[str, float] | None) -> str:
        if not info:
            return "-"
        return f"{info['p50'] * 1e3:.3f} / {info['p99'] * 1e3:.3f}"

    lines = [
        "| transcript | batch | durability | ctxbudget p50 / p99 ms | whole-file rewrite "
        "p50 / p99 ms | SQLite WAL p50 / p99 ms | bare write p50 / p99 ms | rewrite ÷ "
        "ctxbudget | ctxbudget ÷ SQLite | ctxbudget − bare write (p50) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (mib, batch, durability), impls in sorted(cells.items()):
        ours, rewrite, sqlite = impls.get("ctxbudget"), impls.get("rewrite"), impls.get("sqlite")
        bare = impls.get("bare")
        vs_rewrite = f"**{rewrite['p50'] / ours['p50']:.0f}×**" if ours and rewrite else "-"
        vs_sqlite = f"**{ours['p50'] / sqlite['p50']:.2f}×**" if ours and sqlite else "-"
        over_bare = f"{(ours['p50'] - bare['p50']) * 1e6:.0f} µs" if ours and bare else "-"
        lines.append(
            f"| {mib} MiB | {batch} | {durability} | {ms(ours)} | {ms(rewrite)} | "
            f"{ms(sqlite)} | {ms(bare)} | {vs_rewrite} | {vs_sqlite} | {over_bare} |"
        )
    for b in opens:
        info = b["extra_info"]
        lines += [
            "",
            "| open + recover | median | max |",
            "|---|---|---|",
            f"| {info['mib']} MiB transcript with a torn tail | "
            f"{b['stats']['median']:.3f} s | {b['stats']['max']:.3f} s |",
        ]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--short", action="store_true", help="CI mode: small and quick")
    parser.add_argument("--json", type=Path, help="keep the raw pytest-benchmark JSON here")
    args, extra = parser.parse_known_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = args.json or Path(tmp) / "bench.json"
        _run_pytest(args.short, out, extra)
        if not out.exists():  # every selected benchmark was skipped
            return 0
        data = json.loads(out.read_text())
    machine = data.get("machine_info", {})
    print()
    mode = "short" if args.short else "full"
    cpu = machine.get("cpu", {}).get("brand_raw", "?")
    python = machine.get("python_version", "?")
    print(f"## Results ({mode} mode; {cpu}, {os.cpu_count()} cores, Python {python})")
    print()
    print(_tables(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
