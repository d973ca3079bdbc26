"""API token keys: made here, shown once, stored only as a digest.

A key is 160 random bits, so a plain SHA-256 of it cannot be reversed or guessed from the
database: no slow password hash is needed, and a request's key is found by its digest in one
indexed read.
"""

from __future__ import annotations

import hashlib
import secrets

KEY_BYTES = 20


def new_key() -> str:
    return secrets.token_hex(KEY_BYTES)


def key_digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()
