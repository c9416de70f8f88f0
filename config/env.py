"""Typed readers for environment variables.

Each raises ImproperlyConfigured naming the variable and what it expected, so a
bad value stops `make run` with one clear line instead of a traceback later.
This module imports nothing from Django but the exception, so the launcher can
check the environment before any service starts.
"""

import os
import re
from pathlib import Path
from typing import TypedDict
from urllib.parse import parse_qs, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(os.environ.get("WEFT_DATA_DIR") or BASE_DIR / ".data")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r}: expected a boolean (true/false, 1/0, yes/no)")


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={raw!r}: expected one of {', '.join(choices)}")
    return value


def env_int(name: str, default: int, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r}: expected an integer") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={raw!r}: expected an integer >= {minimum}")
    return value


def env_float(name: str, default: float, minimum: float = 0.0) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r}: expected a number") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name}={raw!r}: expected a number >= {minimum}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s@?#]*@")
_SECRET_QUERY = re.compile(
    r"(?i)(?P<name>[?&](?:api[_-]?key|key|token|access[_-]?token|password|pass|secret|sig|signature)=)"
    r"[^&\s#'\"]*"
)


def without_credentials(text: str) -> str:
    """A URL — or a message that may hold URLs, such as an exception's text — without
    credentials: `user:password@` is dropped and secret-looking query values masked.
    Everything that shows or logs a configured URL goes through this."""
    text = _USERINFO.sub(r"\g<scheme>", str(text))
    return _SECRET_QUERY.sub(r"\g<name>***", text)


def embedded_database_url() -> str:
    return f"postgresql://postgres@/weft?host={DATA_DIR / 'pg'}"


def embedded_redis_url() -> str:
    return f"unix://{DATA_DIR / 'redis.sock'}"


def database_from_url(name: str, url: str) -> dict:
    """postgres[ql]://user:pass@host:port/db?host=/socket/dir&sslmode=... -> DATABASES entry."""
    expected = "expected postgresql://user:password@host:port/dbname"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ImproperlyConfigured(f"{name}={without_credentials(url)!r}: {expected}") from None
    if parts.scheme not in ("postgres", "postgresql") or not parts.path.strip("/"):
        raise ImproperlyConfigured(f"{name}={without_credentials(url)!r}: {expected}")
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    host = query.pop("host", None) or unquote(parts.hostname or "")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parts.path.lstrip("/")),
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": host,
        "PORT": str(port or ""),
        "OPTIONS": query,
    }


def check_redis_url(name: str, url: str) -> str:
    expected = "expected redis://host:port/db, rediss://... or unix:///path/to/redis.sock"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise ImproperlyConfigured(f"{name}={without_credentials(url)!r}: {expected}") from None
    if parts.scheme not in ("redis", "rediss", "unix"):
        raise ImproperlyConfigured(f"{name}={without_credentials(url)!r}: {expected}")
    if parts.scheme == "unix" and not parts.path:
        raise ImproperlyConfigured(f"{name}={without_credentials(url)!r}: {expected}")
    if parts.scheme != "unix" and not parts.hostname:
        raise ImproperlyConfigured(f"{name}={without_credentials(url)!r}: {expected}")
    return url


def celery_broker_url(redis_url: str) -> str:
    """Kombu spells a unix-socket Redis as redis+socket:///path."""
    parts = urlsplit(redis_url)
    if parts.scheme == "unix":
        db = parse_qs(parts.query).get("db", ["0"])[-1]
        return f"redis+socket://{parts.path}?virtual_host={db}"
    return redis_url


def check_http_url(name: str, url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ImproperlyConfigured(
            f"{name}={without_credentials(url)!r}: expected an http(s):// URL"
        )
    return url.rstrip("/")


class BackendEntry(TypedDict):
    """One WEFT_BACKENDS entry, checked; completions.routing builds its Backend from it."""

    name: str
    url: str  # "local", or an http(s) URL without its trailing slash
    api_key: str
    models: dict[str, str] | None


def env_backends(name: str) -> list[BackendEntry]:
    """A JSON list of completion backends, each {"url": "http(s)://…/v1" or "local",
    "api_key": "…", "models": {"short-id": "upstream-model-id", …}, "name": "…"}; only
    url is required. Errors name the entry, never echo the value (it may hold keys)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return []

    def bad(reason: str) -> ImproperlyConfigured:
        return ImproperlyConfigured(f"{name}=…: {reason} (see README: Model routing)")

    import json

    try:
        entries = json.loads(raw)
    except ValueError:
        raise bad("expected a JSON list of backends") from None
    if not isinstance(entries, list) or not entries:
        raise bad("expected a non-empty JSON list of backends")
    backends: list[BackendEntry] = []
    for number, entry in enumerate(entries, start=1):
        where = f"backend {number}"
        if not isinstance(entry, dict):
            raise bad(f"{where}: expected an object")
        unknown = set(entry) - {"url", "api_key", "models", "name"}
        if unknown:
            raise bad(f"{where}: unknown key {sorted(unknown)[0]!r}")
        url = entry.get("url")
        if url == "local":
            host = "local"
        else:
            parts = urlsplit(url) if isinstance(url, str) else None
            if (
                not isinstance(url, str)
                or parts is None
                or parts.scheme not in ("http", "https")
                or not parts.hostname
            ):
                raise bad(f'{where}: "url" must be an http(s):// URL or "local"')
            host, url = parts.hostname, url.rstrip("/")
        for key in ("api_key", "name"):
            if not isinstance(entry.get(key, ""), str):
                raise bad(f'{where}: "{key}" must be a string')
        models = entry.get("models")
        if models is not None and (
            not isinstance(models, dict)
            or not models
            or not all(
                isinstance(k, str) and k.strip() == k and k and isinstance(v, str) and v
                for k, v in models.items()
            )
        ):
            raise bad(f'{where}: "models" must map short ids to model names')
        backends.append(
            {
                "name": entry.get("name") or host,
                "url": url,
                "api_key": entry.get("api_key", ""),
                "models": models,
            }
        )
    return backends
