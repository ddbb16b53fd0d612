"""Subscription files for a network: one subscription a line, `HOST: FILTER`.

FILTER is the rule language of `camus compile` without the action (the network decides the
ports); `#` starts a comment. The filters are parsed as one rules text with each line's
`HOST:` blanked out, so the compiler's shape cache makes 100K lines as fast as 100K rules
and an error points at the line and column of the original file.
"""

from __future__ import annotations

from compiler.errors import RuleError
from compiler.rules import parse_rules
from compiler.spec import Spec
from controller.policy import Subscription


def parse_subscriptions(text: str, spec: Spec, hosts: set[str] | None = None,
                        source: str | None = None) -> list[Subscription]:
    """Subscriptions in file order; RuleError at the first bad line (a host missing from
    `hosts`, a line without `HOST:`, or a filter the rule parser refuses)."""
    lines, owner = [], {}
    for lineno, raw in enumerate(text.removeprefix("\ufeff").split("\n"), start=1):
        body = _strip_comment(raw)
        if not body.strip():
            lines.append("")
            continue
        host, colon, rest = body.partition(":")
        host = host.strip()
        if not colon or not host or " " in host or '"' in host:
            raise RuleError("expected `HOST: FILTER`", lineno, 1, source)
        if hosts is not None and host not in hosts:
            raise RuleError(f"no host {host!r} in the topology", lineno, 1, source)
        if ";" in rest:
            raise RuleError("one filter a line (';' is not allowed)", lineno,
                            len(host) + 2 + rest.index(";"), source)
        owner[lineno] = host
        # The filter keeps its columns: `HOST:` becomes as many spaces.
        lines.append(" " * (len(body) - len(rest)) + rest + " : fwd(1)")
    rules = parse_rules("\n".join(lines), spec, source=source)
    return [Subscription(owner[r.line], r.filter, r.text.rsplit(":", 1)[0].strip()) for r in rules]


def _strip_comment(line: str) -> str:
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            return line[:i]
    return line
