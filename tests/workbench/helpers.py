"""Small helpers shared by the Workbench tests."""

from __future__ import annotations

from typing import Any

from completions.models import Generation

WORKBENCH_TIMEOUT = 30_000  # ms: generous, the machine is shared


def make_generation(user, *, texts: list[str], state: str = "done", **fields: Any) -> Generation:
    """A finished checkpoint written directly (no backend), e.g. for output no model
    would produce on demand."""
    params = {"model": "scripted", "prompt": fields.pop("prompt", "Once"), "max_tokens": 16}
    params["n"] = len(texts)
    logprobs = fields.pop("logprobs", None)
    choices = [
        {
            "index": i,
            "text": text,
            "finish_reason": "length",
            "stop_reason": None,
            "logprobs": logprobs if i == 0 else None,
            "prompt_logprobs": None,
        }
        for i, text in enumerate(texts)
    ]
    return Generation.objects.create(
        owner=user,
        kind=fields.pop("kind", "workbench"),
        params=params,
        state=state,
        choices=choices,
        usage={"prompt_tokens": 2, "completion_tokens": 16, "total_tokens": 18},
        request_id=fields.pop("request_id", "req-test-1"),
        served_model="weft/scripted-tiny",
        **fields,
    )


def fill_run_form(
    page, *, prompt: str, n: int = 1, logprobs: int | None = None, max_tokens: int = 16
):
    page.locator("#id_prompt").fill(prompt)
    page.locator("#id_n").fill(str(n))
    page.locator("#id_max_tokens").fill(str(max_tokens))
    page.locator("#id_logprobs").fill("" if logprobs is None else str(logprobs))


def drive_main_flow(page, base_url: str, *, prompt: str, artifacts=None, shot: str = "") -> dict:
    """As a new user would: n = 3 with logprobs = 5, run, watch three samples stream,
    hover a token, branch from an alternative, save, find it in History by a word of a
    sample, export JSONL. Returns what the caller may check further."""
    import json
    import re

    from playwright.sync_api import expect

    page.goto(f"{base_url}/workbench/")
    fill_run_form(page, prompt=prompt, n=3, logprobs=5, max_tokens=24)
    page.locator("#run-btn").click()
    run = page.locator(".run").first
    # Streaming: text appears in the live targets before the saved result replaces them.
    expect(run.locator("pre[id$='-choice-0']")).not_to_be_empty(timeout=WORKBENCH_TIMEOUT)
    expect(run.locator(".gen-state.state-done").first).to_be_visible(timeout=WORKBENCH_TIMEOUT)
    samples = run.locator(".gen-result .sample")
    expect(samples).to_have_count(3, timeout=WORKBENCH_TIMEOUT)
    for i in range(3):
        expect(samples.nth(i).locator(".sample-text")).not_to_be_empty()
    if artifacts is not None and shot:
        page.screenshot(path=str(artifacts / shot), full_page=True)

    # Hover the third in-text token of sample 0: the popover lists alternatives.
    tokens = samples.nth(0).locator(".tok[data-in][data-alts]")
    target = tokens.nth(2)
    before = "".join(tokens.nth(i).text_content() for i in range(2))
    target.hover()
    pop = page.locator(".tok-pop")
    expect(pop).to_be_visible()
    expect(pop.locator(".alt.sampled")).to_have_count(1)
    expect(pop.locator(".pop-foot")).to_contain_text("cover")
    alternatives = pop.locator(".alt:not(.sampled)")
    assert alternatives.count() >= 1
    chosen = alternatives.first.get_attribute("data-alt")
    alternatives.first.click()
    branched = page.locator("#id_prompt").input_value()
    assert branched == prompt + before + chosen, (branched, prompt, before, chosen)

    # Save with a title, then find it in History by a word of a sample.
    texts = [samples.nth(i).get_attribute("data-text") for i in range(3)]
    run.locator("input[name=title]").fill("three samples")
    run.get_by_role("button", name="Save to History").click()
    expect(run.locator(".saved")).to_contain_text("Saved to History")
    word = max(re.findall(r"[A-Za-z]{3,}", " ".join(texts)), key=len)
    page.goto(f"{base_url}/history/")
    page.get_by_label("Search prompts and samples").fill(word)
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#history-results")).to_contain_text("three samples")
    expect(page.locator("#history-results")).to_contain_text("1 saved run")

    # Export JSONL and parse every line.
    page.get_by_role("link", name="three samples").click()
    href = page.get_by_role("link", name="JSONL").get_attribute("href")
    response = page.request.get(f"{base_url}{href}")
    assert response.ok
    lines = [json.loads(line) for line in response.text().splitlines()]
    assert [line["text"] for line in lines] == texts
    for line in lines:
        assert line["prompt"] == prompt
        assert line["parameters"]["n"] == 3 and line["parameters"]["logprobs"] == 5
        assert line["model_checkpoint"] and line["request_id"]
        assert len(line["tokens"]) == len(line["token_logprobs"]) > 0
    return {"texts": texts, "lines": lines}
