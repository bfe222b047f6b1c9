"""Draw a replay: one frame on a matplotlib axes, or a whole match to GIF / MP4.

Why matplotlib (its Agg canvas) and not a game window: it runs headless (CI, notebooks,
servers), it is already a dependency, and the same :func:`render_frame` draws
one tick in a notebook cell.  The picture is built from the header constants
(stage half-width and depth, blast box, fighter box), so it shows the geometry
the simulation uses — nothing is retyped.

Frames come straight from :func:`brawlkit.replay.play.replay_states` (the
simulation re-run in process), so a rendered match is what the server
simulated, tick for tick, not an interpolation of snapshots.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from io import BytesIO
from pathlib import Path
from typing import Any

import matplotlib
from matplotlib import animation, patches
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image

from brawlkit.replay.format import Replay, result_text
from brawlkit.replay.play import TickState, frame_ticks, replay_states, verify
from brawlkit.wire.constants import C

#: fighter colours by slot
SLOT_COLORS = ("#4ea1ff", "#ff9f43")
_BG = "#11151c"
_STAGE = "#7a8494"
_BLAST = "#d9534f"
_HITSTUN = "#ff3b3b"
#: space above the blast box for the HUD (stage units)
_HUD_BAND = 70.0
#: space around the blast box so its dashed edge is drawn in full
_MARGIN = 4.0
#: default figure width: 5.6 in at 80 dpi = 448 px, one pixel per stage unit across the blast box
DEFAULT_WIDTH_IN = 5.6

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
        ax.add_patch(patches.Rectangle((-hw, -depth), 2 * hw, depth, fc=_STAGE, ec="#c8d0dc", lw=1.0))
        fw, fh = C.BP_FIGHTER_HALF_WIDTH, C.BP_FIGHTER_HEIGHT
        self.bodies, self.shields, self.eyes, self.tags, self.huds = [], [], [], [], []
        for i in range(2):
            body = patches.Rectangle((0, 0), 2 * fw, fh, fc=SLOT_COLORS[i], ec="none", lw=0, zorder=3)
            shield = patches.Circle((0, 0), fh, fc="#a8e6ff", ec="#e0f7ff", alpha=0.4, lw=0.8,
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


class _CompactGifWriter(animation.PillowWriter):
    """PillowWriter keeping each frame as a 64-colour palette image instead of RGB:
    a full match is ~3,000 frames, and Pillow holds them all until it writes the GIF
    (RGB: ~1.2 GB at 448x380; palette: a third of that, and a smaller file)."""

    def setup(self, fig: Any, outfile: Any, dpi: float | None = None) -> None:
        super().setup(fig, outfile, dpi=dpi)
        self._palette_frames: list[Image.Image] = []

    def grab_frame(self, **savefig_kwargs: Any) -> None:
        buf = BytesIO()
        self.fig.savefig(buf, **{**savefig_kwargs, "format": "rgba", "dpi": self.dpi})
        im = Image.frombuffer("RGBA", self.frame_size, buf.getvalue(), "raw", "RGBA", 0, 1)
        self._palette_frames.append(im.convert("RGB").quantize(
            colors=64, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE))

    def finish(self) -> None:
        frames = self._palette_frames
        frames[0].save(self.outfile, save_all=True, append_images=frames[1:],
                       duration=int(1000 / self.fps), loop=0)


def _writer(out: Path, fps: int) -> Any:
    suffix = out.suffix.lower()
    if suffix == ".gif":
        return _CompactGifWriter(fps=fps)
    if suffix == ".mp4":
        ffmpeg = str(matplotlib.rcParams["animation.ffmpeg_path"])
        if shutil.which(ffmpeg) is None:
            raise RenderError(
                f"cannot write {out}: ffmpeg ({ffmpeg!r}) is not on PATH. Install it "
                "(Debian/Ubuntu: `sudo apt-get install ffmpeg`; conda: `conda install ffmpeg`) "
                "or render a .gif instead (--out match.gif)")
        return animation.FFMpegWriter(fps=fps, codec="libx264",
                                      extra_args=["-pix_fmt", "yuv420p"])
    raise ValueError(f"{out}: unknown video type {out.suffix!r}; use .gif or .mp4")


def _progress(states: Iterable[TickState], total: int, enabled: bool) -> Iterable[TickState]:
    if not enabled:
        return states
    from tqdm import tqdm

    return tqdm(states, total=total, unit="frame", desc="render", leave=False)


def render_replay(replay: Replay, out: str | os.PathLike[str], *, fps: int = DEFAULT_FPS,
                  every: int = DEFAULT_EVERY, hold_s: float = DEFAULT_HOLD_S, check: bool = True,
                  dpi: int = 80, width_in: float = DEFAULT_WIDTH_IN, progress: bool = True) -> Path:
    """Render ``replay`` to ``out`` (.gif or .mp4); returns the path.

    One frame per ``every`` ticks (plus the last tick, see
    :func:`~brawlkit.replay.play.frame_ticks`), played at ``fps``; the defaults
    (every 3rd tick at 20 fps) play the match in real time.  The last frame carries
    the result and is held ``hold_s`` seconds (in a GIF the repeated frames merge
    into one longer frame).  ``check`` first runs :func:`verify`, so a replay that
    does not reproduce is refused instead of drawn wrong.  The file appears
    atomically (temp name + rename).
    """
    if fps < 1 or every < 1:
        raise ValueError(f"fps and every must be >= 1, got fps={fps} every={every}")
    out = Path(out)
    writer = _writer(out, fps)
    if check:
        verify(replay)
    n_frames = len(frame_ticks(replay.n_ticks, every))
    hold = max(0, round(hold_s * fps))
    result = result_text(replay)
    tmp = out.with_name(f".{out.stem}.tmp{out.suffix}")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = new_figure(dpi, width_in)
    try:
        drawer = FrameDrawer(ax, replay.names)
        with writer.saving(fig, str(tmp), dpi):
            last: TickState | None = None
            for i, state in enumerate(_progress(replay_states(replay, every), n_frames, progress)):
                is_last = i == n_frames - 1
                drawer.update(state, result if is_last else None)
                writer.grab_frame(facecolor=_BG)
                last = state
            for _ in range(hold if last is not None else 0):
                writer.grab_frame(facecolor=_BG)
        tmp.replace(out)
    except FileNotFoundError as e:  # ffmpeg vanished between the check and the run
        raise RenderError(f"cannot write {out}: {e}") from e
    finally:
        tmp.unlink(missing_ok=True)
    return out
