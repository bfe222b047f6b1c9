"""Replays (.bpr): the format mirrors the C header, files round-trip, bad files are refused,
a recorded match re-simulates to the exact final hash, renders to a GIF, and a real
server's recording (``brawlpit_server --record DIR``) verifies bit for bit."""

from __future__ import annotations

import random
import struct
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import RawClient, c_layout, last_json, run_cli

from brawlkit.common.paths import header_path
from brawlkit.replay import format as F
from brawlkit.replay.play import (
    Recorder,
    ReplayMismatch,
    frame_ticks,
    record_cpu_match,
    replay_players,
    replay_states,
    verify,
)
from brawlkit.wire import protocol as P
from brawlkit.wire.constants import C

MIRRORS = [F.BpReplayHeader, F.BpReplayRun]


@pytest.fixture(scope="module")
def full_match(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A complete CPU 3 vs CPU 5 match recorded in process."""
    path = tmp_path_factory.mktemp("replay") / "full.bpr"
    record_cpu_match(path, 3, 5, seed=7)
    return path


@pytest.fixture(scope="module")
def short_match(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first 2 s of a CPU match: cut short, small, fast to render."""
    path = tmp_path_factory.mktemp("replay") / "short.bpr"
    record_cpu_match(path, 4, 6, seed=11, max_ticks=120)
    return path


# ----------------------------------------------------------------- layout
def test_c_sizes_and_offsets_match_the_mirrors(cc, tmp_path: Path) -> None:
    text = header_path().read_text(encoding="utf-8")
    missing = [c.__name__ for c in MIRRORS if c.__name__ not in text]
    assert not missing, f"{header_path()} does not declare {missing} yet (native side of the format)"
    rest = c_layout(cc, MIRRORS, tmp_path,
                    extra=('  printf("magic %u\\n", (unsigned)BP_REPLAY_MAGIC);',))
    assert [ln.split()[0] for ln in rest] == ["magic"]
    assert int(rest[0].split()[1]).to_bytes(4, "little") == F.REPLAY_MAGIC == b"BPRP"
    assert (F.HEADER_SIZE, F.RUN_SIZE, F.PLAYERS_SIZE) == (128, 28, 64)
    assert F.RUN_DTYPE.names == tuple(f for f, *_ in F.BpReplayRun._fields_)


# ----------------------------------------------------------------- round trip
def test_write_read_round_trip(tmp_path: Path) -> None:
    runs = F.empty_runs(3)
    runs["count"] = [5, 1, 200]
    runs["sx0"], runs["sy0"], runs["buttons0"] = [0.5, -1.0, 0.0], [0.0, 1.0, -0.25], [1, 3, 15]
    runs["sx1"], runs["sy1"], runs["buttons1"] = [-0.75, 0.0, 1.0], [0.125, 0.0, 0.0], [0, 8, 4]
    players = bytes(range(64))
    rep = F.Replay(seed=0xDEADBEEF, match_id=42, runs=runs, final_hash=2**64 - 3, players_raw=players,
                   arena_id=7, mode=C.BP_MODE_FASTFORWARD, cpu_level=8, complete=False,
                   winner=C.BP_WINNER_NONE, start_unix_ms=1_796_000_000_123,
                   names=("player:ada", "cpu:8"))
    path = F.write_replay(tmp_path / "r.bpr", rep)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.bpr"]  # no temp file left
    data = path.read_bytes()
    assert len(data) == 128 + 3 * 28 + 64 and data[:4] == b"BPRP"
    back = F.read_replay(path)
    assert back.path == path
    for f in ("seed", "match_id", "final_hash", "players_raw", "arena_id", "mode", "cpu_level",
              "complete", "winner", "start_unix_ms", "names", "version"):
        assert getattr(back, f) == getattr(rep, f), f
    assert back.runs.tobytes() == runs.tobytes() and back.n_ticks == 206 and back.n_runs == 3
    assert F.encode_replay(back) == data
    # the header fields sit where the C struct puts them
    h = F.BpReplayHeader.from_buffer_copy(data)
    assert (h.version, h.header_size, h.n_ticks, h.n_runs) == (1, 128, 206, 3)
    assert struct.unpack_from("<Q", data, F.BpReplayHeader.final_hash.offset)[0] == 2**64 - 3
    assert back.inputs().shape == (206, 2, 3) and tuple(back.inputs()[5, 0]) == (-1.0, 1.0, 3.0)


def test_writer_refuses_what_the_reader_would(tmp_path: Path) -> None:
    rep = F.read_replay(record_cpu_match(tmp_path / "ok.bpr", 1, 1, seed=3, max_ticks=30).path)
    import dataclasses

    with pytest.raises(ValueError, match="printable ASCII"):
        F.encode_replay(dataclasses.replace(rep, names=("tab\there", "")))
    with pytest.raises(ValueError, match="longer than 32"):
        F.encode_replay(dataclasses.replace(rep, names=("x" * 33, "")))
    with pytest.raises(ValueError, match="64"):
        F.encode_replay(dataclasses.replace(rep, players_raw=b"\0" * 10))


# ----------------------------------------------------------------- bad files
def _mutate(data: bytes, offset: int, fmt: str, value: object) -> bytes:
    b = bytearray(data)
    struct.pack_into(fmt, b, offset, value)
    return bytes(b)


_H = F.BpReplayHeader
BAD_FILES = {
    "empty": (lambda d: b"", "truncated: 0 bytes"),
    "short header": (lambda d: d[:100], "truncated: 100 bytes"),
    "foreign (GIF)": (lambda d: b"GIF89a" + d[6:], "bad magic"),
    "bpw blob": (lambda d: b"BPW\x02" + d[4:], "bad magic"),
    "version 2": (lambda d: _mutate(d, _H.version.offset, "<H", 2), "version 2"),
    "header_size": (lambda d: _mutate(d, _H.header_size.offset, "<H", 64), "header_size 64"),
    "truncated run": (lambda d: d[:128 + 28 + 5], "truncated"),
    "truncated trailer": (lambda d: d[:-1], "truncated"),
    "trailing bytes": (lambda d: d + b"\0\0", "2 trailing bytes"),
    "n_runs too big": (lambda d: _mutate(d, _H.n_runs.offset, "<I", 10**6), "truncated"),
    "n_ticks disagrees": (lambda d: _mutate(d, _H.n_ticks.offset, "<I", 31), "n_ticks 31"),
    "zero-count run": (lambda d: _mutate(d, 128, "<I", 0), "run 0 has count 0"),
    "NaN stick": (lambda d: _mutate(d, 128 + 4, "<f", float("nan")), "non-finite sx0"),
    "winner": (lambda d: _mutate(d, _H.winner.offset, "<B", 9), "winner 9"),
    "mode": (lambda d: _mutate(d, _H.mode.offset, "<B", 7), "mode 7"),
    "name junk after NUL": (lambda d: _mutate(d, _H.name0.offset + 20, "<B", 0x41), "name0"),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_bad_files_are_refused_naming_file_and_problem(tmp_path: Path, case: str) -> None:
    good = record_cpu_match(tmp_path / "good.bpr", 2, 2, seed=5, max_ticks=30).path
    assert good is not None
    data = good.read_bytes()
    bad = tmp_path / "bad.bpr"
    mutate, reason = BAD_FILES[case]
    bad.write_bytes(mutate(data))
    with pytest.raises(ValueError) as e:
        F.read_replay(bad)
    assert str(bad) in str(e.value) and reason in str(e.value), str(e.value)


def test_cli_reports_a_bad_file(tmp_path: Path) -> None:
    bad = tmp_path / "notes.bpr"
    bad.write_text("not a replay at all, just some text that is long enough " * 4)
    r = run_cli("replay", str(bad))
    assert r.returncode == 1 and "bad magic" in r.stderr and str(bad) in r.stderr, r.stderr


# ----------------------------------------------------------------- re-simulation
def test_recorded_match_replays_to_the_exact_final_hash(full_match: Path) -> None:
    rep = F.read_replay(full_match)
    assert rep.complete and rep.winner in (0, 1, C.BP_WINNER_DRAW)
    assert rep.names == ("cpu:3", "cpu:5") and rep.cpu_level == 5
    assert 0 < rep.n_ticks <= C.BP_MATCH_TICKS and rep.n_runs < rep.n_ticks  # runs compress
    v = verify(rep)
    assert (v.n_ticks, v.final_hash, v.winner, v.complete) == (rep.n_ticks, rep.final_hash,
                                                               rep.winner, True)
    # the lazy state stream ends on the recorded final fighters
    states = list(replay_states(rep, every=50))
    assert [s.tick for s in states] == frame_ticks(rep.n_ticks, 50)
    assert states[-1].players == rep.final_players and states[-1].phase == C.BP_PHASE_OVER
    assert states[0].tick == 0 and states[0].ticks_left == C.BP_MATCH_TICKS
    per_tick = replay_players(rep)
    assert per_tick.shape == (rep.n_ticks + 1, 2) and per_tick[-1].tobytes() == rep.players_raw
    # the same seed and levels record the same match again
    assert record_cpu_match(None, 3, 5, seed=7).final_hash == rep.final_hash


def test_a_changed_input_or_result_is_caught(full_match: Path) -> None:
    import dataclasses

    rep = F.read_replay(full_match)
    runs = rep.runs.copy()
    runs["sx0"][:20] = 1.0  # slot 0 walks right for its first 20 runs
    with pytest.raises(ReplayMismatch, match="final state hash"):
        verify(dataclasses.replace(rep, runs=runs))
    with pytest.raises(ReplayMismatch, match="final state hash"):
        verify(dataclasses.replace(rep, seed=rep.seed + 1))
    players = bytearray(rep.players_raw)
    players[16] ^= 1  # player 0 damage, one bit
    with pytest.raises(ReplayMismatch, match="player 0 damage"):
        verify(dataclasses.replace(rep, players_raw=bytes(players)))
    with pytest.raises(ReplayMismatch, match="winner"):
        verify(dataclasses.replace(rep, winner=1 - rep.winner if rep.winner < 2 else 0))


def test_cut_short_and_python_recorder(short_match: Path, tmp_path: Path) -> None:
    rep = F.read_replay(short_match)
    assert (rep.n_ticks, rep.complete, rep.winner) == (120, False, C.BP_WINNER_NONE)
    verify(rep)
    # Recorder with arbitrary inputs: out-of-range sticks are recorded as the sim clamps them
    from brawlkit.wire.sim import BpInput

    rng = random.Random(3)
    with Recorder(seed=99, match_id=4, names=("me", "")) as rec:
        for t in range(300):
            b = rng.choice((0, 1, 2, 4, 8, 0xFF))
            rec.step(BpInput(rng.uniform(-3, 3), 1.0 if t < 100 else -5.0, b), BpInput(0, 0, 0))
        mine = rec.finish()
    assert mine.n_ticks == 300 and mine.names == ("me", "")
    assert float(np.abs(mine.runs[["sx0", "sy0"]].view(np.float32)).max()) <= 1.0
    assert int(mine.runs["buttons0"].max()) <= C.BP_BTN_MASK
    back = F.read_replay(F.write_replay(tmp_path / "mine.bpr", mine))
    assert verify(back).final_hash == mine.final_hash


# ----------------------------------------------------------------- render
def test_render_gif_has_one_frame_per_drawn_tick(short_match: Path, tmp_path: Path) -> None:
    from PIL import Image

    from brawlkit.replay.render import render_replay

    rep = F.read_replay(short_match)
    t0 = time.monotonic()
    out = render_replay(rep, tmp_path / "clip.gif", fps=20, every=3, hold_s=1.0, progress=False)
    took = time.monotonic() - t0
    with Image.open(out) as im:
        assert im.format == "GIF" and im.size[0] >= 400
        # 0, 3, ..., 120: 41 drawn ticks; the held result frames merge into the last one
        assert im.n_frames == len(frame_ticks(120, 3)) == 41
        im.seek(0)
        assert im.info["duration"] == 50
        im.seek(im.n_frames - 1)
        assert im.info["duration"] >= 1000
    assert out.stat().st_size < 400_000, out.stat().st_size
    assert [p.name for p in tmp_path.iterdir()] == ["clip.gif"]
    assert took < 60


def test_render_size_fps_and_scale_options(short_match: Path, tmp_path: Path) -> None:
    from PIL import Image

    from brawlkit.replay.render import render_replay, video_width

    rep = F.read_replay(short_match)
    full = render_replay(rep, tmp_path / "full.gif", progress=False)
    half = render_replay(rep, tmp_path / "half.gif", scale=0.5, fps=10, progress=False)
    wide = render_replay(rep, tmp_path / "wide.gif", width=640, progress=False)
    with Image.open(full) as a, Image.open(half) as b, Image.open(wide) as c:
        assert a.size[0] == 448 and b.size[0] == 224 and c.size[0] == 640
        assert b.size[1] == pytest.approx(a.size[1] / 2, abs=2)
        assert b.info["duration"] == 100 and a.info["duration"] == 50
    assert half.stat().st_size < 0.6 * full.stat().st_size
    with pytest.raises(ValueError, match="not both"):
        video_width(300, 0.5)
    with pytest.raises(ValueError, match="64 to 4096"):
        video_width(10)


def test_render_is_fast_and_streams(tmp_path: Path) -> None:
    """50 s of a match (1,000 frames): drawn into the GIF's palette and streamed, a few ms
    of CPU a frame, re-simulation included.  Drawing each frame with matplotlib and
    quantising it cost ~30 ms of CPU a frame (92 s for a 148 s match)."""
    from PIL import Image

    from brawlkit.replay.render import render_replay

    rep = record_cpu_match(None, 5, 6, seed=3, max_ticks=3000)
    t0 = time.process_time()
    out = render_replay(rep, tmp_path / "long.gif", check=False, progress=False)
    cpu_per_frame = (time.process_time() - t0) / len(frame_ticks(rep.n_ticks, 3))
    assert cpu_per_frame < 0.008, f"{cpu_per_frame * 1000:.1f} ms of CPU per frame"
    with Image.open(out) as im:
        assert im.n_frames > 900  # a frame per drawn tick (the tick counter changes in each)
    assert out.stat().st_size < 1_500_000, out.stat().st_size


def test_replays_are_drawn_in_the_clients_colours(short_match: Path) -> None:
    """One palette for the pygame client and the renderer: player 1 red-orange, player 2
    blue in both (the renderer once drew them blue and orange, the other way round)."""
    from brawlkit.common import palette
    from brawlkit.play import draw
    from brawlkit.replay.render import SLOT_COLORS, RasterDrawer

    assert draw.SLOT_C is palette.SLOT_C and draw.BG_TOP is palette.BG_TOP
    assert SLOT_COLORS == tuple(palette.hex_of(c) for c in palette.SLOT_C)
    rep = F.read_replay(short_match)
    state = next(iter(replay_states(rep, every=60)))
    rgb = RasterDrawer(448, rep.names).draw(state).convert("RGB")
    colours = {c for _, c in rgb.getcolors(maxcolors=1 << 16)}
    assert palette.SLOT_C[0] in colours and palette.SLOT_C[1] in colours
    assert palette.BG_TOP in colours and palette.STAGE_C in colours
    assert (0x4E, 0xA1, 0xFF) not in colours and (0xFF, 0x9F, 0x43) not in colours
    # player 1 (slot 0) is drawn where slot 0 stands
    p = state.players[0]
    d = RasterDrawer(448, rep.names)
    x, y = d.pt(p.x, p.y + C.BP_FIGHTER_HEIGHT / 4)
    assert rgb.getpixel((int(x), int(y))) == palette.SLOT_C[0]


def test_render_frame_draws_on_any_axes(short_match: Path) -> None:
    from matplotlib.figure import Figure

    from brawlkit.replay.render import clock_text, render_frame

    rep = F.read_replay(short_match)
    states = list(replay_states(rep, every=60))
    ax = Figure().add_subplot()
    drawer = render_frame(states[0], ax, names=rep.names)
    assert drawer.clock.get_text() == "2:30" and drawer.huds[0].get_text().startswith("cpu:4\n0%")
    drawer.update(states[-1], result="cut short")
    assert drawer.tick.get_text() == "tick 120" and drawer.result.get_visible()
    assert drawer.bodies[1].get_x() == pytest.approx(states[-1].players[1].x - C.BP_FIGHTER_HALF_WIDTH)
    assert clock_text(1) == "0:01" and clock_text(0) == "0:00" and clock_text(61 * 60) == "1:01"


def test_mp4_without_ffmpeg_names_the_fix(short_match: Path, tmp_path: Path, monkeypatch) -> None:
    import matplotlib

    from brawlkit.replay.render import RenderError, render_replay

    monkeypatch.setitem(matplotlib.rcParams, "animation.ffmpeg_path", str(tmp_path / "no-ffmpeg"))
    with pytest.raises(RenderError, match="apt-get install ffmpeg"):
        render_replay(F.read_replay(short_match), tmp_path / "m.mp4", progress=False)
    with pytest.raises(ValueError, match="use .gif or .mp4"):
        render_replay(F.read_replay(short_match), tmp_path / "m.avi", progress=False)
    assert list(tmp_path.iterdir()) == []


def test_cli_verifies_and_renders(short_match: Path, tmp_path: Path) -> None:
    out = tmp_path / "m.gif"
    r = run_cli("replay", str(short_match), "--out", str(out), "--every", "6", "--no-progress",
                "--json")
    assert r.returncode == 0, r.stderr
    info = last_json(r.stdout)
    assert info["verified"] is True and info["n_ticks"] == 120 and info["out"] == str(out)
    assert info["names"] == ["cpu:4", "cpu:6"] and info["result"].startswith("cut short")
    assert out.stat().st_size > 0
    small = tmp_path / "s.gif"
    r = run_cli("replay", str(short_match), "--out", str(small), "--scale", "0.5", "--fps", "10",
                "--no-progress", "--json")
    assert r.returncode == 0, r.stderr
    assert last_json(r.stdout)["bytes"] == small.stat().st_size and "MB)" in r.stdout
    from PIL import Image

    with Image.open(small) as im:
        assert im.size[0] == 224 and im.info["duration"] == 100


# ----------------------------------------------------------------- a real server's recording
def _wait_for_file(d: Path, pattern: str, timeout: float = 10.0) -> list[Path]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = sorted(d.glob(pattern))
        if found:
            return found
        time.sleep(0.05)
    return []


@pytest.mark.servers
def test_server_recording_verifies_bit_for_bit_and_renders(server_factory, tmp_path: Path) -> None:
    """A lockstep match against the CPU over real packets; the server writes the .bpr;
    it re-simulates in process to the recorded hash and fighters, its slot-0 inputs are
    exactly the commands sent, and it renders."""
    from PIL import Image

    from brawlkit.replay.render import render_replay

    rec_dir = tmp_path / "replays"
    rec_dir.mkdir()
    seed, level = 4321, 3
    srv = server_factory(mode="lockstep", cpu_level=level, seed=seed,
                         extra_args=["--record", str(rec_dir)])
    c = RawClient(srv.address)
    try:
        first = c.snapshot()
        assert first.phase == C.BP_PHASE_PLAYING
        rng = random.Random(5)
        sent: list[tuple[float, float, int]] = []  # slot 0's input, per tick
        tick, last = 0, first
        for i in range(1, 2000):
            sx, sy = rng.choice((-1.0, -0.5, 0.0, 0.25, 1.0)), rng.choice((-1.0, 0.0, 0.0, 1.0))
            b, rep_n = rng.choice((0, 0, 1, 2, 4, 8, 3)), rng.choice((1, 4, 16, 64))
            c.cmd(tick, i, sx, sy, b, rep=rep_n)
            last = c.snapshot()
            sent += [(sx, sy, b)] * (last.tick - tick)
            tick = last.tick
            if last.over:
                break
        assert last.over, "match did not end"
        files = _wait_for_file(rec_dir, "*.bpr")
        assert [f.name.endswith(f"-a{c.arena_id}-m{last.match_id}.bpr") for f in files] == [True]
        assert not list(rec_dir.glob("*.tmp*")), "a temp file was left behind"
    finally:
        c.close()
    rep = F.read_replay(files[0])
    assert (rep.seed, rep.match_id, rep.arena_id) == (seed, last.match_id, c.arena_id)
    assert (rep.mode, rep.cpu_level, rep.complete, rep.winner) == (C.BP_MODE_LOCKSTEP, level, True,
                                                                   last.winner)
    assert rep.names[1] == f"cpu:{level}" and rep.n_ticks == last.tick
    assert rep.final_players == last.players  # what the server sent is what it recorded
    assert abs(rep.start_unix_ms / 1000 - time.time()) < 600
    assert files[0].name.startswith(f"{rep.start_unix_ms}-")
    assert [tuple(x) for x in rep.inputs()[:, 0]] == [(float(a), float(b), float(c_))
                                                      for a, b, c_ in sent]
    v = verify(rep)  # bit for bit: final hash, both fighters, tick count, phase, winner
    assert v.final_hash == rep.final_hash
    out = render_replay(rep, tmp_path / "server.gif", every=30, hold_s=0.5, progress=False)
    with Image.open(out) as im:
        assert im.n_frames == len(frame_ticks(rep.n_ticks, 30))


@pytest.mark.servers
def test_server_match_cut_short_by_reset_verifies(server_factory, tmp_path: Path) -> None:
    """A RESET mid-match ends the match early: its file says so (complete 0, no winner),
    carries the seed that match was played with (not the RESET's new one), and still
    re-simulates bit for bit; the next match gets a file of its own."""
    rec_dir = tmp_path / "replays"
    rec_dir.mkdir()
    srv = server_factory(mode="lockstep", cpu_level=4, seed=9, extra_args=["--record", str(rec_dir)])
    c = RawClient(srv.address)
    try:
        c.snapshot()
        c.cmd(0, 1, 1.0, 0.0, 0, rep=50)
        assert c.snapshot().tick == 50
        c.reset(10)
        assert c.snapshot().match_id == 2
        c.cmd(0, 1, -1.0, 0.0, C.BP_BTN_JUMP, rep=30)
        assert c.snapshot().tick == 30
        c.send(P.pack_bye(2, c.session))  # the slot empties: match 2 is cut short too
        files = _wait_for_file(rec_dir, "*-m2.bpr")
    finally:
        c.close()
    first, second = (F.read_replay(f) for f in sorted(rec_dir.glob("*.bpr"), key=lambda p: p.name[-6:]))
    assert [(r.match_id, r.seed, r.n_ticks, r.complete, r.winner) for r in (first, second)] == [
        (1, 9, 50, False, C.BP_WINNER_NONE), (2, 10, 30, False, C.BP_WINNER_NONE)]
    assert files and verify(first) and verify(second)
