from django.apps import AppConfig


class WorkbenchConfig(AppConfig):
    name = "workbench"

    def ready(self) -> None:
        from completions.registry import register_result_url
        from workbench.views import result_url

        # The door's final fragment loads this in place of the streamed text.
        register_result_url("workbench", result_url)
