"""With the backend unreachable the page still works, says so, and a run is refused
with a clear message — prompt and settings kept."""

import pytest

from tests.support import free_port
from tests.workbench.conftest import weft_stack
from tests.workbench.helpers import fill_run_form


@pytest.fixture(scope="module")
def down_stack(django_db_setup, tmp_path_factory):
    # Nothing listens on this port.
    dead = f"http://127.0.0.1:{free_port()}"
    with weft_stack(dead, tmp_path_factory.mktemp("down-stack")) as url:
        yield url


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_it_reports_backend_down(down_stack, make_user, login, page):
    from playwright.sync_api import expect

    user = make_user()
    login(down_stack, user.username)
    page.goto(f"{down_stack}/workbench/")
    expect(page.locator("#model-error")).to_contain_text("backend cannot be reached")
    page.locator("#id_model").fill("llama-8b")
    fill_run_form(page, prompt="Still here after the error", n=1, max_tokens=8)
    page.locator("#run-btn").click()
    notice = page.locator("#run-notice")
    expect(notice).to_contain_text("The backend could not take the run", timeout=30_000)
    expect(notice).to_contain_text("connect_error")
    expect(notice).to_contain_text("Your prompt and settings are kept")
    assert page.locator("#id_prompt").input_value() == "Still here after the error"
    assert page.locator("#id_max_tokens").input_value() == "8"
