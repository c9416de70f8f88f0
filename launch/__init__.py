"""`make run` and `make test` land here (`python -m launch run|test`).

run:  check the environment, start what is not configured (embedded Postgres,
      Redis, the local engine), migrate, show the local account, then supervise
      the services of `launch.services` (web, one Celery worker per pool, beat).
test: lint, make sure Chromium and nginx are there, start a throw-away Postgres
      and Redis (unless configured), run pytest, tear everything down.

The modules, by concern:

- `services`:   the one description of Weft's services (name, command, environment,
                readiness check, restart policy); `make run`, the topology test and
                deploy/'s systemd units are built from or checked against it;
- `supervisor`: starting, watching, reviving and stopping child processes;
- `runtime`:    who children run as and from where (the privilege drop and mirrors);
- `datadir`:    the data dir, its lock, the metrics dir, private files;
- `embedded`:   the embedded Postgres and Redis (the same binaries serve the
                topology test as standalone TCP servers with passwords);
- `system`:     Debian packages `make test` installs once (Chromium, nginx);
- `commands`:   `run` and `test` themselves.

Django-free until the environment is checked: nothing here imports Django but
`config.env`'s exception.
"""


def say(message: str) -> None:
    print(f"weft: {message}", flush=True)


class LaunchError(Exception):
    """A one-line reason to stop."""
