from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from core import metrics
from core.health import cached_checks
from core.models import Preferences


def home(request):
    return redirect("workbench")


@login_not_required
@never_cache
def health(request: HttpRequest) -> JsonResponse:
    """Liveness: this process answers. Nothing else is asked — a restart of the
    process cures nothing a database or a backend does (readiness says that)."""
    return JsonResponse({"status": "ok"})


@login_not_required
@never_cache
def ready(request: HttpRequest) -> JsonResponse:
    """Readiness: 503 when Postgres or Redis is down, or every backend (one down
    leaves the others serving). What is down, and each check's time, only to whoever
    may scrape the metrics (this machine, or the metrics token): to anyone else the
    status is all it says."""
    checks = cached_checks()
    down = [name for name, result in checks.items() if not result["ok"]]
    body: dict = {"status": "down" if down else "ok"}
    if metrics.may_scrape(request):
        body |= {"down": down, "checks": checks}
    return JsonResponse(body, status=503 if down else 200)


@login_not_required
@never_cache
def metrics_view(request: HttpRequest) -> HttpResponse:
    """Prometheus metrics of every process of this machine (core/metrics.py)."""
    if not metrics.may_scrape(request):
        return HttpResponse("metrics: localhost only, or Bearer WEFT_METRICS_TOKEN\n",
                            status=403, content_type="text/plain")  # fmt: skip
    body, content_type = metrics.exposition()
    return HttpResponse(body, content_type=content_type)


@require_POST
def plain_view(request):
    """The token views' colours on or off for this user (every page, every browser)."""
    Preferences.objects.set_plain_view(request.user, request.POST.get("plain") == "1")
    if request.htmx:
        return HttpResponse(status=204)
    back = request.POST.get("next", "")
    safe = (
        back.startswith("/")
        and back.isprintable()
        and url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()})
    )
    return redirect(back if safe else "home")


def forbidden(request: HttpRequest, exception: Exception) -> HttpResponse:
    """403: the reason, as a page, or for htmx as a notice in the page's notice area
    (nothing else is swapped: what the user typed stays)."""
    from django.core.exceptions import PermissionDenied
    from django.shortcuts import render

    message = str(exception) if isinstance(exception, PermissionDenied) else ""
    if getattr(request, "htmx", False):
        response = render(request, "403.html#notice", {"exception": message}, status=403)
        response["HX-Reswap"] = "none"
        return response
    return render(request, "403.html", {"exception": message}, status=403)


@login_not_required
def locked_out(request: HttpRequest, response=None, credentials=None) -> HttpResponse:
    """django-axes' lockout answer (AXES_LOCKOUT_CALLABLE): the styled page, 429."""
    from django.conf import settings
    from django.shortcuts import render

    minutes = int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)
    context = {"failure_limit": settings.AXES_FAILURE_LIMIT, "minutes": minutes}
    return render(request, "registration/locked_out.html", context, status=429)
