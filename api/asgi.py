"""/v1 at the ASGI level: requests under /v1 go to the proxy's handlers, everything
else to Django. Under /v1 every answer, errors included, is the seed's JSON envelope
with X-Request-Id — never Django's HTML 404/500, its CSRF refusal or a login redirect,
because none of Django's middleware runs here."""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qsl

from api.errors import ApiError
from api.http import ClientGone, Request, log, log_bug, shown
from core import logs, metrics
from core.middleware import UNAVAILABLE_RETRY_AFTER, dependency_down


def _is_v1(path: str) -> bool:
    return path == "/v1" or path.startswith("/v1/")


def _handler(req: Request):
    from api.urls import QUERY_PARAMS, ROUTES, route_of

    path = route_of(req.path.rstrip("/") if req.path != "/" else req.path)
    methods = ROUTES.get(path)
    if methods is None:
        raise ApiError("not_found", f"no route {req.method} {shown(req.path)} (see /openapi.json)")
    handler = methods.get(req.method)
    if handler is None:
        allowed = ", ".join(methods)
        raise ApiError(
            "method_not_allowed",
            f"{shown(req.path)} takes {allowed}, not {req.method}",
            headers={"Allow": allowed},
        )
    query = req.scope.get("query_string", b"")
    if query:
        try:
            names = [name for name, _ in parse_qsl(query.decode(), keep_blank_values=True,
                                                   strict_parsing=True, errors="strict")]  # fmt: skip
        except (ValueError, UnicodeDecodeError):
            raise ApiError("invalid_request", "the query string is malformed") from None
        accepted = QUERY_PARAMS.get((path, req.method), set())
        unknown = [name for name in names if name not in accepted]
        if unknown or not names:
            takes = ", ".join(sorted(accepted)) or "no query parameters"
            got = shown(", ".join(sorted(set(names))))
            raise ApiError(
                "invalid_request",
                f"{req.method} {shown(req.path)} takes {takes} (got {got})",
                param=shown(unknown[0]) if unknown else None,
            )
    return handler


def _route_template(path: str) -> str:
    """The route a path matched, as a bounded label ("/v1/harvest/{id}"), or "other"."""
    from api.urls import ROUTES, route_of

    matched = route_of(path.rstrip("/") if path != "/" else path)
    return matched if matched in ROUTES else "other"


class V1Router:
    def __init__(self, django_app) -> None:
        self.django_app = django_app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or not _is_v1(scope["path"]):
            await self.django_app(scope, receive, send)
            return
        req = Request(scope, receive, send)
        logs.bind(request_id=req.id)
        code = ""
        try:
            await _handler(req)(req)
        except ApiError as exc:
            code = exc.code
            await req.error(exc)
        except ClientGone:
            code = "client_closed"
            return
        except asyncio.CancelledError:
            code = "client_closed"
            raise
        except Exception as exc:
            if dependency_down(exc):
                # The database or Redis away a moment (restarting): retryable, not a bug.
                code = "service_unavailable"
                log.warning("api %s %s: %s unavailable (request %s)", req.method, req.path,
                            type(exc).__name__, req.id)  # fmt: skip
                await req.error(
                    ApiError(
                        "service_unavailable",
                        f"Weft's database or Redis is unavailable; retry shortly (request {req.id})",
                        retry_after=UNAVAILABLE_RETRY_AFTER,
                    )
                )
                return
            code = "internal_error"
            log_bug(req, exc)
            await req.error(ApiError("internal_error", f"internal error; quote {req.id}"))
        finally:
            metrics.api_answered(req, _route_template(req.path), code)
