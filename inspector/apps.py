from django.apps import AppConfig


class InspectorConfig(AppConfig):
    name = "inspector"
    verbose_name = "Inspect"

    def ready(self) -> None:
        from completions.registry import register_result_url
        from inspector.views import result_url

        # History and the live-update consumer link an "inspect" generation here.
        register_result_url("inspect", result_url)
