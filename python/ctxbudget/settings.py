"""Settings (SPEC §4): compaction strategy, experiments, per-model thresholds.

Persisted as JSON and replaced atomically; an invalid file raises
:class:`~ctxbudget.SettingsError` naming the field and is never modified, so the last
good file is never lost.
"""

from __future__ import annotations

import json
import math
import os
import reprlib
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from ._shared import atomic_write
from .errors import SettingsError
from .policy import Budget

__all__ = ["REQUIRED_EXPERIMENTS", "Settings", "Strategy"]

REQUIRED_EXPERIMENTS = frozenset({"token_budget", "agent_memory"})
"""Token budget is effective only when both experiments are on."""

SETTINGS_VERSION = 1

SETTINGS_MAX_BYTES = 1 << 20
"""Largest settings file read; a bigger one is refused rather than loaded."""

_INT_DIGITS_MAX = 20
"""Longest integer literal read; every number in a settings file is small."""

_shown = reprlib.Repr()
_shown.maxstring = _shown.maxother = 60


class Strategy(str, Enum):
    """Compaction strategy."""

    SUMMARIZE = "summarize"
    TOKEN_BUDGET = "token_budget"


def _error(message: str, field_name: str, path: str | None = None) -> SettingsError:
    err = SettingsError(f"{path + ': ' if path else ''}{field_name}: {message}")
    err.field, err.path = field_name, path
    return err


def _threshold(value: object, field_name: str, path: str | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _error(
            f"must be a number from 0.0 to 1.0, got {_shown.repr(value)}", field_name, path
        )
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise _error(
            f"must be from 0.0 to 1.0 (1.0 = Off), got {_shown.repr(value)}", field_name, path
        )
    return float(value)


@dataclass(frozen=True)
class Settings:
    """Saved preferences. ``strategy`` is the preference; :attr:`effective_strategy` is
    what applies."""

    strategy: Strategy = Strategy.SUMMARIZE
    experiments: frozenset[str] = field(default_factory=frozenset)
    default_threshold: float = 0.7
    thresholds: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "strategy", Strategy(self.strategy))
        except ValueError:
            raise _error(
                f"must be 'summarize' or 'token_budget', got {_shown.repr(self.strategy)}",
                "strategy",
            ) from None
        experiments = self.experiments
        if isinstance(experiments, str) or not all(isinstance(e, str) for e in experiments):
            raise _error("must be a list of experiment names", "experiments")
        object.__setattr__(self, "experiments", frozenset(experiments))
        object.__setattr__(
            self, "default_threshold", _threshold(self.default_threshold, "default_threshold")
        )
        if not isinstance(self.thresholds, Mapping):
            raise _error("must be an object of model name to threshold", "thresholds")
        checked = {}
        for model, value in self.thresholds.items():
            if not isinstance(model, str) or not model:
                raise _error("model names must be non-empty strings", "thresholds")
            checked[model] = _threshold(value, f"thresholds[{model!r}]")
        object.__setattr__(self, "thresholds", checked)

    @property
    def token_budget_available(self) -> bool:
        """True when both required experiments are on."""
        return self.experiments >= REQUIRED_EXPERIMENTS

    @property
    def effective_strategy(self) -> Strategy:
        """``token_budget`` only when preferred and both experiments are on."""
        if self.strategy is Strategy.TOKEN_BUDGET and self.token_budget_available:
            return Strategy.TOKEN_BUDGET
        return Strategy.SUMMARIZE

    def threshold_for(self, model: str) -> float:
        """The stored threshold of ``model`` (or the default)."""
        return self.thresholds.get(model, self.default_threshold)

    def budget_for(
        self, model: str, context_window: int, output_reserve: int | None = None
    ) -> Budget:
        """The :class:`~ctxbudget.Budget` of ``model`` with its threshold."""
        return Budget(context_window, self.threshold_for(model), output_reserve)

    def with_threshold(self, model: str, threshold: float) -> Settings:
        """A copy with ``model``'s threshold set."""
        return Settings(
            self.strategy,
            self.experiments,
            self.default_threshold,
            {**self.thresholds, model: _threshold(threshold, f"thresholds[{model!r}]")},
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return {
            "version": SETTINGS_VERSION,
            "strategy": self.strategy.value,
            "experiments": sorted(self.experiments),
            "default_threshold": self.default_threshold,
            "thresholds": dict(sorted(self.thresholds.items())),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, path: str | None = None) -> Settings:
        """Validates a JSON object; errors name the field (and the file)."""
        if not isinstance(data, Mapping):
            raise _error("the settings must be a JSON object", "<root>", path)
        known = {"version", "strategy", "experiments", "default_threshold", "thresholds"}
        for key in data:
            if key not in known:
                name = str(key)
                shown = name if len(name) <= 60 else name[:57] + "..."
                raise _error(f"unknown field; expected one of {sorted(known)}", shown, path)
        version = data.get("version", SETTINGS_VERSION)
        # type() and not ==: true and 1.0 equal 1 but are not a version number.
        if type(version) is not int or version != SETTINGS_VERSION:
            raise _error(
                f"unsupported version {_shown.repr(version)}; this release reads version "
                f"{SETTINGS_VERSION}",
                "version",
                path,
            )
        experiments = data.get("experiments", [])
        if not isinstance(experiments, list):
            raise _error("must be a list of experiment names", "experiments", path)
        try:
            return cls(
                strategy=data.get("strategy", Strategy.SUMMARIZE.value),
                experiments=frozenset(experiments),
                default_threshold=data.get("default_threshold", 0.7),
                thresholds=data.get("thresholds", {}),
            )
        except SettingsError as exc:
            raise _error(str(exc).split(": ", 1)[-1], exc.field, path) from None
        except TypeError:
            raise _error("experiment names must be strings", "experiments", path) from None

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, missing_ok: bool = False) -> Settings:
        """Reads settings. A file that does not exist raises
        :class:`~ctxbudget.SettingsError` unless ``missing_ok`` is true, which gives the
        defaults. Any unreadable or invalid file raises :class:`~ctxbudget.SettingsError`
        naming the problem and is left exactly as it is."""
        if not isinstance(path, (str, os.PathLike)):
            raise _error(
                f"the path must be a str or os.PathLike, got {type(path).__name__}", "<file>"
            )
        p = Path(path)
        try:
            raw = _read_file(p)
        except FileNotFoundError:
            if missing_ok:
                return cls()
            raise _error(
                "does not exist; check the path, or pass missing_ok=True to start from "
                "the defaults",
                "<file>",
                str(p),
            ) from None
        return cls.from_dict(_parse(raw, str(p)), path=str(p))

    def save(self, path: str | os.PathLike[str]) -> None:
        """Writes the settings atomically: temporary file, fsync, rename, directory
        fsync. A crash leaves the old file or the new one, never a mix; a temporary file
        left by a writer killed mid-save is removed by the next save to that directory."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(p, (json.dumps(self.to_dict(), indent=2) + "\n").encode())


def _read_file(p: Path) -> bytes:
    """The bytes of the regular file ``p`` (never blocks on a FIFO or device)."""
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _error(f"cannot be opened: {exc.strerror}", "<file>", str(p)) from None
    except ValueError as exc:  # a NUL byte, or a name the file system cannot encode
        raise _error(f"is not a usable path: {exc}", "<file>", repr(str(p))) from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise _error("is a directory; give the path of the settings file", "<file>", str(p))
        if not stat.S_ISREG(st.st_mode):
            raise _error("is not a regular file", "<file>", str(p))
        if st.st_size > SETTINGS_MAX_BYTES:
            raise _too_big(st.st_size, str(p))
        chunks = []
        remaining = SETTINGS_MAX_BYTES + 1
        while remaining > 0:
            try:
                chunk = os.read(fd, remaining)
            except OSError as exc:
                raise _error(f"cannot be read: {exc.strerror}", "<file>", str(p)) from None
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
    finally:
        os.close(fd)
    raw = b"".join(chunks)
    if len(raw) > SETTINGS_MAX_BYTES:
        raise _too_big(len(raw), str(p))
    return raw


def _too_big(size: int, path: str) -> SettingsError:
    return _error(
        f"is {size:,} bytes; a settings file holds at most {SETTINGS_MAX_BYTES:,}", "<file>", path
    )


class _BadNumber(Exception):
    pass


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > _INT_DIGITS_MAX:
        raise _BadNumber(
            f"an integer of {len(text.lstrip('-')):,} digits; settings hold only thresholds "
            f"from 0.0 to 1.0 and version {SETTINGS_VERSION}"
        )
    return int(text)


def _parse_constant(text: str) -> float:
    raise _BadNumber(f"{text} is not JSON; thresholds are numbers from 0.0 to 1.0")


def _parse(raw: bytes, path: str) -> Any:
    """The JSON value of a settings file's bytes; every failure is a SettingsError."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _error(f"not UTF-8 (byte {exc.start})", "<file>", path) from None
    try:
        return json.loads(text, parse_int=_parse_int, parse_constant=_parse_constant)
    except json.JSONDecodeError as exc:
        raise _error(
            f"not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}", "<file>", path
        ) from None
    except _BadNumber as exc:
        raise _error(f"not valid settings: {exc}", "<file>", path) from None
    except RecursionError:
        raise _error(
            "not valid settings: nested too deeply (a settings file is a flat object)",
            "<file>",
            path,
        ) from None
