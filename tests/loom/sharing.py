"""Sharing a tree in tests, through loom.access.share(tree, user, role): role
"editor" or "viewer", None revokes — the same call the share dialog makes."""


def share(tree, user, role: str | None) -> None:
    from loom import access

    access.share(tree, user, role)
