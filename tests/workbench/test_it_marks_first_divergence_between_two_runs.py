"""Two runs of one prompt with different settings, ticked "compare" on the page, open
side by side with their differing settings and each sample pair's first divergence
marked in both."""

import pytest

from tests.workbench.helpers import WORKBENCH_TIMEOUT, fill_run_form


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_it_marks_first_divergence_between_two_runs(
    wb_stack, engine, make_user, login, page, artifacts_dir
):
    from playwright.sync_api import expect

    user = make_user()
    login(wb_stack["url"], user.username)
    page.goto(f"{wb_stack['url']}/workbench/")
    fill_run_form(page, prompt="The owl said", n=2, logprobs=2, max_tokens=24)
    page.locator("#id_seed").fill("5")
    page.locator("#run-btn").click()
    expect(page.locator(".run").first.locator(".gen-state.state-done")).to_be_visible(
        timeout=WORKBENCH_TIMEOUT
    )
    page.locator("#id_temperature").fill("1.8")
    page.locator("#run-btn").click()
    expect(page.locator(".run")).to_have_count(2)
    expect(page.locator(".run").first.locator(".gen-state.state-done")).to_be_visible(
        timeout=WORKBENCH_TIMEOUT
    )
    bar = page.locator("#compare-bar")
    expect(bar).to_be_hidden()
    for i in range(2):
        page.locator(".run").nth(i).locator(".compare-pick").check()
    expect(bar).to_be_visible()
    page.get_by_role("link", name="Compare the two ticked runs").click()
    page.wait_for_url("**/workbench/compare/?a=*")

    expect(page.locator("tr.differs th")).to_have_text(["temperature"])
    pair = page.locator(".compare-pair[data-diverge-at]").first
    expect(pair).to_be_visible()
    at = int(pair.get_attribute("data-diverge-at"))
    sides = pair.locator(".compare-side")
    texts = [sides.nth(i).locator(".sample").get_attribute("data-text") for i in range(2)]
    assert texts[0][:at] == texts[1][:at] and texts[0][at : at + 1] != texts[1][at : at + 1]
    for i in range(2):
        marked = sides.nth(i).locator(".tok.diverge")
        if at < len(texts[i]):
            expect(marked).to_have_count(1)
            # The mark is on the chip holding the first differing character.
            shared = sides.nth(i).evaluate(
                "(el) => { let t = ''; for (const c of el.querySelectorAll('.tok[data-in]')) {"
                " if (c.classList.contains('diverge')) return t; t += c.textContent; } return null; }"
            )
            assert shared is not None and len(shared) <= at < len(shared) + len(
                marked.text_content()
            )
    page.screenshot(path=str(artifacts_dir / "workbench-compare-two-runs.png"), full_page=True)
