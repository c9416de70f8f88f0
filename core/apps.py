from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Weft core"

    def ready(self) -> None:
        from celery.signals import task_prerun, worker_ready

        from core import checks, consumers, logs, metrics  # noqa: F401 - checks registers itself

        consumers.connect_signals()
        worker_ready.connect(metrics.start_worker_heartbeat, dispatch_uid="weft-heartbeat")
        task_prerun.connect(
            lambda sender=None, args=None, **kw: logs.bind_task(getattr(sender, "name", ""), args),
            dispatch_uid="weft-log-task",
            weak=False,
        )
