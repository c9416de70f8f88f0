"""ASGI middleware that refuses an over-large request body before anything reads it.

Django's ASGI handler reads the whole body — spilling to a temporary file past
FILE_UPLOAD_MAX_MEMORY_SIZE — before any Django middleware, authentication or view
runs, so a size limit in Django would come after a huge anonymous upload was already
on disk. This wrapper sits in front of Django: a Content-Length over the limit is
answered 413 without reading a byte, and a body without one (chunked) is counted as
it arrives and cut off at the limit.

Limits are settings: WEFT_MAX_REQUEST_BYTES for every path, WEFT_MAX_IMPORT_BYTES for
the paths in WEFT_IMPORT_PATHS when the request is a signed-in user's. The login check
runs later, in Django, after the body is on disk: so here the session cookie is looked
up (Django's own check, aget_user) before the larger allowance is given; an anonymous
request gets the small limit everywhere. The public API never gets here: config/asgi.py routes
/v1 first to api/asgi.py, which checks its own limit (WEFT_API_MAX_BODY_BYTES) the same
way and answers in its JSON envelope.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from importlib import import_module
from typing import Any

from django.conf import settings
from django.contrib.auth import aget_user
from django.http import HttpRequest, HttpResponse
from django.http.cookie import parse_cookie
from django.utils.html import escape

from core import logs

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def body_limit(path: str) -> int:
    """The largest request body a signed-in user may send to `path`, in bytes."""
    if any(path.startswith(prefix) for prefix in settings.WEFT_IMPORT_PATHS):
        return settings.WEFT_MAX_IMPORT_BYTES
    return settings.WEFT_MAX_REQUEST_BYTES


async def signed_in(scope: Scope) -> bool:
    """Whether the request's session cookie is a signed-in, active user's — the check
    Django's AuthenticationMiddleware makes later (a changed password ends the session)."""
    cookies = b"; ".join(value for name, value in scope.get("headers") or [] if name == b"cookie")
    key = parse_cookie(cookies.decode("latin-1")).get(settings.SESSION_COOKIE_NAME)
    if not key:
        return False
    request = HttpRequest()
    request.session = import_module(settings.SESSION_ENGINE).SessionStore(key)
    user = await aget_user(request)
    return bool(user.is_authenticated)


def too_large_response(limit: int) -> tuple[bytes, bytes]:
    """(content type, body) of the 413 for `path`."""
    message = f"The request body is larger than the limit of {limit:,} bytes."
    page = (
        "<!doctype html><title>Request too large</title>"
        f"<h1>Request too large</h1><p>{escape(message)}</p>"
    )
    return b"text/html; charset=utf-8", page.encode()


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers") or []:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # the server itself rejects a malformed length
    return None


class RequestBodyLimitMiddleware:
    """Wraps the HTTP application (see config/asgi.py)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path") or "/"
        limit = body_limit(path)
        small = settings.WEFT_MAX_REQUEST_BYTES
        # The larger allowance is only a signed-in user's; the session is looked up only
        # for a body that needs it (a declared length past the small limit now, a
        # chunked one when it gets there).
        unchecked = limit > small
        length = _content_length(scope)
        if unchecked and length is not None and length > small:
            unchecked = False
            if not await signed_in(scope):
                limit = small

        async def refuse() -> None:
            content_type, body = too_large_response(limit)
            await send(
                {
                    "type": "http.response.start",
                    "status": 413,
                    "headers": [
                        (b"content-type", content_type),
                        (b"content-length", str(len(body)).encode()),
                        (b"connection", b"close"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})

        if length is not None and length > limit:
            await refuse()
            return

        received = 0
        refused = False

        async def counted_receive() -> Message:
            nonlocal received, refused, limit, unchecked
            message = await receive()
            if message["type"] == "http.request" and not refused:
                received += len(message.get("body", b""))
                if unchecked and received > small:
                    unchecked = False
                    if not await signed_in(scope):
                        limit = small
                if received > limit:
                    refused = True
                    await refuse()
                    # Django stops reading on a disconnect and answers nothing itself.
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            if not refused:
                await send(message)

        await self.app(scope, counted_receive, guarded_send)


# Seconds a client is asked to wait while the database or Redis is away: the launcher
# starts a stopped one again within a second or two (launch/supervisor.py).
UNAVAILABLE_RETRY_AFTER = 5


def dependency_down(exc: BaseException | None) -> bool:
    """Whether `exc` (or what caused it) says the database or Redis cannot be reached:
    a moment's outage, answered 503 with Retry-After rather than as a bug."""
    from django.db import InterfaceError, OperationalError
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    seen = 0
    while exc is not None and seen < 8:
        if isinstance(
            exc, OperationalError | InterfaceError | RedisConnectionError | RedisTimeoutError
        ):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def unavailable_page() -> HttpResponse:
    """The layout's "back in a moment" page, 503: rendered without a request (nothing
    may read the session, which lives in the database that is away)."""
    from django.template import loader

    html = loader.get_template("503.html").render({"retry_after": UNAVAILABLE_RETRY_AFTER})
    response = HttpResponse(html, status=503)
    response["Retry-After"] = str(UNAVAILABLE_RETRY_AFTER)
    return response


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: Django calls it for any exception a view or middleware raised, the
    exception still being handled — the session and login middleware read the
    database before any view, so only here does every page's outage become a 503."""
    import sys

    from django.views.defaults import server_error as plain_server_error

    if dependency_down(sys.exc_info()[1]):
        return unavailable_page()
    return plain_server_error(request)


def same_origin(scope: Scope) -> bool:
    """Whether a WebSocket handshake comes from one of this site's own pages: its Origin
    is exactly the scheme, host and port it was sent to (the host one of ALLOWED_HOSTS),
    or one of CSRF_TRUSTED_ORIGINS — the rule Django's CSRF check applies to a form
    post. A browser always sends Origin on a WebSocket; a handshake without one is no
    page's."""
    from urllib.parse import urlsplit

    from django.http.request import split_domain_port, validate_host
    from django.middleware.csrf import CsrfViewMiddleware
    from django.utils.http import is_same_domain

    headers = {name: value for name, value in scope.get("headers") or []}
    origin = headers.get(b"origin", b"").decode("latin-1").lower()
    host = headers.get(b"host", b"").decode("latin-1").lower()
    if not origin or origin == "null":
        return False
    trusted = CsrfViewMiddleware(lambda request: HttpResponse())
    if origin in trusted.allowed_origins_exact:
        return True
    parsed = urlsplit(origin)
    if any(
        is_same_domain(parsed.netloc, pattern)
        for pattern in trusted.allowed_origin_subdomains.get(parsed.scheme, [])
    ):
        return True
    domain, _port = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return False
    scheme = "https" if scope.get("scheme") in ("wss", "https") else "http"
    return origin == f"{scheme}://{host}"


class WebSocketOriginMiddleware:
    """Refuses (HTTP 403) a WebSocket handshake that is not from this site (same_origin).
    Channels' AllowedHostsOriginValidator compares only the host name, so a page on the
    same host under another port or scheme (another program's) got a signed-in socket."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket" and not same_origin(scope):
            from channels.security.websocket import WebsocketDenier

            await WebsocketDenier()(scope, receive, send)
            return
        await self.app(scope, receive, send)


class RequestIdMiddleware:
    """Every page's answer carries X-Request-Id, as every /v1 answer does (the seed:
    "X-Request-Id … which is on every response"; /v1 sets its own in api/http.py): the
    id the log lines of this request carry (core.logs), to quote in a bug report."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request_id = logs.new_request_id()
        token = logs.bind(request_id=request_id)
        try:
            response = self.get_response(request)
        finally:
            logs.reset(token)
        response["X-Request-Id"] = request_id
        return response

    def process_view(self, request: HttpRequest, view: Any, args: Any, kwargs: Any) -> None:
        # After the session and authentication middleware: whose request this is.
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            logs.bind(user_id=user.pk)
