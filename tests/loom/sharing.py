"""Sharing a tree in tests, through loom.access.share(tree, user, role): role
"editor" or "viewer", None revokes. (h22s's access.py provides share() over the real
TreeShare model at merge; the tests only ever go through this helper.)"""


def share(tree, user, role: str | None) -> None:
    from loom import access

    access.share(tree, user, role)
