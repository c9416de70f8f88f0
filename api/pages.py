"""The API keys page (create, show the secret once, list, revoke) and the published
spec (/openapi.json, /swagger). Every key is looked up with user=request.user, so
someone else's id is a 404."""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from api import openapi, snippets
from api.forms import KeyForm
from api.models import ApiKey, TooManyKeys
from completions import budget
from core.shortcuts import HtmxRequest

PAGE = "api/keys.html"


def _rows(user) -> list[tuple[ApiKey, dict[str, int]]]:
    return [
        (key, budget.key_summary(key))
        for key in ApiKey.objects.for_user(user).select_related("user")
    ]


def api_base_url(request: HttpRequest) -> str:
    """This server's own /v1, as the browser reached it."""
    return request.build_absolute_uri("/v1")


@require_http_methods(["GET", "POST"])
def keys(request: HtmxRequest) -> HttpResponse:
    form = KeyForm(request.POST if request.method == "POST" else None)
    context: dict = {"form": form, "api_base": api_base_url(request)}
    status = 200
    if request.method == "POST":
        made = None
        if form.is_valid():
            try:
                made = ApiKey.objects.create_key(request.user, form.cleaned_data["name"])
            except TooManyKeys as refusal:
                form.add_error(None, str(refusal))
        if made is not None:
            key, secret = made
            model = snippets.default_model_id()
            context.update(
                created=key,
                secret=secret,
                snippets=snippets.for_key(api_base_url(request), secret, model),
                form=KeyForm(),
            )
        elif not request.htmx:  # htmx swaps 2xx only: the form comes back with its errors
            status = 400
    context["rows"] = _rows(request.user)
    template = f"{PAGE}#keys-main" if request.htmx else PAGE
    response = render(request, template, context, status=status)
    # The secret is in this one response only: no cache may keep it.
    add_never_cache_headers(response)
    return response


@require_POST
def revoke(request: HtmxRequest, key_id: int) -> HttpResponse:
    """Revoke once confirmed: the page's button asks first (hx-confirm) and sends
    confirm=1; without it (no JavaScript) the answer is a page that asks."""
    key = get_object_or_404(ApiKey, pk=key_id, user=request.user)
    if request.POST.get("confirm") != "1" and not key.is_revoked:
        return render(request, "api/revoke_confirm.html", {"key": key})
    key.revoke()
    if not request.htmx:
        return redirect("api_keys")
    return render(request, f"{PAGE}#key-row", {"key": key, "usage": budget.key_summary(key)})


# --- the published spec: public, like /health and like the seed's own -----------------
# It holds no secret and no user data; tools (SDK generators, schemathesis, Swagger UI
# before a login) fetch it without a session. Every /v1 call still needs a key.


@login_not_required
@require_GET
def openapi_json(request: HttpRequest) -> JsonResponse:
    spec = openapi.build_spec(request.build_absolute_uri("/").rstrip("/"))
    return JsonResponse(spec, json_dumps_params={"ensure_ascii": False})


@login_not_required
@require_GET
def swagger(request: HttpRequest) -> HttpResponse:
    return render(request, "api/swagger.html")
