"""The colours of BRAWLPIT pictures: one palette for the pygame client
(:mod:`brawlkit.play.draw`) and the replay renderer (:mod:`brawlkit.replay.render`).

Why one module: a replay of a match a person just played should look like the match
they saw — player 1 the same red-orange, player 2 the same blue, the same stage and
sky — and a colour changed here changes both.  Plain RGB tuples (what pygame and
Pillow take) with :func:`hex_of` for matplotlib; nothing here imports either library,
so it sits on the lowest floor and every picture-making package may use it.
"""

from __future__ import annotations

RGB = tuple[int, int, int]

#: the sky, a vertical gradient from the top colour to the bottom one
BG_TOP: RGB = (22, 26, 44)
BG_BOTTOM: RGB = (48, 38, 70)
#: the stage: its walkable top, its body, its outline
STAGE_TOP_C: RGB = (200, 204, 214)
STAGE_C: RGB = (86, 90, 110)
STAGE_EDGE_C: RGB = (60, 62, 80)
#: the blast zone's dashed edge
BLAST_C: RGB = (190, 60, 70)
TEXT_C: RGB = (236, 238, 244)
DIM_C: RGB = (150, 156, 176)
#: player 1 (slot 0) and player 2 (slot 1)
SLOT_C: tuple[RGB, RGB] = ((236, 96, 72), (72, 150, 240))
SLOT_LABEL = ("P1", "P2")
WHITE: RGB = (255, 255, 255)
BLACK: RGB = (0, 0, 0)
#: a fighter in lag or helpless is greyed towards this
LAG_C: RGB = (90, 90, 100)
EYE_C: RGB = (250, 250, 250)
RESPAWN_C: RGB = (230, 230, 140)
ATTACK_C: RGB = (255, 226, 90)
SPECIAL_C, SPECIAL_CORE_C = (255, 150, 50), (255, 236, 160)
UPSPECIAL_C: RGB = (255, 200, 90)
#: the HUD's player cards, the shield-health bar
CARD_C: RGB = (30, 32, 46)
BAR_BG_C, BAR_C = (60, 64, 84), (140, 200, 255)
#: damage text goes from this white to this red by 150 %
DAMAGE_LOW_C, DAMAGE_HIGH_C = (245, 245, 245), (230, 40, 40)
WIN_C, LOSE_C = (120, 230, 130), (240, 110, 100)
NOTE_C: RGB = (250, 220, 120)


def mix(c: RGB, d: RGB, t: float) -> RGB:
    """``c`` moved the fraction ``t`` of the way to ``d``."""
    r, g, b = (round(a + (e - a) * t) for a, e in zip(c, d, strict=True))
    return r, g, b


def damage_color(damage: float) -> RGB:
    return mix(DAMAGE_LOW_C, DAMAGE_HIGH_C, min(1.0, max(0.0, damage) / 150.0))


def hex_of(c: RGB) -> str:
    """``#rrggbb`` (matplotlib's form)."""
    return "#{:02x}{:02x}{:02x}".format(*c)
