"""`camus serve`'s security flags, and `camus user add/list/delete`.

Flags win over the same settings in `--config` (Kafka's property names: listeners,
ssl.certificate.location, ssl.key.location, ssl.ca.location, ssl.client.auth,
sasl.enabled.mechanisms, connections.max.reauth.ms, authorizer.class.name, super.users,
allow.everyone.if.no.acl.found; sasl.server.max.receive.size has no flag).

`camus user` edits the SCRAM credentials in a data dir, the running broker's included (it
rereads them); the password is read from standard input, never from the command line,
where `ps` would show it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .listeners import CLIENT_AUTH, MECHANISMS, Security, parse_listener, parse_super_users


def add_serve_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("security (docs/security.md)")
    g.add_argument("--ssl-cert", type=Path, metavar="PEM", help="the broker's certificate chain")
    g.add_argument("--ssl-key", type=Path, metavar="PEM", help="the broker's private key")
    g.add_argument("--ssl-ca", type=Path, metavar="PEM",
                   help="the CA that signs client certificates (ssl.client.auth)")
    g.add_argument("--ssl-client-auth", choices=CLIENT_AUTH,
                   help="ask SSL clients for a certificate (default none); the principal is "
                        "then User:<its subject>")
    g.add_argument("--sasl-mechanisms", metavar="LIST",
                   help=f"sasl.enabled.mechanisms (default {','.join(MECHANISMS)})")
    g.add_argument("--reauth-ms", type=int, metavar="MS",
                   help="connections.max.reauth.ms: SASL sessions last this long (KIP-368)")
    g.add_argument("--authorizer", action="store_true",
                   help="enforce ACLs (stored in the data dir; kafka-acls manages them)")
    g.add_argument("--super-users", metavar="'User:A;User:B'", help="principals ACLs do not bind")
    g.add_argument("--allow-everyone-if-no-acl-found", action="store_true",
                   help="a resource no ACL names is open to everyone (default: closed)")


def security_from_args(args: argparse.Namespace, sec: Security) -> None:
    if args.listen:
        try:
            sec.listeners = [parse_listener(x) for x in args.listen]
        except ValueError as exc:
            raise ValueError(f"--listen {exc}") from None
    for flag, attr in (("ssl_cert", "certfile"), ("ssl_key", "keyfile"), ("ssl_ca", "cafile"),
                       ("ssl_client_auth", "client_auth"), ("reauth_ms", "reauth_ms")):
        if getattr(args, flag) is not None:
            setattr(sec, attr, getattr(args, flag))
    if args.sasl_mechanisms:
        sec.mechanisms = tuple(m.strip().upper() for m in args.sasl_mechanisms.split(",") if m.strip())
    if args.authorizer:
        sec.authorizer = True
    if args.super_users:
        sec.super_users = parse_super_users(args.super_users)
    if args.allow_everyone_if_no_acl_found:
        sec.allow_if_no_acl = True


def register_user(subparsers) -> None:
    u = subparsers.add_parser(
        "user", help="add, list or delete SASL/SCRAM users in a data dir",
        description="SCRAM credentials (salted; the password is never stored) in "
                    "DIR/scram-credentials.json. A running camus serve on that data dir picks "
                    "changes up at once. Example: echo secret | camus user add alice "
                    "--data-dir data")
    actions = u.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    for name, text in (("add", "add a user or change its password (read from stdin)"),
                       ("list", "users and their mechanisms"),
                       ("delete", "delete a user, or one of its mechanisms")):
        a = actions.add_parser(name, help=text, description=text)
        if name != "list":
            a.add_argument("name")
        a.add_argument("--data-dir", type=Path, required=True, metavar="DIR")
        if name != "list":
            a.add_argument("--mechanism", action="append", choices=("SCRAM-SHA-256", "SCRAM-SHA-512"),
                           help="repeatable (default: both for add, every one for delete)")
        if name == "add":
            a.add_argument("--iterations", type=int, default=4096, help="4096..16384 (default 4096)")
    u.set_defaults(func=run_user)


def run_user(args: argparse.Namespace) -> int:
    from .users import HASHES, UserError, UserStore, make_credential

    what = f"camus user {args.action}"
    store = UserStore(args.data_dir)
    try:
        if args.action == "list":
            for name, creds in sorted(store.users().items()):
                print(name + "\t" + ",".join(f"{m}(iterations={c['iterations']})"
                                             for m, c in sorted(creds.items())))
            return 0
        if args.action == "add":
            line = sys.stdin.readline()
            password = line[:-1] if line.endswith("\n") else line
            if not password:
                print(f"{what}: no password on standard input", file=sys.stderr)
                return 2
            for mech in args.mechanism or list(HASHES):
                store.set(args.name, mech, make_credential(mech, password, args.iterations))
            print(f"{'set' if args.mechanism else 'set all mechanisms for'} user {args.name}")
            return 0
        gone = [m for m in args.mechanism or [None] if store.delete(args.name, m)]
        if not gone:
            print(f"{what}: no such user or mechanism: {args.name}", file=sys.stderr)
            return 1
        print(f"deleted {args.name}")
        return 0
    except (UserError, OSError) as exc:
        print(f"{what}: {exc}", file=sys.stderr)
        return 2
