"""deploy/nginx/weft.conf, run by nginx in front of a stand-in web process: login
attempts are rate-limited per address (POSTs only), nginx's own answers — its error
pages and the /v1 envelopes — carry HSTS and a Content-Security-Policy that allows
nothing, a page's own policy passes alone (not doubled), and the upload paths stream
their bodies instead of spooling them to disk first."""

import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from launch.datadir import scratch_dir
from launch.runtime import runtime
from launch.supervisor import Supervisor
from tests.deploy.files import NGINX_SITE
from tests.deploy.topology import render_site, start_nginx
from tests.support import free_port

PAGE_POLICY = "default-src 'self'; from-the-page"


class StandIn(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Security-Policy", PAGE_POLICY)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    do_GET = do_POST = _answer

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def edge():
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), StandIn)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    folder = scratch_dir("weft-edge-")
    sup = Supervisor(runtime())
    port = free_port()
    site = render_site([server.server_address[1]], free_port(), port, folder / "nginx")
    try:
        tls = start_nginx(sup, folder / "nginx", site)
        with httpx.Client(base_url=f"https://127.0.0.1:{port}", verify=tls, timeout=30) as http:
            yield http
    finally:
        sup.stop_all()
        server.shutdown()


def _hsts(response: httpx.Response) -> bool:
    return response.headers.get_list("strict-transport-security") == [
        "max-age=31536000; includeSubDomains"
    ]


def test_it_marks_nginx_s_own_answers(edge):
    too_big = edge.post("/workbench/", content=b"x" * (8 * 1024 * 1024 + 1))
    assert too_big.status_code == 413 and "nginx" in too_big.text  # nginx's own page
    api = edge.post("/v1/completions", content=b"x" * (8 * 1024 * 1024 + 1))
    assert api.status_code == 413 and api.json()["error"]["code"] == "request_too_large"
    for answer in (too_big, api):
        assert _hsts(answer), answer.headers
        assert answer.headers.get_list("content-security-policy") == [
            "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
        ]
    page = edge.get("/workbench/")
    assert page.status_code == 200 and _hsts(page)
    assert page.headers.get_list("content-security-policy") == [PAGE_POLICY]  # not doubled


def test_it_rate_limits_login_attempts_per_address(edge):
    assert all(edge.get("/login/").status_code == 200 for _ in range(20))  # reading it is free
    codes = [edge.post("/login/", data={"username": "a", "password": "b"}).status_code
             for _ in range(16)]  # fmt: skip
    assert codes[:11] == [200] * 11 and codes[-1] == 429, codes  # one, and a burst of 10
    assert edge.get("/workbench/").status_code == 200  # other pages are not slowed


def test_it_streams_uploads_instead_of_spooling_them():
    text = NGINX_SITE.read_text()
    for path in ("/loom/import/", "/batch/new/"):
        block = re.search(r"location = " + re.escape(path) + r" \{(.*?)\}", text, re.S)[1]
        assert "proxy_request_buffering off;" in block, path
