"""A budget request round trip in real Chromium: a Workbench run refused for the budget
offers "Ask for more budget" with what it lacked; the request waits on the Usage page;
staff approve it in the admin; the Usage page shows the answer and the new budget
(its chart too), and the same run then fits and runs."""

import pytest
from playwright.sync_api import expect

from completions.models import TokenBudget
from feedback.models import BudgetRequest
from tests.charts import canvas_ink, chart_entry, watch_errors
from tests.workbench.helpers import WORKBENCH_TIMEOUT, fill_run_form

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_it_runs_after_staff_grant_more_budget(
    wb_stack, engine, make_user, login, page, browser, artifacts_dir
):
    errors = watch_errors(page)
    user = make_user()
    TokenBudget.objects.create(user=user, monthly_tokens=100)
    login(wb_stack["url"], user.username)
    page.goto(f"{wb_stack['url']}/workbench/")
    fill_run_form(page, prompt="the cat", n=2, max_tokens=200)
    page.locator("#run-btn").click()
    notice = page.locator("#run-notice .refused")
    expect(notice).to_contain_text("only 100 are left")
    assert engine.completion_requests() == []

    # The scripted tokenizer: BOS + 2 words = 3 prompt tokens; 3 + 2 × 200 = 403 asked.
    notice.get_by_role("link", name="Ask for more budget").click()
    expect(page.get_by_label("Tokens a month to add")).to_have_value("303")
    page.get_by_label("What is it for?").fill("Longer samples for a comparison.")
    page.get_by_role("button", name="Ask").click()
    page.wait_for_url("**/usage/")
    asked = BudgetRequest.objects.get(owner=user)
    expect(page.locator(f"#budget-request-{asked.pk}")).to_contain_text("pending")
    page.screenshot(path=str(artifacts_dir / "budget-request-pending.png"), full_page=True)

    staff = make_user(is_staff=True, is_superuser=True)
    admin = browser.new_context().new_page()
    admin.goto(f"{wb_stack['url']}/login/")
    admin.get_by_label("Username").fill(staff.username)
    admin.get_by_label("Password").fill("a-long-test-password")
    admin.get_by_role("button", name="Log in").click()
    admin.wait_for_url(lambda url: "/login/" not in url)
    admin.goto(f"{wb_stack['url']}/admin/feedback/budgetrequest/")
    row = admin.locator("#result_list tbody tr", has_text="Longer samples")
    expect(row).to_contain_text("Pending")
    row.locator("input[name=_selected_action]").check()
    admin.locator("select[name=action]").select_option(
        label="Approve: add each amount to its budget"
    )
    admin.get_by_role("button", name="Run").or_(admin.get_by_role("button", name="Go")).click()
    expect(admin.locator(".messagelist")).to_contain_text("Approved 1 request.")
    expect(row).to_contain_text("Approved")
    admin.screenshot(path=str(artifacts_dir / "budget-request-admin-approved.png"))

    page.reload()
    expect(page.locator(f"#budget-request-{asked.pk}")).to_contain_text(
        "the budget went from 100 to 403"
    )
    expect(page.locator("#usage-budget")).to_have_text("403")

    page.goto(f"{wb_stack['url']}/workbench/")
    expect(page.locator("#budget")).to_contain_text("403 of 403 tokens left")
    fill_run_form(page, prompt="the cat", n=2, max_tokens=200)
    page.locator("#run-btn").click()
    run = page.locator(".run").first
    expect(run.locator(".gen-state.state-done").first).to_be_visible(timeout=WORKBENCH_TIMEOUT)
    expect(run.locator(".gen-result .sample")).to_have_count(2)
    assert len(engine.completion_requests()) == 1

    # The Usage page's chart has the run's tokens, under its model, against the new budget.
    page.goto(f"{wb_stack['url']}/usage/")
    figure = page.locator("#chart-usage-pages")
    spec = chart_entry(page, figure)
    used = int(page.locator("#usage-used").text_content())
    series = {s["label"]: s["values"] for s in spec["series"]}
    today = spec["marks"][0]["x"] - 1
    assert series["scripted"][today] == used > 0
    assert series["tokens left"][today] == 403 - used
    assert canvas_ink(page, figure) > 0.01
    figure.scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts_dir / "usage-chart.png"))

    admin.goto(f"{wb_stack['url']}/usage/")
    everyone = admin.locator("#chart-usage-everyone-users")
    assert user.username in [s["label"] for s in chart_entry(admin, everyone)["series"]]
    everyone.scroll_into_view_if_needed()
    admin.screenshot(path=str(artifacts_dir / "usage-everyone.png"))
    admin.context.close()
    assert errors == []  # no script error on the way
