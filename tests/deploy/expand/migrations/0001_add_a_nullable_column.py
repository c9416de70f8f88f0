from django.db import migrations

# What `makemigrations` writes for a new `models.TextField(null=True)` on ApiRequest,
# as SQL (this app cannot own another app's model): the running code names its columns,
# so it neither sees nor misses the new one. lock_timeout: the ALTER waits for the
# table's lock behind running transactions, and every request waits behind it; a
# migration that cannot have the lock soon fails rather than stall the site.
FORWARD = """
SET LOCAL lock_timeout = '5s';
ALTER TABLE api_apirequest ADD COLUMN expand_note text NULL;
"""


class Migration(migrations.Migration):
    dependencies = [("api", "__latest__")]

    operations = [
        migrations.RunSQL(FORWARD, "ALTER TABLE api_apirequest DROP COLUMN expand_note;"),
    ]
