from django.apps import AppConfig


class InspectorConfig(AppConfig):
    name = "inspector"
    verbose_name = "Inspect"

    def ready(self) -> None:
        from completions.registry import register_result, register_saved_result
        from inspector.views import render_result, result_context

        register_result("inspect", render_result)
        # A scoring saved to History shows its token table there too.
        register_saved_result("inspect", result_context)
