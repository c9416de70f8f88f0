from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "api"
    verbose_name = "Public API"

    def ready(self) -> None:
        # Registers the jobs' executor with the door and their end-of-run receiver.
        from api import jobs  # noqa: F401
