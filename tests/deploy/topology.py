"""A production topology on one machine, each part its own process as it would be its
own machine: Postgres and Redis as standalone servers on TCP with passwords (the
embedded mode's own binaries), two scripted backends, the services of
launch/services.py — two web processes, one worker per pool, beat — and nginx in
front, on deploy/nginx/weft.conf with TLS, all with deploy/weft.env's settings.

The site file is used as an operator copies it; only what names this machine changes
(the web processes' ports, nginx's own ports, the certificate). The test's nginx.conf
around it adds, for the test's eyes only, which web process answered each response
(X-Test-Upstream) and an access log of it."""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import shutil
import ssl
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import psycopg
import websockets

from launch import services
from launch.commands import manage
from launch.datadir import reset_metrics_dir, scratch_dir
from launch.embedded import Tcp, ensure_database, start_postgres, start_redis
from launch.runtime import BASE_DIR, runtime
from launch.supervisor import Supervisor, wait_ready
from tests.completions.wsclient import Page
from tests.deploy.files import NGINX_SITE, environment
from tests.support import free_port, wait_until

NGINX = "/usr/sbin/nginx"


class Topology:
    def __init__(self, engines: list[str]) -> None:
        self.engines = engines
        self.scratch = scratch_dir("weft-topology-")
        self.rt = runtime()
        self.data = Supervisor(self.rt)  # Postgres, Redis
        self.app = Supervisor(self.rt)  # Weft's services
        self.proxy = Supervisor(self.rt)  # nginx
        self.pg = Tcp(free_port(), secrets.token_urlsafe(16))
        self.redis = Tcp(free_port(), secrets.token_urlsafe(16))
        self.web_ports = [free_port(), free_port()]
        self.http_port, self.https_port = free_port(), free_port()
        self.base = f"https://127.0.0.1:{self.https_port}"
        self.logs = self.scratch / "logs"
        self.outputs: list = []
        self._reviving = threading.Event()

    # --- the servers ---------------------------------------------------------------

    def start_postgres(self) -> None:
        start_postgres(self.data, self.scratch / "pg", durable=False, tcp=self.pg)

    def start_redis(self) -> None:
        start_redis(self.data, self.scratch / "redis.sock", persist=False, tcp=self.redis)

    def restart(self, name: str) -> None:
        """Stop a server (its own signal: a clean shutdown) and start it again, same port."""
        self.data.stop(name, timeout=15)
        {"postgres": self.start_postgres, "redis": self.start_redis}[name]()

    def db(self) -> psycopg.Connection:
        return psycopg.connect(
            host="127.0.0.1", port=self.pg.port, user="postgres", password=self.pg.password,
            dbname="weft", autocommit=True,
        )  # fmt: skip

    # --- Weft ----------------------------------------------------------------------

    def environment(self) -> dict[str, str]:
        engine_a, engine_b = self.engines
        backends = [
            {"name": "gpu-a", "url": f"{engine_a}/v1", "models": {"tiny-a": "scripted"}},
            {"name": "gpu-b", "url": f"{engine_b}/v1", "models": {"tiny-b": "scripted"}},
        ]
        env = {"PATH": os.environ["PATH"], **environment()}
        env.update(
            SECRET_KEY=secrets.token_urlsafe(50),
            DATABASE_URL=f"postgresql://postgres:{self.pg.password}@127.0.0.1:{self.pg.port}/weft",
            REDIS_URL=f"redis://:{self.redis.password}@127.0.0.1:{self.redis.port}/0",
            WEFT_BACKENDS=json.dumps(backends),
            WEFT_DEFAULT_MODEL="tiny-a",
            ALLOWED_HOSTS="127.0.0.1",
            CSRF_TRUSTED_ORIGINS=self.base,
            WEFT_DATA_DIR=str(self.scratch),
            PROMETHEUS_MULTIPROC_DIR=str(self.scratch / "metrics"),
            STATIC_ROOT=str(self.scratch / "static"),
            WEFT_METRICS_TOKEN=secrets.token_urlsafe(24),
            DJANGO_SETTINGS_MODULE="config.settings",
            # A test's pace: small pools, quick sweeps, short leases, small key limits.
            WEFT_WORKER_CONCURRENCY="2",
            WEFT_BULK_WORKER_CONCURRENCY="2",
            WEFT_CHECKPOINT_INTERVAL_SECONDS="0.2",
            WEFT_GENERATION_STALE_SECONDS="2",
            WEFT_JOB_SWEEP_SECONDS="1",
            WEFT_JOB_REQUEUE_SECONDS="3",
            WEFT_BACKEND_READ_TIMEOUT="10",
            WEFT_BACKEND_MAX_RETRIES="0",
            WEFT_API_MAX_ACTIVE="2",
            WEFT_API_MAX_WAITING="2",
            # The tests give one person several keys, each with its own 2 + 2 places:
            # the person's caps (by default each key's) must not be what refuses them.
            WEFT_API_USER_MAX_ACTIVE="8",
            WEFT_API_USER_MAX_WAITING="8",
            WEFT_API_LEASE_SECONDS="2",
        )
        return env

    def start(self) -> None:
        self.logs.mkdir()
        self.start_postgres()
        ensure_database(self.scratch / "pg", "weft", port=self.pg.port)
        self.start_redis()
        self.env = self.environment()
        reset_metrics_dir(self.scratch / "metrics", self.rt)
        manage(self.env, "migrate", "--noinput", capture=True)
        manage(self.env, "collectstatic", "--noinput", capture=True)
        account = manage(self.env, "weft_local_account", capture=True)
        self.username, self.password = re.search(
            r"username: (\S+)  password: (\S+)", account
        ).groups()
        self.services = services.app_services(
            sys.executable, host="127.0.0.1", web_ports=self.web_ports,
            prefix=self.env["WEFT_GENERATION_QUEUE"], interactive_threads=2, bulk_threads=2,
            schedule=str(self.scratch / "celerybeat-schedule"),
        )  # fmt: skip
        for service in self.services:  # all at once, then each waited for
            self.start_service(service, wait=False)
        for service in self.services:
            self.wait_ready(service.name, since=0)
        self.start_nginx()
        threading.Thread(target=self._revive, daemon=True).start()

    def service(self, name: str) -> services.Service:
        return next(s for s in self.services if s.name == name)

    def log(self, name: str) -> Path:
        return self.logs / f"{name}.log"

    def start_service(self, service: services.Service, *, wait: bool = True) -> None:
        # Kept open: a revived service writes to the same file.
        out = self.log(service.name).open("ab")  # noqa: SIM115 - closed in stop()
        self.outputs.append(out)
        self.app.run(service, self.env, stdout=out, stderr=subprocess.STDOUT)
        if wait:
            self.wait_ready(service.name, since=0)

    def log_size(self, name: str) -> int:
        return self.log(name).stat().st_size

    def wait_ready(self, name: str, since: int) -> None:
        """Until `name` passes its readiness check (launch/services.py); by its output,
        in what it logged after byte `since` (the log keeps earlier starts' lines)."""
        service = self.service(name)
        if service.ready and service.ready.line:
            needle = service.ready.line.encode()
            wait_until(lambda: needle in self.log(name).read_bytes()[since:], 60, name)
        else:
            wait_until(lambda: self.current(name).poll() is None, 15, name)
            wait_ready(service, self.current(name))

    def errors(self) -> str:
        """For a failing assertion's message: the processes' ERROR lines, kept whole in
        .artifacts/topology-errors.log (the scratch folder goes with the test)."""
        lines = []
        for path in sorted(self.logs.iterdir()):
            for line in path.read_text(errors="replace").splitlines():
                if '"level": "ERROR"' in line:
                    lines.append(f"{path.stem}: {line}")
        kept = BASE_DIR / ".artifacts" / "topology-errors.log"
        kept.parent.mkdir(exist_ok=True)
        kept.write_text("\n".join(lines) + "\n")
        return f"{len(lines)} ERROR lines, in {kept}"

    def current(self, name: str) -> subprocess.Popen:
        return next(proc for child, proc, _ in self.app.children if child == name)

    def kill(self, name: str) -> None:
        """SIGKILL: nothing runs in the process any more (the reviver starts it again,
        as systemd's Restart=always would)."""
        proc = self.current(name)
        proc.kill()
        proc.wait()

    def _revive(self) -> None:
        while not self._reviving.wait(0.2):
            self.app.revive()

    # --- nginx -----------------------------------------------------------------------

    def start_nginx(self) -> None:
        folder = self.scratch / "nginx"
        site = render_site(self.web_ports, self.http_port, self.https_port, folder)
        self.tls = start_nginx(self.proxy, folder, site)

    def upstream(self, response: httpx.Response) -> int:
        """Which web process answered (its port), from the test's own header."""
        return int(response.headers["x-test-upstream"].rsplit(":", 1)[1])

    # --- clients -----------------------------------------------------------------

    def http(self, **kwargs) -> httpx.Client:
        return httpx.Client(base_url=self.base, verify=self.tls, timeout=30, **kwargs)

    def log_in(self) -> httpx.Client:
        http = self.http()
        form = http.get("/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
        done = http.post(
            "/login/",
            data={"username": self.username, "password": self.password,
                  "csrfmiddlewaretoken": token},
            headers={"Referer": f"{self.base}/login/"},
        )  # fmt: skip
        assert done.status_code == 302, done.text[:500]
        return http

    def api_key(self, budget: int = 10_000_000) -> str:
        out = manage(self.env, "weft_api_key", "create", self.username, "--budget", str(budget),
                     capture=True)  # fmt: skip
        return out.strip().splitlines()[-1]

    def stop(self) -> None:
        self._reviving.set()
        self.proxy.stop_all()
        self.app.stop_all()
        self.data.stop_all()
        for out in self.outputs:
            out.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


# --- a page's live run, watched over its socket through nginx ------------------------------


def start_run(http: httpx.Client, body: dict) -> int:
    response = http.post(
        "/workbench/run/",
        data={name: str(value) for name, value in body.items()},
        headers={"X-CSRFToken": http.cookies["csrftoken"], "HX-Request": "true",
                 "Referer": str(http.base_url) + "/workbench/"},
    )  # fmt: skip
    assert response.status_code == 200, response.text[:500]
    return int(re.search(r"gen-(\d+)-", response.text).group(1))


class Socket:
    """A page's socket to a run, fed into a `Page`, on a thread of its own; `upstream`
    is the port of the web process it reached, `closed` set when the socket ended."""

    def __init__(self, topology: Topology, http: httpx.Client, generation_id: int, page: Page):
        self.topology, self.page = topology, page
        self.url = topology.base.replace("https://", "wss://") + f"/ws/generations/{generation_id}/"
        self.cookie = f"sessionid={http.cookies['sessionid']}"
        self.upstream: int | None = None
        self.opened, self.closed, self.stop = (
            threading.Event(),
            threading.Event(),
            threading.Event(),
        )
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self.thread.start()
        assert self.opened.wait(15), self.error

    async def _run(self) -> None:
        headers = {"Cookie": self.cookie, "Origin": self.topology.base}
        try:
            async with websockets.connect(self.url, additional_headers=headers,
                                          ssl=self.topology.tls) as ws:  # fmt: skip
                self.upstream = int(ws.response.headers["x-test-upstream"].rsplit(":", 1)[1])
                self.opened.set()
                while not self.stop.is_set() and not self.page.final:
                    try:
                        self.page.feed(await asyncio.wait_for(ws.recv(), 0.2))
                    except TimeoutError:
                        continue
        except Exception as exc:  # a web process killed under it: the page reconnects
            self.error = exc
        finally:
            self.opened.set()
            self.closed.set()


def until(predicate, timeout: float, what: str):
    return wait_until(predicate, timeout, what, interval=0.1)


def expected_text(engine: str, body: dict) -> str:
    answer = httpx.post(f"{engine}/v1/completions", json={**body, "model": "scripted"}, timeout=30)
    return answer.json()["choices"][0]["text"]


# --- nginx on deploy/'s site file, for this machine (the test and bench/topology.py) ------


def render_site(web_ports: list[int], http_port: int, https_port: int, folder: Path) -> str:
    """deploy/nginx/weft.conf with this machine's ports and a certificate in `folder`."""
    text = NGINX_SITE.read_text()
    servers = "".join(
        f"    server 127.0.0.1:{port} max_fails=1 fail_timeout=10s;\n" for port in web_ports
    )
    text, count = re.subn(r"(?m)^    server 127\.0\.0\.1:\d+ [^\n]*\n", "", text)
    assert count == 2, "the site file's upstream block changed: update tests/deploy/topology.py"
    text = text.replace("    zone weft_web 64k;\n", "    zone weft_web 64k;\n" + servers)
    text = re.sub(r"(?m)^\s*listen \[::\]:\d+[^\n]*\n", "", text)
    text = text.replace("listen 80;", f"listen 127.0.0.1:{http_port};")
    text = text.replace("listen 443 ssl http2;", f"listen 127.0.0.1:{https_port} ssl http2;")
    text = text.replace("server_name weft.example.org;", "server_name 127.0.0.1;")
    text = re.sub(r"ssl_certificate\s+\S+;", f"ssl_certificate {folder / 'cert.pem'};", text)
    text = re.sub(r"ssl_certificate_key\s+\S+;", f"ssl_certificate_key {folder / 'key.pem'};", text)
    # The site's blocks have add_header lines of their own, so nginx does not inherit
    # the test's from http{}: it goes beside each block's.
    text = text.replace(
        "add_header Content-Security-Policy $weft_csp always;\n",
        "add_header Content-Security-Policy $weft_csp always;\n"
        "    add_header X-Test-Upstream $upstream_addr always;\n",
    )
    return text


def start_nginx(sup: Supervisor, folder: Path, site: str) -> ssl.SSLContext:
    """nginx (as the children run: the service user when root) on `site`, with a fresh
    self-signed certificate for 127.0.0.1 in `folder`; returns the TLS context that
    trusts it. Around the site, for tests only: X-Test-Upstream on every response (the
    web process that answered) and an access log of it."""
    folder.mkdir()
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", key, "-out", cert],
        check=True, capture_output=True,
    )  # fmt: skip
    (folder / "weft.conf").write_text(site)
    (folder / "nginx.conf").write_text(f"""
daemon off;
worker_processes 2;
pid {folder}/nginx.pid;
events {{ worker_connections 1024; }}
http {{
    include /etc/nginx/mime.types;
    log_format upstream '$request_method $uri $status $upstream_addr';
    access_log {folder}/access.log upstream;
    client_body_temp_path {folder}/body;
    proxy_temp_path {folder}/proxy;
    fastcgi_temp_path {folder}/fastcgi;
    uwsgi_temp_path {folder}/uwsgi;
    scgi_temp_path {folder}/scgi;
    add_header X-Test-Upstream $upstream_addr always;
    include {folder}/weft.conf;
}}
""")
    user = sup.runtime.user
    if user is not None:  # nginx runs as the service user, like the rest
        for path in [folder, *folder.iterdir()]:
            os.chown(path, user.pw_uid, user.pw_gid)
    proc = sup.start(
        "nginx",
        [NGINX, "-p", str(folder), "-c", str(folder / "nginx.conf"), "-e", str(folder / "error.log")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    tls = ssl.create_default_context(cafile=str(cert))
    https = re.search(r"listen 127\.0\.0\.1:(\d+) ssl", site)[1]
    errors = folder / "error.log"
    wait_until(
        lambda: (
            proc.poll() is None
            and httpx.get(f"https://127.0.0.1:{https}/health", verify=tls).status_code == 200
        ),
        15,
        f"nginx ({errors.read_text() if errors.exists() else ''})",
    )
    return tls
