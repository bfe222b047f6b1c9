"""The scripted ``/move`` player: a few lines of fighting-game sense, one declaration.

It is what the example endpoint (``examples/move_clients/random_server.py --policy
scripted``) answers and the teacher ``policy train --clone-fights`` clones
(:mod:`~brawlkit.policy_server.clone`).  Both once shared it by the package loading the
example by file path, which an installed package does not have; now the player lives
here and the example imports it.  It reads the JSON request body of docs/move.md (plain
dicts), so it needs neither the request model nor a server.
"""

from __future__ import annotations

import random
from typing import Any

from brawlkit.wire.constants import C

#: the stage top spans |x| <= this, at y = 0 (the header's, never retyped)
STAGE_HALF_WIDTH = float(C.BP_STAGE_HALF_WIDTH)


def scripted(me: dict[str, Any], op: dict[str, Any], rng: random.Random) -> str:
    """Recover, approach, hit, finish: the move for fighter ``me`` against ``op``."""
    dx = op["x"] - me["x"]
    offstage = abs(me["x"]) > STAGE_HALF_WIDTH or me["y"] < 0
    if offstage:  # recover: up-special toward the stage, double jump first if high enough
        toward = "left" if me["x"] > 0 else "right"
        if me["y"] > -30 and rng.random() < 0.3:
            return "jump_" + toward
        return "up_special_" + toward
    side = "right" if dx > 0 else "left"
    if abs(dx) > 40:
        return "dash_" + side
    if abs(dx) > 18:
        return side
    if op["damage"] > 90 and rng.random() < 0.5:
        return "special_" + side  # the finisher once the opponent is heavy
    if rng.random() < 0.1:
        return "shield"
    return "attack_" + side


def scripted_move(body: dict[str, Any], rng: random.Random) -> str:
    """The scripted player's move for a ``/move`` request body: :func:`scripted`, and a
    dash toward the stage's middle when the state does not offer that move (e.g.
    helpless after the up-special; ``available`` lists what it offers)."""
    me = body["self"]
    name = scripted(me, body["opponent"], rng)
    offered = body.get("available")
    if offered and name not in offered:
        name = "dash_" + ("left" if me["x"] > 0 else "right")
    return name
