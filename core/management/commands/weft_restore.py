import json
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from config.env import DATA_DIR
from core import backup


class Command(BaseCommand):
    help = (
        "Restores a folder made by weft_backup into the configured database, which must "
        "be empty (a new database: createdb), and checks its rows against the manifest."
    )

    def add_arguments(self, parser):
        parser.add_argument("folder", type=Path)

    def handle(self, *args, folder: Path, **options):
        dump, key, manifest_file = (folder / n for n in (backup.DUMP, backup.KEY,
                                                         backup.MANIFEST))  # fmt: skip
        if not (dump.is_file() and key.is_file() and manifest_file.is_file()):
            raise CommandError(f"{folder} is not a backup made by weft_backup")
        if backup.has_tables():
            raise CommandError(
                f"the database {settings.DATABASES['default']['NAME']} has tables already: "
                "restore into a new, empty one"
            )
        try:
            conn, env = backup.libpq()
            backup.run(backup.pg_tool("pg_restore"), [*conn, "--no-owner", "--no-privileges",
                       "--exit-on-error", "--single-transaction", str(dump)], env)  # fmt: skip
        except backup.BackupError as exc:
            raise CommandError(str(exc)) from None
        expected = json.loads(manifest_file.read_text())["rows"]
        found = backup.counts()
        if found != expected:
            raise CommandError(
                f"restored, but the rows differ from the backup's: {found} != {expected}"
            )
        self._secret_key(key.read_text().strip())
        self.stdout.write(f"restored {sum(found.values()):,} rows from {folder}")

    def _secret_key(self, saved: str) -> None:
        if saved == settings.SECRET_KEY:
            return
        key_file = DATA_DIR / "secret_key"
        if settings.SECRET_KEY == (key_file.read_text().strip() if key_file.exists() else None):
            # make run's key (no SECRET_KEY set): the backup's takes its place.
            key_file.write_text(saved)
            key_file.chmod(0o600)
            self.stdout.write(f"the backup's secret key is now {key_file}")
        else:
            self.stderr.write(
                "SECRET_KEY differs from the backup's: set it to the contents of "
                f"{backup.KEY} (sessions and share links signed with the old one fail)"
            )
