from django.apps import AppConfig


class WorkbenchConfig(AppConfig):
    name = "workbench"

    def ready(self) -> None:
        from completions.registry import register_result
        from workbench.views import render_result

        # The door's final fragment loads this in place of the streamed text.
        register_result("workbench", render_result)
