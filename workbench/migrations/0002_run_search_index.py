from django.db import migrations

# Full-text search over History (workbench.models.RunQuerySet.search). The expression
# matches the SQL Django emits for SearchVector("search_text", config="simple"), so the
# planner can use the index; GinIndex itself would need django.contrib.postgres.
CREATE = (
    "CREATE INDEX run_search ON workbench_run USING gin "
    "(to_tsvector('simple'::regconfig, COALESCE((search_text)::text, '')))"
)


class Migration(migrations.Migration):
    dependencies = [("workbench", "0001_initial")]

    operations = [migrations.RunSQL(CREATE, "DROP INDEX run_search")]
