"""Typing a rule against its spec: fields resolved, operators checked, constants converted.

A comparison's field is resolved by name (`header.field`, or a bare `field` when unique) and
its operator checked against the field's match kind (exact and prefix fields take only == and
!=). Its constant becomes the field's value: a number must fit the field's width, a string or
bare word is ASCII padded with spaces to the field's bytes, an IPv4 address needs 32 bits, and
`value/len` is a prefix with its host bits cleared. Every error names the token's line and
column; a rule's ports are checked here too (1..MAX_PORT).

A side of a comparison may be declared state instead (`my_counter`, `avg(price)`,
`rate(m)`): it is resolved against the spec's state declarations and compared with a number
that the state can reach; update actions (`count(c)`, `meter(m)`, `avg(price)`) are resolved
here too (docs/stateful.md).
"""

from __future__ import annotations

from typing import NamedTuple

from compiler.actions import LIBRARY, MAX_PRIORITY, Signature, argument
from compiler.ast import MAX_PORT, OPS, Atom, Const, Filter, Not, Or, StateAtom, Verdict
from compiler.errors import RuleError, SpecError
from compiler.rule_syntax import Call, Token, VerdictCall
from compiler.spec import QueryField, Spec, StateVar


class Compare(NamedTuple):
    """A comparison with its field resolved; its constant may still be a slot of a shape."""

    field: QueryField
    op: str
    constant: Token
    op_token: Token | None = None


class StateCompare(NamedTuple):
    """A comparison of declared state; its constant may still be a slot of a shape."""

    state: StateVar
    op: str
    constant: Token
    op_token: Token | None = None


_FLIPPED = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}


class RuleTyper:
    """Turns tokens into type-checked atoms: resolves fields, converts and checks constants."""

    def __init__(self, spec: Spec, source: str | None):
        self.spec, self.source = spec, source
        self.fields: dict[str, QueryField | None] = {}

    def error(self, message: str, tok: Token) -> RuleError:
        return RuleError(message, tok.line, tok.column, self.source)

    def number(self, digits: str, base: int, limit: int, tok: Token) -> int:
        """`digits` as an integer; one far too long for `limit` is limit + 1, not converted
        (Python refuses to convert more than 4,300 decimal digits, and needs not try)."""
        if base == 16 and digits[:2].lower() == "0x":
            digits = digits[2:]
        if len(digits.lstrip("0")) > len(format(limit, "x" if base == 16 else "d")):
            return limit + 1
        return int(digits, base)

    def port(self, tok: Token) -> int:
        if tok.type == "INT" and tok.value.isdigit():
            port = self.number(tok.value, 10, MAX_PORT, tok)
        elif tok.type == "HEX" and "/" not in tok.value:
            port = self.number(tok.value, 16, MAX_PORT, tok)
        else:
            raise self.error(f"expected a port number, not {tok.value!r}", tok)
        if not 1 <= port <= MAX_PORT:
            raise self.error(f"port {_shown(tok.value)} is out of range (1..{MAX_PORT})", tok)
        return port

    def lookup(self, name: str) -> QueryField | None:
        if name not in self.fields:
            try:
                self.fields[name] = self.spec.resolve(name)
            except SpecError:
                self.fields[name] = None
        return self.fields[name]

    def field(self, tok: Token) -> QueryField:
        if tok.type != "NAME":
            raise self.error(f"expected a field name, not {tok.value!r}", tok)
        q = self.lookup(tok.value)
        if q is None:
            try:
                self.spec.resolve(tok.value)
            except SpecError as exc:
                raise self.error(exc.message, tok) from None
        return q

    def compare(self, left: Token | Call, op_token: Token, right: Token | Call
                ) -> Compare | StateCompare:
        op = "==" if op_token.value == "=" else op_token.value
        if self.is_state(left) or self.is_state(right) and not self.is_field(left):
            if self.is_state(left):
                return StateCompare(self.state(left), op, self.state_constant(right), op_token)
            return StateCompare(self.state(right), _FLIPPED.get(op, op),
                                self.state_constant(left), op_token)
        for side in (left, right):
            if isinstance(side, Call):
                raise self.error(self.unknown_call(side), side.name)
        if self.is_state(right):
            raise self.error("comparing a field with state is not supported; compare each "
                             "with a number", right)
        # `price > 50` is the usual order; `50 < price` is accepted and flipped.
        if left.type == "NAME" and (self.lookup(left.value) or "." in left.value) \
                or right.type != "NAME" or not self.lookup(right.value):
            return Compare(self.field(left), op, right, op_token)
        return Compare(self.field(right), _FLIPPED.get(op, op), left, op_token)

    def member(self, subject: Token | Call, values: list[Token | Call], negated: bool
               ) -> Filter:
        if self.is_state(subject):
            state = self.state(subject)
            atoms = tuple(StateCompare(state, "==", self.state_constant(v)) for v in values)
        else:
            field = self.field(subject)
            for v in values:
                if isinstance(v, Call):
                    raise self.error(f"expected a constant, not {v.name.value}(...)", v.name)
            atoms = tuple(Compare(field, "==", v) for v in values)
        if not atoms:
            return Const(negated)
        any_of = atoms[0] if len(atoms) == 1 else Or(atoms)
        return Not(any_of) if negated else any_of

    def is_state(self, tok: Token | Call) -> bool:
        """Whether `tok` reads state: a call (`avg(f)`, `rate(m)`) or a counter's or meter's
        name (state names never clash with fields: the spec refuses that)."""
        return isinstance(tok, Call) or tok.type == "NAME" and tok.value in self.spec.state_vars

    def is_field(self, tok: Token | Call) -> bool:
        return isinstance(tok, Token) and tok.type == "NAME" and (
            self.lookup(tok.value) is not None or "." in tok.value)

    def state(self, tok: Token | Call) -> StateVar:
        """The state a comparison reads: `counter`, `avg(field)` or `rate(meter)`."""
        if isinstance(tok, Token):
            var = self.spec.state_vars[tok.value]
            if var.kind == "meter":
                raise self.error(f"'{var.name}' is a meter: compare its rate, "
                                 f"rate({var.name}) {'>'} N (per second)", tok)
            return var
        name, arg = tok
        if name.value == "avg":
            return self.averaged(arg)
        if name.value == "rate":
            var = self.spec.state_vars.get(arg.value)
            if var is not None and var.kind == "meter":
                return var
            if var is not None:
                raise self.error(f"'{arg.value}' is a {var.kind}, not a meter: compare it "
                                 f"as {var.read_as}", arg)
            raise self.error(f"unknown meter '{arg.value}' (meters: "
                             f"{self.known('meter')})", arg)
        raise self.error(self.unknown_call(tok), name)

    def unknown_call(self, call: Call) -> str:
        if call.name.value in ("count", "meter"):
            return (f"{call.name.value}(...) is an update action, written after ':'; a "
                    f"counter is read by its name, a meter as rate(NAME)")
        return (f"unknown function '{call.name.value}': state is read as a counter's name, "
                f"avg(field) or rate(meter)")

    def known(self, kind: str) -> str:
        names = [v.name for v in self.spec.state_vars.values() if v.kind == kind]
        return ", ".join(names) or "none declared"

    def averaged(self, arg: Token) -> StateVar:
        """The average of field `arg` (`h.f`, or `f` when unique among averaged fields)."""
        averages = [v for v in self.spec.state_vars.values() if v.kind == "average"]
        if "." in arg.value:
            matches = [v for v in averages if v.field == arg.value]
        else:
            matches = [v for v in averages if v.field.split(".", 1)[1] == arg.value]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            options = ", ".join(v.field for v in matches)
            raise self.error(f"averaged field '{arg.value}' is ambiguous: write one of "
                             f"{options}", arg)
        declared = [f.qname for h in self.spec.headers for f in h.fields
                    if arg.value in (f.qname, f.name)]
        if declared:
            raise self.error(f"field '{declared[0]}' is not declared averageable (add "
                             f"@query_average({declared[0]}, WINDOW_US, SLOTS) to the spec)",
                             arg)
        raise self.error(f"unknown field '{arg.value}' in avg(...) (averaged fields: "
                         f"{', '.join(v.field for v in averages) or 'none declared'})", arg)

    def state_constant(self, tok: Token | Call) -> Token:
        """The other side of a state comparison: a constant, checked when instantiated."""
        if isinstance(tok, Call) or tok.type == "NAME" and (
                self.is_field(tok) or tok.value in self.spec.state_vars):
            where = tok.name if isinstance(tok, Call) else tok
            raise self.error("comparing state with a field or other state is not supported; "
                             "compare it with a number", where)
        return tok

    def state_atom(self, state: StateVar, op: str, tok: Token, op_tok: Token | None = None
                   ) -> StateAtom:
        """`state op constant`, the constant a number the state can reach."""
        assert op in OPS, op
        text = tok.value
        if tok.type not in ("INT", "HEX") or "/" in text:
            what = {"STRING": "a string", "NAME": "a word", "IPV4": "an address"}.get(
                tok.type, "a prefix")
            raise self.error(f"{state.read_as} is compared with a number, not {what} "
                             f"({text})", tok)
        limit = state.max_constant
        value = self.number(text, 16 if tok.type == "HEX" else 10, limit, tok)
        if value > limit:
            raise self.error(f"constant {_shown(text)} is out of range for {state.read_as} "
                             f"(at most {limit})", tok)
        return StateAtom(state, op, value, tok.line, tok.column)

    def update(self, call: Call) -> StateVar:
        """The state an update action names: count(counter), meter(meter), avg(field)."""
        verb, arg = call
        if verb.value == "avg":
            return self.averaged(arg)
        want = {"count": "counter", "meter": "meter"}[verb.value]
        var = self.spec.state_vars.get(arg.value)
        if var is None or var.kind == "average":
            raise self.error(f"unknown {want} '{arg.value}' ({want}s: {self.known(want)})", arg)
        if var.kind != want:
            raise self.error(f"{verb.value}(...) updates a {want}; '{arg.value}' is a "
                             f"{var.kind}: write {var.action}", arg)
        return var

    def verdict_name(self, call: VerdictCall) -> Signature:
        """The declared action a verdict names (refused: one the spec does not declare, the
        wrong number of arguments); checked once per rule shape."""
        name = call.name
        sig = self.spec.actions.get(name.value)
        if sig is None:
            known = ", ".join(sorted(self.spec.actions)) or "none"
            hint = f" (add @action({name.value}) to the spec)" if name.value in LIBRARY else ""
            raise self.error(f"unknown action '{name.value}' (fwd, and the actions this spec "
                             f"declares: {known}){hint}", name)
        if len(call.args) != len(sig.params):
            raise self.error(f"{name.value} takes {len(sig.params)} argument"
                             f"{'' if len(sig.params) == 1 else 's'}: {sig.usage()}", name)
        return sig

    def verdict(self, call: VerdictCall, args: list[Token], priority: Token | None) -> Verdict:
        """The typed verdict of `call` with its argument (and priority) tokens instantiated."""
        sig = self.verdict_name(call)
        values = tuple(argument(t, tok, self.error) for (_, t), tok in zip(sig.params, args))
        level = 0
        if priority is not None:
            if priority.type not in ("INT", "HEX") or "/" in priority.value:
                raise self.error(f"a priority is a number, not {priority.value!r}", priority)
            level = self.number(priority.value, 16 if priority.type == "HEX" else 10,
                                MAX_PRIORITY, priority)
            if level > MAX_PRIORITY:
                raise self.error(f"priority {_shown(priority.value)} is out of range "
                                 f"(0..{MAX_PRIORITY})", priority)
        return Verdict(sig.name, values, level)

    def atom(self, field: QueryField, op: str, tok: Token, op_tok: Token | None = None) -> Atom:
        assert op in OPS, op
        op_tok = op_tok or tok
        if field.kind == "exact" and op not in ("==", "!="):
            raise self.error(f"'{op}' on exact-match field '{field.qname}': only == and != are "
                             f"allowed (it is declared query_field_exact)", op_tok)
        if field.kind == "lpm" and op not in ("==", "!="):
            raise self.error(f"'{op}' on prefix-match field '{field.qname}': only == and != "
                             f"are allowed (it is declared query_field_lpm)", op_tok)
        value, prefix_len = self.constant(field, tok)
        if prefix_len is not None:
            if op not in ("==", "!="):
                raise self.error(f"a prefix can only be compared with == or !=, not '{op}'",
                                 op_tok)
            if field.kind == "exact" and prefix_len != field.width:
                raise self.error(f"prefix match on exact-match field '{field.qname}'", tok)
            if prefix_len == field.width:
                prefix_len = None
        return Atom(field, op, value, prefix_len, tok.line, tok.column)

    def constant(self, field: QueryField, tok: Token) -> tuple[int, int | None]:
        text = tok.value
        if tok.type in ("INT", "HEX"):
            digits, _, plen = text.partition("/")
            value = self.number(digits, 16 if tok.type == "HEX" else 10, field.max_value, tok)
            if value > field.max_value:
                raise self.error(f"constant {_shown(digits)} does not fit in {field.width}-bit "
                                 f"field '{field.qname}' (max {field.max_value})", tok)
            return self.prefix(field, value, plen, tok)
        if tok.type == "IPV4":
            addr, _, plen = text.partition("/")
            octets = [int(o) for o in addr.split(".")]
            if any(o > 255 for o in octets):
                raise self.error(f"{addr} is not an IPv4 address", tok)
            if field.width != 32:
                raise self.error(f"an IPv4 address needs a 32-bit field; '{field.qname}' has "
                                 f"{field.width} bits", tok)
            return self.prefix(field, int.from_bytes(bytes(octets), "big"), plen, tok)
        if tok.type in ("STRING", "NAME"):
            if tok.type == "NAME" and self.lookup(text) is not None:
                raise self.error(f"'{text}' is a field: comparing two fields is not supported "
                                 f"(write \"{text}\" to mean the text)", tok)
            if tok.type == "NAME" and "." in text:
                raise self.error(f"unknown field '{text}' (a constant with a '.' must be quoted)",
                                 tok)
            chars = text[1:-1] if tok.type == "STRING" else text
            if field.dns_name:
                try:
                    return field.encode(chars), None
                except ValueError as exc:
                    raise self.error(str(exc), tok) from None
            if field.width % 8:
                raise self.error(f"a string needs a field of whole bytes; '{field.qname}' has "
                                 f"{field.width} bits", tok)
            try:
                raw = chars.encode("ascii")
            except UnicodeEncodeError:
                raise self.error(f"string {text} is not ASCII", tok) from None
            size = field.width // 8
            if len(raw) > size:
                raise self.error(f"string {text} is {len(raw)} characters; field "
                                 f"'{field.qname}' holds {size}", tok)
            return int.from_bytes(raw.ljust(size, b" "), "big"), None
        raise self.error(f"expected a constant, not {text!r}", tok)

    def prefix(self, field: QueryField, value: int, plen: str, tok: Token) -> tuple[int, int | None]:
        """`value/plen`: the prefix's network value (host bits cleared) and its length."""
        if not plen:
            return value, None
        length = self.number(plen, 10, field.width, tok)
        if length > field.width:
            raise self.error(f"prefix length /{length} is longer than the {field.width}-bit "
                             f"field '{field.qname}'", tok)
        mask = ((1 << length) - 1) << (field.width - length)
        return value & mask, length


def _shown(digits: str) -> str:
    """A constant as an error message quotes it: whole, or its ends if it is very long."""
    return digits if len(digits) <= 40 else f"{digits[:16]}...{digits[-8:]} ({len(digits)} digits)"
