from django.apps import AppConfig


class WorkbenchConfig(AppConfig):
    name = "workbench"

    def ready(self) -> None:
        from completions.registry import register_history, register_result
        from workbench.models import Run
        from workbench.views import render_result

        # The door's final fragment loads this in place of the streamed text.
        register_result("workbench", render_result)
        # Other pages (Inspect) save to History through the door's registry.
        register_history(Run.objects.save_generation)
