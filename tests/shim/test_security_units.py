"""The sans-IO security pieces: SCRAM against an independent client (`scramp`), PLAIN, the
session state machine with a fake clock, the credential store, and the ACL rules."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scramp import ScramClient

from shim.security import acl
from shim.security.listeners import Listener, Security, parse_listener
from shim.security.sasl import AuthenticationFailed, Exchange
from shim.security.session import Session
from shim.security.users import UserStore, make_credential


@pytest.fixture
def store(tmp_path):
    s = UserStore(tmp_path)
    for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        s.set("alice", mech, make_credential(mech, "alice-secret"))
    return s


def scram(store, mechanism, user, password, mangle=None):
    e = Exchange(mechanism, store)
    c = ScramClient([mechanism], user, password)
    c.set_server_first(e.step(c.get_client_first().encode()).decode())
    final = c.get_client_final()
    if mangle:
        final = mangle(final)
    c.set_server_final(e.step(final.encode()).decode())  # scramp checks the server's signature
    return e


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_authenticates_and_proves_the_server(store, mechanism):
    e = scram(store, mechanism, "alice", "alice-secret")
    assert e.done and e.principal == "User:alice"


@pytest.mark.parametrize("user,password", [("alice", "wrong"), ("nobody", "alice-secret")])
def test_scram_wrong_password_and_unknown_user_fail_at_the_same_step(store, user, password):
    e = Exchange("SCRAM-SHA-512", store)
    c = ScramClient(["SCRAM-SHA-512"], user, password)
    first = e.step(c.get_client_first().encode()).decode()
    assert first.count(",") == 2 and ",i=4096" in first  # looks the same either way
    c.set_server_first(first)
    with pytest.raises(AuthenticationFailed, match="invalid credentials with SASL mechanism SCRAM-SHA-512"):
        e.step(c.get_client_final().encode())


def test_scram_accepts_librdkafka_2_0_doubled_client_nonce_as_kafka_does(store):
    """librdkafka 2.0.x sends r=<client nonce><full nonce>; Kafka accepts a nonce that ends
    with its own, and so do we, with the proof computed over what was sent."""
    import base64
    import hashlib
    import hmac

    from shim.security.scram import keys_from_salted, salted_password
    e = Exchange("SCRAM-SHA-256", store)
    cnonce = "57gH]2ZFTd^OF9a0wFPxiBPws61<mwUf"
    bare = f"n=alice,r={cnonce}"
    server_first = e.step(f"n,,{bare}".encode()).decode()
    attrs = dict(x.split("=", 1) for x in server_first.split(","))
    without_proof = f"c=biws,r={cnonce}{attrs['r']}"
    salted = salted_password("SCRAM-SHA-256", "alice-secret", base64.b64decode(attrs["s"]), int(attrs["i"]))
    stored, _ = keys_from_salted("SCRAM-SHA-256", salted)
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    sig = hmac.digest(stored, f"{bare},{server_first},{without_proof}".encode(), "sha256")
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, sig))).decode()
    assert e.step(f"{without_proof},p={proof}".encode()).startswith(b"v=")
    assert e.done and hashlib.sha256(client_key).digest() == stored


def test_scram_refuses_replayed_or_foreign_nonces(store):
    with pytest.raises(AuthenticationFailed):
        scram(store, "SCRAM-SHA-256", "alice", "alice-secret",
              mangle=lambda f: f.replace("r=", "r=x", 1)[:-4] + "AAA=")


def test_plain_checks_the_stored_scram_credential(store):
    assert Exchange("PLAIN", store).step(b"\0alice\0alice-secret") == b""
    assert Exchange("PLAIN", store).step(b"alice\0alice\0alice-secret") == b""
    for token in (b"\0alice\0nope", b"\0nobody\0alice-secret", b"bob\0alice\0alice-secret",
                  b"alice-secret", b"\xff\0\xfe"):
        with pytest.raises(AuthenticationFailed):
            Exchange("PLAIN", store).step(token)


def test_credentials_are_salted_never_plain(store, tmp_path):
    text = (tmp_path / "scram-credentials.json").read_text()
    assert "alice-secret" not in text
    doc = json.loads(text)["alice"]["SCRAM-SHA-512"]
    assert doc["iterations"] >= 4096 and set(doc) == {"salt", "iterations", "stored_key", "server_key"}
    assert (tmp_path / "scram-credentials.json").stat().st_mode & 0o077 == 0
    other = UserStore(tmp_path)  # another process (camus user) changes it: the broker sees it
    other.delete("alice", "SCRAM-SHA-256")
    assert store.credential("alice", "SCRAM-SHA-256") is None
    assert store.credential("alice", "SCRAM-SHA-512") is not None


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_session_gates_requests_and_expires(store):
    clock = Clock()
    sec = Security(reauth_ms=1000)
    s = Session(Listener("SASL_PLAINTEXT", "127.0.0.1", 1), sec, store, clock=clock)
    assert s.refuse("ApiVersions") is None and s.refuse("Metadata")
    assert s.handshake("PLAIN", 1) == 0
    assert s.refuse("Metadata")  # in the middle of the exchange
    assert s.step(b"\0alice\0alice-secret") == (b"", None, 1000)
    assert s.principal == "User:alice" and s.refuse("Metadata") is None
    clock.now += 1.5
    assert "expired" in s.refuse("Metadata")
    assert s.refuse("SaslHandshake") is None  # re-authentication is how to go on
    assert s.handshake("SCRAM-SHA-512", 1) != 0  # not with another mechanism
    assert s.handshake("PLAIN", 1) == 0
    s.step(b"\0alice\0alice-secret")
    assert s.refuse("Metadata") is None


def test_reauthentication_as_someone_else_fails(store):
    store.set("bob", "SCRAM-SHA-256", make_credential("SCRAM-SHA-256", "bob-secret"))
    s = Session(Listener("SASL_SSL", "h", 1), Security(), store)
    s.handshake("PLAIN", 1)
    s.step(b"\0alice\0alice-secret")
    s.handshake("PLAIN", 1)
    _, failure, _ = s.step(b"\0bob\0bob-secret")
    assert failure and s.close_after_answer and s.principal == "User:alice"


def test_plaintext_listener_is_anonymous_and_refuses_sasl(store):
    s = Session(Listener("PLAINTEXT", "h", 1), Security(), store)
    assert s.principal == "User:ANONYMOUS" and s.refuse("Produce") is None
    assert s.handshake("PLAIN", 1) == 34  # ILLEGAL_SASL_STATE


@pytest.mark.parametrize("text,expected", [
    ("127.0.0.1:9092", ("PLAINTEXT", "127.0.0.1", 9092)),
    ("sasl_ssl://127.0.0.1:0", ("SASL_SSL", "127.0.0.1", 0)),
    ("SSL://[::1]:9093", ("SSL", "::1", 9093)),
])
def test_parse_listener(text, expected):
    lst = parse_listener(text)
    assert (lst.protocol, lst.host, lst.port) == expected


@pytest.mark.parametrize("text", ["GSSAPI://h:1", "h", "SSL://h:99999", "PLAINTEXT://h:x"])
def test_parse_listener_refuses(text):
    with pytest.raises(ValueError):
        parse_listener(text)


# --- ACLs ------------------------------------------------------------------------------

def binding(name, op, perm=acl.ALLOW, principal="User:alice", pattern=acl.LITERAL, rtype=acl.TOPIC, host="*"):
    return acl.Binding(rtype, name, pattern, principal, host, op, perm)


def authorizer(*bindings, **kw):
    store = acl.AclStore(None)
    store.add(list(bindings))
    return acl.Authorizer(store, **kw)


def test_acl_rules_as_kafka():
    a = authorizer(binding("orders", acl.READ), binding("pay", acl.ALL, pattern=acl.PREFIXED),
                   binding("payroll", acl.READ, acl.DENY), binding("*", acl.DESCRIBE, principal="User:*"),
                   binding("secret", acl.WRITE, host="10.0.0.1"), super_users={"User:root"})
    can = lambda op, name, who="User:alice", host="127.0.0.1": a.allows(who, host, op, acl.TOPIC, name)  # noqa: E731
    assert can(acl.READ, "orders") and can(acl.DESCRIBE, "orders")  # READ implies DESCRIBE
    assert not can(acl.WRITE, "orders")
    assert can(acl.WRITE, "payments") and can(acl.DELETE, "pay")  # prefixed ALL
    assert not can(acl.READ, "payroll") and can(acl.WRITE, "payroll")  # DENY wins, for its op
    assert can(acl.DESCRIBE, "anything", "User:bob") and not can(acl.READ, "anything", "User:bob")
    assert not can(acl.WRITE, "secret") and can(acl.WRITE, "secret", host="10.0.0.1")
    assert can(acl.DELETE, "nothing-names-it", "User:root")
    assert not a.allows("User:alice", "h", acl.READ, acl.GROUP, "g")  # no ACL: closed by default
    assert authorizer(allow_if_no_acl=True).allows("User:x", "h", acl.READ, acl.GROUP, "g")


def test_acl_filters_match_as_kafka():
    b = [binding("orders", acl.READ), binding("ord", acl.WRITE, pattern=acl.PREFIXED),
         binding("g", acl.READ, rtype=acl.GROUP)]
    store = acl.AclStore(None)
    store.add(b + b)  # duplicates are stored once
    assert len(store.bindings) == 3
    f = lambda **kw: acl.Filter(**{"resource_type": acl.ANY_RESOURCE, "resource_name": None,  # noqa: E731
                                   "pattern_type": acl.ANY_PATTERN, "principal": None, "host": None,
                                   "operation": acl.ANY_OP, "permission": acl.ANY_PERMISSION, **kw})
    assert store.find(f()) == b
    assert store.find(f(resource_name="orders", pattern_type=acl.MATCH)) == b[:2]
    assert store.find(f(resource_name="orders")) == b[:1]
    assert store.find(f(pattern_type=acl.PREFIXED)) == b[1:2]
    assert store.delete(f(resource_type=acl.GROUP)) == b[2:]
    assert store.bindings == b[:2]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "ab", "abc", "*", "b"]),
                          st.sampled_from([acl.LITERAL, acl.PREFIXED]),
                          st.sampled_from([acl.READ, acl.WRITE, acl.ALL, acl.DESCRIBE]),
                          st.sampled_from([acl.ALLOW, acl.DENY]),
                          st.sampled_from(["User:u", "User:*", "User:v"])), max_size=6),
       st.sampled_from(["a", "ab", "abc", "b", "c"]), st.sampled_from([acl.READ, acl.WRITE, acl.DESCRIBE]))
def test_acl_decision_matches_a_brute_force_reading_of_kafkas_rules(rows, name, op):
    bindings = [binding(n, o, perm, who, pattern) for n, pattern, o, perm, who in rows]
    got = authorizer(*bindings).allows("User:u", "h", op, acl.TOPIC, name)

    def applies(b):
        return (name.startswith(b.resource_name) if b.pattern_type == acl.PREFIXED
                else b.resource_name in (name, "*"))
    on_resource = [b for b in bindings if applies(b)]
    mine = [b for b in on_resource if b.principal in ("User:u", "User:*")]
    denied = any(b.permission == acl.DENY and b.operation in (op, acl.ALL) for b in mine)
    implied = {acl.DESCRIBE: {acl.READ, acl.WRITE}}.get(op, set())
    allowed = any(b.permission == acl.ALLOW and b.operation in {op, acl.ALL} | implied for b in mine)
    assert got == (bool(on_resource) and not denied and allowed)


@pytest.mark.parametrize("bad", [
    binding("t", acl.ANY_OP), binding("t", acl.READ, acl.ANY_PERMISSION),
    binding("t", acl.READ, pattern=acl.MATCH), binding("t", acl.READ, principal="alice"),
    binding("not-kafka-cluster", acl.ALTER, rtype=acl.CLUSTER), binding("g", acl.WRITE, rtype=acl.GROUP),
])
def test_bindings_that_cannot_be_stored(bad):
    with pytest.raises(acl.AclError):
        bad.check()


# --- client quotas ---------------------------------------------------------------------

def test_quota_precedence_is_kafkas():
    from shim.security.quotas import QuotaStore
    q = QuotaStore(None)
    q.alter({"client-id": None}, [("producer_byte_rate", 1.0, False)])
    assert q.quota("alice", "app", "producer_byte_rate") == 1.0
    q.alter({"client-id": "app"}, [("producer_byte_rate", 2.0, False)])
    assert q.quota("alice", "app", "producer_byte_rate") == 2.0
    q.alter({"user": None}, [("producer_byte_rate", 3.0, False)])
    assert q.quota("alice", "app", "producer_byte_rate") == 3.0
    assert q.quota("ANONYMOUS", "app", "producer_byte_rate") == 3.0  # as Kafka: a user too
    q.alter({"user": "alice"}, [("producer_byte_rate", 4.0, False)])
    q.alter({"user": "alice", "client-id": "app"}, [("producer_byte_rate", 5.0, False)])
    assert q.quota("alice", "app", "producer_byte_rate") == 5.0
    assert q.quota("alice", "other", "producer_byte_rate") == 4.0
    assert q.quota("bob", "other", "producer_byte_rate") == 3.0
    assert q.quota("bob", "other", "consumer_byte_rate") is None
    with pytest.raises(ValueError):
        q.alter({"user": "x"}, [("request_percentage", 5.0, False)])


def test_quota_throttle_time_follows_kafkas_formula():
    from shim.security.quotas import QuotaStore
    q = QuotaStore(None, window_num=11, window_seconds=1.0)
    q.alter({"client-id": "c"}, [("producer_byte_rate", 1000.0, False)])
    clock = Clock()
    clock.now = 1000.0
    assert q.record("u", "c", "producer_byte_rate", 5000, clock) == 0  # 5000 B over >= 10 s
    assert q.record("u", "other", "producer_byte_rate", 10 ** 9, clock) == 0  # no quota for it
    # 20,000 B over the 10 s floor: 2000 B/s, (2000 - 1000) / 1000 * 10 s = 10 s
    assert q.record("u", "c", "producer_byte_rate", 15000, clock) == 10000
    # far over: bounded by the whole window (11 s)
    assert q.record("u", "c", "producer_byte_rate", 10 ** 7, clock) == 11000
    clock.now += 30  # the old samples have left the window
    assert q.record("u", "c", "producer_byte_rate", 100, clock) == 0
