"""The game state as text: what a text policy and a language model read (docs/move_training.md).

:func:`render_state` writes a ``/move`` request as a few lines of plain English —
the model's fighter, the opponent relative to it, the clock, the last moves —
with numbers rounded to what a player would judge by eye (positions to 10 stage
units, damage to 10 %, the clock to 10 s).  Both consumers read the same lines:

Besides the numbers, a few words say what a player sees at a glance: the opponent
``close`` / ``near`` / ``far``, a fighter ``near edge`` or ``offstage``.

* the small text policy trained here (:mod:`brawlkit.policy_server.text_policy`)
  reads them as word tokens (:func:`tokenize`: lower-case words and signed integers,
  a move name as its pieces ``attack_right`` -> ``attack right``);
* the language-model adapter (:mod:`brawlkit.policy_server.llm`) puts them into its
  chat prompt, with the list of available moves and the instruction.

Example (docs/move_training.md shows more)::

    you: x -40 y 0, ground, facing right, 30%, 3 stocks, shield 60, jump ready, idle
    opponent: far 80 right 0 up, ground, 0%, 3 stocks, walk
    time: 150 s left
    your last moves: jump attack_right
"""

from __future__ import annotations

import math
import re

from brawlkit.wire.constants import C

#: action_state id -> the word the prompt uses (the header's BP_AS_* names, lower-case)
STATE_WORDS: dict[int, str] = {
    int(getattr(C, name)): name[len("BP_AS_"):].lower()
    for name in dir(C) if name.startswith("BP_AS_") and name != "BP_AS_COUNT"
}
_ON_GROUND = int(C.BP_PLAYER_FLAG_ON_GROUND)
_OFFSTAGE = int(C.BP_PLAYER_FLAG_OFFSTAGE)
_TOKEN_RE = re.compile(r"[a-z]+|-?\d+")
#: |x| beyond which a fighter on the stage is near its edge (the edges are ±BP_STAGE_HALF_WIDTH)
_EDGE = float(C.BP_STAGE_HALF_WIDTH) - 20.0
#: distances (stage units) of "close" (a jab's reach and a little) and "near"
_CLOSE, _NEAR = 20.0, 60.0


def _r(value: float, step: int) -> int:
    """``value`` rounded to a multiple of ``step`` (what the prompt prints)."""
    return int(round(value / step)) * step


def _fighter_words(f: object) -> list[str]:
    flags = int(f.flags)  # type: ignore[attr-defined]
    words = ["ground" if flags & _ON_GROUND else "air"]
    if flags & _OFFSTAGE:
        words.append("offstage")
    elif abs(float(f.x)) > _EDGE:  # type: ignore[attr-defined]
        words.append("near edge")
    return words


def _distance_word(d: float) -> str:
    """How far the opponent is, as a player would say it: close (in reach of a jab),
    near, far."""
    return "close" if d < _CLOSE else ("near" if d < _NEAR else "far")


def render_state(req: object) -> str:
    """The request (a :class:`~brawlkit.policy_server.policy.MoveRequest`) as text."""
    me, op = req.me, req.opponent  # type: ignore[attr-defined]
    facing = "right" if me.facing >= 0 else "left"
    dx, dy = op.x - me.x, op.y - me.y
    you = [f"x {_r(me.x, 10)} y {_r(me.y, 10)}", *_fighter_words(me), f"facing {facing}",
           f"{_r(me.damage, 10)}%", f"{me.stocks} stocks", f"shield {_r(me.shield, 10)}",
           "jump ready" if me.jumps_left > 0 else "no jump", STATE_WORDS.get(me.action_state, "unknown")]
    them = [f"{_distance_word(math.hypot(dx, dy))} {_r(abs(dx), 10)} {'right' if dx >= 0 else 'left'} "
            f"{_r(abs(dy), 10)} {'up' if dy >= 0 else 'down'}", *_fighter_words(op),
            f"{_r(op.damage, 10)}%", f"{op.stocks} stocks", STATE_WORDS.get(op.action_state, "unknown")]
    lines = [f"you: {', '.join(you)}", f"opponent: {', '.join(them)}",
             f"time: {_r(req.ticks_left / int(C.BP_TICK_HZ), 10)} s left"]  # type: ignore[attr-defined]
    last = req.last_moves  # type: ignore[attr-defined]
    lines.append(f"your last moves: {' '.join(last) if last else 'none'}")
    return "\n".join(lines)


def tokenize(text: str) -> list[str]:
    """Word tokens of a prompt: lower-case words and signed integers; punctuation and
    ``_`` separate (a move name reads as its pieces)."""
    return _TOKEN_RE.findall(text.lower())


def vocabulary() -> list[str]:
    """Every token :func:`render_state` can write, in a fixed order: the words, the
    move pieces, and the integers it can print (multiples of 10 over the blast box,
    stocks 0..9).  A token outside it reads as ``<unk>``."""
    from brawlkit.policy_server.moves import NAMES

    words = ["you", "x", "y", "ground", "air", "offstage", "facing", "right", "left", "stocks",
             "shield", "jump", "ready", "no", "opponent", "up", "down", "time", "s", "your",
             "last", "moves", "none", "unknown", "near", "edge", "close", "far", *STATE_WORDS.values()]
    for name in NAMES:
        words += tokenize(name)
    span = int(max(C.BP_BLAST_X, C.BP_BLAST_TOP) * 2.5) // 10 * 10
    numbers = [str(v) for v in range(-span, span + 1, 10)] + [str(v) for v in range(10)]
    return list(dict.fromkeys(words + numbers))
