"""Small typed readers for settings that come from the environment.

Each one fails loudly (``ImproperlyConfigured``) on a value it cannot parse, because a typo in a
deployment's environment must stop the process at start-up, not surface as odd behaviour later.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use 1/0, true/false, yes/no)")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} must be at least {minimum}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


@dataclass(frozen=True)
class _Backend:
    engine: str
    default_port: int | None


_BACKENDS = {
    "postgres": _Backend("django.db.backends.postgresql", 5432),
    "postgresql": _Backend("django.db.backends.postgresql", 5432),
    "sqlite": _Backend("django.db.backends.sqlite3", None),
}


def parse_database_url(url: str, *, base_dir: Path) -> dict[str, Any]:
    """Turn ``postgres://user:pass@host:port/name?opt=v`` or ``sqlite:///path`` into a
    DATABASES entry.

    A relative SQLite path is taken from the project directory; ``sqlite:///:memory:`` is allowed.
    """
    parts = urlsplit(url)
    backend = _BACKENDS.get(parts.scheme)
    if backend is None:
        known = ", ".join(sorted(_BACKENDS))
        raise ImproperlyConfigured(f"DATABASE_URL scheme {parts.scheme!r} is not one of: {known}")
    if backend.default_port is None:
        return {"ENGINE": backend.engine, "NAME": _sqlite_path(parts.path, base_dir)}
    name = unquote(parts.path.lstrip("/"))
    if not name:
        raise ImproperlyConfigured(f"DATABASE_URL {url!r} names no database (…/dbname)")
    try:
        port = parts.port or backend.default_port
    except ValueError:
        raise ImproperlyConfigured(f"DATABASE_URL {url!r} has an invalid port") from None
    return {
        "ENGINE": backend.engine,
        "NAME": name,
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "",
        "PORT": str(port),
        "OPTIONS": dict(parse_qsl(parts.query)),
    }


def _sqlite_path(path: str, base_dir: Path) -> str:
    # sqlite:///db.sqlite3 -> path "/db.sqlite3" (relative); sqlite:////abs/db -> "//abs/db".
    if path in ("/:memory:", ":memory:"):
        return ":memory:"
    if path.startswith("//"):
        return path[1:]
    if not path.strip("/"):
        raise ImproperlyConfigured(
            "DATABASE_URL sqlite:/// needs a file name, e.g. sqlite:///db.sqlite3"
        )
    return str(base_dir / path.lstrip("/"))
