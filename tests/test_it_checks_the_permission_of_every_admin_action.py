"""Every admin action asks for a permission, and holds to it: walking every registered
ModelAdmin's actions, a staff user who may only *view* a model can run none of them
(on their own rows or anyone's), and a staff user with the permission an action asks
(*change*; *delete* for unlocking logins) can run it on others' rows and their own —
except approving (or declining) their own budget request, which another member of
staff decides."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import Permission

from api.models import ApiKey
from feedback.models import BudgetRequest

pytestmark = pytest.mark.django_db


def _budget_request(owner) -> BudgetRequest:
    return BudgetRequest.objects.create(owner=owner, amount=12_345, reason="more")


def _key(owner) -> ApiKey:
    return ApiKey.objects.create_key(owner, "k")[0]


def _attempt(owner):
    from datetime import timedelta

    from axes.models import AccessAttempt
    from django.utils import timezone

    row = AccessAttempt.objects.create(
        username=owner.username, ip_address="203.0.113.1", failures_since_start=99,
        get_data="", post_data="", http_accept="", path_info="/login/", user_agent="test",
    )  # fmt: skip
    # Expired (older than the cool-off), so that cleaning up takes it too.
    AccessAttempt.objects.filter(pk=row.pk).update(attempt_time=timezone.now() - timedelta(days=2))
    return row


def _kept(row) -> bool:
    return type(row).objects.filter(pk=row.pk).exists()


def _pending(row: BudgetRequest) -> bool:
    row.refresh_from_db()
    return row.state == "pending"


def _live(row: ApiKey) -> bool:
    row.refresh_from_db()
    return row.revoked_at is None


# (app label, model, action): (make a row owned by a user, "the action left it alone",
# may a staff user with the action's permission run it on their own row?)
ACTIONS: dict[tuple[str, str, str], tuple[Any, Any, bool]] = {
    ("feedback", "budgetrequest", "approve"): (_budget_request, _pending, False),
    ("feedback", "budgetrequest", "decline"): (_budget_request, _pending, False),
    ("api", "apikey", "revoke"): (_key, _live, True),
    ("axes", "accessattempt", "unlock"): (_attempt, _kept, True),
    ("axes", "accessattempt", "cleanup_expired_attempts"): (_attempt, _kept, True),
}


def _custom_actions() -> set[tuple[str, str, str]]:
    found = set()
    for model, model_admin in admin.site._registry.items():
        for name in model_admin.actions or []:
            func = getattr(model_admin, name) if isinstance(name, str) else name
            assert getattr(func, "allowed_permissions", None), (
                f"{model.__name__} admin action {func.__name__} declares no permission"
            )
            found.add((model._meta.app_label, model._meta.model_name, func.__name__))
    return found


def _needs(app: str, model: str, action: str) -> list[str]:
    for registered, model_admin in admin.site._registry.items():
        if (registered._meta.app_label, registered._meta.model_name) == (app, model):
            return list(getattr(model_admin, action).allowed_permissions)
    raise AssertionError(model)


def _staff(make_user, app: str, model: str, *codenames: str):
    user = make_user(is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(
            content_type__app_label=app, codename__in=[f"{c}_{model}" for c in codenames]
        )
    )
    return user


def _run(client, app: str, model: str, action: str, row) -> str:
    response = client.post(
        f"/admin/{app}/{model}/", {"action": action, "_selected_action": [row.pk]}, follow=True
    )
    assert response.status_code == 200
    return response.content.decode()


def test_it_knows_every_custom_action_and_each_declares_a_permission():
    assert _custom_actions() == set(ACTIONS)


@pytest.mark.parametrize("app,model,action", sorted(ACTIONS))
def test_it_refuses_every_action_to_a_view_only_staff_user(client, make_user, app, model, action):
    assert "view" not in _needs(app, model, action)
    make_row, untouched, _ = ACTIONS[(app, model, action)]
    viewer = _staff(make_user, app, model, "view")
    client.force_login(viewer)
    listing = client.get(f"/admin/{app}/{model}/")
    assert listing.status_code == 200  # they may look, but are not offered the action
    assert f'value="{action}"' not in listing.content.decode()
    for row in (make_row(viewer), make_row(make_user())):
        _run(client, app, model, action, row)
        assert untouched(row)


@pytest.mark.parametrize("app,model,action", sorted(ACTIONS))
def test_it_lets_a_change_staff_user_act_on_others_and_own_rows_as_allowed(
    client, make_user, app, model, action
):
    make_row, untouched, on_own = ACTIONS[(app, model, action)]
    changer = _staff(make_user, app, model, "view", *_needs(app, model, action))
    client.force_login(changer)
    others = make_row(make_user())
    _run(client, app, model, action, others)
    assert not untouched(others)
    own = make_row(changer)
    page = _run(client, app, model, action, own)
    assert untouched(own) is not on_own
    if not on_own:
        assert "were your own" in page or "was your own" in page


def test_it_does_not_raise_a_budget_by_a_view_only_approval(client, make_user):
    """The issue's case: view-only staff approving their own request of 12,345."""
    viewer = _staff(make_user, "feedback", "budgetrequest", "view")
    own = _budget_request(viewer)
    client.force_login(viewer)
    _run(client, "feedback", "budgetrequest", "approve", own)
    own.refresh_from_db()
    assert own.state == "pending" and own.budget_after is None


def test_it_refuses_self_approval_in_grants_itself(make_user):
    from feedback import grants

    staff = make_user(is_staff=True, is_superuser=True)
    own = _budget_request(staff)
    with pytest.raises(grants.OwnRequest):
        grants.approve(own, staff)
    assert _pending(own)


def test_it_keeps_staff_from_editing_their_own_budget_rows(client, make_user):
    from completions.models import TokenBudget

    staff = make_user(is_staff=True)
    staff.user_permissions.set(
        Permission.objects.filter(codename__in=["view_tokenbudget", "change_tokenbudget",
                                                "view_apikey", "change_apikey"])
    )  # fmt: skip
    own = TokenBudget.objects.create(user=staff, monthly_tokens=10)
    others = TokenBudget.objects.create(user=make_user(), monthly_tokens=10)
    key = _key(staff)
    client.force_login(staff)
    url = "/admin/completions/tokenbudget/{}/change/"
    client.post(url.format(own.pk), {"user": staff.pk, "monthly_tokens": 10**9})
    client.post(url.format(others.pk), {"user": others.user_id, "monthly_tokens": 99})
    own.refresh_from_db()
    others.refresh_from_db()
    assert (own.monthly_tokens, others.monthly_tokens) == (10, 99)
    client.post(f"/admin/api/apikey/{key.pk}/change/", {"name": "k", "monthly_budget": 10**9})
    key.refresh_from_db()
    assert key.monthly_budget != 10**9
