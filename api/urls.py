"""The /v1 routes. They are matched by api.asgi (before Django's URL resolver ever
sees the request), so this is a plain table: path -> {method: async handler}. A path
with `{id}` matches one path segment; QUERY_PARAMS names the few query parameters an
operation takes (every other operation refuses any query string)."""

from api import harvest, proxy

ROUTES = {
    "/v1/completions": {"POST": proxy.completions},
    "/v1/models": {"GET": proxy.models},
    "/v1/chat/completions": {"POST": proxy.chat_completions},
    harvest.ROUTE: {"GET": harvest.harvest, "DELETE": harvest.cancel},
}

QUERY_PARAMS = {(harvest.ROUTE, "GET"): {"wait"}}


def route_of(path: str) -> str:
    """The ROUTES entry a (trailing-slash-stripped) path falls under."""
    if path.startswith(harvest.PREFIX):
        rest = path.removeprefix(harvest.PREFIX)
        if rest and "/" not in rest:
            return harvest.ROUTE
    return path
