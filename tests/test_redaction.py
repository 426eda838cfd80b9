"""A password (in a URL's userinfo, ``?password=``, ``sslpassword`` or a libpq
``key=value`` string) is never printed: not in an error's ``str``/``repr`` or its chained
causes, not in the command line's output or its ``next:`` hints, not in a ``repr`` of
``History``, ``Session``, ``AsyncSession`` or ``AgentsSession``. Every path goes through
one redaction function (``ctxbudget._redact.redact``, and ``redact_secrets`` in the
core), held to the same cases."""

from __future__ import annotations

import asyncio
import json
import traceback
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

import pytest
from history_helpers import fill_two_windows
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget import (
    AsyncSession,
    CtxBudgetError,
    Database,
    History,
    MemoryTool,
    Session,
    SessionHistoryTool,
)
from ctxbudget._redact import redact
from ctxbudget.cli import main

SECRET = "Xq7-s3cr3t-PW"
"""A password no message has any other reason to contain."""

CASES = Path(__file__).parents[1] / "rust/ctxbudget/src/pg/config/testdata/redact.json"


def _leaks(text: str) -> bool:
    return SECRET in text or "s3cr3t" in text


@pytest.mark.parametrize(("given", "want"), json.loads(CASES.read_text(encoding="utf-8")))
def test_redaction_meets_the_cases_the_core_meets(given: str, want: str) -> None:
    assert redact(given) == want
    assert redact(want) == want, "redacting twice changes nothing"


def _with(url: str, *, userinfo_password: bool = True, query: str = "", **parts: str) -> str:
    """``url`` (the test server's) with ``SECRET`` as the password in its userinfo, more
    query parameters and other parts replaced (``host``, ``port``, ``path``)."""
    s = urlsplit(url)
    user = s.username or "ctxbudget"
    host = parts.get("host", s.hostname or "127.0.0.1")
    port = parts.get("port", str(s.port))
    auth = f"{user}:{SECRET}@" if userinfo_password else f"{user}@"
    q = "&".join(p for p in (s.query, query) if p)
    return urlunsplit((s.scheme, f"{auth}{host}:{port}", parts.get("path", s.path), q, ""))


def _everything_about(exc: BaseException) -> str:
    """``str``, ``repr``, the formatted traceback and every chained cause or context."""
    seen: list[str] = []
    e: BaseException | None = exc
    while e is not None:
        seen += [str(e), repr(e), *(repr(a) for a in e.args)]
        e = e.__cause__ or e.__context__
    seen.append("".join(traceback.format_exception(exc)))
    return "\n".join(seen)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _failing_urls(pg_url: str) -> Iterator[tuple[str, str]]:
    root = Path(__file__).parents[1] / "rust/ctxbudget/src/pg/config/testdata/other_ca.pem"
    yield "bad database", _with(pg_url, path="/no_such_db_x", query=f"password={SECRET}")
    user_url = _with(pg_url, query=f"password={SECRET}")
    yield "auth failure (no such role)", user_url.replace("ctxbudget:", "nosuchrole:", 1)
    yield (
        "TLS failure",
        _with(pg_url, query=f"password={SECRET}&sslmode=verify-full&sslrootcert={root}").replace(
            "sslmode=require&", ""
        ),
    )
    yield "unknown parameter", _with(pg_url, query=f"password={SECRET}&no_such_parameter=1")
    yield "malformed port", _with(pg_url, query=f"password={SECRET}&port=notaport")
    yield "bad sslmode", _with(pg_url, query=f"sslpassword={SECRET}&sslmode=sometimes")
    yield "unsupported sslpassword", _with(pg_url, query=f"sslpassword={SECRET}")
    yield "no host", f"postgresql://u:{SECRET}@"
    yield "no host, a database", f"postgresql://u:{SECRET}@/db?password={SECRET}"
    yield "malformed percent escape", _with(pg_url, query=f"password={SECRET}&sslrootcert=%zz")


def _unreachable_urls(pg_url: str) -> Iterator[tuple[str, str]]:
    """URLs whose server cannot be reached: each is retried for the pool's
    ``reconnect_for`` before it fails (the test opens them with a short one)."""
    yield "server down", _with(pg_url, port=str(_free_port()), query=f"password={SECRET}")
    yield "bad host", _with(pg_url, host="no-such-host.invalid", query=f"password={SECRET}")


def test_no_connection_error_shows_the_password(pg_url: str) -> None:
    for what, url in _failing_urls(pg_url):
        with pytest.raises(CtxBudgetError) as err:
            History.open(url, conversation=f"red-{uuid.uuid4().hex}")
        assert not _leaks(_everything_about(err.value)), f"{what}: {err.value!r}"
    # The error after the reconnects ran out (1 s here instead of the default 30 s: the
    # message is the same, the wait is not what is tested).
    for what, url in _unreachable_urls(pg_url):
        with pytest.raises(CtxBudgetError) as err:
            Database.open(url, reconnect_for=1.0).history(f"red-{uuid.uuid4().hex}")
        assert not _leaks(_everything_about(err.value)), f"{what}: {err.value!r}"


def test_no_cli_error_shows_the_password(pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    # (A server that is down: test_cli_exit_codes checks its line, to wait 30 s once.)
    for what, url in _failing_urls(pg_url):
        for argv in (
            ["history", "list", "--store", url, "--conversation", "c1"],
            ["history", "verify", url, "--conversation", "c1"],
        ):
            try:
                code = main(argv)
            except SystemExit as e:
                code = e.code  # type: ignore[assignment]
                assert not _leaks(str(e)), what
            out, err = capsys.readouterr()
            assert code in (1, 2), f"{what}: exit {code}"
            assert not _leaks(out + err), f"{what}: {out}{err}"
            assert err.strip(), f"{what}: nothing said"


def test_no_cli_output_or_hint_shows_the_password(
    pg_url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    conversation = f"red-{uuid.uuid4().hex}"
    fill_two_windows(History.open(pg_url, conversation=conversation))
    for url in (
        _with(pg_url),
        _with(pg_url, userinfo_password=False, query=f"password={SECRET}"),
        _with(pg_url, query=f"password={SECRET}&application_name=red"),
    ):
        for argv in (
            ["list", "--store", url, "--conversation", conversation],
            ["items", "--store", url, "--conversation", conversation],
            ["search", url, "deploy", "--conversation", conversation],
            ["read", "--store", url, "--conversation", conversation, "1"],
            ["verify", "--store", url, "--conversation", conversation],
            ["verify", "--store", url, "--conversation", conversation, "--json"],
            ["export", "--store", url, "--conversation", conversation],
        ):
            assert main(["history", *argv]) == 0
            out, err = capsys.readouterr()
            assert out.strip() and not _leaks(out + err), f"{argv}: {out}{err}"
        # The hints name the store, password masked, so they stay recognisable.
        main(["history", "list", "--store", url, "--conversation", conversation])
        assert "next: ctxbudget history items --store postgresql://" in capsys.readouterr().out
        for argv in (
            ["read", "--store", url, "--conversation", conversation, "99999"],
            ["items", "--store", url, "--conversation", conversation, "--window", "w:99999"],
            ["recover", "--store", url, "--conversation", conversation],
            ["list", url, "--store", url, "--conversation", conversation],
            ["list", "--store", url, "--conversation", f"missing-{uuid.uuid4().hex}"],
            ["list", "--store", url],
            ["list", str(tmp_path), url],  # an extra positional: argparse's own error
            ["read", "--store", url, "--conversation", conversation, url],
        ):
            with pytest.raises(SystemExit) as exit_:
                main(["history", *argv])
            out, err = capsys.readouterr()
            assert exit_.value.code in (1, 2)
            assert err.strip() and not _leaks(out + err + str(exit_.value)), f"{argv}: {err}"


def test_reprs_show_no_password(pg_url: str) -> None:
    url = _with(pg_url, query=f"password={SECRET}")
    conversation = f"red-{uuid.uuid4().hex}"
    history = History.open(url, conversation=conversation)
    session = Session.open(url, conversation=conversation, model="gpt-4o")
    shown = [repr(history), str(history), repr(session), history.location]
    shown += [repr(SessionHistoryTool(history)), MemoryTool(history).location]

    async def open_async() -> AsyncSession:
        return await AsyncSession.open(url, conversation=conversation, model="gpt-4o")

    shown.append(repr(asyncio.run(open_async())))
    agents = pytest.importorskip("ctxbudget.integrations.agents")
    shown.append(repr(agents.AgentsSession.open(conversation, url, model="gpt-4o")))
    for text in shown:
        assert not _leaks(text), text
    assert conversation in repr(session)


_PASSWORD = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Zs", "Zl", "Zp")),
    min_size=1,
    max_size=24,
).map(lambda s: f"Q{s}Z9")


@settings(max_examples=400, deadline=None)
@given(password=_PASSWORD)
def test_no_password_survives_redaction_in_any_form(password: str) -> None:
    conninfo = password.replace("\\", "\\\\").replace("'", "\\'")
    forms = [
        f"postgresql://u:{password}@h:5432/db?sslmode=require",
        f"postgresql://u:{quote(password, safe='')}@h/db",
        f"postgresql://u@h/db?password={quote(password, safe='')}&sslmode=require",
        f"postgres://u@h/db?sslpassword={quote(password, safe='')}",
        f"host=h password='{conninfo}' dbname=x",
        f'cannot parse the URL "postgresql://u:{password}@h/db": bad',
    ]
    if "&" not in password:
        forms += [f"postgresql://u@h/db?password={password}&x=1", f"password={password} x=1"]
    for text in forms:
        shown = redact(text)
        assert password not in shown and quote(password, safe="") not in shown, (text, shown)
