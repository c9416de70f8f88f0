"""Feedback (the button on every page, the user's own list) and requests for more
budget (from a refusal, the Usage page or an API key's row). Every row is looked up
with owner=request.user: someone else's id is a 404."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.db import IntegrityError, transaction
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from api.models import ApiKey, ApiRequest
from completions.budget import monthly_budget
from completions.models import Generation
from core.shortcuts import HtmxRequest, int_or_404
from feedback import grants, notify
from feedback.forms import BudgetRequestForm, FeedbackForm
from feedback.models import BudgetRequest, Feedback, over_daily_quota

FORM = "feedback/form.html"
KEYS_LOOKED_AT = 20  # the latest API request is looked for among this many of the user's keys


def latest_request_id(user: Any) -> str:
    """The X-Request-Id of the user's most recent request: a page run's (the backend's
    id, kept on the generation) or an API call's, whichever came last."""
    found = [
        Generation.objects.filter(owner_id=user.pk)
        .exclude(request_id="")
        .order_by("-created_at")
        .values_list("created_at", "request_id")
        .first()
    ]
    for key in ApiKey.objects.for_user(user).order_by("-last_used_at")[:KEYS_LOOKED_AT]:
        found.append(
            ApiRequest.objects.for_key(key).values_list("created_at", "request_id").first()
        )
    known = [f for f in found if f is not None]
    return max(known)[1] if known else ""


def _prefill(request: HtmxRequest) -> dict[str, Any]:
    page = request.GET.get("page") or request.headers.get("Referer") or ""
    return {
        "page_url": page[:2000],
        "reported_at": timezone.now().replace(microsecond=0),
        "request_id": latest_request_id(request.user)[:200],
    }


@require_http_methods(["GET", "POST"])
def feedback_new(request: HtmxRequest) -> HttpResponse:
    """The short form (a dialog over the page, or a page of its own without htmx)."""
    fragment = f"{FORM}#form" if request.htmx else FORM
    if request.method == "GET":
        return render(request, fragment, {"form": FeedbackForm(initial=_prefill(request))})
    form = FeedbackForm(request.POST)
    refusal = over_daily_quota(request.user)
    if refusal:
        form.add_error(None, refusal)
    if not form.is_valid():
        # htmx swaps 2xx only: the dialog gets its form back with the errors.
        return render(request, fragment, {"form": form}, status=200 if request.htmx else 400)
    item = form.save(commit=False)
    item.owner = request.user
    item.save()
    transaction.on_commit(lambda: notify.new_feedback(item))
    if request.htmx:
        return render(request, f"{FORM}#thanks", {"item": item})
    messages.success(request, "Thank you: your feedback is stored, and staff will read it.")
    return redirect("feedback_detail", item.pk)


@require_GET
def feedback_list(request: HtmxRequest) -> HttpResponse:
    return render(request, "feedback/list.html", {"items": Feedback.objects.for_user(request.user)})


@require_GET
def feedback_detail(request: HtmxRequest, feedback_id: int) -> HttpResponse:
    item = get_object_or_404(Feedback.objects.for_user(request.user), pk=feedback_id)
    return render(request, "feedback/detail.html", {"item": item})


# --------------------------------------------------------------------------- budget


def _own_key(request: HtmxRequest, data: Any) -> ApiKey | None:
    raw = data.get("key")
    if not raw:
        return None
    return get_object_or_404(ApiKey.objects.for_user(request.user), pk=int_or_404(raw))


def _suggested(data: Any) -> int | None:
    """What a refusal lacked: asked − left, as the link from it says."""
    try:
        return max(1, int(data.get("asked", "")) - int(data.get("left", "0")))
    except ValueError:
        return None


_ONE_PENDING = (
    "You have a request waiting already (for {target}): staff answer it on the Usage "
    "page. One waits at a time; withdraw that one to ask for something else."
)


@require_http_methods(["GET", "POST"])
def budget_request(request: HtmxRequest) -> HttpResponse:
    """Ask for more tokens a month: ?key=<id> for one of your API keys, else your pages'
    budget; ?asked=&left= (from a refusal) suggest the amount."""
    data = request.POST if request.method == "POST" else request.GET
    key = _own_key(request, data)
    current = key.budget_tokens() if key is not None else monthly_budget(request.user)
    # One waits at a time per person, whichever budget it names (a constraint too).
    pending = BudgetRequest.objects.for_user(request.user).pending().first()
    context: dict[str, Any] = {"key": key, "current": current, "pending": pending}
    if request.method == "GET":
        context["form"] = BudgetRequestForm(initial={"amount": _suggested(data)})
        return render(request, "feedback/budget_request.html", context)
    form = BudgetRequestForm(request.POST)
    context["form"] = form
    if key is not None and key.is_revoked:
        form.add_error(None, "This key is revoked: make a new key instead.")
    elif pending is not None:
        form.add_error(None, _ONE_PENDING.format(target=pending.target))
    elif refusal := over_daily_quota(request.user):
        form.add_error(None, refusal)
    if not form.is_valid():
        return render(request, "feedback/budget_request.html", context, status=400)
    item = form.save(commit=False)
    item.owner = request.user
    item.key = key
    try:
        with transaction.atomic():
            item.save()
    except IntegrityError:  # another post of theirs got there first
        form.add_error(None, _ONE_PENDING.format(target="another budget"))
        return render(request, "feedback/budget_request.html", context, status=400)
    transaction.on_commit(lambda: notify.new_budget_request(item))
    messages.success(
        request, f"Asked for {item.amount:,} more tokens a month for {item.target}: "
                 "staff answer here, on the Usage page."
    )  # fmt: skip
    return redirect("usage")


@require_POST
def budget_request_withdraw(request: HtmxRequest, budget_request_id: int) -> HttpResponse:
    item = get_object_or_404(BudgetRequest.objects.for_user(request.user), pk=budget_request_id)
    if grants.withdraw(item):
        messages.info(request, f"Withdrawn: the request for {item.amount:,} more tokens.")
    else:
        messages.error(request, f"That request was {item.state} already.")
    return redirect("usage")
