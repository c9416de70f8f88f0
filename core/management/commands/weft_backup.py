import json
import os
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from core import backup


class Command(BaseCommand):
    help = (
        "Backs Weft up into a new folder: the database (pg_dump, custom format), the "
        "secret key and a manifest. Keep the environment file beside it (docs/deploy.md)."
    )

    def add_arguments(self, parser):
        parser.add_argument("folder", type=Path, help="made by the command; must not exist")

    def handle(self, *args, folder: Path, **options):
        try:
            folder.mkdir(mode=0o700, parents=True)
        except FileExistsError:
            raise CommandError(f"{folder} exists: give a new folder") from None
        try:
            tool = backup.pg_tool("pg_dump")
            conn, env = backup.libpq()
            target = folder / backup.DUMP
            backup.run(tool, [*conn, "--format=custom", "--no-owner", "--no-privileges",
                              "--file", str(target)], env)  # fmt: skip
        except backup.BackupError as exc:
            raise CommandError(str(exc)) from None
        key = folder / backup.KEY
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(settings.SECRET_KEY)
        rows = backup.counts()
        manifest = {
            "created_at": timezone.now().isoformat(),
            "pg_dump": str(tool),
            "database": str(settings.DATABASES["default"]["NAME"]),
            "rows": rows,
        }
        (folder / backup.MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        self.stdout.write(f"backed up to {folder}: {target.stat().st_size:,} bytes of database, "
                          f"{sum(rows.values()):,} rows counted")  # fmt: skip
