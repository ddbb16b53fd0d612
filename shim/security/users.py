"""SCRAM credentials, stored salted (never a password), in `<data dir>/scram-credentials.json`.

Each user has, per mechanism (SCRAM-SHA-256, SCRAM-SHA-512), the salt, the iteration count
(>= 4096, RFC 7677) and RFC 5802's StoredKey and ServerKey: enough to verify a SCRAM proof
or a PLAIN password, never enough to log in as the user. `camus user add/delete` edit the
file while the broker runs; the broker rereads it when it changes. Writes go through a
temporary file and a rename, under a lock, so a reader never sees half a file and two
writers never lose each other's change. Without a data dir the store lives in memory
(users come from AlterUserScramCredentials only).
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hmac
import json
import os
from pathlib import Path

from .scram import HASHES, keys_from_salted, salted_password

FILE = "scram-credentials.json"
MIN_ITERATIONS = 4096
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
    salt = salt or os.urandom(32)
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


class UserStore:
    def __init__(self, data_dir: Path | None) -> None:
        self.path = data_dir / FILE if data_dir else None
        self._users: dict[str, dict[str, dict]] = {}
        self._stamp = None
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

    @contextlib.contextmanager
    def _editing(self):
        if self.path is None:
            yield self._users
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
