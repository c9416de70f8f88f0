"""`make run` shows the local account's password on a terminal (a new user needs it);
when its output is not a terminal — a service's log, a pipe — the password goes to a
0600 file in the data dir and only that file's path is printed. (End to end, through a
pipe: tests/test_it_launcher_lifecycle.py logs in with the password read from there.)"""

import os
import stat

from launch.commands import show_local_account
from launch.datadir import PASSWORD_FILE

LINE = "username: weft  password: Zq8-secret-Xy"


def test_it_shows_the_password_on_a_terminal(tmp_path):
    leader, follower = os.openpty()
    with os.fdopen(follower, "w") as terminal:
        show_local_account(LINE, tmp_path, terminal)
    shown = os.read(leader, 1000).decode()
    os.close(leader)
    assert "Zq8-secret-Xy" in shown
    assert not (tmp_path / PASSWORD_FILE).exists()


def test_it_writes_it_to_a_private_file_elsewhere(tmp_path):
    reader, writer = os.pipe()
    with os.fdopen(writer, "w") as pipe:
        show_local_account(LINE, tmp_path, pipe)
    printed = os.read(reader, 1000).decode()
    os.close(reader)
    path = tmp_path / PASSWORD_FILE
    assert printed == f"username: weft  password: in {path}\n"
    assert path.read_text().strip() == "Zq8-secret-Xy"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_it_replaces_a_link_planted_where_the_file_goes(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("untouched")
    (tmp_path / PASSWORD_FILE).symlink_to(elsewhere)
    with open(os.devnull, "w") as out:
        show_local_account(LINE, tmp_path, out)
    assert elsewhere.read_text() == "untouched"
    assert not (tmp_path / PASSWORD_FILE).is_symlink()


def test_it_passes_a_line_without_a_password_through(tmp_path):
    reader, writer = os.pipe()
    changed = "username: weft  password: (changed since first start; not shown)"
    with os.fdopen(writer, "w") as pipe:
        show_local_account(changed, tmp_path, pipe)
    assert os.read(reader, 1000).decode() == changed + "\n"
    os.close(reader)
