"""API jobs become the door's runs, key months the ledger's accounts (the data first,
then the old tables go). A job's reservation moves from its submission's metadata row
to its run, as a new job's does at submission."""

from django.db import migrations

from api.migrations import _jobs_to_runs as jobs_to_runs


class Migration(migrations.Migration):
    dependencies = [
        ("api", "0004_apirequest_released_at"),
        ("completions", "0003_one_run"),
    ]

    operations = [
        migrations.RunPython(jobs_to_runs.forward, migrations.RunPython.noop, elidable=False),
        migrations.RemoveConstraint(
            model_name="apikeymonth",
            name="api_key_month_unique",
        ),
        migrations.RemoveIndex(
            model_name="completionjob",
            name="api_job_status_beat",
        ),
        migrations.RemoveIndex(
            model_name="completionjob",
            name="api_job_status_finished",
        ),
        migrations.RemoveIndex(
            model_name="completionjob",
            name="api_job_status_created",
        ),
        migrations.RemoveConstraint(
            model_name="completionjob",
            name="api_job_idempotency_unique",
        ),
        migrations.RemoveField(
            model_name="completionjob",
            name="api_request",
        ),
        migrations.RemoveField(
            model_name="completionjob",
            name="key",
        ),
        migrations.RemoveField(
            model_name="completionjob",
            name="user",
        ),
        migrations.DeleteModel(
            name="ApiKeyMonth",
        ),
        migrations.DeleteModel(
            name="CompletionJob",
        ),
    ]
