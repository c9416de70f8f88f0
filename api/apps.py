from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "api"
    verbose_name = "Public API"

    def ready(self) -> None:
        # Registers the jobs' executor with the door and their end-of-run receiver, and
        # the requests' lease check with the door's release sweep.
        from api import executor, jobs, ledger  # noqa: F401
        from api.errors import ERRORS
        from core import metrics

        metrics.register_codes(ERRORS)  # the labels' codes: core imports no app
