"""Actions beyond `fwd`: the library of actions a spec may declare, and how their arguments
are typed (docs/actions.md).

A rule's action list holds `fwd(ports)` (any number of rules' port sets are unioned), and at
most one *verdict*: `drop`, or an action from `LIBRARY` that the rule's spec declares with
`@action(name)`. The library is closed on purpose: every action it lists has code in the
software switch (`switch/reference.py`), so declaring one the switch cannot run is refused
when the spec is read, not when the first packet needs it. Adding an action is adding it
here, to the reference switch and to the P4 program (docs/actions.md, "Adding an action").

Of the verdicts of the rules a packet matches, the one `rank` puts first is taken: the
highest `priority(N)` (default 0); at equal priority `drop`, then the smallest (name,
arguments). The order depends on the rules' meaning only, never on their order in a file,
so an incremental change compiles to the same entries as a full compile.

A leaf module (it imports nothing of camus): `compiler.spec` reads `@action` and
`@default_action` with it, below the rule language.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a rule does beyond `fwd`: `drop`, or an action its spec declares with its typed
    arguments (`answerDNS(10.0.0.105)`: args (0x0a000069,)), at a priority (`priority(N)`,
    default 0). Of the verdicts of the rules a packet matches, one is taken
    (`compiler.actions.rank`; docs/actions.md)."""

    name: str
    args: tuple[int, ...] = ()
    priority: int = 0

    def __str__(self) -> str:
        call = self.name if self.name == "drop" else \
            f"{self.name}({', '.join(map(str, self.args))})"
        return call if not self.priority else f"{call}, priority({self.priority})"

MAX_PORT = 511  # fwd(...) names ports 1..511
# An argument's type: its width in bits, and whether a dotted IPv4 address may spell it.
TYPES = {"ipv4": 32, "port": 9, "u8": 8, "u16": 16, "u32": 32}
MAX_PRIORITY = (1 << 16) - 1
DROP = "drop"


@dataclass(frozen=True)
class Signature:
    """An action of the library: its name and its parameters' (name, type)."""

    name: str
    params: tuple[tuple[str, str], ...]
    summary: str

    def usage(self) -> str:
        if not self.params:
            return self.name
        return f"{self.name}({', '.join(f'{t} {n}' for n, t in self.params)})"


LIBRARY = {s.name: s for s in (
    Signature(DROP, (), "discard the packet, whatever fwd other matching rules name"),
    Signature("answerDNS", (("ip", "ipv4"),),
              "answer a DNS query for an A record with `ip`, back out of the ingress port"),
)}


def argument(ptype: str, tok, error) -> int:
    """The value of argument token `tok` (INT, HEX or IPV4) as a `ptype`; `error(msg, tok)`
    makes the exception to raise."""
    width = TYPES[ptype]
    text = tok.value
    if "/" in text:
        raise error(f"an argument is a number or an address, not a prefix ({text})", tok)
    if tok.type == "IPV4":
        if ptype != "ipv4":
            raise error(f"expected a {ptype} number, not the address {text}", tok)
        parts = text.split(".")
        if any(len(p) > 3 or int(p) > 255 for p in parts):
            raise error(f"{text} is not an IPv4 address", tok)
        return int.from_bytes(bytes(int(p) for p in parts), "big")
    if tok.type not in ("INT", "HEX"):
        raise error(f"expected a {ptype}, not {text!r}", tok)
    digits = text[2:] if tok.type == "HEX" else text
    if len(digits.lstrip("0")) > 20:
        raise error(f"{text[:24]}... does not fit {width} bits", tok)
    value = int(digits, 16 if tok.type == "HEX" else 10)
    if value >= 1 << width:
        raise error(f"{text} does not fit a {ptype} ({width} bits)", tok)
    return value


def rank(v: Verdict) -> tuple:
    """Sort key of verdicts: the first one is taken (highest priority, then drop, then the
    smallest name and arguments)."""
    return (-v.priority, v.name != DROP, v.name, v.args)
