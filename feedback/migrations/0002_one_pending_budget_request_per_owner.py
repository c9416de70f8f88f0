from django.db import migrations, models


def withdraw_all_but_the_newest(apps, schema_editor):
    """Before the constraint: a person with several pending requests keeps the newest
    (staff saw them all; the older ones are marked withdrawn, not deleted)."""
    BudgetRequest = apps.get_model("feedback", "BudgetRequest")
    kept: set[int] = set()
    for row in BudgetRequest.objects.filter(state="pending").order_by("-created_at", "-pk"):
        if row.owner_id in kept:
            BudgetRequest.objects.filter(pk=row.pk).update(state="withdrawn")
        kept.add(row.owner_id)


class Migration(migrations.Migration):
    dependencies = [("feedback", "0001_initial")]

    operations = [
        migrations.RunPython(withdraw_all_but_the_newest, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="budgetrequest",
            constraint=models.UniqueConstraint(
                condition=models.Q(("state", "pending")),
                fields=("owner",),
                name="one_pending_budget_request_per_owner",
            ),
        ),
    ]
