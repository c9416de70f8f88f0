"""The /v1 routes. They are matched by api.asgi (before Django's URL resolver ever
sees the request), so this is a plain table: path -> {method: async handler}."""

from api import proxy

ROUTES = {
    "/v1/completions": {"POST": proxy.completions},
    "/v1/models": {"GET": proxy.models},
    "/v1/chat/completions": {"POST": proxy.chat_completions},
}
