"""SCRAM credentials, stored salted (never a password), in `<data dir>/scram-credentials.json`.

Each user has, per mechanism (SCRAM-SHA-256, SCRAM-SHA-512), the salt, the iteration count
(>= 4096, RFC 7677) and RFC 5802's StoredKey and ServerKey: enough to verify a SCRAM proof
or a PLAIN password, never enough to log in as the user. `camus user add/delete` edit the
file while the broker runs; the broker rereads it when it changes. Writes go through a
temporary file and a rename, under a lock, so a reader never sees half a file and two
writers never lose each other's change. Without a data dir the store lives in memory
(users come from AlterUserScramCredentials only).

A name with no credential gets a decoy (`decoy`), so that nothing before the final proof
tells a stranger whether a user exists: the iteration count and salt length real users of
that mechanism have (the most common among them; 4096 and 32 bytes, `camus user add`'s,
before there are any) and a salt derived from the name and a per-broker secret, kept in
`<data dir>/sasl-secret` (random, 0600, made on first use), so the same name shows the same
salt across restarts, as a real user's does, and no one without the file can compute it.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import errno
import fcntl
import hashlib
import hmac
import json
import os
from pathlib import Path

from .scram import HASHES, keys_from_salted, salted_password

FILE = "scram-credentials.json"
SECRET_FILE = "sasl-secret"
MIN_ITERATIONS = 4096
SALT_BYTES = 32  # what make_credential draws
MAX_ITERATIONS = 16384  # Kafka's ScramMechanism maxIterations
# KIP-554's ScramMechanism codes.
MECHANISM_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}


class UserError(ValueError):
    pass


def make_credential(mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
                    salt: bytes | None = None) -> dict:
    if mechanism not in HASHES:
        raise UserError(f"unknown mechanism {mechanism!r}; expected {', '.join(HASHES)}")
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise UserError(f"iterations {iterations}: expected {MIN_ITERATIONS}..{MAX_ITERATIONS}")
    salt = salt or os.urandom(SALT_BYTES)
    stored, server = keys_from_salted(mechanism, salted_password(mechanism, password, salt, iterations))
    return credential_from_keys(salt, stored, server, iterations)


def credential_from_keys(salt: bytes, stored_key: bytes, server_key: bytes, iterations: int) -> dict:
    enc = lambda b: base64.b64encode(b).decode()  # noqa: E731
    return {"salt": enc(salt), "iterations": iterations, "stored_key": enc(stored_key),
            "server_key": enc(server_key)}


def salted_credential(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> dict:
    """From KIP-554's SaltedPassword (what AlterUserScramCredentials carries)."""
    stored, server = keys_from_salted(mechanism, salted)
    return credential_from_keys(salt, stored, server, iterations)


def keys(cred: dict) -> tuple[bytes, bytes, bytes, int]:
    """(salt, stored_key, server_key, iterations), as scramp's auth_fn returns them."""
    dec = base64.b64decode
    return dec(cred["salt"]), dec(cred["stored_key"]), dec(cred["server_key"]), cred["iterations"]


def password_matches(mechanism: str, cred: dict, password: str) -> bool:
    salt, stored, _, iterations = keys(cred)
    mine, _ = keys_from_salted(mechanism, salted_password(mechanism, password, salt, iterations))
    return hmac.compare_digest(mine, stored)


def _load_secret(path: Path | None) -> bytes:
    """The broker's decoy secret: read, or made once (a link makes it all or nothing, and
    the first of two brokers starting together wins)."""
    if path is None:
        return os.urandom(32)  # in memory: stable for this process only
    try:
        secret = path.read_bytes()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(32))
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
        secret = path.read_bytes()
    if len(secret) < 32:
        raise OSError(errno.EINVAL, f"{path}: {len(secret)} bytes, expected 32 random bytes; "
                      "delete it to make a new one (unknown users' salts then change once)")
    return secret


class UserStore:
    def __init__(self, data_dir: Path | None) -> None:
        self.path = data_dir / FILE if data_dir else None
        self._users: dict[str, dict[str, dict]] = {}
        self._stamp = None
        self._secret: bytes | None = None
        self._typical: dict = {}  # what `typical` answers, until the file changes
        self._reload()

    def _reload(self) -> None:
        if self.path is None:
            return
        try:
            st = self.path.stat()
        except FileNotFoundError:
            self._users, self._stamp = {}, None
            return
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp != self._stamp:
            self._users = json.loads(self.path.read_text())
            self._stamp = stamp
            self._typical = {}

    @contextlib.contextmanager
    def _editing(self):
        if self.path is None:
            yield self._users
            self._typical = {}
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self._stamp = None
            self._reload()
            yield self._users
            tmp = self.path.with_suffix(".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump(self._users, f, indent=1, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            self._stamp = None

    def credential(self, user: str, mechanism: str) -> dict | None:
        self._reload()
        return self._users.get(user, {}).get(mechanism)

    def typical(self, mechanism: str | None = None):
        """Real users' most common shape (ties: the larger): for a mechanism, the (iterations,
        salt length) of its credentials, make_credential's defaults when there are none;
        for None, the mechanism of users' first credentials (in HASHES order), which PLAIN
        checks."""
        self._reload()
        if not self._typical:
            firsts = collections.Counter(next(m for m in HASHES if m in creds)
                                         for creds in self._users.values() if creds)
            self._typical[None] = max(firsts, key=lambda m: (firsts[m], m)) if firsts else next(iter(HASHES))
            for mech in HASHES:
                seen = collections.Counter(
                    (cred["iterations"], len(base64.b64decode(cred["salt"])))
                    for creds in self._users.values() if (cred := creds.get(mech)))
                self._typical[mech] = (max(seen, key=lambda k: (seen[k], k)) if seen
                                       else (MIN_ITERATIONS, SALT_BYTES))
        return self._typical[mechanism]

    def load_secret(self) -> None:
        """Read (or make) the decoy secret now: the broker does at start, so that a data dir
        it cannot write fails there, not in some client's authentication."""
        if self._secret is None:
            self._secret = _load_secret(self.path.with_name(SECRET_FILE) if self.path else None)

    def decoy(self, user: str, mechanism: str) -> dict:
        """A credential for a name that has none of `mechanism`: shaped like real users' and
        with the same salt every time for the same name, but no password matches it."""
        self.load_secret()
        iterations, length = self.typical(mechanism)
        seed = b"\0".join([b"camus decoy salt", mechanism.encode(), user.encode()])
        salt = b""
        while len(salt) < length:  # HMAC in counter mode, for salts longer than one digest
            salt += hmac.digest(self._secret, seed + len(salt).to_bytes(4, "big"), "sha512")
        size = hashlib.new(HASHES[mechanism]).digest_size
        return credential_from_keys(salt[:length], os.urandom(size), os.urandom(size), iterations)

    def users(self) -> dict[str, dict[str, dict]]:
        self._reload()
        return {u: dict(m) for u, m in self._users.items()}

    def set(self, user: str, mechanism: str, cred: dict) -> None:
        if not user:
            raise UserError("empty user name")
        with self._editing() as users:
            users.setdefault(user, {})[mechanism] = cred

    def delete(self, user: str, mechanism: str | None = None) -> bool:
        """Remove one mechanism's credential, or all of the user's; False if there was none."""
        with self._editing() as users:
            have = users.get(user)
            if not have or (mechanism is not None and mechanism not in have):
                return False
            if mechanism is None:
                del users[user]
            else:
                del have[mechanism]
                if not have:
                    del users[user]
            return True
