from django.apps import AppConfig


class CompletionsConfig(AppConfig):
    name = "completions"

    def ready(self) -> None:
        # Connects the pre_delete receiver that settles a live row's reservation.
        from completions import lifecycle  # noqa: F401
