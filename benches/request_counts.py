"""Request counts side by side: ctxbudget, the OpenAI cookbook's formula, LiteLLM's
``token_counter`` and LangChain's ``ChatOpenAI.get_num_tokens_from_messages`` on the
realistic gpt-4o requests of tests/request_corpus.py, as deviations from the cookbook
(images: from OpenAI's documented rule), per category.

    python benches/request_counts.py      # prints the table (benches/run.py includes it)
"""

from __future__ import annotations

import statistics
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from request_corpus import COUNTERS, corpus, counts

CATEGORIES = ("chat", "tools", "tool calls", "images")


def _cell(deviations: list[float], failures: int) -> str:
    if not deviations:
        return f"fails ({failures})"
    worst = max(deviations, key=abs)
    text = f"{statistics.median(deviations):+.1f}% (worst {worst:+.1f}%)"
    if all(d == 0 for d in deviations):
        text = "**equal**"
    return text + (f", fails on {failures}" if failures else "")


def table() -> str:
    """One row per category, one column per counter: median and worst deviation from
    the cookbook's count."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # LangChain warns that it ignores tools
        results = [(case, counts(case)) for case in corpus()]
    names = [n for n in COUNTERS if n != "cookbook"]
    lines = [
        "| requests (gpt-4o) | n | " + " | ".join(names) + " |",
        "|---|---|" + "---|" * len(names),
    ]
    for category in CATEGORIES:
        rows = [(c, r) for c, r in results if c.category == category]
        cells = []
        for name in names:
            deviations = []
            for _, r in rows:
                ours, base = r[name], r["cookbook"]
                if isinstance(ours, int) and isinstance(base, int):
                    deviations.append((ours - base) / base * 100)
            cells.append(_cell(deviations, len(rows) - len(deviations)))
        lines.append(f"| {category} | {len(rows)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
