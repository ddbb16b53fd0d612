"""A structural check of generated P4 for machines without p4c: what it proves is listed here.

`problems(program, p4info)` returns readable findings, empty when the program passes:
brackets balance; every header type is a whole number of bytes (bmv2 needs that); no
declared identifier is a P4 keyword (but `state`, which the grammar accepts as a name and
the naming contract asks for); every `hdr.X` and `meta.X` names a declared instance or
field; every parser transition names a declared state; every table is declared once and
applied exactly once (p4c refuses a second apply); every action a table lists is declared;
and every P4Info table, match field and action exists in the program under the same name.
It does not type-check expressions, widths of assignments or extern calls: only p4c does
that, and no test here claims the program compiles without it.
"""

from __future__ import annotations

import re

from p4rt.names import KEYWORDS

ALLOWED_KEYWORD_NAMES = {"state"}  # meta.state and set_state(state): docs/pipeline-ir.md


def _strip(program: str) -> str:
    program = re.sub(r"/\*.*?\*/", " ", program, flags=re.S)
    program = re.sub(r"//[^\n]*", " ", program)
    return re.sub(r'"[^"\n]*"', '""', program)


def _block(text: str, start: int) -> str:
    """The text between the `{` at or after `start` and its matching `}`."""
    i = text.index("{", start)
    depth = 0
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i + 1: j]
    raise ValueError("unbalanced")


def _control(code: str, name: str) -> str:
    m = re.search(rf"\bcontrol\s+{name}\s*\(", code)
    return _block(code, m.end()) if m else ""


def problems(program: str, p4info=None) -> list[str]:
    out: list[str] = []
    code = _strip(program)
    for o, c in ("{}", "()", "[]"):
        if code.count(o) != code.count(c):
            out.append(f"unbalanced {o}{c}: {code.count(o)} vs {code.count(c)}")
    if out:
        return out
    # Types and instances.
    types: dict[str, dict[str, str]] = {}
    for m in re.finditer(r"\b(header|struct)\s+(\w+)\s*\{", code):
        decl = r"((?:@\w+\([^)]*\)\s*)*(?:bit|varbit)<\d+>|bool|\w+)\s+(\w+)\s*;"
        fields = {f: t for t, f in re.findall(decl, _block(code, m.end() - 1))}
        types[m.group(2)] = fields
        for f in fields:
            if f in KEYWORDS and f not in ALLOWED_KEYWORD_NAMES:
                out.append(f"{m.group(2)}.{f}: P4 keyword used as a field name")
        if m.group(1) == "header":
            bits = sum(int(w) for t in fields.values() for w in re.findall(r"^bit<(\d+)>", t))
            if bits % 8:
                out.append(f"header {m.group(2)}: {bits} bits is not a whole number of bytes")
    instances = types.get("headers_t", {})
    meta = {f for f in types.get("metadata_t", {})}
    for inst, field in re.findall(r"\bhdr\.(\w+)(?:\.(\w+))?", code):
        if inst not in instances:
            out.append(f"hdr.{inst}: no such header instance")
        elif field and field not in ("isValid", "setValid", "setInvalid") and \
                field not in types.get(instances[inst], {}):
            out.append(f"hdr.{inst}.{field}: no such field")
    for field in set(re.findall(r"\bmeta\.(\w+)", code)):
        if field not in meta:
            out.append(f"meta.{field}: no such metadata field")
    # Parser states.
    parser = re.search(r"\bparser\s+\w+\s*\(", code)
    if parser is None:
        out.append("no parser")
    else:
        body = _block(code, parser.end())
        states = re.findall(r"\bstate\s+(\w+)\s*\{", body)
        if len(set(states)) != len(states):
            out.append("a parser state is declared twice")
        targets = set(re.findall(r"\btransition\s+(\w+)\s*;", body))
        cases = "".join(re.findall(r"select\s*\([^{]*\)\s*\{([^}]*)\}", body))
        targets |= set(re.findall(r":\s*(\w+)\s*;", cases))
        for t in targets - set(states) - {"accept", "reject", "select"}:
            out.append(f"transition to undeclared state {t}")
        if "start" not in states:
            out.append("no start state")
    # Tables and actions, per control.
    controls = {}
    for name in ("CamusIngress", "CamusEgress"):
        body = _control(code, name)
        tables = re.findall(r"\btable\s+(\w+)\s*\{", body)
        actions = set(re.findall(r"\baction\s+(\w+)\s*\(", body)) | {"NoAction"}
        for t in tables:
            tb = _block(body, body.index(f"table {t} "))
            for a in re.findall(r"(?:@\w+\s+)?(\w+)\s*;", _block(tb, tb.index("actions"))):
                if a not in actions:
                    out.append(f"{name}.{t}: action {a} is not declared")
        for t in set(tables):
            if tables.count(t) > 1:
                out.append(f"{name}.{t}: declared twice")
        for t in tables:
            n = len(re.findall(rf"\b{t}\.apply\(\)", body))
            if n != 1:
                out.append(f"{name}.{t}: applied {n} times (p4c allows exactly one apply site)")
        for t in set(re.findall(r"\b(\w+)\.apply\(\)", body)) - set(tables):
            out.append(f"{name}: {t}.apply() names no table")
        controls[name] = (tables, actions)
    if p4info is not None:
        out += _p4info_problems(program, p4info, controls)
    return out


def _p4info_problems(program: str, p4info, controls) -> list[str]:
    out = []
    raw = re.sub(r"//[^\n]*", " ", program)
    for t in p4info.tables:
        ctl, _, name = t.preamble.name.partition(".")
        if name not in controls.get(ctl, ([], set()))[0]:
            out.append(f"P4Info table {t.preamble.name} is not in the program")
            continue
        body = _block(raw, re.search(rf"\bcontrol\s+{ctl}\s*\(", raw).end())
        table = _block(body, body.index(f"table {name} "))
        names = re.findall(r':\s*(\w+)\s*@name\("([^"]+)"\)', table)
        if [(n, k) for k, n in names] != [(f.name, _kind_name(f.match_type)) for f in t.match_fields]:
            out.append(f"{t.preamble.name}: key {names} differs from P4Info "
                       f"{[(f.name, _kind_name(f.match_type)) for f in t.match_fields]}")
    declared = {f"{c}.{a}" for c, (_, acts) in controls.items() for a in acts} | {"NoAction"}
    for a in p4info.actions:
        if a.preamble.name not in declared:
            out.append(f"P4Info action {a.preamble.name} is not in the program")
            continue
        if a.preamble.name == "NoAction":
            continue
        ctl, _, name = a.preamble.name.partition(".")
        m = re.search(rf"\baction\s+{name}\s*\(([^)]*)\)", _control(_strip(program), ctl))
        params = [tuple(p.split()) for p in m.group(1).split(",") if p.strip()]
        want = [(f"bit<{p.bitwidth}>", p.name) for p in a.params]
        if params != want:
            out.append(f"{a.preamble.name}: parameters {params} differ from P4Info {want}")
    return out


def _kind_name(match_type: int) -> str:
    from p4rt.protos import p4info_pb2

    return p4info_pb2.MatchField.MatchType.Name(match_type).lower()
