"""The human client: play BRAWLPIT (or watch an arena) in a pygame window.

``net`` is the non-blocking UDP session (no pygame), ``controls`` turns keyboard and
gamepad into a controller state, ``draw`` renders one state onto a Surface, and
``app`` is the ``python -m brawlkit play`` loop that ties them together
(docs/play.md).
"""

import os as _os

# pygame prints a banner on import; this package's commands print JSON on stdout
_os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
