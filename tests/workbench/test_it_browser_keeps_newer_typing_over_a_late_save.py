"""In Chromium: a debounced draft save is still on its way when the page is left and
the beacon carries newer text; the older save reaches the server last. The page
numbers its saves, and the server keeps the newest: the newer typing survives."""

import time

import pytest

from tests.workbench.helpers import WORKBENCH_TIMEOUT

OLDER = "The lighthouse"
NEWER = "The lighthouse keeper wrote to the sea"


def fields_of(save: tuple[str, bytes]) -> dict[str, str]:
    """The multipart form a draft save carries, as {name: value}."""
    content_type, body = save
    boundary = content_type.split("boundary=")[1].encode()
    out = {}
    for part in body.split(b"--" + boundary):
        head, _, value = part.partition(b"\r\n\r\n")
        if b'name="' in head:
            name = head.split(b'name="')[1].split(b'"')[0].decode()
            out[name] = value.removesuffix(b"\r\n").decode()
    return out


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_it_keeps_newer_typing_over_a_save_that_lands_late(
    wb_stack, make_user, login, page, artifacts_dir
):
    from playwright.sync_api import expect

    from workbench.models import Draft

    user = make_user()
    url = wb_stack["url"]
    login(url, user.username)
    held = []  # the debounced save, kept back as if still on its way

    def on_draft(route):
        save = (route.request.headers["content-type"], route.request.post_data_buffer or b"")
        if not held and fields_of(save).get("prompt") == OLDER:
            held.append(save)
            route.fulfill(status=200, body='<span id="draft-status">Draft saved</span>')
        else:
            route.continue_()

    page.route("**/workbench/draft/", on_draft)
    page.goto(f"{url}/workbench/")
    page.locator("#id_prompt").fill(OLDER)
    deadline = time.monotonic() + WORKBENCH_TIMEOUT / 1000
    while not held:
        assert time.monotonic() < deadline, "the debounced save never left"
        page.wait_for_timeout(50)

    # Newer text, and straight away to History: the beacon carries it.
    page.locator("#id_prompt").fill(NEWER)
    page.get_by_role("link", name="History").click()
    page.wait_for_url("**/history/")
    while not Draft.objects.filter(owner=user, values__prompt=NEWER).exists():
        assert time.monotonic() < deadline, "the beacon's save never arrived"
        time.sleep(0.05)

    # Now the older save arrives, last.
    content_type, body = held[0]
    late = page.request.post(f"{url}/workbench/draft/", headers={"content-type": content_type},
                             data=body)  # fmt: skip
    assert late.status == 200
    assert Draft.objects.get(owner=user).values["prompt"] == NEWER

    # The saves were numbered by the page, in the order they were made (the beacon
    # itself is not routed through Playwright: the server's record says what it sent).
    older = fields_of(held[0])
    assert len(older["draft_page"]) == 24 and older["draft_seq"] == "1"
    page_id, newest = Draft.objects.get(owner=user).save_numbers[-1]
    assert page_id == older["draft_page"] and newest > 1

    page.goto(f"{url}/workbench/")
    expect(page.locator("#id_prompt")).to_have_value(NEWER)
    page.screenshot(path=str(artifacts_dir / "workbench-draft-late-save.png"))
