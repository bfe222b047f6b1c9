"""Draw one state of a BRAWLPIT match onto a pygame Surface.

Why this knows nothing of sockets or keys: a picture is a pure function of a
:class:`View` (the freshest snapshot plus who is who) and a :class:`Camera`, so a test
draws a hand-made snapshot and checks pixels, the spectator and the player share it,
and a replay viewer could reuse it.  All geometry comes from the header's constants
(``C.BP_STAGE_*``, ``C.BP_BLAST_*``, ``C.BP_FIGHTER_*``; docs/observation.md): world
units, y up, the stage top at y = 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pygame

from brawlkit.common.palette import (
    ATTACK_C,
    BAR_BG_C,
    BAR_C,
    BG_BOTTOM,
    BG_TOP,
    BLACK,
    BLAST_C,
    CARD_C,
    DIM_C,
    EYE_C,
    LAG_C,
    LOSE_C,
    NOTE_C,
    RESPAWN_C,
    SLOT_C,
    SLOT_LABEL,
    SPECIAL_C,
    SPECIAL_CORE_C,
    STAGE_C,
    STAGE_EDGE_C,
    STAGE_TOP_C,
    TEXT_C,
    UPSPECIAL_C,
    WHITE,
    WIN_C,
)
from brawlkit.common.palette import damage_color as _damage_color
from brawlkit.common.palette import mix as _mix
from brawlkit.wire.constants import C
from brawlkit.wire.protocol import PlayerState, Snapshot

SIZE = (1024, 640)
HUD_H = 118
# the colours live in one palette, shared with the replay renderer (a replay looks like
# the match the person saw)

#: the part of the world the camera always keeps in view (units): the stage and the air above it
_FRAME_MIN = (-(C.BP_STAGE_HALF_WIDTH + 25.0), C.BP_STAGE_HALF_WIDTH + 25.0,
              -(C.BP_STAGE_DEPTH + 12.0), C.BP_RESPAWN_Y + 10.0)
_RATING = re.compile(r"^(?P<base>.*\S)\s+\((?P<rating>-?\d+(?:\.\d+)?)\)$")


def split_rating(name: str) -> tuple[str, str | None]:
    """``"gen3-main (1234)"`` → (``"gen3-main"``, ``"1234"``): a bot pool names its bots
    ``"<member id> (<rating>)"``; any other name has no rating."""
    m = _RATING.match(name)
    return (m["base"], m["rating"]) if m else (name, None)


@dataclass
class View:
    """Everything a frame shows.  ``my_slot`` None = spectating (or not seated yet)."""

    snapshot: Snapshot | None = None
    my_slot: int | None = None
    names: tuple[str, str] = ("", "")
    status: str | None = None            # a full-screen message (connecting, refused, lost)
    hint: str | None = None              # one line under the status
    arena_id: int = 0
    spectating: bool = False
    fps: float = 0.0
    server: str = ""
    note: str | None = None              # a transient banner (e.g. the previous result)
    present: tuple[bool, bool] | None = None  # which slots are filled (from PEER), if known
    #: the finished match's winner to show (``BP_WINNER_*``) when the snapshot no longer
    #: says OVER (the opponent left after the match), and the result screen's lines
    result: int | None = None
    result_lines: list[str] | None = None
    #: ratings from elsewhere (the registry) when a name carries none
    ratings: tuple[str | None, str | None] = (None, None)


def _present(view: View, snap: Snapshot, slot: int) -> bool:
    """Is someone in ``slot``?  PEER says so when it came; otherwise a full arena, or
    while waiting only our own slot."""
    if view.present is not None:
        return view.present[slot]
    return snap.n_players >= 2 or view.my_slot == slot


# ---------------------------------------------------------------- camera
@dataclass
class Camera:
    """World-to-screen transform that frames the stage and both fighters, eased so it
    does not jump; it never shows beyond the blast zones."""

    cx: float = 0.0
    cy: float = 15.0
    half_w: float = 130.0
    ease: float = 0.12

    @staticmethod
    def target(players: tuple[PlayerState, ...] | None, aspect: float) -> tuple[float, float, float]:
        x0, x1, y0, y1 = _FRAME_MIN
        for p in players or ():
            if p.action_state == C.BP_AS_DEAD:
                continue
            x0, x1 = min(x0, p.x - 30.0), max(x1, p.x + 30.0)
            y0, y1 = min(y0, p.y - 20.0), max(y1, p.y + C.BP_FIGHTER_HEIGHT + 25.0)
        x0, x1 = max(x0, -C.BP_BLAST_X), min(x1, C.BP_BLAST_X)
        y0, y1 = max(y0, C.BP_BLAST_BOTTOM), min(y1, C.BP_BLAST_TOP)
        half_w = max((x1 - x0) / 2.0, (y1 - y0) / 2.0 * aspect)
        half_w = min(half_w, C.BP_BLAST_X, (C.BP_BLAST_TOP - C.BP_BLAST_BOTTOM) / 2.0 * aspect)
        half_h = half_w / aspect
        cx = min(max((x0 + x1) / 2.0, -C.BP_BLAST_X + half_w), C.BP_BLAST_X - half_w)
        cy = min(max((y0 + y1) / 2.0, C.BP_BLAST_BOTTOM + half_h), C.BP_BLAST_TOP - half_h)
        return cx, cy, half_w

    def update(self, players: tuple[PlayerState, ...] | None, aspect: float,
               snap: bool = False) -> None:
        tx, ty, tw = self.target(players, aspect)
        k = 1.0 if snap else self.ease
        self.cx += (tx - self.cx) * k
        self.cy += (ty - self.cy) * k
        self.half_w += (tw - self.half_w) * k


class _Xf:
    """world (x, y up) → screen pixels for one frame."""

    def __init__(self, cam: Camera, w: int, h: int) -> None:
        self.s = w / (2.0 * cam.half_w)
        self.ox = w / 2.0 - cam.cx * self.s
        self.oy = h / 2.0 + cam.cy * self.s

    def pt(self, x: float, y: float) -> tuple[int, int]:
        return round(self.ox + x * self.s), round(self.oy - y * self.s)

    def rect(self, x0: float, y0: float, x1: float, y1: float) -> pygame.Rect:
        (a, b), (c, d) = self.pt(x0, y1), self.pt(x1, y0)
        return pygame.Rect(a, b, max(1, c - a), max(1, d - b))

    def len(self, units: float) -> int:
        return max(1, round(units * self.s))


# ---------------------------------------------------------------- fonts
_FONTS: dict[int, pygame.font.Font] = {}


def font(size: int) -> pygame.font.Font:
    if not pygame.font.get_init():
        pygame.font.init()
    f = _FONTS.get(size)
    if f is None:
        f = _FONTS[size] = pygame.font.Font(None, size)
    return f


def _text(surf: pygame.Surface, text: str, size: int, color: tuple[int, int, int],
          pos: tuple[int, int], anchor: str = "topleft") -> pygame.Rect:
    img = font(size).render(text, True, color)
    r = img.get_rect(**{anchor: pos})
    surf.blit(img, r)
    return r


def _fit(text: str, size: int, width: int) -> str:
    """``text`` cut with an ellipsis so it renders within ``width`` pixels."""
    f = font(size)
    if f.size(text)[0] <= width:
        return text
    while text and f.size(text + "…")[0] > width:
        text = text[:-1]
    return text + "…"


# ---------------------------------------------------------------- the world
def _background(surf: pygame.Surface, h: int) -> None:
    w = surf.get_width()
    for i in range(0, h, 4):
        t = i / max(1, h)
        c = tuple(round(a + (b - a) * t) for a, b in zip(BG_TOP, BG_BOTTOM, strict=True))
        surf.fill(c, (0, i, w, 4))


def _stage(surf: pygame.Surface, xf: _Xf) -> None:
    hw, depth = C.BP_STAGE_HALF_WIDTH, C.BP_STAGE_DEPTH
    # blast zones: a dashed red line where a fighter's centre loses a stock
    blast = xf.rect(-C.BP_BLAST_X, C.BP_BLAST_BOTTOM, C.BP_BLAST_X, C.BP_BLAST_TOP)
    for a, b in ((blast.topleft, blast.topright), (blast.bottomleft, blast.bottomright),
                 (blast.topleft, blast.bottomleft), (blast.topright, blast.bottomright)):
        _dashed(surf, BLAST_C, a, b)
    block = xf.rect(-hw, -depth, hw, 0.0)
    pygame.draw.rect(surf, STAGE_C, block)
    pygame.draw.rect(surf, STAGE_EDGE_C, block, width=max(1, xf.len(1.0)))
    top = xf.rect(-hw, -2.0, hw, 0.0)
    pygame.draw.rect(surf, STAGE_TOP_C, top)
    for side in (-1, 1):  # ledge grab boxes, faint
        x0 = side * hw if side > 0 else -hw - C.BP_LEDGE_GRAB_X
        r = xf.rect(x0, -C.BP_LEDGE_GRAB_Y, x0 + C.BP_LEDGE_GRAB_X, 0.0)
        pygame.draw.rect(surf, (110, 116, 140), r, width=1)


def _dashed(surf: pygame.Surface, color: tuple[int, int, int], a: tuple[int, int],
            b: tuple[int, int], dash: int = 10) -> None:
    (x0, y0), (x1, y1) = a, b
    n = max(1, int(max(abs(x1 - x0), abs(y1 - y0)) // dash))
    for i in range(0, n, 2):
        p = (x0 + (x1 - x0) * i // n, y0 + (y1 - y0) * i // n)
        q = (x0 + (x1 - x0) * (i + 1) // n, y0 + (y1 - y0) * (i + 1) // n)
        pygame.draw.line(surf, color, p, q, 2)


def _fighter(surf: pygame.Surface, xf: _Xf, p: PlayerState, slot: int, tick: int,
             me: bool) -> None:
    if p.action_state == C.BP_AS_DEAD:
        return
    hw, ht = C.BP_FIGHTER_HALF_WIDTH, C.BP_FIGHTER_HEIGHT
    color = SLOT_C[slot]
    if p.flags & C.BP_PLAYER_FLAG_HITSTUN:
        color = _mix(color, WHITE, 0.55 if (tick // 3) % 2 else 0.25)
    elif p.action_state in (C.BP_AS_HELPLESS, C.BP_AS_SHIELDBREAK, C.BP_AS_LAG):
        color = _mix(color, LAG_C, 0.5)
    invuln = bool(p.flags & C.BP_PLAYER_FLAG_INVULNERABLE)
    if p.action_state == C.BP_AS_RESPAWN:  # the respawn platform under the feet
        pygame.draw.rect(surf, RESPAWN_C, xf.rect(p.x - 8.0, p.y - 1.5, p.x + 8.0, p.y))
    body = xf.rect(p.x - hw, p.y, p.x + hw, p.y + ht)
    if invuln and (tick // 4) % 2:
        pygame.draw.rect(surf, color, body, width=max(1, xf.len(0.8)), border_radius=3)
    else:
        pygame.draw.rect(surf, color, body, border_radius=3)
    pygame.draw.rect(surf, _mix(color, BLACK, 0.45), body, width=1, border_radius=3)
    f = 1 if p.facing >= 0 else -1
    # the face: an eye band on the facing side
    ex0 = p.x + 0.5 if f > 0 else p.x - hw + 0.5
    eye = xf.rect(ex0, p.y + ht - 5.0, ex0 + hw - 1.0, p.y + ht - 3.0)
    pygame.draw.rect(surf, EYE_C, eye)
    nose = [xf.pt(p.x + f * hw, p.y + ht - 6.5), xf.pt(p.x + f * (hw + 2.5), p.y + ht - 8.0),
            xf.pt(p.x + f * hw, p.y + ht - 9.5)]
    pygame.draw.polygon(surf, _mix(color, BLACK, 0.3), nose)
    if p.action_state == C.BP_AS_ATTACK:
        pygame.draw.circle(surf, ATTACK_C, xf.pt(p.x + f * (hw + 5.0), p.y + ht * 0.55),
                           xf.len(3.0))
    elif p.action_state == C.BP_AS_SPECIAL:
        pygame.draw.circle(surf, SPECIAL_C, xf.pt(p.x + f * (hw + 7.0), p.y + ht * 0.5),
                           xf.len(5.5))
        pygame.draw.circle(surf, SPECIAL_CORE_C, xf.pt(p.x + f * (hw + 7.0), p.y + ht * 0.5),
                           xf.len(2.5))
    elif p.action_state == C.BP_AS_UPSPECIAL:
        a, b = xf.pt(p.x, p.y - 2.0), xf.pt(p.x, p.y - 12.0)
        pygame.draw.line(surf, UPSPECIAL_C, a, b, xf.len(3.0))
    if p.flags & C.BP_PLAYER_FLAG_SHIELDING:
        r = xf.len(4.0 + 8.0 * max(0.0, p.shield) / C.BP_SHIELD_MAX)
        bubble = pygame.Surface((2 * r + 2, 2 * r + 2), pygame.SRCALPHA)
        pygame.draw.circle(bubble, (*_mix(color, WHITE, 0.4), 110), (r + 1, r + 1), r)
        pygame.draw.circle(bubble, (255, 255, 255, 180), (r + 1, r + 1), r, width=2)
        cx, cy = xf.pt(p.x, p.y + ht / 2.0)
        surf.blit(bubble, (cx - r - 1, cy - r - 1))
    # a marker above the head: P1 / P2, and YOU for the local player
    top = xf.pt(p.x, p.y + ht + 3.0)
    label = "YOU" if me else SLOT_LABEL[slot]
    tri = [(top[0] - 6, top[1] - 8), (top[0] + 6, top[1] - 8), (top[0], top[1])]
    pygame.draw.polygon(surf, SLOT_C[slot], tri)
    _text(surf, label, 20, TEXT_C, (top[0], top[1] - 9), "midbottom")


# ---------------------------------------------------------------- HUD
def _card(surf: pygame.Surface, rect: pygame.Rect, slot: int, p: PlayerState | None,
          name: str, me: bool, known: str | None = None) -> None:
    pygame.draw.rect(surf, CARD_C, rect, border_radius=10)
    pygame.draw.rect(surf, SLOT_C[slot], rect, width=3, border_radius=10)
    rating = split_rating(name)[1] or known
    tag = SLOT_LABEL[slot] + (" · you" if me else "")
    r = _text(surf, tag, 22, SLOT_C[slot], (rect.x + 14, rect.y + 10))
    _text(surf, f"rating {rating}" if rating else "unrated", 22, DIM_C, (r.right + 14, rect.y + 10))
    _text(surf, _fit(name or "(empty)", 28, rect.w - 150), 28, TEXT_C, (rect.x + 14, rect.y + 34))
    if p is None:
        return
    dmg = f"{p.damage:.0f}%"
    _text(surf, dmg, 56, _damage_color(p.damage), (rect.right - 16, rect.y + 8), "topright")
    for i in range(C.BP_STOCKS):  # stock icons: filled = left
        c = (rect.x + 22 + i * 22, rect.bottom - 20)
        if i < p.stocks:
            pygame.draw.circle(surf, SLOT_C[slot], c, 8)
        pygame.draw.circle(surf, TEXT_C, c, 8, width=1)
    bar = pygame.Rect(rect.right - 116, rect.bottom - 24, 100, 8)  # shield health
    pygame.draw.rect(surf, BAR_BG_C, bar)
    fill = bar.copy()
    fill.w = round(bar.w * max(0.0, min(1.0, p.shield / C.BP_SHIELD_MAX)))
    pygame.draw.rect(surf, BAR_C, fill)
    _text(surf, "shield", 18, DIM_C, (bar.x - 6, bar.centery), "midright")


def _clock(ticks_left: int) -> str:
    secs = (ticks_left + C.BP_TICK_HZ - 1) // C.BP_TICK_HZ
    return f"{secs // 60}:{secs % 60:02d}"


def _overlay(surf: pygame.Surface, h: int, title: str, lines: list[str],
             color: tuple[int, int, int] = TEXT_C) -> None:
    w = surf.get_width()
    shade = pygame.Surface((w, h), pygame.SRCALPHA)
    shade.fill((10, 10, 20, 150))
    surf.blit(shade, (0, 0))
    title_img = font(72).render(title, True, color)
    imgs = [font(28).render(line, True, TEXT_C if i == 0 else DIM_C) for i, line in enumerate(lines)]
    box_w = max([title_img.get_width(), *(i.get_width() for i in imgs)]) + 60
    box_h = title_img.get_height() + 32 * len(imgs) + 40
    box = pygame.Rect(0, 0, box_w, box_h)
    box.center = (w // 2, h // 2 - 30)
    pygame.draw.rect(surf, (20, 22, 34), box, border_radius=14)
    pygame.draw.rect(surf, color, box, width=2, border_radius=14)
    y = box.y + 18
    surf.blit(title_img, title_img.get_rect(midtop=(w // 2, y)))
    y += title_img.get_height() + 6
    for img in imgs:
        surf.blit(img, img.get_rect(midtop=(w // 2, y)))
        y += 32


def result_title(winner: int, my_slot: int | None) -> tuple[str, tuple[int, int, int]]:
    """The result screen's headline: from the player's side, or neutral for a spectator."""
    if winner == C.BP_WINNER_DRAW:
        return "DRAW", TEXT_C
    if winner not in (0, 1):
        return "MATCH OVER", TEXT_C
    if my_slot is None:
        return f"{SLOT_LABEL[winner]} WINS", SLOT_C[winner]
    return ("YOU WIN", WIN_C) if winner == my_slot else ("YOU LOSE", LOSE_C)


def draw(surf: pygame.Surface, view: View, camera: Camera | None = None) -> None:
    """Draw ``view`` on ``surf`` (any size; the HUD takes the bottom ``HUD_H`` pixels)."""
    w, h = surf.get_size()
    play_h = h - HUD_H
    snap = view.snapshot
    cam = camera or Camera()
    if camera is None:
        cam.update(snap.players if snap else None, w / play_h, snap=True)
    _background(surf, play_h)
    xf = _Xf(cam, w, play_h)
    _stage(surf, xf)
    tick = snap.tick if snap else 0
    if snap is not None:
        for slot in (0, 1):
            if _present(view, snap, slot):
                _fighter(surf, xf, snap.players[slot], slot, tick, view.my_slot == slot)
    # HUD
    surf.fill((16, 17, 26), (0, play_h, w, HUD_H))
    pad = 12
    cw = (w - 3 * pad) // 2
    for slot in (0, 1):
        r = pygame.Rect(pad + slot * (cw + pad), play_h + pad, cw, HUD_H - 2 * pad)
        seated = snap is not None and _present(view, snap, slot)
        _card(surf, r, slot, snap.players[slot] if seated and snap else None, view.names[slot],
              view.my_slot == slot, view.ratings[slot])
    # top bar: clock, arena, fps
    if snap is not None:
        _text(surf, _clock(snap.ticks_left), 48, TEXT_C, (w // 2, 8), "midtop")
    parts = [f"arena {view.arena_id}" if view.arena_id else view.server]
    if snap is not None:
        parts.append(f"match {snap.match_id}")
    if view.spectating:
        parts.append("spectating")
    _text(surf, " · ".join(p for p in parts if p), 22, DIM_C, (12, 10))
    if view.fps:
        _text(surf, f"{view.fps:.0f} fps", 22, DIM_C, (w - 12, 10), "topright")
    if view.note:
        _text(surf, view.note, 26, NOTE_C, (w // 2, 58), "midtop")
    # full-screen states
    if view.status is not None:
        _overlay(surf, play_h, view.status, [view.hint] if view.hint else [])
    elif snap is None:
        _overlay(surf, play_h, "Joined", ["waiting for the first snapshot…"])
    elif snap.phase == C.BP_PHASE_OVER or view.result is not None:
        winner = snap.winner if view.result is None else view.result
        title, color = result_title(winner, None if view.spectating else view.my_slot)
        lines = view.result_lines
        if lines is None:
            lines = ["Esc quits"] if view.spectating else ["R plays again · Esc quits"]
        _overlay(surf, play_h, title, lines, color)
    elif snap.phase == C.BP_PHASE_WAITING:
        who = "a bot or a player" if not view.spectating else "both players"
        _overlay(surf, play_h, "Waiting for an opponent",
                 [f"arena {view.arena_id}: the match starts when {who} joined",
                  "Esc quits" if view.spectating else "R looks for another arena · Esc quits"])
