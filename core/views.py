from django.contrib.auth.decorators import login_not_required
from django.http import HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from core.health import run_checks
from core.models import Preferences


def home(request):
    return redirect("workbench")


@login_not_required
@never_cache
def health(request):
    checks = run_checks()
    down = [name for name, result in checks.items() if not result["ok"]]
    body = {"status": "down" if down else "ok", "down": down, "checks": checks}
    return JsonResponse(body, status=503 if down else 200)


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
