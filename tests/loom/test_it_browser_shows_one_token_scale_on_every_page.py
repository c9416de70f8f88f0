"""Workbench, Loom and Inspect show tokens with one colour scale: the same legend
(labels and colours) on each page, and every chip coloured as its legend entry."""

import math

import pytest
from playwright.sync_api import expect

from loom.models import Author, Tree
from tests.workbench.helpers import fill_run_form

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

WAIT = 30_000
LEGEND_JS = """() => [...document.querySelectorAll('.tok-legend .tok-scale .tok')].map(
    (el) => [el.className, el.textContent, getComputedStyle(el).backgroundColor])"""
CHIPS_JS = """(sel) => [...document.querySelectorAll(sel)].map(
    (el) => [[...el.classList].find((c) => /^p[0-9]$/.test(c)), getComputedStyle(el).backgroundColor])"""


def scale(page, chips: str, shot):
    expect(page.locator(chips).first).to_be_visible(timeout=WAIT)
    legend = page.evaluate(LEGEND_JS)
    colours = {cls.split()[1]: bg for cls, _text, bg in legend}
    got = page.evaluate(CHIPS_JS, chips)
    assert got, chips
    for bin_class, bg in got:
        assert bin_class in colours and colours[bin_class] == bg, (bin_class, bg, colours)
    page.screenshot(path=str(shot))
    return legend, {b for b, _ in got}


def test_it_shows_one_token_scale_on_every_page(loom_stack, make_user, page, login, artifacts_dir):
    user = make_user("scales")
    page.set_viewport_size({"width": 1280, "height": 1000})
    base = loom_stack["url"]
    login(base, "scales")

    page.goto(f"{base}/workbench/")
    fill_run_form(page, prompt="The quiet river", n=1, logprobs=3, max_tokens=24)
    page.locator("#run-btn").click()
    expect(page.locator(".run .gen-state.state-done").first).to_be_visible(timeout=WAIT)
    workbench, wb_bins = scale(
        page, ".gen-result .tok[data-alts]", artifacts_dir / "scale-workbench.png"
    )

    tree = Tree.objects.create_from_prompt(user, "Once")
    probs = [0.9, 0.2, 0.05, 0.02, 0.004, 0.9]
    words = [" upon", " a", " time", " there", " lived", "<|im_end|>"]
    lp = {
        "tokens": words,
        "token_logprobs": [math.log(p) for p in probs],
        "top_logprobs": [{w: math.log(p)} for w, p in zip(words, probs, strict=True)],
    }
    node = tree.root.add_child(" upon a time there lived", author=Author.MODEL, logprobs=lp)
    page.goto(f"{base}/loom/{tree.pk}/n/{node.pk}/")
    loom, loom_bins = scale(page, "#current-seg .tok[data-alts]", artifacts_dir / "scale-loom.png")
    assert loom_bins == {"p0", "p1", "p2", "p3", "p4"}

    page.goto(f"{base}/inspect/")
    page.get_by_label("Text to score").fill("The river ran slowly past the old mill.")
    page.locator("#form-score").get_by_role("button", name="Score").click()
    inspect, _ = scale(page, "#tokens .tok[data-lp]", artifacts_dir / "scale-inspect.png")

    assert workbench == loom == inspect
    assert len(workbench) == 8 and workbench[0][1] == "≥ 0.32"
    assert len({bg for _c, _t, bg in workbench}) == 8  # eight distinct colours
