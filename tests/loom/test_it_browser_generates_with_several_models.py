"""Several models at once, in real Chromium against two real backends routed by
WEFT_BACKENDS (the local engine with SmolLM2 and the scripted engine under the alias
"tiny"): n children from each model, every child coloured by its model, the same
colours in the legend, and each model's request sent to its own backend."""

import json

import pytest
from playwright.sync_api import expect

from completions.models import Generation
from loom.models import Author, Tree
from tests.support import Supervisor, child_env, free_port, start_web, start_worker

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]
WAIT = 90_000
COLOURS_JS = """() => [...document.querySelectorAll('#loom-children .child.model')].map(
    (el) => [el.dataset.model, getComputedStyle(el).borderLeftColor])"""
LEGEND_JS = """() => [...document.querySelectorAll('.model-legend .model-key')].map(
    (el) => [el.textContent, getComputedStyle(el).borderLeftColor])"""


@pytest.fixture(autouse=True)
def real_passwords(settings):
    """The user logs in through the real server, which checks the real hasher."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]


@pytest.fixture(scope="module")
def two_model_stack(django_db_setup, tmp_path_factory):
    pytest.importorskip("llama_cpp")
    from django.conf import settings

    from engine.testing import run_engine

    with (
        run_engine("llama", n_threads=1, startup_timeout=120) as local,
        run_engine("scripted", token_delay=0.01) as scripted,
    ):
        backends = [
            {"url": "local"},
            {"name": "scripted", "url": f"{scripted}/v1", "models": {"tiny": "scripted"}},
        ]
        env = child_env(
            settings.DATABASES["default"]["NAME"],
            WEFT_BACKEND_URL=f"{local}/v1",
            WEFT_BACKENDS=json.dumps(backends),
            WEFT_DEFAULT_MODEL="",
            WEFT_GENERATION_QUEUE="loom-models",
        )
        sup = Supervisor()
        logs = tmp_path_factory.mktemp("loommodels")
        try:
            url = start_web(sup, env, free_port())
            start_worker(sup, env, logs / "worker.log")
            yield {"url": url, "scripted": scripted}
        finally:
            sup.stop_all()


def test_it_generates_n_children_per_model_coloured_by_model(
    two_model_stack, make_user, page, login, artifacts_dir
):
    import httpx

    user = make_user("models")
    tree = Tree.objects.create_from_prompt(user, "The weather today is")
    root = tree.root
    page.set_viewport_size({"width": 1400, "height": 1100})
    login(two_model_stack["url"], "models")
    httpx.delete(f"{two_model_stack['scripted']}/_scripted/requests").raise_for_status()
    page.goto(f"{two_model_stack['url']}/loom/{tree.pk}/n/{root.pk}/")

    page.locator("#gen-settings summary").click()
    page.get_by_label("n", exact=True).fill("2")
    page.get_by_label("max_tokens").fill("6")
    page.get_by_label("smollm2-135m", exact=True).check()
    page.get_by_label("tiny", exact=True).check()
    page.get_by_role("button", name="Generate", exact=True).click()
    expect(page.locator(".gen-live")).to_have_count(2)
    expect(page.locator(".placeholders .child")).to_have_count(4)
    expect(page.locator("#loom-children .child.model")).to_have_count(4, timeout=WAIT)
    # The second generation to finish re-reads the reader once more: wait for it.
    expect(page.locator(".gen-live")).to_have_count(0, timeout=WAIT)

    kids = list(root.children())
    assert sorted(k.params["model"] for k in kids) == [
        "smollm2-135m",
        "smollm2-135m",
        "tiny",
        "tiny",
    ]
    assert all(k.author == Author.MODEL and k.text for k in kids)
    by_model = {g.params["model"]: g for g in Generation.objects.filter(target__parent=root.pk)}
    assert set(by_model) == {"smollm2-135m", "tiny"} and all(
        g.state == "done" for g in by_model.values()
    )
    assert (
        by_model["tiny"].served_model == "weft/scripted-tiny"
    )  # the alias went to its own backend
    sent = [r for r in httpx.get(f"{two_model_stack['scripted']}/_scripted/requests").json()["requests"]
            if r["path"] == "/v1/completions"]  # fmt: skip
    assert len(sent) == 1  # smollm2's request never reached the scripted engine

    colours = page.evaluate(COLOURS_JS)
    per_model: dict[str, set] = {}
    for model, colour in colours:
        per_model.setdefault(model, set()).add(colour)
    assert set(per_model) == {"smollm2-135m", "tiny"}
    assert all(len(c) == 1 for c in per_model.values())  # one colour per model
    assert per_model["smollm2-135m"] != per_model["tiny"]
    legend = dict(page.evaluate(LEGEND_JS))
    assert {m: {c} for m, c in legend.items()} == per_model
    page.screenshot(path=artifacts_dir / "loom-several-models.png")
