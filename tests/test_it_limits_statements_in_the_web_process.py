"""The web process sets a statement timeout on its database connections, so a
query that never ends cannot hold a web thread forever; a process that serves
no web requests (the worker, migrations) is not limited."""

import subprocess
import sys
import threading

import pytest
from django.conf import settings as django_settings
from django.db import OperationalError, connection

from tests.support import BASE_DIR, child_env

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_cancels_a_long_statement_in_the_web_process(client, make_user, settings):
    settings.WEFT_WEB_STATEMENT_TIMEOUT = 0.2
    client.force_login(make_user())
    assert client.get("/loom/").status_code == 200  # the web stack is loaded
    seen = {}

    def fresh_connection():
        try:
            with connection.cursor() as cur:
                cur.execute("SHOW statement_timeout")
                seen["timeout"] = cur.fetchone()[0]
                cur.execute("SELECT pg_sleep(2)")
            seen["slept"] = True
        except OperationalError as exc:
            seen["error"] = str(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=fresh_connection)
    thread.start()
    thread.join(10)
    assert seen["timeout"] == "200ms"
    assert "statement timeout" in seen["error"] and "slept" not in seen


def test_it_leaves_other_processes_unlimited():
    env = child_env(django_settings.DATABASES["default"]["NAME"])
    code = (
        "import django; django.setup()\n"
        "from django.db import connection\n"
        "cur = connection.cursor(); cur.execute('SHOW statement_timeout'); print(cur.fetchone()[0])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.stdout.strip() == "0", out.stderr
