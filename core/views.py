from django.contrib.auth.decorators import login_not_required
from django.http import JsonResponse
from django.shortcuts import redirect
from django.views.decorators.cache import never_cache

from core.health import run_checks


def home(request):
    return redirect("workbench")


@login_not_required
@never_cache
def health(request):
    checks = run_checks()
    down = [name for name, result in checks.items() if not result["ok"]]
    body = {"status": "down" if down else "ok", "down": down, "checks": checks}
    return JsonResponse(body, status=503 if down else 200)
