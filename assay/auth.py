"""Django's model backend, loading the signed-in user with one plain SELECT; and, for the
judging page's hot path, the signed-in user without reading the database at all.

Every request of a signed-in person loads their user row. Building that query through the ORM
costs several times what running it does (~0.5 ms against ~0.06 ms on the judging benchmark's
machine), and the judging loop answers hundreds of requests a second. Everything else —
passwords, permissions, `is_active` — is the stock backend's.

`session_user` goes one step further for the one request that comes hundreds of times a second
(an answer on the judging page): it checks the session against the user row this process read
last, and leaves it to the statement that acts on the request to confirm, in its own snapshot,
that the row still has that password hash and is active. A changed password, a deactivated
account or a revoked superuser flag therefore takes effect on the very next request, exactly as
with a fresh read: the statement finds no such user, stores nothing, and the request goes the
general way, which reads the row again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.backends import ModelBackend as DjangoModelBackend
from django.contrib.auth.models import User
from django.db import connections, router
from django.http import HttpRequest
from django.utils.crypto import constant_time_compare

_FIELDS = [f.attname for f in User._meta.concrete_fields]
_SQL = "SELECT {columns} FROM {table} WHERE id = %s".format(
    columns=", ".join(str(f.column) for f in User._meta.concrete_fields),
    table=User._meta.db_table,
)
_BACKEND = f"{__name__}.ModelBackend"
_REMEMBERED = 10_000  # user rows kept per process; the map is emptied when it is full


@dataclass(frozen=True)
class SessionUser:
    """A signed-in user as of the last read of their row by this process. `password` (the
    stored hash) is what the acting statement must find unchanged."""

    pk: int
    password: str
    is_superuser: bool


_seen: dict[int, SessionUser] = {}


class ModelBackend(DjangoModelBackend):
    def get_user(self, user_id: Any) -> User | None:
        try:
            pk = int(user_id)
        except (TypeError, ValueError):  # not an id: as if signed out
            return None
        alias = router.db_for_read(User)
        with connections[alias].cursor() as cursor:
            cursor.execute(_SQL, [pk])
            row = cursor.fetchone()
        if row is None:
            _seen.pop(pk, None)
            return None
        user = User.from_db(alias, _FIELDS, row)
        if not self.user_can_authenticate(user):
            _seen.pop(pk, None)
            return None
        _remember(user)
        return user


def _remember(user: User) -> None:
    if len(_seen) >= _REMEMBERED:
        _seen.clear()
    _seen[user.pk] = SessionUser(user.pk, user.password, user.is_superuser)


def session_user(request: HttpRequest) -> SessionUser | None:
    """The user the request's session signs in, if this process has read their row before and
    the session's hash matches that row under the current secret key; else None (the caller
    takes the general path, where `request.user` reads the row and verifies, or rotates, the
    session as Django does). The caller's statement must confirm `password` and `is_active`."""
    session = request.session
    try:
        pk = int(session[SESSION_KEY])
        backend, claimed = session[BACKEND_SESSION_KEY], session.get(HASH_SESSION_KEY)
    except (KeyError, TypeError, ValueError):
        return None
    known = _seen.get(pk)
    if known is None or backend != _BACKEND or _BACKEND not in settings.AUTHENTICATION_BACKENDS:
        return None
    expected = User(pk=pk, password=known.password).get_session_auth_hash()
    if not claimed or not constant_time_compare(claimed, expected):
        return None
    return known
