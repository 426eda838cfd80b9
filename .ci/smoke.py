"""Smoke test of an installed ctxbudget (sdist or wheel), run outside the repository."""

import asyncio
import contextlib
import io
import os
import sys
import tempfile
from pathlib import Path

import ctxbudget
from ctxbudget.cli import main

assert "site-packages" in ctxbudget.__file__, f"not the installed package: {ctxbudget.__file__}"
enc = ctxbudget.Encoding("o200k_base")
assert enc.count("Hello, world!") == 4, enc.count("Hello, world!")
assert ctxbudget.count_tokens("hello world", model="gpt-4o") == 2
assert not ctxbudget._ctxbudget.FAILPOINTS, "distributed builds carry no fault injection"
with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()) as out:
    ws = Path(tmp) / "ws"
    assert main(["demo", "--workspace", str(ws), "--steps", "40", "--agent", "cooperative"]) == 0
    assert "session_history: found" in out.getvalue()
    assert main(["history", "search", str(ws / "cooperative"), "deploy key"]) == 0


async def _async_step(ws: Path) -> str:
    s = await ctxbudget.AsyncSession.open(ws, model="gpt-4o", durability="none")
    await s.add_user("hello")
    return (await s.prepare()).status


with tempfile.TemporaryDirectory() as tmp:
    assert asyncio.run(_async_step(Path(tmp) / "ws")) == "send"
# The PostgreSQL store ships in every build: with a server (.ci/package starts one when
# the machine has the binaries), a conversation over TLS, checked and unchecked.
PG_URL = os.environ.get("CTXBUDGET_PG_URL")
if PG_URL:
    conversation = f"smoke-{os.getpid()}"
    h = ctxbudget.History.open(PG_URL, conversation=conversation)
    h.append([{"kind": "message", "role": "user", "parts": [{"type": "text", "text": "hi"}]}])
    assert [r.seq for r in h.rows()] == [1], "one row in a new conversation"
    found = ctxbudget.SessionHistoryTool(h).call({"action": "search", "query": "HI"})
    assert [i["item_id"] for i in found["items"]] == ["1"], found
    root = os.environ.get("CTXBUDGET_PG_ROOTCERT")
    if root:
        sep = "&" if "?" in PG_URL else "?"
        checked = PG_URL.replace("sslmode=require", "sslmode=verify-full")
        checked += f"{sep}sslrootcert={root}" if "sslrootcert" not in checked else ""
        v = ctxbudget.History.open(checked, conversation=conversation)
        assert [r.seq for r in v.rows()] == [1]
    print("smoke: PostgreSQL store OK")
elif os.environ.get("CTXBUDGET_REQUIRE_POSTGRES") == "1":
    raise SystemExit("CTXBUDGET_REQUIRE_POSTGRES=1 but CTXBUDGET_PG_URL is not set")
print(f"smoke OK: ctxbudget {ctxbudget.__version__} from {Path(ctxbudget.__file__).parent}")
sys.exit(0)
