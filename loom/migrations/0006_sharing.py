# Placeholder until h22s merges: h22s's 0006_sharing (the TreeShare model) replaces it.
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("loom", "0005_expansions")]
    operations: list = []
