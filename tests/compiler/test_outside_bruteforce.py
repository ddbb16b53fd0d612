"""The outside judge (tests/compiler/outside.py) run as tests: random and adversarial rule
sets on the product's specs and on small custom ones, checked through `camus compile`,
`camus eval` and `camus switch run` (native and python) against an evaluator that shares no
code with camus.

Most examples run the CLI's entry point in this process (`camus.cli.main`, the code the
`camus` command runs); a bounded few run real `python -m camus` subprocesses. Larger runs by
hand: `python3 -m tests.compiler.outside --runs 300 [--seed N] [--subprocess] [--orders]`.
"""

from __future__ import annotations

import itertools
import json
import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from . import outside as o


def _spec(fields: list[tuple[str, int, str, bool]], framing: str = "single", udp_port: int = 4000) -> o.App:
    """A custom App from (name, width, kind, ascii), all in header m, in order."""
    lines, anns, fs, off = [], [], [], 0
    for name, width, kind, asc in fields:
        lines.append(f"    bit<{width}> {name};")
        if kind:
            ann = {"range": "query_field", "exact": "query_field_exact", "lpm": "query_field_lpm"}[kind]
            anns.append(f"@pragma {ann}(m.{name})")
            if asc:
                anns.append(f"@pragma ascii(m.{name})")
            fs.append(o.F(f"m.{name}", width, kind, asc, off))
        off += width
    head = ""
    if framing == "moldudp64":
        head = "header mold { bit<80> session; bit<64> sequence_number; bit<16> message_count; }\n"
        anns.append("@pragma framing(moldudp64, mold)")
    text = head + "header m {\n" + "\n".join(lines) + "\n}\n" + "\n".join(anns) + f"\n@pragma udp_port({udp_port})\n"
    return o.App("custom", text, fs, off // 8, udp_port, framing)


WIDTHS_SPEC = _spec([("a", 8, "range", False), ("b", 16, "range", False), ("c", 32, "range", False),
                     ("d", 64, "range", False)])


def _judge(tmp_path: Path, app: o.App, rules, text: str, messages, *, frames: bool = True,
           orders: bool = False, subprocess_mode: bool = False, seed: int = 0, static: bool = False) -> None:
    """`rules` is [(AST, ports)] and `text` its spelling; messages are full field dicts."""
    rng = random.Random(seed)
    cases = []
    if frames:
        for m in messages:
            blk = o.message_bytes(app, m, rng)
            sel = o.selected(app, blk, rules, m)
            cases.append(o.single_case(app, blk, sel) if app.framing == "single"
                         else o.mold_case(app, b"0123456789", 7, [blk], [sel]))
    o.check(app, rules, text, messages, cases, tmp_path / "run", rng, subprocess_mode, static=static)
    if orders:
        for n, perm in enumerate(itertools.permutations([f.qname for f in app.fields])):
            o.check(app, rules, text, messages, [], tmp_path / f"order{n}", rng, subprocess_mode, list(perm))


def _values(f: o.F) -> list[int]:
    top = f.top
    vals = {0, 1, 2, top - 1, top, top // 2, top // 2 + 1}
    if f.width == 64:
        vals |= {1 << 63, (1 << 63) - 1, (1 << 64) - 1}
    return sorted(v for v in vals if 0 <= v <= top)


def _grid(app: o.App) -> list[dict[str, int]]:
    """Every field at every boundary value, the others at a rotating boundary value."""
    out = []
    per = {f.qname: _values(f) for f in app.fields}
    for f in app.fields:
        for i, v in enumerate(per[f.qname]):
            m = {g.qname: per[g.qname][(i + k) % len(per[g.qname])] for k, g in enumerate(app.fields)}
            m[f.qname] = v
            out.append(m)
    return out


# ---------------------------------------------------------------- random campaigns


@pytest.mark.parametrize("seed", range(24))
def test_random_campaign_in_process(seed):
    o.campaign(seed * 7919 + 11, subprocess_mode=False, n_messages=40, n_frames=12)


@pytest.mark.parametrize("app", ["itch", "int", "kafka", "custom"])
def test_random_campaign_subprocess(app):
    # Real `python -m camus` processes: compile, eval, switch run native and python.
    o.campaign(hash(app) % 1000 if app != "custom" else 4242, subprocess_mode=True, app_name=app,
               n_rules=6, n_messages=40, n_frames=12)


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.integers(0, 2**32))
def test_random_campaign_hypothesis_seeds(seed):
    o.campaign(seed, subprocess_mode=False, n_messages=30, n_frames=8)


@pytest.mark.parametrize("seed", range(4))
def test_every_field_order_on_small_specs(seed):
    rng = random.Random(seed)
    app = o.custom_app(rng)
    while len(app.fields) < 2 or len(app.fields) > 4:
        app = o.custom_app(rng)
    gen = o.RuleGen(app, rng)
    rules, text = gen.rules(rng.randint(2, 8))
    msgs = [gen.message() for _ in range(40)]
    with tempfile.TemporaryDirectory() as tmp:
        _judge(Path(tmp), app, rules, text, msgs, frames=False, orders=True, seed=seed)


# ---------------------------------------------------------------- adversarial rule sets


def _atom(f, op, v, plen=None):
    return ("atom", f, op, v, plen)


def test_boundary_values_of_every_width(tmp_path):
    app = WIDTHS_SPEC
    rules, lines = [], []
    port = 1
    for f in app.fields:
        for v in _values(f):
            for op in ("==", "!=", "<", "<=", ">", ">="):
                rules.append((_atom(f, op, v), [port]))
                text = hex(v) if port % 3 == 0 else str(v)
                lines.append(f"{f.qname} {op} {text} : fwd({port})")
                port = port % 12 + 1 if port != 12 else 511
    _judge(tmp_path, app, rules, "\n".join(lines), _grid(app))


def test_tautologies_contradictions_and_empty_sets(tmp_path):
    app = WIDTHS_SPEC
    a, b, c, d = app.fields
    rules = [
        (("or", [_atom(c, ">", 5), _atom(c, "<=", 5)]), [1]),
        (("and", [_atom(c, ">", 5), _atom(c, "<", 5)]), [2]),
        (("in", a, [], True), [3]),
        (("in", a, [], False), [4]),
        (("not", ("in", b, [], False)), [5]),
        (_atom(d, ">", (1 << 64) - 1), [6]),
        (_atom(d, "<", 0), [7]),
        (_atom(d, ">=", 0), [8]),
        (_atom(a, "<=", 255), [9]),
        (("and", [("in", a, [], True), _atom(b, "==", 7)]), [10]),
        (("const", True), [11]),
        (("const", False), [12]),
        (("not", ("const", False)), [13]),
        (("or", [_atom(d, "!=", 1 << 63), _atom(d, "==", 1 << 63)]), [14]),
        (("and", [_atom(a, "!=", 0), ("not", _atom(a, "!=", 0))]), [15]),
    ]
    text = """m.c > 5 or m.c <= 5 : fwd(1)
m.c > 5 and m.c < 5 : fwd(2)
m.a not in {} : fwd(3)
m.a in {} : fwd(4)
not m.b in {} : fwd(5)
m.d > 18446744073709551615 : fwd(6)
m.d < 0 : fwd(7)
m.d >= 0 : fwd(8)
a <= 0xff : fwd(9)
a not in {} and b == 7 : fwd(10)
true : fwd(11)
false : fwd(12)
not false : fwd(13)
d != 9223372036854775808 or d == 0x8000000000000000 : fwd(14)
a != 0 and not a != 0 : fwd(15)
"""
    _judge(tmp_path, app, rules, text, _grid(app))


def test_only_tautologies_and_only_contradictions(tmp_path):
    app = WIDTHS_SPEC
    c = app.fields[2]
    for n, (rules, text) in enumerate([
        ([(("or", [_atom(c, ">", 5), _atom(c, "<=", 5)]), [1, 2])], "c > 5 or c <= 5 : fwd(1, 2)"),
        ([(("const", True), [511])], "true : fwd(511)"),
        ([(_atom(c, "<", 0), [1])], "c < 0 : fwd(1)"),
    ]):
        _judge(tmp_path / str(n), app, rules, text, _grid(app))


def test_zero_and_one_rule_programs(tmp_path):
    app = WIDTHS_SPEC
    for n, text in enumerate(["", "\n\n", "# nothing but a comment ☃\r\n", "  ;  ; ", "\t\n"]):
        _judge(tmp_path / f"z{n}", app, [], text, _grid(app))
    d = app.fields[3]
    _judge(tmp_path / "one", app, [(_atom(d, ">=", 1 << 63), [7])], "d >= 0x8000000000000000 : fwd(7)",
           _grid(app))


def test_duplicates_same_filter_other_ports_and_many_ports(tmp_path):
    app = WIDTHS_SPEC
    a, b, c, d = app.fields
    everything = list(range(1, 512))
    rules = [
        (_atom(a, "==", 1), [1]), (_atom(a, "==", 1), [1]), (_atom(a, "==", 1), [2]),
        (_atom(a, "==", 1), everything), (_atom(b, ">", 3), list(range(1, 512, 2))),
        (_atom(b, ">", 3), list(range(2, 512, 2))), (_atom(c, "<", 9), [511]),
        (_atom(c, "<", 9), [511, 1, 1]),
    ]
    text = "\n".join([
        "a == 1 : fwd(1)", "a == 1 : fwd(1)", "a == 1 : fwd(2)",
        "a == 1 : fwd(" + ", ".join(map(str, everything)) + ")",
        "b > 3 : fwd(" + ",".join(map(str, range(1, 512, 2))) + ")",
        "b > 3 : fwd(" + ",".join(map(str, range(2, 512, 2))) + ")",
        "c < 9 : fwd(511)", "c < 9 : fwd(511, 1, 1)"])
    _judge(tmp_path, app, rules, text, _grid(app))


STRINGS = _spec([("sym", 64, "exact", True), ("side", 8, "exact", True), ("tag", 32, "range", True),
                 ("n", 16, "range", False)], framing="moldudp64", udp_port=1234)


def test_strings(tmp_path):
    app = STRINGS
    sym, side, tag, _ = app.fields

    def s(f, text):
        return o._ascii_int(f, text)

    rules = [
        (_atom(sym, "==", s(sym, "")), [1]),
        (_atom(sym, "==", s(sym, "ABCDEFGH")), [2]),
        (_atom(sym, "==", s(sym, "A B")), [3]),
        (_atom(sym, "==", s(sym, "goog")), [4]),
        (_atom(sym, "==", s(sym, "GOOG")), [5]),
        (_atom(sym, "==", s(sym, "GOOG  ")), [6]),
        (_atom(sym, "!=", s(sym, " GOOG")), [7]),
        (_atom(side, "==", s(side, "B")), [8]),
        (_atom(side, "==", s(side, "")), [9]),
        (_atom(side, "==", s(side, " ")), [10]),
        (_atom(tag, "<", s(tag, "M")), [11]),
        (_atom(tag, ">=", s(tag, "a b")), [12]),
        (("in", sym, [s(sym, "X;Y"), s(sym, "#hash#"), s(sym, "it's")], False), [13]),
        (_atom(sym, "==", s(sym, "GOOG")), [14]),
    ]
    text = "\r\n".join([
        'sym == "" : fwd(1)', "sym == 'ABCDEFGH' : fwd(2)", 'sym == "A B" : fwd(3)',
        "sym == goog : fwd(4)", 'sym == "GOOG" : fwd(5)', 'sym == "GOOG  " : fwd(6)',
        'sym != " GOOG" : fwd(7)', "side == B : fwd(8)", "side == '' : fwd(9)", 'side == " " : fwd(10)',
        'tag < "M" : fwd(11)', "tag >= 'a b' : fwd(12)  # a comment; with \"quotes\"",
        "sym in {\"X;Y\", '#hash#', \"it's\"} : fwd(13)", '"GOOG" == sym : fwd(14)']) + "\r\n"
    texts = ["", "ABCDEFGH", "A B", "goog", "GOOG", " GOOG", "X;Y", "#hash#", "it's", "B", " ", "M", "a b",
             "L", "a", "a c", "ZZZZZZZZ"]
    msgs = []
    for i, t in enumerate(texts):
        for j in range(3):
            msgs.append({sym.qname: s(sym, t[:8]), side.qname: s(side, texts[(i + j) % len(texts)][:1]),
                         tag.qname: s(tag, texts[(i + 2 * j) % len(texts)][:4]), "m.n": i})
    _judge(tmp_path, app, rules, text, msgs)


LPM = _spec([("dst", 32, "lpm", False), ("k", 16, "lpm", False), ("w", 64, "lpm", False)])


def test_prefixes(tmp_path):
    app = LPM
    dst, k, w = app.fields
    ip = lambda t: sum(int(x) << s for x, s in zip(t.split("."), (24, 16, 8, 0)))  # noqa: E731
    rules = [
        (_atom(dst, "==", 0, 0), [1]), (_atom(dst, "==", ip("10.0.0.0"), 8), [2]),
        (_atom(dst, "==", ip("10.1.0.0"), 16), [3]), (_atom(dst, "==", ip("10.1.2.3"), 32), [4]),
        (_atom(dst, "!=", ip("10.1.2.0"), 24), [5]), (_atom(dst, "==", ip("10.1.2.3"), None), [6]),
        (_atom(dst, "!=", ip("0.0.0.0"), 0), [7]), (_atom(k, "==", 0x8000, 1), [8]),
        (_atom(w, "==", 1 << 63, 1), [9]), (_atom(w, "==", (1 << 64) - 1, 64), [10]),
        (_atom(w, "!=", 0, 63), [11]), (_atom(dst, "==", ip("10.255.255.255"), 8), [12]),
    ]
    text = """dst == 0.0.0.0/0 : fwd(1)
dst == 10.0.0.0/8 : fwd(2)
dst == 10.1.0.0/16 : fwd(3)
dst == 10.1.2.3/32 : fwd(4)
dst != 10.1.2.0/24 : fwd(5)
dst == 10.1.2.3 : fwd(6)
dst != 0.0.0.0/0 : fwd(7)
k == 0x8000/1 : fwd(8)
w == 9223372036854775808/1 : fwd(9)
w == 0xFFFFFFFFFFFFFFFF/64 : fwd(10)
w != 0/63 : fwd(11)
dst == 10.255.255.255/8 : fwd(12)
"""
    msgs = []
    for t in ("0.0.0.0", "10.0.0.0", "10.1.2.3", "10.1.2.4", "10.1.3.3", "10.2.0.0", "9.255.255.255",
              "11.0.0.0", "255.255.255.255", "10.255.255.255"):
        for kv, wv in ((0, 0), (0x7FFF, 1), (0x8000, (1 << 63)), (0xFFFF, (1 << 64) - 1)):
            msgs.append({"m.dst": ip(t), "m.k": kv, "m.w": wv})
    _judge(tmp_path, app, rules, text, msgs, orders=True)


def test_deep_nesting(tmp_path):
    app = WIDTHS_SPEC
    c = app.fields[2]
    rules, lines = [], []
    for depth in (1, 10, 100, 400, 1000):
        rules.append((_atom(c, ">", depth), [depth % 511]))
        lines.append("(" * depth + f"m.c > {depth}" + ")" * depth + f" : fwd({depth % 511})")
    node, text = _atom(c, "<", 3), "m.c < 3"
    for i in range(300):
        node = ("not", node)
        text = f"not ({text})"
    rules.append((node, [77]))
    lines.append(text + " : fwd(77)")
    rules.append((("not", _atom(c, "==", 4)), [78]))
    lines.append("not " * 999 + "c == 4 : fwd(78)")
    node, text = _atom(c, ">=", 0), "c >= 0"
    for i in range(200):
        node = ("and" if i % 2 else "or", [node, _atom(c, "!=", i)])
        text = f"({text} {'and' if i % 2 else 'or'} c != {i})"
    rules.append((node, [79]))
    lines.append(text + " : fwd(79)")
    msgs = [{"m.a": 0, "m.b": 0, "m.c": v, "m.d": 0} for v in (0, 2, 3, 4, 5, 11, 101, 401, 1001, 1 << 31)]
    _judge(tmp_path, app, rules, "\n".join(lines), msgs, frames=False)


def test_separators_comments_line_endings(tmp_path):
    app = WIDTHS_SPEC
    a, b, c, d = app.fields
    rules = [(_atom(a, "==", 1), [1]), (_atom(b, "==", 2), [2]), (_atom(c, "==", 3), [3]),
             (_atom(d, "==", 4), [4]), (_atom(a, "==", 5), [5])]
    text = ("\ufeff# ünïcødé ☃ comment; not a rule\r\n"
            "\ta == 1 : fwd(1) ; b == 2:fwd(2);\r\n"
            "\r\n"
            "   c\t==\t3\t:\tfwd(3)   # trailing; comment\r\n"
            "d = 4 : fwd(0x4);;a==5:fwd(5)\r\n"
            "# last line without newline")
    msgs = [{"m.a": x, "m.b": x, "m.c": x, "m.d": x} for x in range(7)]
    _judge(tmp_path, app, rules, text, msgs)


def test_static_pipeline(tmp_path):
    rng = random.Random(5)
    app = o.PRODUCT_APPS["kafka"]()
    gen = o.RuleGen(app, rng)
    rules, text = gen.rules(10)
    _judge(tmp_path, app, rules, text, [gen.message() for _ in range(60)], static=True)


def test_type_field_that_is_also_a_query_field(tmp_path):
    """`camus eval` checks the message type field and, when rules test it, uses its value."""
    text = ("header m { bit<8> kind; bit<16> n; }\n@pragma message_type(m.kind, 1, 2)\n"
            "@pragma query_field(m.kind)\n@pragma query_field(m.n)\n")
    kind = o.F("m.kind", 8, "range", False, 0)
    n = o.F("m.n", 16, "range", False, 8)
    app = o.App("custom", text, [kind, n], 3, 1234, "single", (0, 8), (1, 2), "m.kind")
    rules = [(_atom(kind, "==", 2), [1]), (_atom(kind, "<", 2), [2]), (_atom(n, ">", 5), [3])]
    msgs = [{"m.kind": k, "m.n": v} for k in (0, 1, 2, 3) for v in (0, 6)]
    _judge(tmp_path, app, rules, "kind == 2 : fwd(1)\nkind < 2 : fwd(2)\nn > 5 : fwd(3)\n", msgs)


# ---------------------------------------------------------------- packets


@pytest.mark.parametrize("name", ["itch", "int", "kafka", "custom"])
def test_bad_and_edge_frames(tmp_path, name):
    rng = random.Random(len(name))
    app = o.PRODUCT_APPS[name]() if name != "custom" else _spec(
        [("x", 4, "range", False), ("y", 64, "range", False), ("z", 4, "exact", False)], framing="moldudp64")
    gen = o.RuleGen(app, rng)
    rules, text = gen.rules(5)
    rules.append((("const", True), [9]))
    text += "\ntrue : fwd(9)\n"
    cases = o.bad_cases(app, rules, gen, rng) + o.cases_for(app, rules, gen, rng, 20)
    o.check(app, rules, text, [gen.message() for _ in range(10)], cases, tmp_path, rng, False)


# ---------------------------------------------------------------- bad inputs


BAD = [
    ("unknown field", "foo == 1 : fwd(1)", 1, 1, "unknown field"),
    ("unknown qualified field", "m.foo == 1 : fwd(1)", 1, 1, "unknown field"),
    ("not a query field", "m.pad == 1 : fwd(1)", 1, 1, "not a query field"),
    ("string too long", 'sym == "ABCDEFGHI" : fwd(1)', 1, 8, "holds 8"),
    ("constant too wide", "a == 256 : fwd(1)", 1, 6, "does not fit"),
    ("hex constant too wide", "d == 0x10000000000000000 : fwd(1)", 1, 6, "does not fit"),
    ("range op on exact field", "sym > 5 : fwd(1)", 1, 5, "exact-match"),
    ("range op on lpm field", "dst < 5 : fwd(1)", 1, 5, "prefix-match"),
    ("port 0", "a == 1 : fwd(0)", 1, 14, "out of range"),
    ("port 512", "a == 1 : fwd(1, 512)", 1, 17, "out of range"),
    ("missing action", "a == 1", 1, 7, "expected ':'"),
    ("missing action after colon", "a == 1 :", 1, 9, "expected an action"),
    ("empty action", "a == 1 : fwd()", 1, 14, "port number"),
    ("other action", "a == 1 : drop()", 1, 10, "fwd"),
    ("trailing junk", "a == 1 : fwd(1) junk", 1, 17, "end of the rule"),
    ("junk before the colon", "a == 1 2 : fwd(1)", 1, 8, "':'"),
    ("unbalanced (", "(a == 1 : fwd(1)", 1, 9, "')'"),
    ("unbalanced )", "a == 1) : fwd(1)", 1, 7, "':'"),
    ("unclosed set", "a in {1, 2 : fwd(1)", 1, 12, "'}'"),
    ("unterminated string", 'sym == "GOOG : fwd(1)', 1, 8, "unterminated"),
    ("unterminated string, then a rule", "sym == 'GOOG : fwd(1)\na == 1 : fwd(2)", 1, 8, "unterminated"),
    ("error on a later line", "a == 1 : fwd(1)\r\n\r\n  b == 70000 : fwd(2)", 3, 8, "does not fit"),
    ("error after ;", "a == 1 : fwd(1); b = 70000 : fwd(2)", 1, 22, "does not fit"),
    ("NUL byte", "a == 1 : fwd(1)\na == \x00 : fwd(1)", 2, 6, "unexpected character"),
    ("non-ASCII string", 'sym == "é" : fwd(1)', 1, 8, "not ASCII"),
    ("stray character", "a == 1 & b == 2 : fwd(1)", 1, 8, "unexpected character"),
    ("negative constant", "a > -1 : fwd(1)", 1, 5, "unexpected character"),
    ("prefix too long", "dst == 10.0.0.0/33 : fwd(1)", 1, 8, "prefix length"),
    ("bad IPv4", "dst == 10.0.0.256 : fwd(1)", 1, 8, "not an IPv4"),
    ("prefix with <", "c < 5/3 : fwd(1)", 1, 3, "prefix"),
    ("comparison without constant", "a : fwd(1)", 1, 3, "comparison"),
    ("two fields", "a == b : fwd(1)", 1, 6, "comparing two fields"),
    ("two fields, qualified", "m.a < m.c : fwd(1)", 1, 7, "comparing two fields"),
    ("too deep", "(" * 1001 + "a == 1" + ")" * 1001 + " : fwd(1)", 1, 1001, "nested"),
    ("keyword as constant", "a == and : fwd(1)", 1, 6, "constant"),
    ("empty parentheses", "() : fwd(1)", 1, 2, "a field or a constant"),
    ("only a colon", ": fwd(1)", 1, 1, "a field or a constant"),
]

BAD_SPEC = """header m { bit<8> a; bit<16> b; bit<32> c; bit<64> d; bit<64> sym; bit<32> dst; bit<8> pad; }
@pragma query_field(m.a)
@pragma query_field(m.b)
@pragma query_field(m.c)
@pragma query_field(m.d)
@pragma query_field_exact(m.sym)
@pragma ascii(m.sym)
@pragma query_field_lpm(m.dst)
"""


@pytest.mark.parametrize("what,text,line,column,words", BAD, ids=[b[0] for b in BAD])
def test_bad_rules_give_a_positioned_error(tmp_path, what, text, line, column, words):
    spec, rules = tmp_path / "s.p4", tmp_path / "r.rules"
    spec.write_text(BAD_SPEC)
    rules.write_bytes(text.encode())
    rc, out, err = o.camus(["compile", str(spec), str(rules), "--out", str(tmp_path / "o")], subprocess_mode=False)
    assert rc == 2, (rc, err)
    assert "Traceback" not in err, err
    assert f"{rules}:{line}:{column}: " in err, err
    assert words in err, err


def test_bad_inputs_through_a_real_process(tmp_path):
    spec, rules = tmp_path / "s.p4", tmp_path / "r.rules"
    spec.write_text(BAD_SPEC)
    for n, text in enumerate([b"a == 1 : fwd(512)", b"a == 1 : fwd(1) # \xff\xfe", b"a > \x00 : fwd(1)"]):
        rules.write_bytes(text)
        rc, out, err = o.camus(["compile", str(spec), str(rules), "--out", str(tmp_path / "o")])
        assert rc == 2 and "Traceback" not in err and f"{rules}:1:" in err, (text, err)


def test_empty_rules_file_is_zero_rules(tmp_path):
    spec, rules = tmp_path / "s.p4", tmp_path / "r.rules"
    spec.write_text(BAD_SPEC)
    rules.write_text("")
    rc, out, err = o.camus(["compile", str(spec), str(rules), "--out", str(tmp_path / "o")], subprocess_mode=False)
    assert rc == 0, err
    assert json.loads((tmp_path / "o" / "stats.json").read_text())["rules"] == 0
    rc, out, err = o.camus(["eval", "--pipeline", str(tmp_path / "o")], '{"a": 1}\n{}\n', subprocess_mode=False)
    assert (rc, out) == (0, "[]\n[]\n"), err


def test_unwritable_out_is_an_error_not_a_traceback(tmp_path):
    spec, rules = tmp_path / "s.p4", tmp_path / "r.rules"
    spec.write_text(BAD_SPEC)
    rules.write_text("a == 1 : fwd(1)\n")
    rc, out, err = o.camus(["compile", str(spec), str(rules), "--out", str(rules)], subprocess_mode=False)
    assert rc == 2 and "Traceback" not in err and "cannot write" in err, err


def test_any_number_of_port_sets_needs_one_multicast_group(tmp_path):
    """16 independent one-port rules make 2^16 - 16 - 1 multi-port sets: once one group each
    (more than bmv2's 32,767 ids, refused), now bitmaps through one group."""
    spec, rules = tmp_path / "s.p4", tmp_path / "r.rules"
    spec.write_text("header m { " + " ".join(f"bit<8> f{i};" for i in range(16)) + " }\n"
                    + "".join(f"@pragma query_field_exact(m.f{i})\n" for i in range(16)))
    rules.write_text("".join(f"f{i} == 1 : fwd({i + 1})\n" for i in range(16)))
    rc, out, err = o.camus(["compile", str(spec), str(rules), "--out", str(tmp_path / "o")], subprocess_mode=False)
    assert rc == 0, err
    stats = json.loads((tmp_path / "o" / "stats.json").read_text())
    assert stats["multicast_groups"] == 1
    entries = json.loads((tmp_path / "o" / "entries.json").read_text())
    (group,) = entries["multicast_groups"]
    assert 1 <= group["id"] <= 32767 and [r["port"] for r in group["replicas"]] == list(range(1, 17))
    bitmaps = {e["params"]["ports"] for e in entries["table_entries"] if e["action"] == "mcast"}
    assert len(bitmaps) == 2 ** 16 - 16 - 1  # every set of two or more of the 16 ports


def test_eval_takes_whole_messages(tmp_path):
    """Every declared field of an ITCH Add Order may be given; only query fields count."""
    app = o.PRODUCT_APPS["itch"]()
    (tmp_path / "itch.p4").write_text(app.text)
    (tmp_path / "r.rules").write_text('price > 5 and stock == "GOOG" : fwd(1)\nshares < 10 : fwd(2)\n')
    rc, _, err = o.camus(["compile", str(tmp_path / "itch.p4"), str(tmp_path / "r.rules"), "--out",
                          str(tmp_path / "o")], subprocess_mode=False)
    assert rc == 0, err
    whole = {"message_type": "A", "stock_locate": 7, "tracking_number": 1, "timestamp": 2**48 - 1,
             "order_ref": 2**64 - 1, "buy_sell_indicator": "B", "shares": 100, "stock": "GOOG",
             "price": 6}
    lines = [whole, {**whole, "shares": 9}, {**whole, "message_type": "E"},
             {**whole, "itch_order.order_ref": 5, "price": 5}, {**whole, "stock_locate": 2**16}]
    rc, out, err = o.camus(["eval", "--pipeline", str(tmp_path / "o")],
                           "\n".join(json.dumps(x) for x in lines) + "\n", subprocess_mode=False)
    assert out.splitlines() == ["[1]", "[1, 2]", "[]", "[]", "null"], err
    assert rc == 1 and "65536 is not a 16-bit" in err


def test_states_that_decide_alike_are_one_state(tmp_path):
    """Residual sets written differently but meaning the same share one state: a == 1 and
    a == 2 lead to states with identical splits on b, merged into one (both a entries lead to it)."""
    from compiler.compile import compile_text

    spec = "header m { bit<8> a; bit<8> b; bit<8> c; }\n" + "".join(
        f"@pragma query_field(m.{f})\n" for f in "abc")
    text = ("a == 1 and (b < 5 and c == 1 or b >= 5 and c == 1) : fwd(1)\n"
            "a == 1 and b == 7 : fwd(2)\na == 2 and c == 1 : fwd(1)\na == 2 and b == 7 : fwd(2)\n")
    c = compile_text(spec, text, ["a", "b", "c"])
    stages = [c.diagram.splits[s].stage for s in c.diagram.reachable() if s in c.diagram.splits]
    assert stages.count(1) == 1, stages
    a_entries = [e for e in c.entries["table_entries"] if e["table"] == "app_a"]
    assert len(a_entries) == 2 and a_entries[0]["params"] == a_entries[1]["params"], a_entries
    a, b, cc = (o.F(f"m.{f}", 8, "range", False, 8 * i) for i, f in enumerate("abc"))
    rules = [(("and", [_atom(a, "==", 1), ("or", [("and", [_atom(b, "<", 5), _atom(cc, "==", 1)]),
                                                   ("and", [_atom(b, ">=", 5), _atom(cc, "==", 1)])])]), [1]),
             (("and", [_atom(a, "==", 1), _atom(b, "==", 7)]), [2]),
             (("and", [_atom(a, "==", 2), _atom(cc, "==", 1)]), [1]),
             (("and", [_atom(a, "==", 2), _atom(b, "==", 7)]), [2])]
    app = o.App("custom", spec, [a, b, cc], 3, 1234, "single")
    msgs = [{"m.a": x, "m.b": y, "m.c": z} for x in (0, 1, 2, 3) for y in (4, 5, 7, 8) for z in (0, 1, 2)]
    _judge(tmp_path, app, rules, text, msgs)
