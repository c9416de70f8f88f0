"""Every Chromium test fails on a page error or a console error, so a script error can
never pass silently (one once threw on every Loom swap and no test noticed).

`browser` here wraps pytest-playwright's session browser for one test: every context
made in the test — the `page` fixture's and those a test opens itself with
`browser.new_context()` — is watched for uncaught exceptions (`weberror`) and console
messages of type error. The test fails after its body with the list. A test that
provokes an error on purpose (a refused request logs the browser's "Failed to load
resource: … 403") names it: `@pytest.mark.allow_console_errors(r"regex", ...)`, matched
against console messages only — an uncaught exception is never allowed."""

from __future__ import annotations

import re

import pytest

MARKER = "allow_console_errors"
WATCHER = pytest.StashKey["PageErrors"]()


class PageErrors:
    def __init__(self, allowed: list[str]) -> None:
        self.allowed = [re.compile(p) for p in allowed]
        self.found: list[str] = []
        self.reported = 0

    def watch(self, context) -> None:
        context.on("weberror", self._error)
        context.on("console", self._console)

    def _error(self, web_error) -> None:
        error = web_error.error
        frames = (getattr(error, "stack", None) or "").splitlines()[1:2]
        self.found.append(f"page error: {error.message} {' '.join(f.strip() for f in frames)}")

    def _console(self, message) -> None:
        if message.type != "error":
            return
        text = message.text
        if any(p.search(text) for p in self.allowed):
            return
        where = message.location or {}
        self.found.append(
            f"console error: {text} ({where.get('url', '?')}:{where.get('lineNumber', '?')})"
        )

    def check(self) -> None:
        new = self.found[self.reported :]
        self.reported = len(self.found)
        if new:
            pytest.fail("the page reported errors:\n  " + "\n  ".join(new), pytrace=False)


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}(*patterns): console errors this browser test expects (regexes)"
    )


@pytest.fixture
def browser(browser, request):
    """pytest-playwright's browser, every context of this test watched (see above)."""
    allowed = [p for m in request.node.iter_markers(MARKER) for p in m.args]
    errors = PageErrors(allowed)
    request.node.stash[WATCHER] = errors
    made = browser.new_context

    def new_context(*args, **kwargs):
        context = made(*args, **kwargs)
        errors.watch(context)
        return context

    browser.new_context = new_context
    try:
        yield browser
    finally:
        browser.new_context = made
    # Errors that came after the test's body (while its pages closed).
    errors.check()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    result = yield
    errors = item.stash.get(WATCHER, None)
    if errors is not None:
        errors.check()
    return result
