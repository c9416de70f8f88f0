from django.apps import AppConfig


class InspectorConfig(AppConfig):
    name = "inspector"
    verbose_name = "Inspect"

    def ready(self) -> None:
        from completions.registry import register_result
        from inspector.views import render_result

        register_result("inspect", render_result)
