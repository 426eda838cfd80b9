"""Only ``Session``'s own module reads a ``Session``'s private state: the decision, its
steps, the accounting, the async wrapper and the integrations go through the state object
they are handed or the public API. A scan of the package's source fails the test if a
module reads ``something._name`` for a name ``Session`` keeps private."""

from __future__ import annotations

import ast
from pathlib import Path

import ctxbudget

PACKAGE = Path(ctxbudget.__file__).parent
OWN_MODULE = PACKAGE / "session" / "loop.py"


def session_privates(source: str) -> set[str]:
    """The private names class ``Session`` defines: its methods and the attributes it
    sets on ``self``."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == "Session":
            for inner in ast.walk(node):
                if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(inner.name)
                elif (
                    isinstance(inner, ast.Attribute)
                    and isinstance(inner.value, ast.Name)
                    and inner.value.id == "self"
                    and isinstance(inner.ctx, ast.Store)
                ):
                    names.add(inner.attr)
                elif isinstance(inner, (ast.AnnAssign, ast.Assign)):
                    targets = inner.targets if isinstance(inner, ast.Assign) else [inner.target]
                    names.update(t.id for t in targets if isinstance(t, ast.Name))
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def reads_of(source: str, private: set[str]) -> list[str]:
    """``receiver._name`` reads of ``private`` names by a receiver other than the
    module's own objects (``self``, ``cls``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in private
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
        ):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_the_scan_finds_what_it_looks_for() -> None:
    private = session_privates(OWN_MODULE.read_text())
    assert {"_state", "_sync", "_append", "_hooks"} <= private
    assert reads_of("def f(s):\n    return s._state.fold\n", private) == ["line 2: s._state"]
    assert reads_of("class A:\n    def f(self):\n        return self._session._sync()\n", private)
    assert reads_of("def f(s):\n    return s.state, s._core\n", private) == []


def test_no_module_but_the_sessions_own_reads_its_privates() -> None:
    private = session_privates(OWN_MODULE.read_text())
    offenders = {
        str(path.relative_to(PACKAGE)): found
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != OWN_MODULE and (found := reads_of(path.read_text(), private))
    }
    assert offenders == {}
