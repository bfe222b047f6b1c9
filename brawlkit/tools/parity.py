"""C-vs-Python observation parity (docs/observation.md): ``python -m brawlkit parity --states N``.

Generates N snapshot states — named edge cases first (both offstage, zero
distance, zero relative velocity, max damage, zero stocks, outside the blast
box, every posture rule's boundary, ...), then seeded random states across and
beyond the reachable range — writes them as raw SNAPSHOT datagrams, runs the C
tool ``native/build/brawlpit_obs`` on them, builds the same observations with
:mod:`brawlkit.observation`, and compares value by value.

Record format of the C tool (see native/src/obs_tool.c): 96 bytes per record,
``u8 slot, u8[3] 0, 92-byte SNAPSHOT``; it answers 31 float32 per record.

A state passes when every dimension differs by at most ``TOLERANCE`` (1e-6)
and the posture one-hot blocks are identical; a NaN on either side (e.g. a
dimension the C builder never wrote) counts as an infinite difference.

``main`` prints a per-dimension table and, last, one JSON line; it exits 1 on
any mismatch (that is what ``make check`` relies on).  It never builds: the
C tool comes from the native build (``make build``).
"""

from __future__ import annotations

import json
import math
import os
import random
import struct
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import astuple, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from brawlkit.common.cli_args import command_parser
from brawlkit.common.paths import native_path
from brawlkit.env.observation import (
    INPUT_LAYOUTS,
    INPUT_NAMES,
    POSTURE_OFFSET,
    POSTURES,
    build_input,
)
from brawlkit.parena_compiler import load_stdlib_module
from brawlkit.wire.constants import C
from brawlkit.wire.protocol import SNAPSHOT_SIZE, pack_snapshot

TOLERANCE = 1e-6
#: the previous command at the end of a record: f32 stick_x, f32 stick_y, u32 buttons
_PREV = struct.Struct("<ffI")
#: one record of the C tool's input: u8 slot, 3 zero bytes, one SNAPSHOT datagram, the command
RECORD_SIZE = 4 + SNAPSHOT_SIZE + _PREV.size


@dataclass(frozen=True)
class P:
    """One fighter's wire fields (floats are rounded to float32 by packing)."""

    x: float = 0.0
    y: float = 0.0
    vx: float = 0.0
    vy: float = 0.0
    damage: float = 0.0
    shield: float = 60.0
    stocks: int = 3
    facing: int = 1
    flags: int = 1
    action_state: int = 0
    hitstun_ticks: int = 0
    jumps_left: int = 2

    def fields(self, slot: int) -> tuple[Any, ...]:
        """The ``NetPlayer`` field values in wire order, for ``slot``."""
        return (*astuple(self), slot)


def snapshot_bytes(p0: P, p1: P, ticks_left: int, tick: int = 0, seq: int = 0) -> bytes:
    """A well-formed SNAPSHOT datagram with the two fighters and the clock."""
    return pack_snapshot((p0.fields(0), p1.fields(1)), ticks_left=ticks_left, tick=tick, seq=seq)


def _f32(x: float) -> float:
    return float(np.float32(x))


def _up(x: float) -> float:
    return float(np.nextafter(np.float32(x), np.float32(np.inf)))


def _down(x: float) -> float:
    return float(np.nextafter(np.float32(x), np.float32(-np.inf)))


def _posture_consts() -> dict[str, float]:

    return {k: float(v) for k, v in
            load_stdlib_module("brawlpit/commander_mod.prn").checked.consts.items()}


def edge_cases() -> list[tuple[str, P, P, int]]:
    """Named edge-case states: (name, player0, player1, ticks_left)."""
    k = _posture_consts()
    edge, late, kill, lead = k["EDGE"], k["LATE_TICKS"], k["KILL_PERCENT"], k["DAMAGE_LEAD"]
    bx, bt, bb = float(C.BP_BLAST_X), float(C.BP_BLAST_TOP), float(C.BP_BLAST_BOTTOM)
    vs, sh, st = float(C.BP_OBS_VEL_SCALE), float(C.BP_SHIELD_MAX), int(C.BP_STOCKS)
    T = int(C.BP_MATCH_TICKS)
    on = P(x=-20.0, y=0.0)
    cases: list[tuple[str, P, P, int]] = [
        ("neutral_start", P(x=-40.0), P(x=40.0, facing=-1), T),
        ("both_offstage", P(x=-150.0, y=-50.0, vy=-2.0, flags=32),
         P(x=180.0, y=-80.0, vx=3.0, flags=32), 4000),
        ("both_offstage_high", P(x=-200.0, y=150.0), P(x=200.0, y=190.0), 4000),
        ("zero_distance", P(x=10.0, y=5.0, vx=1.0), P(x=10.0, y=5.0, vx=-1.0), 3000),
        ("zero_distance_zero_velocity", P(x=10.0, y=5.0), P(x=10.0, y=5.0), 3000),
        ("zero_relative_velocity", P(x=-30.0, vx=2.5, vy=1.0), P(x=30.0, vx=2.5, vy=1.0), 3000),
        ("zero_velocity", P(x=-30.0), P(x=30.0, y=40.0), 3000),
        ("max_damage", P(damage=999.0), P(x=30.0, damage=999.0), 3000),
        ("max_damage_one", P(damage=999.0), P(x=30.0, damage=0.0), 3000),
        ("zero_stocks", P(stocks=0), P(x=30.0, stocks=0), 0),
        ("zero_stocks_one", P(stocks=0, damage=50.0), P(x=30.0, stocks=st), 100),
        ("stocks_255", P(stocks=255), P(x=30.0, stocks=0), 100),
        ("clock_zero", on, P(x=30.0), 0),
        ("clock_max_u32", on, P(x=30.0), 0xFFFFFFFF),
        ("on_blast_x", P(x=bx), P(x=-bx), 3000),
        ("beyond_blast", P(x=bx + 50.0, y=bt + 10.0), P(x=-bx - 1.0, y=bb - 10.0), 3000),
        ("on_blast_top_bottom", P(y=bt), P(y=bb), 3000),
        ("just_inside_blast", P(x=_down(bx), vx=1e-3), P(x=_up(-bx), vx=-50.0), 3000),
        ("launch_up", P(y=150.0, vy=40.0), P(x=10.0, y=_down(bt), vy=1e-30), 3000),
        ("launch_down", P(x=100.0, y=-100.0, vy=-30.0), P(y=_up(bb), vy=-1e-30), 3000),
        ("tiny_velocity", P(vx=1e-45, vy=-1e-45), P(x=1e-45, vx=-1e-45, vy=1e-45), 3000),
        ("velocity_clip", P(vx=vs, vy=-vs), P(x=5.0, vx=_up(vs), vy=_down(-vs)), 3000),
        ("huge_velocity", P(vx=3e38, vy=-3e38), P(x=5.0, vx=-3e38, vy=3e38), 3000),
        ("shield_bounds", P(shield=0.0), P(x=5.0, shield=_up(sh)), 3000),
        ("negative_fields", P(damage=-5.0, shield=-1.0), P(x=5.0, damage=-0.0), 3000),
        ("same_x_facing", P(x=0.0, y=0.0, facing=-1), P(x=0.0, y=50.0, facing=1), 3000),
        ("same_x_facing_zero", P(x=0.0, facing=0), P(x=0.0, y=50.0, facing=0), 3000),
        ("facing_garbage", P(x=-5.0, facing=-128), P(x=5.0, facing=127), 3000),
        ("facing_away", P(x=-5.0, facing=-1), P(x=5.0, facing=1), 3000),
        ("damage_diff_clip", P(damage=999.0), P(x=5.0, damage=0.0), 3000),
        ("negative_zero_positions", P(x=-0.0, y=-0.0), P(x=0.0, y=0.0), 3000),
    ]
    # every posture rule's boundary (values from the compiled .prn, not retyped)
    for name, xs in (("edge", (edge, _down(edge), _up(edge), -edge, _down(-edge), _up(-edge))),):
        for x in xs:
            cases.append((f"self_x_{name}_{x!r}", P(x=x), P(x=0.0), 3000))
            cases.append((f"other_x_{name}_{x!r}", P(x=0.0), P(x=x), 3000))
    for y in (0.0, -0.0, _down(0.0), _up(0.0), -1.0):
        cases.append((f"self_y_{y!r}", P(x=50.0, y=y), P(x=0.0), 3000))
        cases.append((f"other_y_{y!r}", P(x=0.0), P(x=50.0, y=y), 3000))
    for t in (int(late) - 1, int(late), int(late) + 1):
        for sst, ost, sd, od in ((3, 2, 0.0, 0.0), (2, 3, 0.0, 0.0), (2, 2, 10.0, 10.0 + lead),
                                 (2, 2, 10.0, _up(10.0 + lead)), (2, 2, 10.0, _down(10.0 + lead)),
                                 (2, 2, 50.0, 40.0), (2, 2, 50.0, 50.0)):
            cases.append((f"late_{t}_{sst}v{ost}_{sd}v{od!r}",
                          P(stocks=sst, damage=sd), P(x=30.0, stocks=ost, damage=od), t))
    for od in (kill, _down(kill), _up(kill)):
        cases.append((f"kill_percent_{od!r}", P(), P(x=30.0, damage=od), T))
    return cases


def random_player(rng: random.Random) -> P:
    r = rng.random()
    if r < 0.45:  # on stage
        x, y = rng.uniform(-90.0, 90.0), 0.0
    elif r < 0.75:  # airborne anywhere inside the blast box
        x, y = rng.uniform(-230.0, 230.0), rng.uniform(-115.0, 205.0)
    else:  # far and beyond
        x, y = rng.uniform(-320.0, 320.0), rng.uniform(-200.0, 300.0)

    def vel() -> float:
        q = rng.random()
        if q < 0.2:
            return 0.0
        if q < 0.6:
            return rng.gauss(0.0, 2.0)
        if q < 0.85:
            return rng.gauss(0.0, 6.0)
        return rng.uniform(-40.0, 40.0)

    q = rng.random()
    damage = (rng.uniform(0.0, 200.0) if q < 0.6 else rng.uniform(0.0, 999.0) if q < 0.9
              else float(rng.randrange(0, 1000)))
    shield = rng.uniform(0.0, 60.0) if rng.random() < 0.7 else float(C.BP_SHIELD_MAX)
    facing = rng.choice((-1, 1)) if rng.random() < 0.95 else rng.randrange(-128, 128)
    return P(x=x, y=y, vx=vel(), vy=vel(), damage=damage, shield=shield,
             stocks=rng.randrange(0, int(C.BP_STOCKS) + 1), facing=facing,
             flags=rng.randrange(0, 64), action_state=rng.randrange(0, 256),
             hitstun_ticks=rng.randrange(0, 120), jumps_left=rng.randrange(0, 3))


def random_state(rng: random.Random) -> tuple[P, P, int]:
    p0, p1 = random_player(rng), random_player(rng)
    q = rng.random()
    if q < 0.03:  # same spot
        p1 = replace(p1, x=p0.x, y=p0.y)
    elif q < 0.06:  # same velocity
        p1 = replace(p1, vx=p0.vx, vy=p0.vy)
    elif q < 0.08:  # same x
        p1 = replace(p1, x=p0.x)
    t = rng.randrange(0, int(C.BP_MATCH_TICKS) + 1)
    return p0, p1, t


#: previous commands of the edge cases: neutral, every button, stick corners, out-of-range
#: sticks (clipped), a negative zero, unknown button bits (ignored)
EDGE_COMMANDS: tuple[tuple[float, float, int], ...] = (
    (0.0, 0.0, 0), (1.0, -1.0, int(C.BP_BTN_MASK)), (-1.0, 1.0, int(C.BP_BTN_SPECIAL)),
    (1.5, -3.0, int(C.BP_BTN_JUMP) | int(C.BP_BTN_SHIELD)), (-0.0, 0.25, int(C.BP_BTN_ATTACK)),
    (0.1, -0.1, 0xFFFFFFF0),
)


def random_command(rng: random.Random) -> tuple[float, float, int]:
    def stick() -> float:
        q = rng.random()
        return rng.choice((0.0, -1.0, 1.0)) if q < 0.2 else rng.uniform(-1.3, 1.3)

    buttons = rng.randrange(16) | (rng.getrandbits(28) << 4 if rng.random() < 0.05 else 0)
    return stick(), stick(), buttons


def generate(states: int, seed: int = 0
             ) -> tuple[list[bytes], list[int], list[tuple[float, float, int]], list[str]]:
    """``states`` (packets, slots, previous commands, names): edge cases first, then random."""
    packets: list[bytes] = []
    slots: list[int] = []
    prevs: list[tuple[float, float, int]] = []
    names: list[str] = []
    for k, (name, p0, p1, t) in enumerate(edge_cases()):
        for slot in (0, 1):
            packets.append(snapshot_bytes(p0, p1, t))
            slots.append(slot)
            prevs.append(EDGE_COMMANDS[(2 * k + slot) % len(EDGE_COMMANDS)])
            names.append(f"{name}/slot{slot}")
    packets, slots, prevs, names = packets[:states], slots[:states], prevs[:states], names[:states]
    rng = random.Random(seed)
    i = 0
    while len(packets) < states:
        p0, p1, t = random_state(rng)
        packets.append(snapshot_bytes(p0, p1, t, tick=i, seq=i))
        slots.append(rng.randrange(2))
        prevs.append(random_command(rng))
        names.append(f"random/{i}")
        i += 1
    return packets, slots, prevs, names


def c_inputs(packets: list[bytes], slots: list[int], prevs: list[tuple[float, float, int]],
             layout: int, obs_bin: Path) -> np.ndarray:
    """Run the C tool on the records; (N, input size of ``layout``) float32."""
    dim = INPUT_LAYOUTS[layout]
    with tempfile.TemporaryDirectory(prefix="bk_parity_") as td:
        src, dst = Path(td) / "in.bin", Path(td) / "out.bin"
        with open(src, "wb") as f:
            for pkt, slot, prev in zip(packets, slots, prevs, strict=True):
                f.write(bytes((slot, 0, 0, 0)) + pkt + _PREV.pack(*prev))
        proc = subprocess.run([str(obs_bin), "--layout", str(layout), str(src), str(dst)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{obs_bin} failed ({proc.returncode}): {proc.stderr.strip()}")
        out = np.fromfile(dst, dtype="<f4")
    if out.size != len(packets) * dim:
        raise RuntimeError(f"{obs_bin} wrote {out.size} floats for {len(packets)} records")
    return out.reshape(len(packets), dim)


def py_inputs(packets: list[bytes], slots: list[int], prevs: list[tuple[float, float, int]],
              layout: int) -> np.ndarray:
    out = np.empty((len(packets), INPUT_LAYOUTS[layout]), dtype=np.float32)
    for i, (pkt, slot, prev) in enumerate(zip(packets, slots, prevs, strict=True)):
        out[i] = build_input(pkt, slot, layout, prev)
    return out


def _posture_index(block: np.ndarray) -> np.ndarray:
    """argmax of a one-hot row, or -1 when the row is not exactly one-hot."""
    ok = (np.sum(block == 1.0, axis=1) == 1) & (np.sum(block == 0.0, axis=1) == block.shape[1] - 1)
    return np.where(ok, np.argmax(block, axis=1), -1)


def compare(c_in: np.ndarray, py_in: np.ndarray, names: list[str] | None = None,
            layout: int = 1) -> dict[str, Any]:
    """Per-value comparison of one layout's inputs (rows: states) built by C and by Python."""
    dim_names = INPUT_NAMES[layout]
    with np.errstate(invalid="ignore"):
        diff = np.abs(c_in.astype(np.float64) - py_in.astype(np.float64))
    diff[np.isnan(diff)] = np.inf  # NaN on either side (e.g. an unwritten dimension)
    per_dim = diff.max(axis=0) if len(diff) else np.zeros(len(dim_names))
    worst = int(np.argmax(per_dim))
    pb = slice(POSTURE_OFFSET, POSTURE_OFFSET + len(POSTURES))
    pc, pp = _posture_index(c_in[:, pb]), _posture_index(py_in[:, pb])
    mism = np.nonzero((pc != pp) | (pc < 0))[0]
    confusion = np.zeros((len(POSTURES), len(POSTURES) + 1), dtype=int)  # rows py, cols C (+bad)
    for a, b in zip(pp, pc, strict=True):
        confusion[a, b if b >= 0 else len(POSTURES)] += 1
    bad_rows = np.nonzero((diff > TOLERANCE).any(axis=1))[0]
    max_abs = float(per_dim.max()) if len(per_dim) else 0.0

    def fin(v: float) -> float | None:
        return v if math.isfinite(v) else None

    examples = []
    for r in bad_rows[:5]:
        d = int(np.argmax(diff[r]))
        examples.append({"row": int(r), "state": names[r] if names else str(r), "dim": d,
                         "name": dim_names[d], "c": float(c_in[r, d]), "py": float(py_in[r, d])})
    return {
        "layout": layout,
        "states": int(len(c_in)),
        "max_abs_diff": fin(max_abs),
        "worst_dim": worst,
        "worst_dim_name": dim_names[worst],
        "posture_mismatches": int(len(mism)),
        "mismatched_states": int(len(bad_rows)),
        "tolerance": TOLERANCE,
        "ok": bool(max_abs <= TOLERANCE and len(mism) == 0),
        "per_dim": [{"dim": i, "name": dim_names[i], "max_abs_diff": fin(float(per_dim[i]))}
                    for i in range(len(dim_names))],
        "posture_confusion": confusion.tolist(),
        "posture_labels": list(POSTURES),
        "posture_counts": {POSTURES[i]: int((pp == i).sum()) for i in range(len(POSTURES))},
        "examples": examples,
    }


def run(states: int = 10000, seed: int = 0, json_out: str | os.PathLike[str] | None = None,
        obs_bin: str | os.PathLike[str] | None = None, layout: int = 1) -> dict[str, Any]:
    """Generate ``states`` states, build ``layout``'s input with both builders, compare;
    optionally write the result as JSON."""
    if states < 1:
        raise ValueError("states must be >= 1")
    if layout not in INPUT_LAYOUTS:
        raise ValueError(f"layout must be one of {sorted(INPUT_LAYOUTS)}, got {layout}")
    path = Path(obs_bin) if obs_bin else native_path("brawlpit_obs")
    packets, slots, prevs, names = generate(states, seed)
    result = compare(c_inputs(packets, slots, prevs, layout, path),
                     py_inputs(packets, slots, prevs, layout), names, layout)
    result["seed"] = seed
    result["edge_cases"] = sum(1 for n in names if not n.startswith("random/"))
    result["obs_bin"] = str(path)
    if json_out is not None:
        Path(json_out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return result


def run_layouts(states: int = 10000, seed: int = 0, obs_bin: str | os.PathLike[str] | None = None,
                layouts: Sequence[int] = tuple(INPUT_LAYOUTS)) -> dict[str, Any]:
    """:func:`run` for every layout in ``layouts``; the verdict is the worst of them."""
    per = {str(k): run(states, seed, obs_bin=obs_bin, layout=k) for k in layouts}
    diffs = [r["max_abs_diff"] for r in per.values()]
    return {
        "states": states, "seed": seed,
        "max_abs_diff": None if None in diffs else max(d for d in diffs if d is not None),
        "posture_mismatches": sum(r["posture_mismatches"] for r in per.values()),
        "ok": all(r["ok"] for r in per.values()),
        "layouts": per,
    }


def format_table(result: dict[str, Any]) -> str:
    lines = [f"layout {result['layout']}", f"{'dim':>3}  {'name':<22} {'max |C - Py|':>14}"]
    for row in result["per_dim"]:
        v = row["max_abs_diff"]
        text = "inf/NaN" if v is None else f"{v:.3e}"
        flag = "" if v is not None and v <= result["tolerance"] else "  <-- MISMATCH"
        lines.append(f"{row['dim']:>3}  {row['name']:<22} {text:>14}{flag}")
    lines.append(f"layout {result['layout']}: states {result['states']} (edge cases "
                 f"{result.get('edge_cases', '?')}), posture mismatches "
                 f"{result['posture_mismatches']}, {'OK' if result['ok'] else 'FAILED'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = command_parser("parity", "C vs Python policy-input parity (docs/observation.md): the 31-value "
                    "observation (layout 1) and every other policy input layout")
    ap.add_argument("--states", type=int, default=10000, help="states per layout")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layout", type=int, choices=sorted(INPUT_LAYOUTS), action="append",
                    help="check this layout (repeatable; default: every layout)")
    ap.add_argument("--json", action="store_true", help="tables, then one JSON line (last)")
    ap.add_argument("--json-out", help="also write the full result JSON to this file")
    ap.add_argument("--obs-bin", help="C tool to test (default native/build/brawlpit_obs)")
    args = ap.parse_args(argv)
    try:
        result = run_layouts(args.states, args.seed, args.obs_bin,
                             args.layout or tuple(INPUT_LAYOUTS))
    except (RuntimeError, OSError, subprocess.CalledProcessError, ValueError) as e:
        msg = " ".join(str(e).splitlines())
        print(f"parity: error: {msg}", file=sys.stderr)
        if args.json:
            print(json.dumps({"ok": False, "error": msg}))
        return 2
    for res in result["layouts"].values():
        print(format_table(res))
        for ex in res["examples"]:
            print(f"  mismatch: {ex}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    if args.json:
        short = {**result, "layouts": {k: {kk: vv for kk, vv in v.items() if kk != "examples"}
                                       for k, v in result["layouts"].items()}}
        print(json.dumps(short, separators=(",", ":")))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
