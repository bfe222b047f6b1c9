"""Draw a replay: one frame on a matplotlib axes, or a whole match to GIF / MP4.

Two drawers of the same picture, in the colours of the game client
(:mod:`brawlkit.common.palette`, shared with :mod:`brawlkit.play.draw`: player 1
red-orange, player 2 blue, the client's sky and stage):

* :class:`FrameDrawer` — matplotlib artists on any axes: one tick in a notebook cell;
* :class:`RasterDrawer` — Pillow drawing straight into a palette image: what
  :func:`render_replay` writes videos with.  A frame costs well under a millisecond
  to draw and needs no colour quantisation (it is drawn in the GIF's own palette), and
  the GIF is *streamed*: each frame is written as the rectangle that changed since the
  previous one, and only one frame is kept in memory.  Drawing every frame with
  matplotlib and quantising it cost ~30 ms a frame (92 s for a 148 s match) and held
  every frame until the end.

The picture is built from the header constants (stage half-width and depth, blast
box, fighter box), so it shows the geometry the simulation uses — nothing is
retyped.  Frames come straight from :func:`brawlkit.replay.play.replay_states` (the
simulation re-run in process), so a rendered match is what the server simulated,
tick for tick, not an interpolation of snapshots.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import IO, Any

import matplotlib
from matplotlib import patches
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import GifImagePlugin, Image, ImageChops, ImageDraw, ImageFont

from brawlkit.common import palette as pal
from brawlkit.replay.format import Replay, result_text
from brawlkit.replay.play import TickState, frame_ticks, replay_states, verify
from brawlkit.wire.constants import C

#: fighter colours by slot: the client's (brawlkit.common.palette)
SLOT_COLORS = (pal.hex_of(pal.SLOT_C[0]), pal.hex_of(pal.SLOT_C[1]))
_BG = pal.hex_of(pal.BG_TOP)
_STAGE = pal.hex_of(pal.STAGE_C)
_STAGE_TOP = pal.hex_of(pal.STAGE_TOP_C)
_BLAST = pal.hex_of(pal.BLAST_C)
_HITSTUN = pal.hex_of(pal.WHITE)
#: space above the blast box for the HUD (stage units)
_HUD_BAND = 70.0
#: space around the blast box so its dashed edge is drawn in full
_MARGIN = 4.0
#: default figure width: 5.6 in at 80 dpi = 448 px, one pixel per stage unit across the blast box
DEFAULT_WIDTH_IN = 5.6
#: default video width in pixels (the same 448: about one pixel per stage unit)
DEFAULT_WIDTH_PX = 448

DEFAULT_FPS = 20
DEFAULT_EVERY = 3
#: seconds the last frame (with the result) stays on screen
DEFAULT_HOLD_S = 1.5


class RenderError(RuntimeError):
    """The video could not be written (e.g. no ffmpeg for .mp4); the message says how to fix it."""


def clock_text(ticks_left: int) -> str:
    """The match clock as m:ss (seconds rounded up, as a game clock shows them)."""
    secs = -(-int(ticks_left) // C.BP_TICK_HZ)
    return f"{secs // 60}:{secs % 60:02d}"


class FrameDrawer:
    """The artists of one frame on ``ax``, created once and updated per tick.

    Updating artists instead of redrawing the axes keeps a 3,000-frame render
    at a few milliseconds per frame.  ``names`` are the slot names from the
    replay header (empty -> "P1"/"P2").
    """

    def __init__(self, ax: Any, names: tuple[str, str] = ("", "")) -> None:
        self.ax = ax
        self.names = tuple(n or f"P{i + 1}" for i, n in enumerate(names))
        bx, top, bottom = C.BP_BLAST_X, C.BP_BLAST_TOP, C.BP_BLAST_BOTTOM
        ax.set_xlim(-bx - _MARGIN, bx + _MARGIN)
        ax.set_ylim(bottom - _MARGIN, top + _HUD_BAND)
        ax.set_aspect("equal")
        ax.set_facecolor(_BG)
        ax.set_xticks([])
        ax.set_yticks([])
        for spine in ax.spines.values():
            spine.set_visible(False)
        ax.add_patch(patches.Rectangle((-bx, bottom), 2 * bx, top - bottom, fill=False,
                                       ec=_BLAST, lw=0.8, ls=(0, (4, 3))))
        hw, depth = C.BP_STAGE_HALF_WIDTH, C.BP_STAGE_DEPTH
        ax.add_patch(patches.Rectangle((-hw, -depth), 2 * hw, depth, fc=_STAGE, ec=_STAGE_TOP, lw=1.0))
        fw, fh = C.BP_FIGHTER_HALF_WIDTH, C.BP_FIGHTER_HEIGHT
        self.bodies, self.shields, self.eyes, self.tags, self.huds = [], [], [], [], []
        for i in range(2):
            body = patches.Rectangle((0, 0), 2 * fw, fh, fc=SLOT_COLORS[i], ec="none", lw=0, zorder=3)
            shield = patches.Circle((0, 0), fh, fc=pal.hex_of(pal.mix(pal.SLOT_C[i], pal.WHITE, 0.4)),
                                    ec=pal.hex_of(pal.WHITE), alpha=0.4, lw=0.8,
                                    zorder=4, visible=False)
            ax.add_patch(body)
            ax.add_patch(shield)
            (eye,) = ax.plot([], [], marker=">", ms=3.5, color="white", ls="none", zorder=5)
            tag = ax.text(0, 0, f"P{i + 1}", color=SLOT_COLORS[i], fontsize=6, ha="center",
                          va="bottom", zorder=5)
            hud = ax.text(0.02 if i == 0 else 0.98, 0.98, "", transform=ax.transAxes,
                          color=SLOT_COLORS[i], fontsize=8, ha="left" if i == 0 else "right",
                          va="top", family="DejaVu Sans", zorder=6)
            self.bodies.append(body)
            self.shields.append(shield)
            self.eyes.append(eye)
            self.tags.append(tag)
            self.huds.append(hud)
        self.clock = ax.text(0.5, 0.98, "", transform=ax.transAxes, color="white", fontsize=10,
                             ha="center", va="top", weight="bold", zorder=6)
        self.tick = ax.text(0.01, 0.01, "", transform=ax.transAxes, color="#8a94a6", fontsize=6,
                            ha="left", va="bottom", zorder=6)
        self.result = ax.text(0.5, 0.5, "", transform=ax.transAxes, color="white", fontsize=13,
                              ha="center", va="center", weight="bold", zorder=7, visible=False,
                              bbox=dict(boxstyle="round,pad=0.4", fc="#000000", ec="white",
                                        alpha=0.75))

    def update(self, state: TickState, result: str | None = None) -> None:
        """Show ``state``; ``result`` (e.g. "cpu:3 wins") is overlaid when given."""
        fw, fh = C.BP_FIGHTER_HALF_WIDTH, C.BP_FIGHTER_HEIGHT
        for i, p in enumerate(state.players):
            alive = p.action_state != C.BP_AS_DEAD
            body = self.bodies[i]
            body.set_xy((p.x - fw, p.y))
            body.set_visible(alive)
            stun = bool(p.flags & C.BP_PLAYER_FLAG_HITSTUN)
            body.set_edgecolor(_HITSTUN if stun else "none")
            body.set_linewidth(2.0 if stun else 0.0)
            body.set_alpha(0.45 if p.flags & C.BP_PLAYER_FLAG_INVULNERABLE else 1.0)
            shield = self.shields[i]
            shield.set_visible(alive and bool(p.flags & C.BP_PLAYER_FLAG_SHIELDING))
            shield.center = (p.x, p.y + fh / 2)
            shield.set_radius(fh * 0.35 + fh * 0.5 * max(0.0, p.shield) / C.BP_SHIELD_MAX)
            eye = self.eyes[i]
            facing = 1 if p.facing >= 0 else -1
            eye.set_data([p.x + facing * fw * 0.5], [p.y + fh * 0.72])
            eye.set_marker(">" if facing > 0 else "<")
            eye.set_visible(alive)
            self.tags[i].set_position((p.x, p.y + fh + 2))
            self.tags[i].set_visible(alive)
            stocks = "\u25cf" * p.stocks + "\u25cb" * max(0, C.BP_STOCKS - p.stocks)
            self.huds[i].set_text(f"{self.names[i]}\n{p.damage:.0f}%  {stocks}")
        self.clock.set_text(clock_text(state.ticks_left))
        self.tick.set_text(f"tick {state.tick}")
        self.result.set_visible(result is not None)
        self.result.set_text(result or "")


def render_frame(state: TickState, ax: Any, names: tuple[str, str] = ("", ""),
                 result: str | None = None) -> FrameDrawer:
    """Draw one tick on ``ax`` (a notebook's ``plt.subplots()`` axes); returns the
    :class:`FrameDrawer`, whose ``update(state)`` redraws later ticks cheaply."""
    drawer = FrameDrawer(ax, names)
    drawer.update(state, result)
    return drawer


def new_figure(dpi: int = 80, width_in: float = DEFAULT_WIDTH_IN) -> tuple[Figure, Any]:
    """A figure sized to the blast box plus the HUD band, with one full-bleed axes.

    An Agg canvas of its own (not pyplot): rendering is headless whatever backend a
    notebook uses, and the figure never lands in pyplot's list of open figures.
    """
    w = 2 * C.BP_BLAST_X + 2 * _MARGIN
    h = C.BP_BLAST_TOP - C.BP_BLAST_BOTTOM + _HUD_BAND + _MARGIN
    fig = Figure(figsize=(width_in, width_in * h / w), dpi=dpi, facecolor=_BG)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))
    return fig, ax


# ---------------------------------------------------------------- the video drawer
@lru_cache(maxsize=16)
def _font(px: int) -> Any:
    """DejaVu Sans at ``px`` pixels (matplotlib ships it: always there); Pillow's own
    font if it is not."""
    path = Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans-Bold.ttf"
    try:
        return ImageFont.truetype(str(path), max(6, px))
    except OSError:
        return ImageFont.load_default(max(6, px))


def _colour_table() -> list[pal.RGB]:
    """Every colour a video frame uses, in the palette order of the GIF: the client's
    palette and the few mixes the fighters are drawn with (hitstun flash, lag, outline),
    damage text in 16 steps, the sky in 8 bands."""
    out: list[pal.RGB] = []

    def add(c: pal.RGB) -> None:
        if c not in out:
            out.append(c)

    for i in range(8):
        add(pal.mix(pal.BG_TOP, pal.BG_BOTTOM, i / 7))
    for c in (pal.STAGE_TOP_C, pal.STAGE_C, pal.STAGE_EDGE_C, pal.BLAST_C, pal.TEXT_C, pal.DIM_C,
              pal.WHITE, pal.BLACK, pal.EYE_C, pal.RESPAWN_C, pal.ATTACK_C, pal.SPECIAL_C,
              pal.SPECIAL_CORE_C, pal.UPSPECIAL_C, pal.CARD_C, pal.BAR_BG_C, pal.BAR_C):
        add(c)
    for slot in pal.SLOT_C:
        for body in _body_colours(slot):
            add(body)
            add(pal.mix(body, pal.BLACK, 0.45))
            add(pal.mix(body, pal.BLACK, 0.3))
        add(pal.mix(slot, pal.WHITE, 0.4))
    for i in range(16):
        add(pal.damage_color(150.0 * i / 15))
    return out


def _body_colours(slot: pal.RGB) -> tuple[pal.RGB, ...]:
    """A fighter's body: normal, the two hitstun flashes, lagging (the client's rule)."""
    return (slot, pal.mix(slot, pal.WHITE, 0.55), pal.mix(slot, pal.WHITE, 0.25),
            pal.mix(slot, pal.LAG_C, 0.5))


class RasterDrawer:
    """One frame of a match as a palette image (Pillow), ``width`` pixels wide.

    The same view as :class:`FrameDrawer` (the whole blast box, the HUD band above it)
    and the fighters as the client draws them: body in the slot's colour (flashing in
    hitstun, greyed in lag, hollow blinking while invulnerable), the eye band on the
    facing side, the attack / special / up-special marks, the shield bubble sized by the
    shield's health, a P1 / P2 marker; each player's card (name, damage in the client's
    white-to-red, stocks), the clock and the tick.  Drawn in the fixed palette of
    :func:`_colour_table`, so a GIF needs no quantisation and every frame shares it.
    """

    def __init__(self, width: int = DEFAULT_WIDTH_PX, names: tuple[str, str] = ("", "")) -> None:
        if width < 64:
            raise ValueError(f"a video is at least 64 pixels wide, got {width}")
        self.names = tuple(n or f"P{i + 1}" for i, n in enumerate(names))
        self.colours = _colour_table()
        self._index = {c: i for i, c in enumerate(self.colours)}
        self.x0 = -C.BP_BLAST_X - _MARGIN
        self.y1 = C.BP_BLAST_TOP + _HUD_BAND
        world_w = 2 * (C.BP_BLAST_X + _MARGIN)
        world_h = self.y1 - (C.BP_BLAST_BOTTOM - _MARGIN)
        self.s = width / world_w
        self.size = (int(width) // 2 * 2, int(round(world_h * self.s)) // 2 * 2)  # even: yuv420p
        self.background = self._background()
        self.palette_bytes = b"".join(bytes(c) for c in self.colours)
        self.palette_bytes += bytes(768 - len(self.palette_bytes))

    # geometry ---------------------------------------------------------------
    def pt(self, x: float, y: float) -> tuple[float, float]:
        return (x - self.x0) * self.s, (self.y1 - y) * self.s

    def box(self, x0: float, y0: float, x1: float, y1: float) -> tuple[float, float, float, float]:
        (a, b), (c, d) = self.pt(x0, y1), self.pt(x1, y0)
        return a, b, max(a, c - 1), max(b, d - 1)

    def c(self, rgb: pal.RGB) -> int:
        return self._index[rgb]

    def _new(self) -> Image.Image:
        im = Image.new("P", self.size, 0)
        im.putpalette(b"".join(bytes(c) for c in self.colours))
        return im

    def _background(self) -> Image.Image:
        """Sky, blast box, stage, HUD band: drawn once, copied under every frame."""
        im = self._new()
        d = ImageDraw.Draw(im)
        w, h = self.size
        for i in range(8):  # the client's sky gradient, in 8 bands
            d.rectangle((0, h * i // 8, w, h * (i + 1) // 8), fill=i)
        bx, top, bottom = C.BP_BLAST_X, C.BP_BLAST_TOP, C.BP_BLAST_BOTTOM
        (xa, ya), (xb, yb) = self.pt(-bx, top), self.pt(bx, bottom)
        dash = max(3, round(6 * self.s))
        for x in range(int(xa), int(xb), 2 * dash):
            d.line((x, ya, min(x + dash, xb), ya), fill=self.c(pal.BLAST_C))
            d.line((x, yb, min(x + dash, xb), yb), fill=self.c(pal.BLAST_C))
        for y in range(int(ya), int(yb), 2 * dash):
            d.line((xa, y, xa, min(y + dash, yb)), fill=self.c(pal.BLAST_C))
            d.line((xb, y, xb, min(y + dash, yb)), fill=self.c(pal.BLAST_C))
        hw, depth = C.BP_STAGE_HALF_WIDTH, C.BP_STAGE_DEPTH
        d.rectangle(self.box(-hw, -depth, hw, 0), fill=self.c(pal.STAGE_C),
                    outline=self.c(pal.STAGE_EDGE_C))
        d.rectangle(self.box(-hw, -max(1.5, 1.5 / self.s), hw, 0), fill=self.c(pal.STAGE_TOP_C))
        return im

    # one frame --------------------------------------------------------------
    def draw(self, state: TickState, result: str | None = None) -> Image.Image:
        im = self.background.copy()
        d = ImageDraw.Draw(im)
        for i, p in enumerate(state.players):
            self._fighter(d, p, i, state.tick)
        self._hud(d, state)
        if result:
            self._banner(d, result)
        return im

    def _fighter(self, d: ImageDraw.ImageDraw, p: Any, slot: int, tick: int) -> None:
        if p.action_state == C.BP_AS_DEAD:
            return
        hw, ht = C.BP_FIGHTER_HALF_WIDTH, C.BP_FIGHTER_HEIGHT
        normal, flash_a, flash_b, lag = _body_colours(pal.SLOT_C[slot])
        colour = normal
        if p.flags & C.BP_PLAYER_FLAG_HITSTUN:
            colour = flash_a if (tick // 3) % 2 else flash_b
        elif p.action_state in (C.BP_AS_HELPLESS, C.BP_AS_SHIELDBREAK, C.BP_AS_LAG):
            colour = lag
        if p.action_state == C.BP_AS_RESPAWN:
            d.rectangle(self.box(p.x - 8.0, p.y - 1.5, p.x + 8.0, p.y), fill=self.c(pal.RESPAWN_C))
        body = self.box(p.x - hw, p.y, p.x + hw, p.y + ht)
        outline = self.c(pal.mix(colour, pal.BLACK, 0.45))
        hollow = bool(p.flags & C.BP_PLAYER_FLAG_INVULNERABLE) and (tick // 4) % 2
        d.rectangle(body, fill=None if hollow else self.c(colour),
                    outline=self.c(colour) if hollow else outline)
        f = 1 if p.facing >= 0 else -1
        ex0 = p.x + 0.5 if f > 0 else p.x - hw + 0.5
        d.rectangle(self.box(ex0, p.y + ht - 5.0, ex0 + hw - 1.0, p.y + ht - 3.0),
                    fill=self.c(pal.EYE_C))
        d.polygon([self.pt(p.x + f * hw, p.y + ht - 6.5), self.pt(p.x + f * (hw + 2.5), p.y + ht - 8.0),
                   self.pt(p.x + f * hw, p.y + ht - 9.5)], fill=self.c(pal.mix(colour, pal.BLACK, 0.3)))
        if p.action_state == C.BP_AS_ATTACK:
            self._dot(d, p.x + f * (hw + 5.0), p.y + ht * 0.55, 3.0, pal.ATTACK_C)
        elif p.action_state == C.BP_AS_SPECIAL:
            self._dot(d, p.x + f * (hw + 7.0), p.y + ht * 0.5, 5.5, pal.SPECIAL_C)
            self._dot(d, p.x + f * (hw + 7.0), p.y + ht * 0.5, 2.5, pal.SPECIAL_CORE_C)
        elif p.action_state == C.BP_AS_UPSPECIAL:
            d.line((*self.pt(p.x, p.y - 2.0), *self.pt(p.x, p.y - 12.0)),
                   fill=self.c(pal.UPSPECIAL_C), width=max(1, round(3 * self.s)))
        if p.flags & C.BP_PLAYER_FLAG_SHIELDING:
            r = (4.0 + 8.0 * max(0.0, p.shield) / C.BP_SHIELD_MAX) * self.s
            cx, cy = self.pt(p.x, p.y + ht / 2.0)
            d.ellipse((cx - r, cy - r, cx + r, cy + r),
                      outline=self.c(pal.mix(pal.SLOT_C[slot], pal.WHITE, 0.4)),
                      width=max(1, round(1.5 * self.s)))
        tx, ty = self.pt(p.x, p.y + ht + 3.0)
        k = max(2.0, 4 * self.s)
        d.polygon([(tx - k, ty - 1.4 * k), (tx + k, ty - 1.4 * k), (tx, ty)],
                  fill=self.c(pal.SLOT_C[slot]))
        d.text((tx, ty - 1.5 * k), pal.SLOT_LABEL[slot], fill=self.c(pal.TEXT_C),
               font=_font(round(9 * self.s)), anchor="mb")

    def _dot(self, d: ImageDraw.ImageDraw, x: float, y: float, r: float, rgb: pal.RGB) -> None:
        cx, cy = self.pt(x, y)
        rr = max(1.0, r * self.s)
        d.ellipse((cx - rr, cy - rr, cx + rr, cy + rr), fill=self.c(rgb))

    def _hud(self, d: ImageDraw.ImageDraw, state: TickState) -> None:
        w, _ = self.size
        band = _HUD_BAND * self.s
        pad = max(2, round(4 * self.s))
        card_w = (w - 3 * pad) // 2 - round(40 * self.s)
        small, big = _font(round(10 * self.s)), _font(round(20 * self.s))
        for i, p in enumerate(state.players):
            x0 = pad if i == 0 else w - pad - card_w
            rect = (x0, pad, x0 + card_w, band - pad)
            d.rounded_rectangle(rect, radius=max(2, round(5 * self.s)), fill=self.c(pal.CARD_C),
                                outline=self.c(pal.SLOT_C[i]), width=max(1, round(1.5 * self.s)))
            name = self.names[i]
            while len(name) > 4 and d.textlength(name, font=small) > card_w - 60 * self.s:
                name = name[:-2] + "…" if not name.endswith("…") else name[:-2] + "…"
            d.text((x0 + pad, pad + pad), f"{pal.SLOT_LABEL[i]} {name}", fill=self.c(pal.TEXT_C),
                   font=small)
            d.text((x0 + card_w - pad, band - 2 * pad), f"{p.damage:.0f}%",
                   fill=self.c(pal.damage_color(10 * min(15, round(max(0.0, p.damage) / 10)))),
                   font=big, anchor="rb")
            r = max(2.0, 4 * self.s)
            for k in range(C.BP_STOCKS):
                cx, cy = x0 + pad + r + k * 3 * r, band - 2 * pad - r
                d.ellipse((cx - r, cy - r, cx + r, cy + r),
                          fill=self.c(pal.SLOT_C[i]) if k < p.stocks else None,
                          outline=self.c(pal.TEXT_C))
        d.text((w / 2, pad + pad), clock_text(state.ticks_left), fill=self.c(pal.TEXT_C),
               font=big, anchor="mt")
        d.text((w / 2, band - pad), f"tick {state.tick}", fill=self.c(pal.DIM_C), font=small,
               anchor="mb")

    def _banner(self, d: ImageDraw.ImageDraw, text: str) -> None:
        w, h = self.size
        font = _font(round(16 * self.s))
        x0, y0, x1, y1 = d.textbbox((w / 2, h / 2), text, font=font, anchor="mm")
        m = 8 * self.s
        d.rounded_rectangle((x0 - m, y0 - m, x1 + m, y1 + m), radius=max(2, round(6 * self.s)),
                            fill=self.c(pal.BLACK), outline=self.c(pal.TEXT_C), width=1)
        d.text((w / 2, h / 2), text, fill=self.c(pal.TEXT_C), font=font, anchor="mm")


# ---------------------------------------------------------------- writers
class _GifStream:
    """A GIF written frame by frame: the global palette of the drawer, then each frame
    as the rectangle that differs from the previous frame (an unchanged frame only
    lengthens the previous one), so memory is one frame whatever the match's length."""

    def __init__(self, fp: IO[bytes], drawer: RasterDrawer, fps: int) -> None:
        self.fp, self.delay = fp, 1000.0 / fps
        self.prev: Image.Image | None = None
        self.pending: tuple[Image.Image, tuple[int, int], float] | None = None
        self.frames = 0
        first = drawer.background.copy()
        header, _ = GifImagePlugin.getheader(first, info={"loop": 0, "duration": 1})
        for chunk in header:
            fp.write(chunk)

    def add(self, im: Image.Image) -> None:
        if self.prev is None:
            box: tuple[int, int, int, int] | None = (0, 0, *im.size)
        else:
            box = ImageChops.difference(_as_l(im), _as_l(self.prev)).getbbox()
        self.prev = im
        if box is None:  # nothing changed: the previous frame stays longer
            if self.pending is not None:
                crop, at, ms = self.pending
                self.pending = (crop, at, ms + self.delay)
            return
        self._flush()
        self.pending = (im.crop(box), (box[0], box[1]), self.delay)

    def _flush(self) -> None:
        if self.pending is None:
            return
        crop, at, ms = self.pending
        for chunk in GifImagePlugin.getdata(crop, offset=at, duration=round(ms), disposal=1):
            self.fp.write(chunk)
        self.frames += 1
        self.pending = None

    def close(self) -> None:
        self._flush()
        self.fp.write(b";")


def _as_l(im: Image.Image) -> Image.Image:
    """A palette image's indices as a greyscale image (same bytes): what the frame
    difference compares, without a conversion through RGB."""
    return Image.frombuffer("L", im.size, im.tobytes(), "raw", "L", 0, 1)


class _Mp4Pipe:
    """ffmpeg reading raw RGB frames on stdin (H.264, yuv420p: plays everywhere)."""

    def __init__(self, out: Path, size: tuple[int, int], fps: int, ffmpeg: str) -> None:
        self.proc = subprocess.Popen(
            [ffmpeg, "-loglevel", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24",
             "-s", f"{size[0]}x{size[1]}", "-r", str(fps), "-i", "-", "-c:v", "libx264",
             "-pix_fmt", "yuv420p", "-f", "mp4", str(out)],
            stdin=subprocess.PIPE, stderr=subprocess.PIPE)
        self.frames = 0

    def add(self, im: Image.Image) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(im.convert("RGB").tobytes())
        self.frames += 1

    def kill(self) -> None:
        """An ffmpeg still running when rendering failed half-way is not left behind."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        err = self.proc.stderr.read().decode(errors="replace")
        if self.proc.wait() != 0:
            raise RenderError(f"ffmpeg failed: {err.strip()[-500:]}")


def _ffmpeg(out: Path) -> str:
    ffmpeg = str(matplotlib.rcParams["animation.ffmpeg_path"])
    if shutil.which(ffmpeg) is None:
        raise RenderError(
            f"cannot write {out}: ffmpeg ({ffmpeg!r}) is not on PATH. Install it "
            "(Debian/Ubuntu: `sudo apt-get install ffmpeg`; conda: `conda install ffmpeg`) "
            "or render a .gif instead (--out match.gif)")
    return ffmpeg


def _progress(states: Iterable[TickState], total: int, enabled: bool) -> Iterable[TickState]:
    if not enabled:
        return states
    from tqdm import tqdm

    return tqdm(states, total=total, unit="frame", desc="render", leave=False)


def video_width(width: int | None = None, scale: float | None = None) -> int:
    """The frame width: ``width`` pixels, else ``scale`` × the default 448 (0.5 = 224
    px, a quarter of the pixels), else 448."""
    if width is not None and scale is not None:
        raise ValueError("give a width or a scale, not both")
    if width is not None:
        px = int(width)
    elif scale is not None:
        if not (0 < scale <= 8):
            raise ValueError(f"scale must be in (0, 8], got {scale}")
        px = round(DEFAULT_WIDTH_PX * scale)
    else:
        px = DEFAULT_WIDTH_PX
    if not 64 <= px <= 4096:
        raise ValueError(f"a video is 64 to 4096 pixels wide, got {px}")
    return px


def render_replay(replay: Replay, out: str | os.PathLike[str], *, fps: int = DEFAULT_FPS,
                  every: int = DEFAULT_EVERY, hold_s: float = DEFAULT_HOLD_S, check: bool = True,
                  width: int | None = None, scale: float | None = None,
                  progress: bool = True) -> Path:
    """Render ``replay`` to ``out`` (.gif or .mp4); returns the path.

    One frame per ``every`` ticks (plus the last tick, see
    :func:`~brawlkit.replay.play.frame_ticks`), played at ``fps``; the defaults
    (every 3rd tick at 20 fps) play the match in real time.  ``width`` (pixels) or
    ``scale`` (× 448) sets the frame size.  The last frame carries the result and is
    held ``hold_s`` seconds.  ``check`` first runs :func:`verify`, so a replay that
    does not reproduce is refused instead of drawn wrong.  The file appears
    atomically (temp name + rename).
    """
    if fps < 1 or every < 1:
        raise ValueError(f"fps and every must be >= 1, got fps={fps} every={every}")
    out = Path(out)
    suffix = out.suffix.lower()
    if suffix not in (".gif", ".mp4"):
        raise ValueError(f"{out}: unknown video type {out.suffix!r}; use .gif or .mp4")
    ffmpeg = _ffmpeg(out) if suffix == ".mp4" else ""
    drawer = RasterDrawer(video_width(width, scale), replay.names)
    if check:
        verify(replay)
    n_frames = len(frame_ticks(replay.n_ticks, every))
    hold = max(0, round(hold_s * fps))
    result = result_text(replay)
    tmp = out.with_name(f".{out.stem}.tmp{out.suffix}")
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        with contextlib.ExitStack() as stack:
            writer: _GifStream | _Mp4Pipe
            if suffix == ".gif":
                writer = _GifStream(stack.enter_context(open(tmp, "wb")), drawer, fps)
            else:
                writer = _Mp4Pipe(tmp, drawer.size, fps, ffmpeg)
                stack.callback(writer.kill)
            frame = None
            for i, state in enumerate(_progress(replay_states(replay, every), n_frames, progress)):
                frame = drawer.draw(state, result if i == n_frames - 1 else None)
                writer.add(frame)
            for _ in range(hold if frame is not None else 0):
                writer.add(frame)  # type: ignore[arg-type]
            writer.close()
        tmp.replace(out)
    except FileNotFoundError as e:  # ffmpeg vanished between the check and the run
        raise RenderError(f"cannot write {out}: {e}") from e
    finally:
        tmp.unlink(missing_ok=True)
    return out
