"""Tool policy (SPEC §4): ordered rules, regex full match on the tool name, last match
wins, no match denies."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

from ..errors import PolicyError
from ..policy import threshold_is_off

__all__ = ["RuleAction", "ToolPolicy", "ToolRule"]


class RuleAction(str, Enum):
    """What a matching rule does."""

    ENABLE = "enable"
    DISABLE = "disable"


@dataclass(frozen=True, slots=True)
class ToolRule:
    """``{pattern, action}``: ``pattern`` must match the whole tool name."""

    pattern: str
    action: RuleAction


_PRESETS: dict[str, tuple[ToolRule, ...]] = {
    "exec": (ToolRule(".*", RuleAction.ENABLE),),
    "plan": (ToolRule(".*", RuleAction.ENABLE),),
}


_RuleLike = ToolRule | Mapping[str, str] | tuple[str, str]


def _rule(index: int, raw: _RuleLike) -> ToolRule:
    pattern: object
    raw_action: object
    if isinstance(raw, ToolRule):
        pattern, raw_action = raw.pattern, raw.action
    elif isinstance(raw, Mapping):
        pattern, raw_action = raw.get("pattern"), raw.get("action")
    elif isinstance(raw, tuple) and len(raw) == 2:
        pattern, raw_action = raw
    else:
        raise PolicyError(f"rule {index} must be a ToolRule, a dict or a (pattern, action) pair")
    if not isinstance(pattern, str):
        raise PolicyError(f"rule {index}: pattern must be a string, got {pattern!r}")
    try:
        action = RuleAction(raw_action)
    except ValueError:
        raise PolicyError(
            f"rule {index}: action must be 'enable' or 'disable', got {raw_action!r}"
        ) from None
    try:
        re.compile(pattern)
    except re.error as exc:
        raise PolicyError(
            f"rule {index}: pattern {pattern!r} is not a valid regex: {exc}"
        ) from None
    return ToolRule(pattern, action)


class ToolPolicy:
    """Which tools an agent may use: ``ToolPolicy([(".*", "enable"), ("shell", "disable")])``."""

    __slots__ = ("_compiled", "rules")

    def __init__(self, rules: Iterable[_RuleLike] = ()) -> None:
        self.rules: tuple[ToolRule, ...] = tuple(_rule(i, r) for i, r in enumerate(rules))
        self._compiled = [(re.compile(r.pattern), r.action) for r in self.rules]

    @classmethod
    def preset(cls, name: str, *, parent: ToolPolicy | None = None) -> ToolPolicy:
        """``exec`` and ``plan`` allow everything (``.*`` enable); ``explore`` inherits
        its parent's policy (pass ``parent``)."""
        if name == "explore":
            if parent is None:
                raise PolicyError("the explore preset inherits its parent's policy: pass parent=")
            return cls(parent.rules)
        if name not in _PRESETS:
            raise PolicyError(f"unknown preset {name!r}; use exec, plan or explore")
        return cls(_PRESETS[name])

    def allows(self, name: str) -> bool:
        """Whether tool ``name`` is allowed: the last rule whose pattern matches the whole
        name decides; no matching rule means not allowed."""
        allowed = False
        for pattern, action in self._compiled:
            if pattern.fullmatch(name):
                allowed = action is RuleAction.ENABLE
        return allowed

    def with_rules(self, *rules: _RuleLike) -> ToolPolicy:
        """This policy with ``rules`` appended (they take precedence)."""
        return ToolPolicy((*self.rules, *rules))

    def offers_new_context(self, *, mode_active: bool, threshold: float) -> bool:
        """``new_context`` is offered only when token-budget mode is active, the slider is
        not Off (the budget's one definition: :func:`~ctxbudget.policy.threshold_is_off`),
        and both ``memory`` and ``session_history`` are allowed (SPEC §4)."""
        return (
            mode_active
            and not threshold_is_off(threshold)
            and self.allows("memory")
            and self.allows("session_history")
        )

    def __repr__(self) -> str:
        rules = ", ".join(f"({r.pattern!r}, {r.action.value!r})" for r in self.rules)
        return f"ToolPolicy([{rules}])"
