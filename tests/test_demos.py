"""The behaviour-cloning dataset builder (native/src/demos.c, brawlkit/training/demos.py).

What must hold for a cloned policy to play unchanged in the env, the league and
brawlpit_bot: each recorded input is what the env's own builder makes of the recorded
SNAPSHOT bytes and the previous *executed* command; each label decodes to exactly the
teacher's command; the collector is deterministic; at repeat 1 it is the full-rate CPU
match itself; policies play as brawlpit_bot plays them; DAgger executes the student's
commands; replays recorded by a real server give the recorded inputs as labels; and
bad arguments or files are refused with a message that says what is wrong.
"""

from __future__ import annotations

import ctypes
import json
import random
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import RawClient, c_layout

from brawlkit.common.paths import native_dir
from brawlkit.env.actions import decode_action
from brawlkit.env.observation import INPUT_LAYOUT_OBS, INPUT_LAYOUT_SELF, INPUT_LAYOUTS, build_input
from brawlkit.export import bpw as ex
from brawlkit.training import demos as dm
from brawlkit.wire import protocol as P
from brawlkit.wire.constants import C
from brawlkit.wire.sim import BpInput  # the sim_lib fixture's input type


# ----------------------------------------------------------------- helpers
def tiny_policy(path: Path, input_layout: int = INPUT_LAYOUT_SELF, action_repeat: int = 4,
                seed: int = 0, obs_dim: int | None = None) -> Path:
    """An untrained .bpw (random weights, as test_export's small_layers) whose outputs
    leave [-1, 1] and flip signs, so sticks clip and buttons toggle."""
    rng = np.random.default_rng(seed)
    dims = (obs_dim or INPUT_LAYOUTS[input_layout], 16, C.BP_ACT_DIM)
    layers = [ex.Layer(rng.standard_normal((dims[i + 1], dims[i])).astype(np.float32),
                       rng.standard_normal(dims[i + 1]).astype(np.float32),
                       ex.ACT_TANH if i == 0 else ex.ACT_NONE) for i in range(2)]
    path.write_bytes(ex.pack_bpw(layers, ex.PolicyMeta(action_repeat=action_repeat,
                                                       input_layout=input_layout)))
    return path


def same(a: dm.DemoSet, b: dm.DemoSet) -> bool:
    return all(getattr(a, k).tobytes() == getattr(b, k).tobytes()
               for k in ("inputs", "actions", "commands", "snapshots", "match", "tick", "student",
                         "matches"))


def command(c: Any) -> tuple[float, float, int]:
    return float(c["stick_x"]), float(c["stick_y"]), int(c["buttons"])


def previous_executed(ds: dm.DemoSet, r: int) -> tuple[float, float, int]:
    """The command executed at the decision before row r of the same match (neutral first)."""
    return command(ds.commands[r - 1]) if r > 0 and ds.match[r - 1] == ds.match[r] else (0.0, 0.0, 0)


def assert_python_builds_the_same_inputs(ds: dm.DemoSet, rows: np.ndarray) -> None:
    """The env's Python builder, on the recorded snapshot bytes and the previous executed
    command, gives the C input bit for bit (what `python -m brawlkit parity` checks)."""
    for r in rows:
        r = int(r)
        slot = int(ds.matches[ds.match[r]]["teacher_slot"])
        snap = ds.snapshots[r].tobytes()
        assert P.parse_snapshot(snap).tick == ds.tick[r]
        py = build_input(snap, slot, ds.input_layout, previous_executed(ds, r))
        assert py.tobytes() == ds.inputs[r].tobytes(), f"row {r} (tick {ds.tick[r]})"


# ----------------------------------------------------------------- the C side
def test_struct_mirrors_match_c(cc: list[str], tmp_path: Path) -> None:
    flags = [*cc, "-I", str(native_dir() / "src"), "-include", "demos.h"]
    assert c_layout(flags, [dm.BpDemoPlayer, dm.BpDemoSettings, dm.BpDemoMatch, dm.BpDemoOutput],
                    tmp_path) == []
    assert dm.MATCH_DTYPE.itemsize == ctypes.sizeof(dm.BpDemoMatch)


def test_the_same_call_gives_the_same_bytes(tmp_path: Path) -> None:
    student = tiny_policy(tmp_path / "s.bpw")
    kw: dict[str, Any] = dict(action_repeat=4, student=student, beta=0.5, beta_seed=3)
    a = dm.collect_cpu_demos(5, [4, 6], 3, 11, **kw)
    b = dm.collect_cpu_demos(5, [4, 6], 3, 11, **kw)
    assert len(a) > 1000 and same(a, b)
    assert 0 < a.student.sum() < len(a)  # the beta draws did pick both
    assert not same(a, dm.collect_cpu_demos(5, [4, 6], 3, 11, **{**kw, "beta_seed": 4}))
    assert not same(a, dm.collect_cpu_demos(5, [4, 6], 3, 12, **kw))


@pytest.mark.parametrize(("slot", "rule"), [(0, "held"), (1, "held"), (0, "carry"),
                                           (1, "last_press")])
def test_repeat_1_is_the_full_rate_cpu_match(slot: int, rule: str) -> None:
    """At repeat 1 every tick is a decision: under every rule the teacher is the CPU
    itself, and the match is bp_match_cpu_vs_cpu_ex's (same per-slot CPU seeds, thinking
    every tick)."""
    ds = dm.collect_cpu_demos(6, [5], 3, 40, action_repeat=1, teacher_slot=slot, label_rule=rule)
    for i, m in enumerate(ds.matches):
        levels = (6, 5) if slot == 0 else (5, 6)
        winner, ticks, stocks, damage = dm.full_rate_cpu_match(*levels, 40 + i)
        assert (m["winner"], m["ticks"], m["rows"]) == (winner, ticks, ticks)
        assert tuple(m["stocks"]) == stocks and tuple(m["damage"]) == damage
        assert m["teacher_presses_dropped"] == 0 < m["teacher_presses"] == m["executed_presses"]
        final = P.parse_snapshot(m["final_snapshot"].tobytes())  # the state the match ended in
        assert final.over and (final.tick, final.winner) == (ticks, winner)


def _reference_match(sim_lib: Any, levels: tuple[int, int], seed: int, slot: int, repeat: int,
                     rule: str) -> tuple[list[tuple[int, tuple[float, float, int], bytes]], np.ndarray,
                                         int]:
    """An independent reference of the collector, through libbrawlpit and the Python
    twin of the label rules (dm.label_ticks, applied causally: at each decision tick to
    the teacher's outputs since the previous one): both CPUs think on every tick, the opponent's output
    is applied every tick, the teacher's label only at t % R == 0, then held.  Returns
    the (tick, label, snapshot) of each decision, the teacher's every-tick buttons, and
    the ticks played (the whole match)."""
    so = dm.lib()
    sanitize = sim_lib.bp_input_sanitize
    sanitize.argtypes, sanitize.restype = [BpInput], BpInput
    sim = sim_lib.bp_sim_create()
    cpus = {slot: sim_lib.bp_cpu_create(levels[0], so.bp_demo_cpu_seed(seed, slot)),
            1 - slot: sim_lib.bp_cpu_create(levels[1], so.bp_demo_cpu_seed(seed, 1 - slot))}
    buf = ctypes.create_string_buffer(128)
    rows, held, outs = [], BpInput(0.0, 0.0, 0), []
    try:
        sim_lib.bp_sim_reset(sim, seed, 1)
        t = 0
        while sim_lib.bp_sim_phase(sim) == C.BP_PHASE_PLAYING:
            inp = (BpInput * 2)()
            think = {k: sanitize(sim_lib.bp_cpu_think(cpus[k], sim, k)) for k in (0, 1)}
            outs.append((think[slot].stick_x, think[slot].stick_y, think[slot].buttons))
            if t % repeat == 0:
                n = sim_lib.bp_sim_snapshot(sim, 0, 2, C.BP_MODE_LOCKSTEP, 0, buf, 128)
                w0 = max(0, t - repeat)  # the window and the tick before it suffice
                src, buttons = dm.label_ticks(np.array([o[2] for o in outs[w0:]]), repeat, rule)
                pick = outs[w0 + int(src[-1])]
                held = BpInput(pick[0], pick[1], int(buttons[-1]))
                rows.append((t, (held.stick_x, held.stick_y, held.buttons), buf.raw[:n]))
            inp[slot], inp[1 - slot] = held, think[1 - slot]
            sim_lib.bp_sim_step(sim, inp)
            t += 1
    finally:
        sim_lib.bp_sim_destroy(sim)
        for cpu in cpus.values():
            sim_lib.bp_cpu_destroy(cpu)
    return rows, np.array([o[2] for o in outs], np.int64), t


@pytest.mark.parametrize(("repeat", "slot", "rule"), [
    (4, 0, "held"), (3, 1, "held"), (4, 1, "carry"), (2, 0, "carry"), (4, 0, "last_press"),
    (3, 1, "last_press")])
def test_the_collector_is_the_label_rule(sim_lib: Any, repeat: int, slot: int, rule: str) -> None:
    """The C rows must be the reference's match (_reference_match): same ticks, labels
    and snapshot bytes, every decision of the whole match; and the presses C counts as
    dropped are those press_stats counts on the teacher's every-tick stream.  (A
    collector that called the CPU only on decision ticks, applied its per-tick output, or
    made a label by another rule fails here.)"""
    ds = dm.collect_cpu_demos(5, [4], 1, 77, action_repeat=repeat, teacher_slot=slot,
                              label_rule=rule)
    rows, outs, ticks = _reference_match(sim_lib, (5, 4), 77, slot, repeat, rule)
    assert (ds.matches["ticks"][0], len(ds)) == (ticks, len(rows)) and ticks > 1500
    for r, (t, cmd, snap) in enumerate(rows):
        assert (int(ds.tick[r]), decode_action(ds.actions[r])) == (t, cmd), f"row {r}"
        assert ds.snapshots[r].tobytes() == snap, f"tick {t}"
    st = dm.press_stats(outs, repeat, rule)
    m = ds.matches[0]
    assert (m["teacher_presses"], m["teacher_presses_dropped"]) == (st["presses"], st["dropped"])
    assert ds.meta["label_rule"] == rule and rule in dm.LABEL_RULE_TEXT


def test_the_rules_differ_and_keep_presses_as_documented() -> None:
    """Same seeds, repeat 4: 'carry' and 'last_press' drop far fewer of the CPU's presses
    than 'held', and their labels differ from held's (and from each other's) on real
    rows; the match is the held one only up to the first decision they change."""
    sets = {r: dm.collect_cpu_demos(6, [5], 4, 3, action_repeat=4, label_rule=r)
            for r in dm.LABEL_RULES}
    drop = {r: ds.matches["teacher_presses_dropped"].sum() / ds.matches["teacher_presses"].sum()
            for r, ds in sets.items()}
    assert drop["held"] > 0.5 and drop["carry"] < 0.2 and drop["last_press"] < 0.2, drop
    first = {r: int(np.argmax(np.any(ds.actions[:200] != sets["held"].actions[:200], axis=1)))
             for r, ds in sets.items() if r != "held"}
    for r, i in first.items():
        assert i > 0 and sets[r].snapshots[:i + 1].tobytes() == sets["held"].snapshots[:i + 1].tobytes()
    assert not same(sets["carry"], sets["last_press"])
    for ds in sets.values():
        assert (ds.matches["executed_presses"] <= ds.matches["teacher_presses"]).all()


def test_a_policy_teacher_gives_the_same_rows_under_every_rule(tmp_path: Path) -> None:
    t2 = tiny_policy(tmp_path / "t2.bpw", INPUT_LAYOUT_SELF, seed=1)
    held = dm.collect_demos(t2, 4, 2, 5, action_repeat=4)
    for rule in ("carry", "last_press"):
        assert same(held, dm.collect_demos(t2, 4, 2, 5, action_repeat=4, label_rule=rule))


def test_held_teacher_loses_presses_at_repeat_4() -> None:
    ds = dm.collect_cpu_demos(6, [5], 2, 40, action_repeat=4)
    assert (ds.tick % 4 == 0).all()
    assert all(np.diff(ds.tick[ds.match == i]).tolist() == [4] * (m["rows"] - 1)
               for i, m in enumerate(ds.matches))
    assert (ds.matches["teacher_presses_dropped"] > 0).all()
    assert ds.matches["rows"].tolist() == [(int(t) + 3) // 4 for t in ds.matches["ticks"]]


# ----------------------------------------------------------------- parity and labels
@pytest.mark.parametrize("layout", [INPUT_LAYOUT_SELF, INPUT_LAYOUT_OBS])
def test_python_builder_gives_the_c_input_from_the_recorded_snapshot(layout: int) -> None:
    ds = dm.collect_cpu_demos(7, [6], 2, 5, action_repeat=4, input_layout=layout)
    assert ds.inputs.shape[1] == INPUT_LAYOUTS[layout]
    rng = np.random.default_rng(0)
    starts = ds.matches["first_row"]
    rows = np.unique(np.concatenate([starts, starts + 1, rng.integers(0, len(ds), 60)]))
    assert_python_builds_the_same_inputs(ds, rows)


@pytest.mark.parametrize("rule", list(dm.LABEL_RULES))
def test_every_label_decodes_to_the_teachers_command(rule: str) -> None:
    ds = dm.collect_cpu_demos(8, [7], 2, 9, action_repeat=2, label_rule=rule)
    assert (ds.student == 0).all()
    for r, a in enumerate(ds.actions):
        assert decode_action(a) == command(ds.commands[r])  # beta 0: the label was executed
        assert dm.action_of(*decode_action(a)).tobytes() == a.tobytes()
    pressed = np.array([decode_action(a)[2] for a in ds.actions])
    assert all((pressed & b).any() for b in (C.BP_BTN_JUMP, C.BP_BTN_ATTACK, C.BP_BTN_SHIELD))


# ----------------------------------------------------------------- policies
def test_a_bpw_teacher_and_a_bpw_opponent_play_as_brawlpit_bot(tmp_path: Path) -> None:
    t2 = tiny_policy(tmp_path / "t2.bpw", INPUT_LAYOUT_SELF, seed=1)
    t1 = tiny_policy(tmp_path / "t1.bpw", INPUT_LAYOUT_OBS, seed=2, action_repeat=2)
    # a policy teacher: each label is its deterministic command on the recorded input
    ds = dm.collect_demos(t2, ["cpu:4", t1], 2, 3, action_repeat=4)
    assert len(ds.matches) == 4 and (ds.matches["ticks"] > 0).all()
    with dm.NativePolicy(t2) as pol:
        want = pol.commands(ds.inputs)
    assert [decode_action(a) for a in ds.actions] == [command(c) for c in want]
    assert_python_builds_the_same_inputs(ds, np.arange(0, len(ds), 37))
    # a layout-1 teacher in a layout-2 dataset reads its own layout
    ds1 = dm.collect_demos(t1, 3, 1, 3, action_repeat=2)
    with dm.NativePolicy(t1) as pol:
        want = pol.commands(ds1.inputs[:, :C.BP_OBS_DIM])
    assert [decode_action(a) for a in ds1.actions] == [command(c) for c in want]
    # a CPU teacher against a policy opponent
    dsc = dm.collect_demos(5, t2, 2, 3, action_repeat=4)
    assert dsc.meta["opponent"] == f"policy:{t2}" and len(dsc) > 100
    # a policy opponent decides at its blob's action repeat (t1: 2), as brawlpit_bot does
    own = dm.collect_demos(5, t1, 2, 3, action_repeat=4)
    assert same(own, dm.collect_demos(5, t1, 2, 3, action_repeat=4, opponent_repeat=2))
    assert not same(own, dm.collect_demos(5, t1, 2, 3, action_repeat=4, opponent_repeat=4))


def test_dagger_beta_1_executes_the_student_and_beta_0_the_labels(tmp_path: Path) -> None:
    student = tiny_policy(tmp_path / "s.bpw", seed=4)
    ds = dm.collect_cpu_demos(6, [5], 2, 7, action_repeat=4, student=student, beta=1.0)
    assert (ds.student == 1).all() and ds.matches["student_decisions"].sum() == len(ds)
    with dm.NativePolicy(student) as pol:
        assert pol.commands(ds.inputs).tobytes() == ds.commands.tobytes()
    labels = [decode_action(a) for a in ds.actions]
    assert any(lab != command(c) for lab, c in zip(labels, ds.commands, strict=True))
    assert_python_builds_the_same_inputs(ds, np.arange(0, len(ds), 29))  # prev = the student's
    d0 = dm.collect_cpu_demos(6, [5], 2, 7, action_repeat=4, student=student, beta=0.0)
    assert (d0.student == 0).all()
    assert [decode_action(a) for a in d0.actions] == [command(c) for c in d0.commands]
    assert same(d0, dm.collect_cpu_demos(6, [5], 2, 7, action_repeat=4))


# ----------------------------------------------------------------- replays
def test_press_stats_counts_presses_between_decision_ticks() -> None:
    b = np.zeros(16, np.int64)
    b[0] = C.BP_BTN_JUMP              # on a decision tick: seen
    b[2] = C.BP_BTN_ATTACK            # ticks 1-3 are between decisions: dropped
    b[3:6] |= C.BP_BTN_SPECIAL        # starts at 3, lasts into 4: delayed
    b[9:11] |= C.BP_BTN_SHIELD        # dropped
    st = dm.press_stats(b, 4)
    assert (st["presses"], st["dropped"], st["delayed"]) == (4, 2, 1)
    assert dm.press_stats(b, 1)["dropped"] == dm.press_stats(b, 1)["delayed"] == 0


@pytest.mark.servers
def test_a_server_recorded_replay_gives_the_recorded_inputs(server_factory: Any, sim_lib: Any,
                                                            tmp_path: Path) -> None:
    rec = tmp_path / "rec"
    srv = server_factory(mode="lockstep", cpu_level=4, seed=21, extra_args=["--record", str(rec)])
    c = RawClient(srv.address, want_slot=0)
    rng = random.Random(2)
    sent: list[tuple[float, float, int]] = []
    tick, rep = 0, 3  # commands of 3 ticks: they change between the R = 4 decisions
    for seq in range(1, 121):
        cmd = (rng.uniform(-1.5, 1.5), rng.uniform(-1, 1), rng.randrange(16))
        c.cmd(tick, seq, *cmd, rep=rep)
        while (s := c.snapshot()).tick <= tick and not s.over:
            pass
        sent += [cmd] * (s.tick - tick)
        tick = s.tick
        if s.over:
            break
    c.send(P.pack_bye(0, c.session))
    deadline = time.monotonic() + 5
    while not list(rec.glob("*.bpr")) and time.monotonic() < deadline:
        time.sleep(0.02)
    (path,) = rec.glob("*.bpr")

    ds = dm.demos_from_replay(path, 0, action_repeat=4)
    assert ds.tick.tolist() == list(range(0, tick, 4)) and ds.meta["ticks"] == tick
    f32 = np.float32
    for r, t in enumerate(ds.tick):  # the label is what the client sent for that tick
        sx, sy, b = sent[t]
        assert decode_action(ds.actions[r]) == (float(np.clip(f32(sx), -1, 1)),
                                                float(np.clip(f32(sy), -1, 1)), b)
    assert_python_builds_the_same_inputs_replay(ds)
    st = ds.meta["presses"]
    assert st["dropped"] > 0 and ds.meta["ticks_off_hold"] > 0 and ds.meta["player"] == ""
    # the other rules: the labels are the rule's choice of the recorded inputs, and the
    # final snapshot is the re-simulated end (the server's last SNAPSHOT of the match)
    per_tick = np.array([(float(np.clip(f32(x), -1, 1)), float(np.clip(f32(y), -1, 1)), b)
                         for x, y, b in sent[:tick]], dtype=object)
    for rule in ("carry", "last_press"):
        dr = dm.demos_from_replay(path, 0, action_repeat=4, label_rule=rule)
        src, buttons = dm.label_ticks(per_tick[:, 2].astype(np.int64), 4, rule)
        assert [decode_action(a) for a in dr.actions] == [
            (per_tick[s_, 0], per_tick[s_, 1], int(b)) for s_, b in zip(src, buttons, strict=True)]
        assert dr.meta["presses"]["dropped"] < st["dropped"] and dr.meta["label_rule"] == rule
        assert dr.tick.tolist() == ds.tick.tolist()
    final = P.parse_snapshot(ds.matches[0]["final_snapshot"].tobytes())
    assert final.tick == tick and int(final.winner) == int(ds.matches[0]["winner"])

    # the snapshots are the server's bytes: bp_sim_snapshot of the re-simulated state
    recorded = dm.demos_from_replay(path, 1, action_repeat=1)  # the CPU's slot, every tick
    from brawlkit.replay import read_replay

    replay = read_replay(path)
    inputs = replay.inputs()
    assert [decode_action(a) for a in recorded.actions] == [
        (float(i[1, 0]), float(i[1, 1]), int(i[1, 2])) for i in inputs]
    assert recorded.meta["presses"]["dropped"] == 0 and recorded.meta["player"] == "cpu:4"
    sim = sim_lib.bp_sim_create()
    try:
        sim_lib.bp_sim_reset(sim, replay.seed, replay.match_id)
        buf = ctypes.create_string_buffer(128)
        arr = (BpInput * 2)()
        for t in range(0, 60):
            n = sim_lib.bp_sim_snapshot(sim, 0, 2, replay.mode, 0, buf, 128)
            assert buf.raw[:n] == recorded.snapshots[t].tobytes(), t
            for k in range(2):
                arr[k].stick_x, arr[k].stick_y, arr[k].buttons = (float(inputs[t, k, 0]),
                                                                  float(inputs[t, k, 1]),
                                                                  int(inputs[t, k, 2]))
            sim_lib.bp_sim_step(sim, arr)
    finally:
        sim_lib.bp_sim_destroy(sim)


def assert_python_builds_the_same_inputs_replay(ds: dm.DemoSet) -> None:
    """Replay rows: the input is the env's builder on the row's snapshot with the previous
    row's label as the previous command, and the C builder (the fast lane's) agrees."""
    from brawlkit.env.fastlane import BpCommand, build_inputs

    slot = int(ds.matches[0]["teacher_slot"])
    prev = (BpCommand * len(ds))()
    for r in range(len(ds)):
        p = decode_action(ds.actions[r - 1]) if r else (0.0, 0.0, 0)
        prev[r].stick_x, prev[r].stick_y, prev[r].buttons = p
        assert build_input(ds.snapshots[r].tobytes(), slot, ds.input_layout, p).tobytes() \
            == ds.inputs[r].tobytes()
    out = np.empty_like(ds.inputs)
    build_inputs(ds.snapshots.tobytes(), np.full(len(ds), slot, np.int32), prev, ds.input_layout, out)
    assert out.tobytes() == ds.inputs.tobytes()


# ----------------------------------------------------------------- refusals
@pytest.mark.parametrize(("kwargs", "names"), [
    ({"teacher_level": 0}, "teacher_level"),
    ({"teacher_level": C.BP_CPU_LEVEL_MAX + 1}, "teacher_level"),
    ({"opponent_levels": [3, 9]}, r"opponent_levels\[1\]"),
    ({"opponent_levels": []}, "opponent_levels"),
    ({"teacher_slot": 2}, "teacher_slot"),
    ({"action_repeat": 0}, "action_repeat"),
    ({"action_repeat": C.BP_MAX_REPEAT + 1}, "action_repeat"),
    ({"input_layout": 4}, "input_layout"),
    ({"beta": 1.5}, "beta"),
    ({"beta": 0.5}, "beta"),  # no student
    ({"label_rule": "carried"}, "label_rule"),
    ({"matches": 0}, "matches"),
    ({"seed": -1}, "seed"),
])
def test_bad_arguments_name_the_argument(kwargs: dict[str, Any], names: str) -> None:
    args: dict[str, Any] = dict(teacher_level=4, opponent_levels=[3], matches=1, seed=0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=names):
        dm.collect_cpu_demos(**args)


def test_bad_policies_and_a_small_buffer_are_refused(tmp_path: Path) -> None:
    l1 = tiny_policy(tmp_path / "l1.bpw", INPUT_LAYOUT_OBS)
    with pytest.raises(ValueError, match="student: .*obs_dim"):  # 31 inputs, dataset of 79
        dm.collect_cpu_demos(4, [3], 1, 0, student=l1, beta=0.5)
    liar = tiny_policy(tmp_path / "liar.bpw", INPUT_LAYOUT_SELF, obs_dim=C.BP_OBS_DIM)
    with pytest.raises(ValueError, match="teacher: .*obs_dim"):
        dm.collect_demos(liar, 3, 1, 0)
    with pytest.raises(ValueError, match="opponent: .*obs_dim"):
        dm.collect_demos(3, liar, 1, 0)
    (tmp_path / "junk.bpw").write_bytes(b"BPW1" + bytes(40))
    with pytest.raises(ValueError, match="teacher: .*junk.bpw"):
        dm.collect_demos(tmp_path / "junk.bpw", 3, 1, 0)
    with pytest.raises(ValueError, match="teacher: .*neither cpu:L nor"):
        dm.collect_demos(tmp_path / "missing.bpw", 3, 1, 0)
    with pytest.raises(ValueError, match="row_capacity: row buffer too small"):
        dm.collect_demos(4, 3, 2, 0, row_capacity=100)


def _settings(**kw: Any) -> dm.BpDemoSettings:
    s = dm.BpDemoSettings(dm.BpDemoPlayer(dm.D["BP_DEMO_CPU"], 4, None),
                          dm.BpDemoPlayer(dm.D["BP_DEMO_CPU"], 3, None), 0, 4, INPUT_LAYOUT_SELF,
                          0, None, 0.0, 0, 0)
    for k, v in kw.items():
        setattr(s, k, v)
    return s


@pytest.mark.parametrize(("kw", "code"), [
    ({"teacher": dm.BpDemoPlayer(dm.D["BP_DEMO_CPU"], C.BP_CPU_LEVEL_MAX + 1, None)}, "BP_DEMO_ERR_TEACHER_LEVEL"),
    ({"opponent": dm.BpDemoPlayer(dm.D["BP_DEMO_CPU"], C.BP_CPU_LEVEL_MIN - 1, None)}, "BP_DEMO_ERR_OPPONENT_LEVEL"),
    ({"opponent": dm.BpDemoPlayer(dm.D["BP_DEMO_POLICY"], 0, None)}, "BP_DEMO_ERR_KIND"),
    ({"opponent": dm.BpDemoPlayer(7, 3, None)}, "BP_DEMO_ERR_KIND"),
    ({"teacher_slot": 3}, "BP_DEMO_ERR_SLOT"),
    ({"action_repeat": C.BP_MAX_REPEAT + 1}, "BP_DEMO_ERR_REPEAT"),
    ({"action_repeat": 0}, "BP_DEMO_ERR_REPEAT"),
    ({"opponent_repeat": -1}, "BP_DEMO_ERR_OPPONENT_REPEAT"),
    ({"input_layout": 0}, "BP_DEMO_ERR_LAYOUT"),
    ({"beta": float("nan")}, "BP_DEMO_ERR_BETA"),
    ({"beta": 0.1}, "BP_DEMO_ERR_BETA"),
    ({"label_rule": 3}, "BP_DEMO_ERR_LABEL_RULE"),
    ({"label_rule": -1}, "BP_DEMO_ERR_LABEL_RULE"),
])
def test_the_c_collector_checks_its_arguments_itself(kw: dict[str, Any], code: str) -> None:
    """Python checks first, but the C function is an API of its own: every bad setting
    gets its code before anything is played or written."""
    so = dm.lib()
    seeds = (ctypes.c_uint32 * 1)(1)
    matches = np.zeros(1, dm.MATCH_DTYPE)
    out = dm.BpDemoOutput(row_capacity=0, matches=matches.ctypes.data, match_capacity=1)
    rc = so.bp_demo_collect(ctypes.byref(_settings(**kw)), seeds, 1, ctypes.byref(out))
    assert rc == dm.D[code], dm.strerror(rc)
    assert out.n_rows == out.n_matches == 0 and dm.strerror(rc) != "unknown error"
    # too few match records; and rows beyond row_capacity are never written
    out = dm.BpDemoOutput(row_capacity=0, matches=matches.ctypes.data, match_capacity=0)
    assert so.bp_demo_collect(ctypes.byref(_settings()), seeds, 1, ctypes.byref(out)) \
        == dm.D["BP_DEMO_ERR_MATCHES_CAP"]


def test_rows_are_never_written_past_the_capacity() -> None:
    so = dm.lib()
    cap = 50
    guard = np.full(cap + 8, 7, np.uint32)
    matches = np.zeros(2, dm.MATCH_DTYPE)
    out = dm.BpDemoOutput(tick=guard.ctypes.data, row_capacity=cap, matches=matches.ctypes.data,
                          match_capacity=2)
    rc = so.bp_demo_collect(ctypes.byref(_settings()), (ctypes.c_uint32 * 2)(1, 2), 2,
                            ctypes.byref(out))
    assert rc == dm.D["BP_DEMO_ERR_ROWS_CAP"] and out.n_rows == out.n_matches == 0
    assert (guard[cap:] == 7).all() and guard[:cap].tolist() == list(range(0, 4 * cap, 4))


# ----------------------------------------------------------------- the file
def test_save_load_concat_roundtrip(tmp_path: Path) -> None:
    a = dm.collect_cpu_demos(4, [3], 2, 1, action_repeat=4)
    b = dm.collect_cpu_demos(5, [5], 1, 9, action_repeat=4, teacher_slot=1)
    both = dm.concat([a, b])
    assert len(both) == len(a) + len(b) and len(both.matches) == 3
    assert both.match[len(a):].min() == 2 and both.matches["first_row"][2] == len(a)
    assert (both.matches["rows"] == np.bincount(both.match)).all()
    path = both.save(tmp_path / "d.npz")
    back = dm.DemoSet.load(path, input_layout=INPUT_LAYOUT_SELF)
    assert same(back, both) and back.meta["parts"][1]["teacher"] == "cpu:5"
    assert back.meta["version"] == dm.FORMAT_VERSION and back.results() == both.results()
    with pytest.raises(ValueError, match="action repeats differ"):
        dm.concat([a, dm.collect_cpu_demos(4, [3], 1, 1, action_repeat=2)])
    with pytest.raises(ValueError, match="expected layout 1"):
        dm.DemoSet.load(path, input_layout=INPUT_LAYOUT_OBS)


def _rewrite(src: Path, dst: Path, **changes: Any) -> Path:
    with np.load(src) as z:
        data = {k: z[k] for k in z.files}
    meta = json.loads(str(data["meta_json"]))
    meta.update(changes.pop("meta", {}))
    data["meta_json"] = np.array(json.dumps(meta))
    data.update(changes)
    np.savez(dst, **data)
    return dst


def test_load_refuses_other_files_with_a_message(tmp_path: Path) -> None:
    ds = dm.collect_cpu_demos(4, [3], 1, 2, action_repeat=8)
    good = ds.save(tmp_path / "good.npz", compress=False)
    raw = good.read_bytes()
    (tmp_path / "trunc.npz").write_bytes(raw[: len(raw) // 2])
    cases = {
        "trunc.npz": "not a readable .npz",
        "v2.npz": _rewrite(good, tmp_path / "v2.npz", meta={"version": dm.FORMAT_VERSION + 1}),
        "other.npz": _rewrite(good, tmp_path / "other.npz", meta={"format": "something-else"}),
        "short.npz": _rewrite(good, tmp_path / "short.npz", tick=ds.tick[:-1]),
        "dim.npz": _rewrite(good, tmp_path / "dim.npz", meta={"input_layout": INPUT_LAYOUT_OBS}),
        "rows.npz": _rewrite(good, tmp_path / "rows.npz",
                             matches=np.concatenate([ds.matches, ds.matches])),
    }
    messages = {"v2.npz": "version 2", "other.npz": "format 'something-else'",
                "short.npz": "inconsistent length", "dim.npz": r"inputs is float32 \(\d+, 79\)",
                "rows.npz": "row counts sum"}
    for name in cases:
        with pytest.raises(ValueError, match=messages.get(name, "not a readable")) as e:
            dm.DemoSet.load(tmp_path / name)
        assert str(tmp_path / name) in str(e.value)
    np.savez(tmp_path / "plain.npz", x=np.zeros(3))
    with pytest.raises(ValueError, match="no meta_json"):
        dm.DemoSet.load(tmp_path / "plain.npz")
    with zipfile.ZipFile(good) as z:
        assert not any(n.endswith(".pkl") for n in z.namelist())
