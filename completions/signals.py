"""generation_finished(sender=Generation, generation=g): sent once, after commit, when
a generation reaches a terminal state (done, cancelled, refused, failed, interrupted).
The Loom connects to it to turn choices into nodes."""

from django.dispatch import Signal

generation_finished = Signal()
