"""The one settings file. Every value that differs between machines comes from
an environment variable through config.env's typed readers; README.md has the
table of variables."""

import os
from datetime import timedelta
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

from config import lanes
from config.env import (
    BASE_DIR,
    DATA_DIR,
    celery_broker_url,
    check_http_url,
    check_redis_url,
    database_from_url,
    embedded_database_url,
    embedded_redis_url,
    env_backends,
    env_bool,
    env_choice,
    env_float,
    env_int,
    env_list,
    env_str,
)

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    # A local install keeps one random key under .data so sessions survive restarts.
    _key_file = DATA_DIR / "secret_key"
    if _key_file.exists():
        SECRET_KEY = _key_file.read_text().strip()
    else:
        import secrets

        DATA_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
        SECRET_KEY = secrets.token_urlsafe(50)
        # 0600 from its creation: no moment when others could read it.
        _fd = os.open(_key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(_fd, "w") as _out:
            _out.write(SECRET_KEY)

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "channels",
    "axes",  # login throttling; before core, whose admin.py adds its unlock action
    "core",
    "completions",
    "workbench",
    "loom",
    "inspector",
    "api",
    "batch",
    "feedback",
    "usage",
]

MIDDLEWARE = [
    "core.middleware.RequestIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Who acts, and from which page, for the Loom's live events (loom/live.py).
    "loom.live.OriginMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "config.statement_timeout.StatementTimeoutMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into the lockout page.
    "axes.middleware.AxesMiddleware",
]

# Login throttling (django-axes), for the login page and the admin's alike: after
# WEFT_LOGIN_FAILURE_LIMIT failed logins for one username, or from one address, that
# username or address is locked out for WEFT_LOGIN_COOLOFF_MINUTES (a 429 with
# templates/registration/locked_out.html); a success clears its failures. Staff unlock
# early in the admin (Access attempts → "Unlock") or with `manage.py axes_reset_username`.
# Attempts are rows in Postgres, so every web process counts the same ones. The address
# is the client's (uvicorn's --proxy-headers behind nginx, FORWARDED_ALLOW_IPS).
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("WEFT_LOGIN_FAILURE_LIMIT", 10, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("WEFT_LOGIN_COOLOFF_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]  # either one locks
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "core.views.locked_out"
AXES_DISABLE_ACCESS_LOG = True  # successful logins are not a table that grows forever
AXES_VERBOSE = False

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASE_URL = env_str("DATABASE_URL") or embedded_database_url()
DATABASES = {"default": database_from_url("DATABASE_URL", DATABASE_URL)}
DATABASES["default"]["CONN_MAX_AGE"] = env_int("DATABASE_CONN_MAX_AGE", 0, minimum=0)
DATABASES["default"]["TEST"] = {"NAME": env_str("WEFT_TEST_DB") or None}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# Longest a single SQL statement may run in the web process (0 = no limit); the
# worker, beat and migrations are not limited (config/statement_timeout.py).
WEFT_WEB_STATEMENT_TIMEOUT = env_float("WEFT_WEB_STATEMENT_TIMEOUT", 30.0)

REDIS_URL = check_redis_url("REDIS_URL", env_str("REDIS_URL") or embedded_redis_url())

CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "weft",
    }
}

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {
            # redis-py 8 times sockets out after 5 s by default, exactly the channel
            # layer's 5 s blocking BZPOPMIN: an idle socket would then crash its consumer.
            "hosts": [{"address": REDIS_URL, "socket_timeout": 30}],
            "prefix": "weft-asgi",
            "capacity": 1000,
            "expiry": 60,
        },
    }
}

CELERY_BROKER_URL = celery_broker_url(REDIS_URL)
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE_FILENAME = str(DATA_DIR / "celerybeat-schedule")
CELERY_TASK_ALWAYS_EAGER = False
SWEEP = env_float("WEFT_JOB_SWEEP_SECONDS", 30.0, minimum=0.1)
CELERY_BEAT_SCHEDULE = {
    # Every run, whatever its caller (page, Batch, API job): a worker that died, a
    # message that may be lost, and the seed's expiry (page checkpoints 7 days; jobs:
    # queued 24 h, content 24 h, metadata 7 days).
    "runs-recover-stale": {"task": "completions.tasks.recover_stale_runs", "schedule": SWEEP},
    "runs-resend-lost": {"task": "completions.tasks.resend_lost_runs", "schedule": SWEEP},
    "runs-expire": {"task": "completions.tasks.expire_runs", "schedule": 300.0},
    "batch-sweep": {"task": "batch.tasks.sweep_batches", "schedule": 10.0},
    "api-release-stale-reservations": {
        "task": "api.tasks.release_stale_api_reservations",
        "schedule": 60.0,
    },
}

# The completion backend: any server speaking vLLM's /v1/completions. Unset ->
# `make run` starts the local engine on WEFT_ENGINE_PORT and points here.
WEFT_ENGINE_PORT = env_int("WEFT_ENGINE_PORT", 8001, minimum=1)
WEFT_BACKEND_URL = check_http_url(
    "WEFT_BACKEND_URL", env_str("WEFT_BACKEND_URL") or f"http://127.0.0.1:{WEFT_ENGINE_PORT}/v1"
)
WEFT_BACKEND_API_KEY = env_str("WEFT_BACKEND_API_KEY")
# Several backends, each model under a short id (README: Model routing); empty: the
# one backend above. WEFT_DEFAULT_MODEL picks the default short id among them.
WEFT_BACKENDS = env_backends("WEFT_BACKENDS")
WEFT_DEFAULT_MODEL = env_str("WEFT_DEFAULT_MODEL")
WEFT_BACKEND_CONNECT_TIMEOUT = env_float("WEFT_BACKEND_CONNECT_TIMEOUT", 5.0)
WEFT_BACKEND_READ_TIMEOUT = env_float("WEFT_BACKEND_READ_TIMEOUT", 120.0)
WEFT_MONTHLY_TOKEN_BUDGET = env_int("WEFT_MONTHLY_TOKEN_BUDGET", 2_000_000, minimum=0)
# The API allowance all of one user's keys share per month (the admin overrides it per
# user), and each key's own cap inside it unless the admin sets one on the key: a request
# must fit in both, so budgets do not multiply by the number of keys.
WEFT_API_USER_MONTHLY_BUDGET = env_int("WEFT_API_USER_MONTHLY_BUDGET", 2_000_000, minimum=0)
WEFT_API_KEY_MONTHLY_BUDGET = env_int(
    "WEFT_API_KEY_MONTHLY_BUDGET", WEFT_API_USER_MONTHLY_BUDGET, minimum=0
)
# Live (unrevoked) keys per user: the keys page and `manage.py weft_api_key create`
# refuse the next one.
WEFT_API_MAX_KEYS_PER_USER = env_int("WEFT_API_MAX_KEYS_PER_USER", 20, minimum=1)
# The /v1 proxy. Per key: active requests, more waiting in order, starts per minute
# (state in Redis, as leases that expire when a process dies without releasing them).
WEFT_API_MAX_ACTIVE = env_int("WEFT_API_MAX_ACTIVE", 16, minimum=1)
WEFT_API_MAX_WAITING = env_int("WEFT_API_MAX_WAITING", 64, minimum=0)
WEFT_API_RATE_PER_MINUTE = env_int("WEFT_API_RATE_PER_MINUTE", 600, minimum=1)
WEFT_API_LEASE_SECONDS = env_float("WEFT_API_LEASE_SECONDS", 30.0, minimum=1.0)
# The same per person: every key of one user together (keys per user are capped, but a
# cap that multiplies by keys is no cap). Default: what one key may have, so a user with
# WEFT_API_MAX_KEYS_PER_USER keys gets no more than a user with one.
WEFT_API_USER_MAX_ACTIVE = env_int("WEFT_API_USER_MAX_ACTIVE", WEFT_API_MAX_ACTIVE, minimum=1)
WEFT_API_USER_MAX_WAITING = env_int("WEFT_API_USER_MAX_WAITING", WEFT_API_MAX_WAITING, minimum=0)
WEFT_API_USER_RATE_PER_MINUTE = env_int(
    "WEFT_API_USER_RATE_PER_MINUTE", WEFT_API_RATE_PER_MINUTE, minimum=1
)
# A non-streaming answer must start inside this window (else 504 upstream_deadline);
# an omitted max_tokens is cut to window × decode rate tokens (seed: ~15,600).
WEFT_API_REQUEST_WINDOW_SECONDS = env_float("WEFT_API_REQUEST_WINDOW_SECONDS", 120.0, minimum=1.0)
WEFT_API_DECODE_RATE = env_float("WEFT_API_DECODE_RATE", 130.0, minimum=0.1)
WEFT_API_MAX_BODY_BYTES = env_int("WEFT_API_MAX_BODY_BYTES", 8 * 1024 * 1024, minimum=1024)
# The child process that parses large /v1 bodies (api/bodies.py): what one body may
# take. 1 GiB holds the Python objects of the largest body (8 MB of `[[],[],…]` is
# ~200 MB) several times over; a body costs well under a second of CPU.
WEFT_API_PARSER_MEMORY_BYTES = env_int("WEFT_API_PARSER_MEMORY_BYTES", 1024**3, minimum=0)
WEFT_API_PARSER_CPU_SECONDS = env_int("WEFT_API_PARSER_CPU_SECONDS", 5, minimum=1)
WEFT_API_PARSER_TIMEOUT_SECONDS = env_int("WEFT_API_PARSER_TIMEOUT_SECONDS", 20, minimum=1)
# A revoked key (or a changed budget) is honoured within this many seconds.
WEFT_API_KEY_CACHE_SECONDS = env_float("WEFT_API_KEY_CACHE_SECONDS", 5.0)
# Completion jobs (Prefer: respond-async). GET /v1/harvest/<id>?wait=S accepts S up to
# the bound; beyond WEFT_JOB_MAX_LONGPOLLS waiting long-polls (all web processes
# together, counted in Redis) a harvest answers at once with X-Acs-Longpoll: declined.
WEFT_JOB_LONGPOLL_MAX_SECONDS = env_float("WEFT_JOB_LONGPOLL_MAX_SECONDS", 30.0, minimum=0.0)
WEFT_JOB_MAX_LONGPOLLS = env_int("WEFT_JOB_MAX_LONGPOLLS", 256, minimum=0)
# One key's share of those places (so one key cannot hold them all), and its jobs
# queued or running at once (beyond: 429 queue_full).
WEFT_JOB_MAX_LONGPOLLS_PER_KEY = env_int(
    "WEFT_JOB_MAX_LONGPOLLS_PER_KEY", max(1, WEFT_JOB_MAX_LONGPOLLS // 4), minimum=1
)
WEFT_API_MAX_JOBS_PER_KEY = env_int("WEFT_API_MAX_JOBS_PER_KEY", 256, minimum=1)
# Per person (all their keys together), as above: one key's share by default.
WEFT_JOB_MAX_LONGPOLLS_PER_USER = env_int(
    "WEFT_JOB_MAX_LONGPOLLS_PER_USER", WEFT_JOB_MAX_LONGPOLLS_PER_KEY, minimum=1
)
WEFT_API_USER_MAX_JOBS = env_int("WEFT_API_USER_MAX_JOBS", WEFT_API_MAX_JOBS_PER_KEY, minimum=1)
# The job results one person may keep stored (api.quotas; README: Configuration): 4 GiB
# admits the seed's largest single job on the local model (a 1,024-token full-vocabulary
# prompt, ~3.2 GB worst case) while 100 people at their cap fill 400 GiB of one disk.
WEFT_API_USER_STORED_BYTES = env_int("WEFT_API_USER_STORED_BYTES", 4 * 1024**3, minimum=0)
# A queued job not claimed this long after its message was sent is sent again (the
# message can be lost with Redis); a job whose worker died is run again, up to this many
# attempts in all (then it fails, charged nothing).
WEFT_JOB_REQUEUE_SECONDS = env_float("WEFT_JOB_REQUEUE_SECONDS", 300.0, minimum=0.1)
WEFT_JOB_MAX_ATTEMPTS = env_int("WEFT_JOB_MAX_ATTEMPTS", 3, minimum=1)
# Retries only where the seed allows them (429 queue_full/rate_limited, 502, 503); a
# Retry-After longer than the wait cap is reported instead of slept through.
WEFT_BACKEND_MAX_RETRIES = env_int("WEFT_BACKEND_MAX_RETRIES", 3, minimum=0)
WEFT_BACKEND_MAX_RETRY_WAIT = env_float("WEFT_BACKEND_MAX_RETRY_WAIT", 30.0)
# The worker writes a running generation's checkpoint (and heartbeat) this often; a
# running generation whose heartbeat is older than the stale limit lost its worker.
WEFT_CHECKPOINT_INTERVAL_SECONDS = env_float("WEFT_CHECKPOINT_INTERVAL_SECONDS", 0.5, minimum=0.05)
WEFT_GENERATION_STALE_SECONDS = env_float("WEFT_GENERATION_STALE_SECONDS", 10.0, minimum=1.0)
# A generation still queued this long after being queued lost its Celery message: the
# beat sweep sends it once more, and fails it (never_started) if still queued this long
# after that, releasing its reservation.
WEFT_GENERATION_QUEUED_LIMIT_SECONDS = env_float(
    "WEFT_GENERATION_QUEUED_LIMIT_SECONDS", 300.0, minimum=1.0
)
# The prefix of the workers' Celery queues (config/lanes.py): runs go to
# `<prefix>.interactive` (page runs, beat's sweeps) or `<prefix>.bulk` (API jobs, Batch
# prompts), each taken by its own worker pool. Empty: "weft".
WEFT_GENERATION_QUEUE = env_str("WEFT_GENERATION_QUEUE")
CELERY_TASK_DEFAULT_QUEUE = lanes.queue_name(lanes.MAINTENANCE_POOL, WEFT_GENERATION_QUEUE)
# How a worker picks the next queued run of its pool: "fair" (owners take turns,
# completions.scheduler) or "arrival" (first queued, first run: a plain FIFO).
WEFT_SCHEDULER = env_choice("WEFT_SCHEDULER", "fair", ("fair", "arrival"))
# Bulk threads kept for owners with nothing running on the bulk pool (completions.
# scheduler), out of WEFT_BULK_SLOTS: every bulk worker's threads together (one worker:
# its WEFT_BULK_WORKER_CONCURRENCY, `make run`'s). 0: no reservation.
WEFT_BULK_WORKER_CONCURRENCY = env_int("WEFT_BULK_WORKER_CONCURRENCY", 8, minimum=1)
WEFT_BULK_SLOTS = env_int("WEFT_BULK_SLOTS", WEFT_BULK_WORKER_CONCURRENCY, minimum=1)
WEFT_BULK_RESERVED_SLOTS = env_int("WEFT_BULK_RESERVED_SLOTS", 1, minimum=0)

# Batch generations queued or running at once, over every user's batches (they share
# the bulk pool's WEFT_BULK_WORKER_CONCURRENCY threads with API jobs, owners in turn).
WEFT_BATCH_CONCURRENCY = env_int("WEFT_BATCH_CONCURRENCY", 4, minimum=1)

# Request bodies over these sizes are answered 413 before they are read
# (core.middleware.RequestBodyLimitMiddleware); imports may be larger.
WEFT_MAX_REQUEST_BYTES = env_int("WEFT_MAX_REQUEST_BYTES", 8 * 1024 * 1024, minimum=1024)
WEFT_MAX_IMPORT_BYTES = env_int("WEFT_MAX_IMPORT_BYTES", 64 * 1024 * 1024, minimum=1024)
WEFT_IMPORT_PATHS = ["/loom/import/", "/batch/new/"]
# Django's own check on form fields (files excluded) agrees with the body limit.
DATA_UPLOAD_MAX_MEMORY_SIZE = WEFT_MAX_REQUEST_BYTES

# WebSockets per person, counted in Redis across every web process (core/consumers.py):
# a page holds one for the layout, a tree page one more plus one per live generation.
# A socket's lease lasts WEFT_WS_LEASE_SECONDS and is renewed every third of it, so a
# web process that dies frees its sockets' places within one lease.
WEFT_WS_PER_USER = env_int("WEFT_WS_PER_USER", 64, minimum=1)
WEFT_WS_PER_USER_TREE = env_int("WEFT_WS_PER_USER_TREE", 8, minimum=1)
WEFT_WS_PER_TREE = env_int("WEFT_WS_PER_TREE", 64, minimum=1)
WEFT_WS_LEASE_SECONDS = env_float("WEFT_WS_LEASE_SECONDS", 30.0, minimum=1.0)
# A page's node switches reach the tree's other pages at most this often (coalesced).
WEFT_PRESENCE_INTERVAL_SECONDS = env_float("WEFT_PRESENCE_INTERVAL_SECONDS", 0.25, minimum=0.0)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Static files are served from the app folders (WhiteNoise finders); collectstatic is
# optional. With STATIC_ROOT set (production: `manage.py collectstatic` into it),
# WhiteNoise serves the collected files under content-hashed names, cached for ever.
STATIC_ROOT = env_str("STATIC_ROOT") or None
WHITENOISE_USE_FINDERS = STATIC_ROOT is None
WHITENOISE_AUTOREFRESH = DEBUG
if STATIC_ROOT:
    STORAGES = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "config.staticfiles.StaticFilesStorage"},
    }

# Feedback and budget requests (feedback/): mail is off unless WEFT_NOTIFY_EMAIL names
# the address staff read; Django's SMTP backend then sends through this server.
WEFT_NOTIFY_EMAIL = env_str("WEFT_NOTIFY_EMAIL")
# Each may mail staff: a person sends at most this many a day (UTC), feedback and budget
# requests counted together — far more than anyone writes by hand, few enough that a
# script cannot flood the staff's inbox. A person has one budget request pending at once.
WEFT_FEEDBACK_PER_DAY = env_int("WEFT_FEEDBACK_PER_DAY", 20, minimum=1)
MAILERS = {
    "default": {
        "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
        "OPTIONS": {
            "host": env_str("WEFT_EMAIL_HOST", "localhost"),
            "port": env_int("WEFT_EMAIL_PORT", 25, minimum=1),
            "username": env_str("WEFT_EMAIL_USER"),
            "password": env_str("WEFT_EMAIL_PASSWORD"),
            "use_tls": env_bool("WEFT_EMAIL_TLS", False),
            "timeout": 10,
        },
    }
}
DEFAULT_FROM_EMAIL = env_str("WEFT_EMAIL_FROM", "weft@localhost")

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
# HTTPS behind the proxy (docs/deploy.md): the proxy terminates TLS and says so in
# X-Forwarded-Proto, which the ASGI server trusts from FORWARDED_ALLOW_IPS.
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
# Probes and scrapes ask the web processes directly, over plain HTTP.
SECURE_REDIRECT_EXEMPT = [r"^health(/ready)?$", r"^metrics$"]
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)

# Content-Security-Policy on every page (Django's own, SECURE_CSP; nginx sends the same
# on its own error pages: deploy/nginx/weft.conf). Scripts only from Weft's own files:
# no inline script, no eval (htmx's eval-based features, `js:` values and trigger
# filters, are not used); the one inline handler left, the Loom's delete confirmation,
# is allowed by its hash. Styles: Weft's files, plus inline style attributes (a chart's
# height, a progress bar's width, htmx's indicator style) — a style cannot run code.
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [
        CSP.SELF,
        CSP.UNSAFE_HASHES,
        "'sha256-AuUK7fTb2JIUvl9WkI6JXPmXwakarOFgTENu3quyodI='",  # loom/trees.html onsubmit
    ],
    "style-src": [CSP.SELF, CSP.UNSAFE_INLINE],
    "img-src": [CSP.SELF, "data:"],
    "font-src": [CSP.SELF, "data:"],
    "connect-src": [CSP.SELF],  # the pages' own fetches and WebSockets
    "object-src": [CSP.NONE],
    "base-uri": [CSP.SELF],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}

# Logs carry ids, states and counts — never prompt or completion text. JSON lines on
# demand (WEFT_LOG_FORMAT=json), each with the request, key, user and run it is about.
WEFT_LOG_FORMAT = env_str("WEFT_LOG_FORMAT", "plain")
if WEFT_LOG_FORMAT not in ("plain", "json"):
    raise ImproperlyConfigured(f"WEFT_LOG_FORMAT={WEFT_LOG_FORMAT!r}: expected plain or json")
LOGGING: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "core.logs.ContextFilter"}},
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {"()": "core.logs.JsonFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": WEFT_LOG_FORMAT,
            "filters": ["context"],
        }
    },
    "root": {"handlers": ["console"], "level": os.environ.get("WEFT_LOG_LEVEL", "INFO")},
    "loggers": {"httpx": {"level": "WARNING"}, "httpcore": {"level": "WARNING"}},
}
if WEFT_LOG_FORMAT == "json":
    # The ASGI server's and Celery's own lines go through the same handler. Its access
    # log stays off (the web command's --no-access-log, which configuring "uvicorn"
    # would otherwise undo).
    LOGGING["loggers"] |= {
        "uvicorn": {"handlers": ["console"], "propagate": False},
        "uvicorn.access": {"handlers": [], "propagate": False},
    }
    CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# Prometheus metrics at /metrics (core/metrics.py), counted by every process of this
# machine: prometheus_client's multiprocess mode keeps each process's values in files
# here (the launcher empties it when it starts the processes). Scraped from localhost,
# or from anywhere with `Authorization: Bearer <WEFT_METRICS_TOKEN>`.
PROMETHEUS_MULTIPROC_DIR = env_str("PROMETHEUS_MULTIPROC_DIR") or str(DATA_DIR / "metrics")
os.environ["PROMETHEUS_MULTIPROC_DIR"] = PROMETHEUS_MULTIPROC_DIR  # read by prometheus_client
try:
    os.makedirs(PROMETHEUS_MULTIPROC_DIR, mode=0o700, exist_ok=True)
except OSError:
    pass  # a read-only data dir (a one-off manage.py command): its metrics are not kept
WEFT_METRICS_TOKEN = env_str("WEFT_METRICS_TOKEN")
