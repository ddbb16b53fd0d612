"""Errors a user can cause: a bad spec or a bad rule. Each carries its position."""

from __future__ import annotations


class CamusError(Exception):
    """A user-facing error with an optional source position (1-based line and column)."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None,
                 source: str | None = None):
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column
        self.source = source

    def __str__(self) -> str:
        where = self.source or ""
        if self.line is not None:
            where += f"{':' if where else ''}{self.line}:{self.column or 1}"
        return f"{where}: {self.message}" if where else self.message


class SpecError(CamusError):
    """The annotated header spec is malformed or inconsistent."""


class RuleError(CamusError):
    """A rule does not parse or does not type-check against the spec."""


class StateError(RuleError):
    """A stateful rule set that cannot be had: over a state's slots or banks, or beyond what
    the state stages compare (thresholds, combinations, decide entries)."""
