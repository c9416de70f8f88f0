"""The page-error watch every Chromium test runs under (tests/browser/page_errors.py):
an uncaught exception or a console error in the `page` fixture's context, or in a
context the test opened itself, fails the test; a console error the test names is let
through, an exception never."""

import pytest

from tests.browser.page_errors import WATCHER

pytestmark = pytest.mark.browser


def test_it_fails_on_an_exception_or_a_console_error_in_any_context(page, browser, request):
    other = browser.new_context().new_page()
    with page.expect_event("pageerror"):
        page.set_content("<script>const e = undefined; e.id;</script>")
    with other.expect_event("console"):
        other.set_content("<script>console.error('lost the socket')</script>")
    other.evaluate("console.log('a plain log is fine')")
    errors = request.node.stash[WATCHER]
    with pytest.raises(pytest.fail.Exception) as failed:
        errors.check()
    assert "Cannot read properties of undefined (reading 'id')" in str(failed.value)
    assert "console error: lost the socket" in str(failed.value)
    # Reported once: the check after this test's body finds nothing new.
    errors.check()


@pytest.mark.allow_console_errors(r"^expected: ")
def test_it_lets_through_only_the_console_errors_a_test_names(page, request):
    with page.expect_event("console"):
        page.set_content("<script>console.error('expected: a refused request')</script>")
    request.node.stash[WATCHER].check()
    with page.expect_event("pageerror"):
        page.set_content("<script>throw new Error('expected: but thrown')</script>")
    with pytest.raises(pytest.fail.Exception, match="page error: .*expected: but thrown"):
        request.node.stash[WATCHER].check()
