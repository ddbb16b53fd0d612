"""Regular expressions that clients send, matched in time linear in the text.

Two requests carry one: ConsumerGroupHeartbeat's `subscribed_topic_regex` (KIP-848) and
ListTransactions' `transactional_id_pattern` (KIP-1152). Kafka compiles both with RE2/J;
camus uses RE2 (google-re2), the same engine family and syntax. Python's `re` backtracks,
so a pattern like `(.*.*)*X` took exponential time in the name it was matched against, on
the event loop, and froze every connection; RE2 needs no bound on the work, it cannot
blow up. What RE2 cannot express in linear time (lookaround, backreferences, possessive
quantifiers) is refused, as RE2/J refuses it: `InvalidRegex`, which the handlers answer
with INVALID_REGULAR_EXPRESSION. RE2's own memory cap (8 MiB of program) refuses patterns
too large to compile.
"""

from __future__ import annotations

import functools

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # the error reaches the client; RE2 need not also print it


class InvalidRegex(ValueError):
    """A pattern RE2 refuses; the message says why."""


@functools.lru_cache(maxsize=512)  # heartbeats repeat the same few patterns every 5 s
def compile_regex(pattern: str) -> re2._Regexp:
    try:
        return re2.compile(pattern, options=_OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "does not compile"
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise InvalidRegex(f"invalid regular expression {pattern!r}: {reason}") from None

