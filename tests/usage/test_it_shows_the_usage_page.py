import re

import pytest

from completions import budget
from completions.models import BudgetMonth, DailyUsage

pytestmark = pytest.mark.django_db


def test_it_shows_budget_used_reserved_remaining_and_days(client, make_user, budget_of):
    user = make_user()
    budget_of(user, 50_000)
    month = budget.month_of()
    BudgetMonth.objects.create(
        account=f"pages:{user.pk}", user=user, month=month, used=1234, reserved=300
    )
    DailyUsage.objects.create(
        user=user, day=month, prompt_tokens=1000, completion_tokens=234, runs=3
    )
    client.force_login(user)
    response = client.get("/usage/")
    assert response.status_code == 200
    page = response.content.decode()
    assert 'id="usage-budget">50,000<' in page
    assert 'id="usage-used">1,234<' in page  # thousands separated
    assert 'id="usage-reserved">300<' in page
    assert 'id="usage-remaining">48,466<' in page
    row = re.sub(r">\s+<", "><", page)
    assert f"<td>{month:%Y-%m-%d}</td><td>3</td><td>1,000</td><td>234</td><td>1,234</td>" in row
    assert "<nav" in page  # the real layout, not a placeholder


def test_it_starts_a_month_at_midnight_utc_on_the_first():
    import datetime as dt

    assert budget.month_of(dt.datetime(2026, 3, 31, 23, 59, tzinfo=dt.UTC)) == dt.date(2026, 3, 1)
    assert budget.month_of(dt.datetime(2026, 4, 1, 0, 0, tzinfo=dt.UTC)) == dt.date(2026, 4, 1)
    # 23:30 on the 31st in New York is already April in UTC.
    ny = dt.timezone(dt.timedelta(hours=-4))
    assert budget.month_of(dt.datetime(2026, 3, 31, 23, 30, tzinfo=ny)) == dt.date(2026, 4, 1)
    assert budget.next_reset(dt.datetime(2026, 12, 5, tzinfo=dt.UTC)) == dt.datetime(
        2027, 1, 1, tzinfo=dt.UTC
    )


def test_it_shows_the_api_allowance_the_keys_share(client, make_user, settings):
    from api.models import ApiKey

    settings.WEFT_API_USER_MONTHLY_BUDGET = 9000
    user = make_user()
    key, _ = ApiKey.objects.create_key(user, "one")
    month = budget.month_of()
    BudgetMonth.objects.create(account=f"api:{user.pk}", user=user, month=month, used=4000)
    BudgetMonth.objects.create(account=f"key:{key.pk}", user=user, month=month, used=4000)
    client.force_login(user)
    page = client.get("/usage/").content.decode()
    shared = page.split('id="usage-api-allowance"')[1].split("</dl>")[0]
    assert "<dd>9000</dd>" in shared and "<dd>5000</dd>" in shared  # allowance, remaining
