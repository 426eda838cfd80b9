"""Runs the benchmarks side by side and prints one Markdown table per benchmark;
``--write`` regenerates benches/README.md from them.

    python benches/run.py                   # every benchmark, full mode
    python benches/run.py tokens scan       # only these: benches/test_bench_<name>.py
    python benches/run.py --short           # CI: smaller inputs, fewer rounds, same tables
    python benches/run.py --write [NAME …]  # and rewrite benches/README.md
    python benches/run.py --json run.json   # and keep the raw results (with the run's details)
    python benches/run.py --from-json run.json [--write]  # tables of a kept run, running nothing
    python benches/run.py --render          # rewrite it from the tables already in it
    python benches/run.py --check           # fail unless it is what --render writes
    python benches/run.py --list            # the registered benchmarks
    python benches/run.py tokens -- -k cl100k   # what follows -- goes to pytest

``./dev bench [ARGS]`` runs this on the release build (``CTXBUDGET_BENCH_PROFILE`` picks
another cargo profile) with a throwaway PostgreSQL server when its binaries are installed.
Benchmarks print; they never fail on timing.

Adding a benchmark:

1. Write ``benches/test_bench_<name>.py``: pytest-benchmark tests that time ctxbudget and
   what it is compared with, on the same input in the same run, and put in
   ``benchmark.extra_info`` what a row of the table needs (figures a test measures itself,
   such as percentiles, go there too). Mark tests too slow for CI
   ``@pytest.mark.full_only``; read ``conftest.SHORT`` to shrink inputs in ``--short`` mode.
2. End the module with its registration (``benches/registry.py``)::

       BENCHMARK = Benchmark(
           topic="counting",               # the README heading it goes under
           title="…",                      # the section's title
           about="…",                      # one or two sentences: what is compared, on what
           table=table,                    # list[Result] -> one Markdown table
       )

3. ``python benches/run.py --write <name>`` adds its section to benches/README.md (the
   other sections keep their tables); ``./dev bench --write`` re-makes them all in one run.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
README = HERE / "README.md"
PREFIX = "test_bench_"

sys.path.insert(0, str(HERE))
from registry import TOPICS, Benchmark, Result  # noqa: E402


@dataclass(frozen=True)
class Registered:
    """A benchmark module and its registration."""

    name: str
    path: Path
    benchmark: Benchmark


def discover() -> list[Registered]:
    """Every ``test_bench_<name>.py`` with its ``BENCHMARK``, in README order."""
    found = []
    for path in sorted(HERE.glob(f"{PREFIX}*.py")):
        module: ModuleType = importlib.import_module(path.stem)
        benchmark = getattr(module, "BENCHMARK", None)
        if not isinstance(benchmark, Benchmark):
            raise SystemExit(f"{path.name} has no BENCHMARK = Benchmark(...) registration")
        found.append(Registered(path.stem.removeprefix(PREFIX), path, benchmark))
    order = list(TOPICS)
    return sorted(found, key=lambda r: order.index(r.benchmark.topic))


def _run_pytest(selected: list[Registered], short: bool, out: Path, extra: list[str]) -> int:
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        *(str(r.path) for r in selected),
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
    return subprocess.run(cmd, cwd=HERE.parent).returncode


def _results(data: dict[str, Any]) -> dict[str, list[Result]]:
    """This run's results, by benchmark name (the module each test is in)."""
    by_name: dict[str, list[Result]] = {}
    for entry in data.get("benchmarks", []):
        stem = Path(entry["fullname"].split("::")[0]).stem
        by_name.setdefault(stem.removeprefix(PREFIX), []).append(Result.from_json(entry))
    return by_name


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _profile() -> str:
    """The cargo profile of the installed extension: what ./dev bench says it built, or
    the stamp ./dev leaves in the virtualenv."""
    if profile := os.environ.get("CTXBUDGET_BENCH_PROFILE"):
        return profile
    try:
        return (Path(sys.prefix) / ".built").read_text().strip() or "unknown"
    except OSError:
        return "unknown"


def _run_line(short: bool, started: float, load: tuple[float, float]) -> str:
    """Where and how the figures were taken, recorded under every table."""
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    nice = os.nice(0)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started))
    return (
        f"{when}, {'short' if short else 'full'} mode, {_profile()} build; {_cpu()}, "
        f"{os.cpu_count()} cores, {ram:.0f} GiB, {platform.system()}, "
        f"Python {platform.python_version()}; load average {load[0]:.1f} at the start, "
        f"{load[1]:.1f} at the end" + (f"; run at nice {nice}" if nice else "")
    )


RUN_KEY = "ctxbudget_run"
"""Where a kept JSON holds the run's details (``--json``, ``--from-json``)."""

RESULTS = re.compile(r"<!-- results: (\S+) -->\n(.*?)\n<!-- end results -->", re.S)


def _section(r: Registered, results: str | None) -> str:
    body = results or f"_Not measured yet: `python benches/run.py --write {r.name}`._"
    about = textwrap.fill(
        r.benchmark.about, width=90, break_on_hyphens=False, break_long_words=False
    )
    return (
        f"### {r.benchmark.title}\n\n{about}\n\n"
        f"<!-- results: {r.name} -->\n{body}\n<!-- end results -->\n\n"
        f"Run just this one: `python benches/run.py {r.name}`"
    )


PREFACE = """\
# Benchmarks

Each table compares ctxbudget with what it replaces, or with the floor under it, on the
same input in one run on one machine; the line under a table records that run (date,
mode, build profile, CPU, cores, memory, Python, load). Read the ratios within a table:
absolute figures move with the machine and its load. Benchmarks print; they never fail
on timing (CI runs them in `--short` mode).

```sh
./dev bench                   # every benchmark on the release build (PostgreSQL ones
                              # on a throwaway server when its binaries are installed)
./dev bench --write           # the same, and regenerates this file
./dev bench --short           # what CI runs: smaller inputs, fewer rounds, same tables
python benches/run.py NAME    # one benchmark, on the build installed in .venv
cargo bench -p ctxbudget-compare --bench count   # the Rust counting comparisons under criterion
```

This file is generated: `benches/run.py` runs every `benches/test_bench_<name>.py` and
writes the table that module's registration (`BENCHMARK = Benchmark(...)`, see
`benches/registry.py`) builds from its results. To add a benchmark, write such a module
and run `python benches/run.py --write <name>`; the top of `benches/run.py` says more.
A/B comparisons of two builds and profiling scripts live in `benches/experiments/`.
"""


def render(registered: Iterable[Registered], tables: dict[str, str]) -> str:
    """The whole README: the preface, then every benchmark under its topic."""
    parts = [PREFACE.strip()]
    topic = None
    for r in registered:
        if r.benchmark.topic != topic:
            topic = r.benchmark.topic
            parts.append(f"## {TOPICS[topic]}")
        parts.append(_section(r, tables.get(r.name)))
    return "\n\n".join(parts) + "\n"


def main() -> int:
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("names", nargs="*", metavar="NAME", help="benchmarks to run (all)")
    parser.add_argument("--short", action="store_true", help="CI mode: small and quick")
    parser.add_argument("--write", action="store_true", help="regenerate benches/README.md")
    parser.add_argument(
        "--render",
        action="store_true",
        help="run nothing: rewrite benches/README.md from the tables already in it",
    )
    parser.add_argument(
        "--check", action="store_true", help="run nothing: fail unless README.md is current"
    )
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    parser.add_argument("--json", type=Path, help="keep the raw pytest-benchmark JSON here")
    parser.add_argument(
        "--from-json", type=Path, help="run nothing: make the tables from a run kept with --json"
    )
    args = parser.parse_args(argv)
    # conftest reads the mode when the modules are imported, here and in pytest.
    os.environ["CTXBUDGET_BENCH_SHORT"] = "1" if args.short else "0"
    registered = discover()
    if args.list:
        for r in registered:
            print(f"{r.name:22} {TOPICS[r.benchmark.topic]}: {r.benchmark.title}")
        return 0
    current = README.read_text() if README.exists() else ""
    kept = dict(RESULTS.findall(current))
    if args.render or args.check:
        rendered = render(registered, kept)
        if args.check:
            if rendered != current:
                print(
                    "benches/README.md is not what benches/run.py generates: run "
                    "`python benches/run.py --render` (or `--write NAME` for a new benchmark)",
                    file=sys.stderr,
                )
                return 1
            return 0
        README.write_text(rendered)
        return 0
    known = {r.name for r in registered}
    if unknown := sorted(set(args.names) - known):
        parser.error(f"no benchmark named {', '.join(unknown)} (--list shows them)")
    selected = [r for r in registered if not args.names or r.name in args.names]

    if args.from_json:
        status, data = 0, json.loads(args.from_json.read_text())
        line = data.get(RUN_KEY, "run details not recorded")
    else:
        started, load_before = time.time(), os.getloadavg()[0]
        with tempfile.TemporaryDirectory() as tmp:
            out = args.json or Path(tmp) / "bench.json"
            status = _run_pytest(selected, args.short, out, extra)
            data = json.loads(out.read_text()) if out.exists() else {}
        line = _run_line(args.short, started, (load_before, os.getloadavg()[0]))
        if args.json and data:
            args.json.write_text(json.dumps({**data, RUN_KEY: line}, indent=1))

    results = _results(data)
    tables = {}
    for r in selected:
        if r.name in results:
            tables[r.name] = f"{r.benchmark.table(results[r.name])}\n\n_{line}._"
            print(f"\n### {r.benchmark.title} ({r.name})\n\n{tables[r.name]}")
        else:
            print(f"\n### {r.benchmark.title} ({r.name})\n\nnot measured in this run (skipped)")
    if args.write:
        README.write_text(render(registered, {**kept, **tables}))
        print(f"\nwrote {README.relative_to(HERE.parent)}")
    if status not in (0, 5):  # 5: every selected test was deselected
        print(f"\npytest failed (exit {status}): see above", file=sys.stderr)
        return status
    return 0


if __name__ == "__main__":
    sys.exit(main())
