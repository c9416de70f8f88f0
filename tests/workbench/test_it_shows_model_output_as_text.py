"""Model output is text: markup and template syntax in a sample are shown, never run."""

import pytest

from tests.workbench.helpers import make_generation
from workbench.models import Run

NASTY = "<script>alert(1)</script> {{ user }} {% csrf_token %} <img src=x onerror=alert(2)>"


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_it_shows_model_output_as_text(wb_stack, make_user, login, page):
    from playwright.sync_api import expect

    user = make_user()
    logprobs = {
        "tokens": ["<script>", "alert(1)", "</script>"],
        "token_logprobs": [-0.5, -1.0, -0.2],
        "top_logprobs": [
            {"<script>": -0.5, "{{ x }}": -1.5},
            {"alert(1)": -1.0},
            {"</script>": -0.2},
        ],
        "text_offset": [0, 8, 16],
    }
    tokened = make_generation(user, texts=["<script>alert(1)</script>"], logprobs=logprobs,
                              prompt="<b>bold?</b>")  # fmt: skip
    plain = make_generation(user, texts=[NASTY, NASTY + " again"], prompt="{{ prompt }}")
    run = Run.objects.save_generation(plain, title="<i>title</i>", note="{{ note }}")
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    login(wb_stack["url"], user.username)

    page.goto(f"{wb_stack['url']}/workbench/?generation={tokened.pk}")
    sample = page.locator(".run .sample").first
    expect(sample.locator(".sample-text")).to_have_text("<script>alert(1)</script>")
    sample.locator(".tok").first.hover()
    expect(page.locator(".tok-pop")).to_contain_text('"{{ x }}"')
    assert page.locator("#id_prompt").input_value() == "<b>bold?</b>"

    page.goto(f"{wb_stack['url']}/history/{run.pk}/")
    expect(page.locator("h1")).to_have_text("<i>title</i>")
    expect(page.locator(".note")).to_have_text("{{ note }}")
    expect(page.locator(".prompt-view")).to_have_text("{{ prompt }}")
    expect(page.locator(".sample-text").first).to_have_text(NASTY)
    page.goto(f"{wb_stack['url']}/history/?q=alert")
    expect(page.locator("#history-results")).to_contain_text("<i>title</i>")
    page.goto(f"{wb_stack['url']}/history/recover/")
    expect(page.locator("#recover-" + str(tokened.pk))).to_contain_text("<b>bold?</b>")
    assert page.locator("script:not([src])").count() == 0
    assert page.locator("img[src=x]").count() == 0
    assert dialogs == []
