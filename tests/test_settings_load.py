"""Settings.load refuses every bad file with a SettingsError naming the problem, never
changes the file, and a missing file is an error unless the caller asks for defaults."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxbudget
from ctxbudget import Settings, SettingsError


def _load_untouched(path: Path) -> SettingsError:
    """Loads ``path`` expecting a SettingsError; the file must be exactly as before."""
    before = path.read_bytes() if path.is_file() else None
    with pytest.raises(SettingsError) as info:
        Settings.load(path)
    if before is not None:
        assert path.read_bytes() == before
    assert info.value.path == str(path)
    assert str(path) in str(info.value)
    return info.value


def test_a_missing_file_is_an_error_unless_defaults_are_asked_for(tmp_path: Path) -> None:
    typo = tmp_path / "setings.json"
    err = _load_untouched(typo)
    assert "does not exist" in str(err) and "missing_ok=True" in str(err)
    assert not typo.exists(), "nothing is created"
    assert Settings.load(typo, missing_ok=True) == Settings()
    Settings(default_threshold=0.5).save(typo)
    assert Settings.load(typo, missing_ok=True).default_threshold == 0.5


def test_a_missing_directory_is_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope" / "settings.json"
    assert "does not exist" in str(_load_untouched(path))
    assert Settings.load(path, missing_ok=True) == Settings()


def test_a_huge_integer_is_a_settings_error(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text('{"default_threshold": ' + "9" * 5000 + "}")
    assert "5,000 digits" in str(_load_untouched(path))


def test_deep_nesting_is_a_settings_error(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text('{"thresholds": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert "nested too deeply" in str(_load_untouched(path))


def test_a_directory_is_a_settings_error(tmp_path: Path) -> None:
    err = _load_untouched(tmp_path)
    assert "is a directory" in str(err)
    with pytest.raises(SettingsError):
        Settings.load(tmp_path, missing_ok=True)


def test_a_fifo_is_a_settings_error_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "s.json"
    os.mkfifo(fifo)
    box: list[BaseException] = []

    def load() -> None:
        try:
            Settings.load(fifo)
        except BaseException as exc:  # handed to the main thread
            box.append(exc)

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "Settings.load blocked on a FIFO"
    assert isinstance(box[0], SettingsError) and "not a regular file" in str(box[0])


def test_an_oversized_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_bytes(b" " * (1 << 20) + b"{}")
    assert "at most" in str(_load_untouched(path))


@pytest.mark.parametrize("version", ["true", "1.0", "false", '"1"', "2", "null", "[1]"])
def test_only_the_integer_version_is_accepted(tmp_path: Path, version: str) -> None:
    path = tmp_path / "s.json"
    path.write_text('{"version": ' + version + "}")
    err = _load_untouched(path)
    assert err.field == "version"
    path.write_text('{"version": 1}')
    assert Settings.load(path) == Settings()


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_json_constants_are_refused(tmp_path: Path, literal: str) -> None:
    path = tmp_path / "s.json"
    path.write_text('{"default_threshold": ' + literal + "}")
    assert "not JSON" in str(_load_untouched(path))


def test_a_long_value_is_shown_shortened(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"strategy": "x" * 100_000}))
    err = _load_untouched(path)
    assert err.field == "strategy" and len(str(err)) < 500


# ----- arbitrary bytes and values -------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)
settings_like = st.fixed_dictionaries(
    {},
    optional={
        "version": json_values | st.just(1),
        "strategy": json_values | st.sampled_from(["summarize", "token_budget"]),
        "experiments": json_values | st.lists(st.sampled_from(["token_budget", "agent_memory"])),
        "default_threshold": json_values | st.floats(0, 1),
        "thresholds": json_values | st.dictionaries(st.text(max_size=8), st.floats(-1, 2)),
    },
)
contents = st.one_of(
    st.binary(max_size=300),
    json_values.map(lambda v: json.dumps(v).encode()),
    settings_like.map(lambda v: json.dumps(v).encode()),
    st.builds(lambda head, n: head + b"[" * n, st.binary(max_size=10), st.integers(0, 5000)),
)


def _check_load(path: Path, content: bytes) -> None:
    path.write_bytes(content)
    sibling = path.parent / "other.txt"
    sibling.write_text("keep")
    try:
        loaded = Settings.load(path)
    except SettingsError as exc:
        assert exc.path == str(path)
    else:
        assert isinstance(loaded, Settings)
        assert Settings.from_dict(loaded.to_dict()) == loaded
    assert path.read_bytes() == content
    assert sorted(p.name for p in path.parent.iterdir()) == ["other.txt", "s.json"]
    assert sibling.read_text() == "keep"


@settings(max_examples=300, deadline=None)
@given(content=contents)
def test_any_file_loads_or_raises_a_settings_error(
    tmp_path_factory: pytest.TempPathFactory, content: bytes
) -> None:
    _check_load(tmp_path_factory.mktemp("settings") / "s.json", content)


def test_settings_error_is_a_ctxbudget_error() -> None:
    assert issubclass(SettingsError, ctxbudget.CtxBudgetError)
    assert issubclass(SettingsError, ValueError)


path_values = st.one_of(
    st.text(max_size=40),
    st.lists(
        st.sampled_from(["..", ".", "", "s.json", "nope", "other.txt", "\x00"]), max_size=4
    ).map("/".join),
    st.integers(),
    st.none(),
    st.binary(max_size=10),
    st.lists(st.integers(), max_size=2),
)


@settings(max_examples=300, deadline=None)
@given(path=path_values, missing_ok=st.booleans())
def test_any_path_loads_or_raises_a_settings_error(
    tmp_path_factory: pytest.TempPathFactory, path: object, missing_ok: bool
) -> None:
    base = tmp_path_factory.mktemp("paths")
    (base / "s.json").write_text('{"default_threshold": 0.4}')
    (base / "other.txt").write_text("not json")
    before = {p.name: p.read_bytes() for p in base.iterdir()}
    cwd = os.getcwd()
    os.chdir(base)
    try:
        loaded = Settings.load(path, missing_ok=missing_ok)  # type: ignore[arg-type]
    except SettingsError:
        pass
    else:
        assert isinstance(loaded, Settings)
    finally:
        os.chdir(cwd)
    assert {p.name: p.read_bytes() for p in base.iterdir()} == before
