"""On the real model: a run with the seed left empty shows the seed Weft drew, and
Re-run gives exactly the same text."""

import pytest

from tests.workbench.helpers import WORKBENCH_TIMEOUT, fill_run_form


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_it_reruns_a_drawn_seed_identically(llama_stack, make_user, login, page, artifacts_dir):
    from playwright.sync_api import expect

    user = make_user()
    login(llama_stack, user.username)
    page.goto(f"{llama_stack}/workbench/")
    fill_run_form(page, prompt="The old lighthouse keeper opened the door and", n=2, max_tokens=20)
    page.locator("#id_seed").fill("")
    page.locator("#id_temperature").fill("1.0")
    page.locator("#run-btn").click()
    first = page.locator(".run").first
    expect(first.locator(".gen-state.state-done")).to_be_visible(timeout=WORKBENCH_TIMEOUT * 2)
    seed = first.locator(".run-seed code").text_content()
    assert seed.isdigit()
    texts = [
        first.locator(".gen-result .sample").nth(i).get_attribute("data-text") for i in range(2)
    ]
    assert all(texts) and texts[0] != texts[1]  # seed + index: the samples still differ

    first.get_by_role("button", name="Re-run").click()
    expect(page.locator(".run")).to_have_count(2)
    again = page.locator(".run").first
    expect(again.locator(".gen-state.state-done")).to_be_visible(timeout=WORKBENCH_TIMEOUT * 2)
    assert again.locator(".run-seed code").text_content() == seed
    rerun = [
        again.locator(".gen-result .sample").nth(i).get_attribute("data-text") for i in range(2)
    ]
    assert rerun == texts
    page.screenshot(path=str(artifacts_dir / "workbench-rerun-drawn-seed.png"))
