"""Behaviour-cloning datasets: matches -> (policy input, command) pairs.

Why: PPO policies start from behaviour cloning (AlphaStar's supervised start), and the
teacher is free: the built-in CPU, simulated in C at simulation speed.  A cloned policy
must play in the env, the league and ``brawlpit_bot`` unchanged, so every input here is
built by the code those build it with: the C collector (``native/src/demos.c`` in
``libbrawldemo.so``: the server's simulation and CPU, and ``obs.c``'s
``bp_input_from_snapshot``, the function the env's fast lane and the bot call) and, for
replays, the env's own Python builder
(:func:`brawlkit.env.observation.build_input`) on the SNAPSHOT bytes the server would
send; the two are bit-identical (``python -m brawlkit parity``, and a test here).

Two sources:

* :func:`collect_demos` / :func:`collect_cpu_demos` -- teacher vs opponent in process,
  each a CPU level or a ``.bpw`` policy, optionally with a DAgger student.
* :func:`demos_from_replay` -- a ``.bpr`` recording (``brawlpit_server --record``, the
  bot pool; humans included) re-simulated, one player's recorded inputs as labels.

**The label rules (the cadence problem).**  The CPU decides every tick; a policy
decides every ``action_repeat`` (R) ticks and holds its command for R ticks.  At each
decision tick t (t % R == 0 from the match start, as the lockstep env's steps are) the
label is one command made of the teacher's per-tick outputs on the ticks t-R < u <= t,
and that command -- not the teacher's later per-tick outputs -- is what is applied for
the next R ticks.  Three rules (``label_rule``; :data:`LABEL_RULES`, ``demos.h`` spells
them out):

* ``"held"``: the teacher's command at t.  A button the CPU pressed only between two
  decision ticks (a CPU press usually lasts one tick) never reaches the game.
* ``"carry"``: the stick of the command at t; as buttons, every button the teacher
  pressed in the window, so a press between decisions is made at the next decision, up
  to R-1 ticks late, instead of lost -- but with the stick of tick t, not the one the
  CPU pressed it with.
* ``"last_press"``: the whole command of the latest tick in the window on which the
  teacher pressed a new button (the command at t if none): the press with its stick.

The CPU still thinks every tick (its reaction-delay history and timers advance as they
would; see ``demos.c``'s header for why that is the only correct way to call it), but
only the labels reach the game.  So the states recorded are the ones a perfect clone of
the labels at repeat R would visit, and the layout-2 "previous command" of each input
is the command actually executed at the previous decision.  What that costs the teacher
is measurable: compare a collection's per-match results at R with the same seeds at R
= 1 (= the full-rate CPU, bit for bit, under every rule); ``teacher_presses_dropped``
counts the CPU's presses no label carries, ``executed_presses`` the presses the game
applied.

Measured (docs/imitation.md has the whole table and its command), wins of 200 against
the level below at R = 4: L4 / L6 / L8 held 0 / 3 / 40, carry 167 / 83 / 19, last_press
173 / 139 / 118, where the full-rate CPU wins 178 / 152 / 162 (L4 vs L3, L6 vs L5, L8
vs L7).  The press's own stick is what ``carry`` loses (with special, the stick decides
up-special or finisher): ``"last_press"`` is what ``python -m brawlkit imitate`` uses.

A :class:`DemoSet` saves to one ``.npz`` (:data:`FORMAT`, :data:`FORMAT_VERSION`; the
metadata as JSON inside) and :meth:`DemoSet.load` refuses anything else with a message
naming the file and the problem.
"""

from __future__ import annotations

import ctypes
import io
import json
import math
import os
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from brawlkit.common.io import atomic_write_bytes
from brawlkit.common.paths import native_dir, native_path
from brawlkit.env.actions import ACT_DIM, BUTTON_BITS, decode_action
from brawlkit.env.observation import INPUT_LAYOUT, INPUT_LAYOUTS, NEUTRAL_COMMAND, build_input
from brawlkit.wire.constants import C
from brawlkit.wire.header import read_defines
from brawlkit.wire.protocol import SNAPSHOT_SIZE, NetPlayer, pack_snapshot

#: the ``format`` entry of a saved set's metadata, and its version (bump on any change
#: of the arrays or their meaning)
FORMAT = "brawlkit-demos"
FORMAT_VERSION = 2

#: the label rules by name (``demos.h``'s ``BP_DEMO_LABEL_*``, set below from the header)
LABEL_RULES: dict[str, int] = {}
#: each rule in words, as a collected set's ``meta['label_rule_text']`` records it
LABEL_RULE_TEXT = {
    "held": (
        "label = the teacher's command at each decision tick t (t % action_repeat == 0 from the "
        "match start)"),
    "carry": (
        "label = at each decision tick t (t % action_repeat == 0 from the match start), the stick "
        "of the teacher's command at t and every button it pressed on the ticks t-R < u <= t "
        "(R = action_repeat): a press between decisions is made at the next one"),
    "last_press": (
        "label = at each decision tick t (t % action_repeat == 0 from the match start), the "
        "teacher's whole command (stick and buttons) on the latest tick t-R < u <= t (R = "
        "action_repeat) on which it pressed a button it did not hold the tick before; its "
        "command at t if there is none"),
}
_COLLECTED_TAIL = (
    "; only the labels are applied, each held for action_repeat ticks (a CPU teacher thinks "
    "every tick); with a student, the executed command is the student's with probability beta "
    "(the label stays the teacher's); the input's previous command is the command executed at "
    "the previous decision")
_REPLAY_TAIL = (
    " -- of the slot's recorded inputs; the states are the recording's (every per-tick input was "
    "applied); the input's previous command is the label of the previous decision; presses no "
    "label carries are counted in meta['presses']")


# ----------------------------------------------------------------- the C side
#: demos.h's ``#define BP_DEMO_*`` literals (error codes, kinds, slot), read, not retyped
_DEMOS_H = native_dir() / "src" / "demos.h"
D: dict[str, int] = {n: int(d.c_value) for n, d in read_defines(_DEMOS_H).items()
                     if n.startswith("BP_DEMO_") and isinstance(d.c_value, int)}
LABEL_RULES.update(held=D["BP_DEMO_LABEL_HELD"], carry=D["BP_DEMO_LABEL_CARRY"],
                   last_press=D["BP_DEMO_LABEL_LAST_PRESS"])

#: which argument each C error code is about (the ValueError names it)
_ERR_ARG = {
    "BP_DEMO_ERR_TEACHER_LEVEL": "teacher", "BP_DEMO_ERR_OPPONENT_LEVEL": "opponent",
    "BP_DEMO_ERR_SLOT": "teacher_slot", "BP_DEMO_ERR_REPEAT": "action_repeat",
    "BP_DEMO_ERR_OPPONENT_REPEAT": "opponent_repeat", "BP_DEMO_ERR_LAYOUT": "input_layout",
    "BP_DEMO_ERR_TEACHER_POLICY": "teacher", "BP_DEMO_ERR_OPPONENT_POLICY": "opponent",
    "BP_DEMO_ERR_STUDENT_POLICY": "student", "BP_DEMO_ERR_BETA": "beta",
    "BP_DEMO_ERR_KIND": "teacher/opponent", "BP_DEMO_ERR_MATCHES_CAP": "matches",
    "BP_DEMO_ERR_ROWS_CAP": "row_capacity", "BP_DEMO_ERR_LABEL_RULE": "label_rule",
}


class BpCommand(ctypes.Structure):
    """``BpCommand`` (obs.h): a command as the wire carries it."""

    _fields_ = [("stick_x", ctypes.c_float), ("stick_y", ctypes.c_float),
                ("buttons", ctypes.c_uint32)]


class BpDemoPlayer(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int32), ("level", ctypes.c_int32), ("policy", ctypes.c_void_p)]


class BpDemoSettings(ctypes.Structure):
    _fields_ = [
        ("teacher", BpDemoPlayer), ("opponent", BpDemoPlayer),
        ("teacher_slot", ctypes.c_int32), ("action_repeat", ctypes.c_int32),
        ("input_layout", ctypes.c_int32), ("opponent_repeat", ctypes.c_int32),
        ("student", ctypes.c_void_p), ("beta", ctypes.c_double),
        ("beta_seed", ctypes.c_uint32), ("label_rule", ctypes.c_int32),
    ]


class BpDemoMatch(ctypes.Structure):
    _fields_ = [
        ("seed", ctypes.c_uint32), ("ticks", ctypes.c_uint32), ("first_row", ctypes.c_uint32),
        ("rows", ctypes.c_uint32), ("teacher_slot", ctypes.c_uint8), ("winner", ctypes.c_uint8),
        ("stocks", ctypes.c_uint8 * 2), ("damage", ctypes.c_float * 2),
        ("teacher_presses", ctypes.c_uint32), ("teacher_presses_dropped", ctypes.c_uint32),
        ("student_decisions", ctypes.c_uint32), ("executed_presses", ctypes.c_uint32),
        ("final_snapshot", ctypes.c_uint8 * SNAPSHOT_SIZE),
    ]


class BpDemoOutput(ctypes.Structure):
    _fields_ = [
        ("inputs", ctypes.c_void_p), ("actions", ctypes.c_void_p), ("executed", ctypes.c_void_p),
        ("snapshots", ctypes.c_void_p), ("match", ctypes.c_void_p), ("tick", ctypes.c_void_p),
        ("student", ctypes.c_void_p), ("row_capacity", ctypes.c_size_t),
        ("matches", ctypes.c_void_p), ("match_capacity", ctypes.c_size_t),
        ("n_rows", ctypes.c_size_t), ("n_matches", ctypes.c_size_t),
    ]


#: the executed command of each row (``BpCommand``)
COMMAND_DTYPE = np.dtype([("stick_x", "<f4"), ("stick_y", "<f4"), ("buttons", "<u4")])
#: one match's result (``BpDemoMatch``, written by C straight into this array)
MATCH_DTYPE = np.dtype(BpDemoMatch)
assert COMMAND_DTYPE.itemsize == ctypes.sizeof(BpCommand)

_MIRRORS = {"BP_DEMO_STRUCT_PLAYER": BpDemoPlayer, "BP_DEMO_STRUCT_SETTINGS": BpDemoSettings,
            "BP_DEMO_STRUCT_MATCH": BpDemoMatch, "BP_DEMO_STRUCT_OUTPUT": BpDemoOutput}


@lru_cache(maxsize=1)
def lib() -> ctypes.CDLL:
    """Load ``libbrawldemo.so`` once, argument types declared and the struct mirrors
    checked (a missing build raises naming ``make build``)."""
    so = ctypes.CDLL(str(native_path("libbrawldemo.so")))
    vp, sz = ctypes.c_void_p, ctypes.c_size_t
    so.bp_demo_collect.argtypes = [ctypes.POINTER(BpDemoSettings), ctypes.POINTER(ctypes.c_uint32),
                                   sz, ctypes.POINTER(BpDemoOutput)]
    so.bp_demo_collect.restype = ctypes.c_int
    so.bp_demo_max_rows.argtypes = [ctypes.c_int, sz]
    so.bp_demo_max_rows.restype = sz
    so.bp_demo_strerror.argtypes = [ctypes.c_int]
    so.bp_demo_strerror.restype = ctypes.c_char_p
    so.bp_demo_struct_size.argtypes = [ctypes.c_int]
    so.bp_demo_struct_size.restype = sz
    so.bp_demo_action_of.argtypes = [ctypes.POINTER(BpCommand), ctypes.POINTER(ctypes.c_float)]
    so.bp_demo_action_of.restype = None
    so.bp_demo_cpu_seed.argtypes = [ctypes.c_uint32, ctypes.c_int]
    so.bp_demo_cpu_seed.restype = ctypes.c_uint32
    # policy.c, linked in: the .bpw a teacher / opponent / student plays
    so.bp_policy_load_file.argtypes = [ctypes.c_char_p, ctypes.c_char_p, sz]
    so.bp_policy_load_file.restype = vp
    so.bp_policy_free.argtypes = [vp]
    so.bp_policy_free.restype = None
    for name in ("bp_policy_obs_dim", "bp_policy_act_dim", "bp_policy_action_repeat",
                 "bp_policy_input_layout"):
        getattr(so, name).argtypes = [vp]
        getattr(so, name).restype = ctypes.c_int
    so.bp_policy_forward.argtypes = [vp, ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_float)]
    so.bp_policy_forward.restype = None
    so.bp_action_decode.argtypes = [ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_float),
                                    ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_uint32)]
    so.bp_action_decode.restype = None
    # cpu.c: the full-rate reference match (the held teacher at R = 1 is this match)
    so.bp_match_cpu_vs_cpu_ex.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_uint32,
                                          ctypes.POINTER(ctypes.c_uint32), vp]
    so.bp_match_cpu_vs_cpu_ex.restype = ctypes.c_uint8
    for key, mirror in _MIRRORS.items():
        got = so.bp_demo_struct_size(D[key])
        if got != ctypes.sizeof(mirror):
            raise ImportError(f"libbrawldemo.so's {mirror.__name__} is {got} bytes, the mirror in "
                              f"{__name__} {ctypes.sizeof(mirror)}: rebuild with `make build`")
    return so


def strerror(code: int) -> str:
    """The C collector's text for an error code."""
    return lib().bp_demo_strerror(code).decode()


class NativePolicy:
    """A ``.bpw`` loaded by the C loader, played exactly as ``brawlpit_bot`` plays it
    (``bp_policy_forward`` + ``bp_action_decode``): what the collector runs for a policy
    teacher, opponent or student, usable to check a dataset or a cloned policy."""

    def __init__(self, path: str | os.PathLike[str], what: str = "policy") -> None:
        self._lib = lib()
        self.path = Path(path)
        err = ctypes.create_string_buffer(256)
        self.ptr: int | None = self._lib.bp_policy_load_file(os.fsencode(self.path), err, len(err))
        if not self.ptr:
            raise ValueError(f"{what}: {self.path}: {err.value.decode(errors='replace')}")
        self.obs_dim = int(self._lib.bp_policy_obs_dim(self.ptr))
        self.act_dim = int(self._lib.bp_policy_act_dim(self.ptr))
        self.action_repeat = int(self._lib.bp_policy_action_repeat(self.ptr))
        self.input_layout = int(self._lib.bp_policy_input_layout(self.ptr))

    def commands(self, inputs: np.ndarray) -> np.ndarray:
        """The deterministic command (:data:`COMMAND_DTYPE`) for each row of ``inputs``."""
        x = np.ascontiguousarray(inputs, dtype=np.float32).reshape(-1, self.obs_dim)
        out = np.empty(len(x), dtype=COMMAND_DTYPE)
        a = (ctypes.c_float * self.act_dim)()
        sx, sy, b = ctypes.c_float(), ctypes.c_float(), ctypes.c_uint32()
        fp = ctypes.POINTER(ctypes.c_float)
        for i in range(len(x)):
            self._lib.bp_policy_forward(self.ptr, x[i].ctypes.data_as(fp), a)
            self._lib.bp_action_decode(a, ctypes.byref(sx), ctypes.byref(sy), ctypes.byref(b))
            out[i] = (sx.value, sy.value, b.value)
        return out

    def close(self) -> None:
        if self.ptr:
            self._lib.bp_policy_free(self.ptr)
            self.ptr = None

    def __enter__(self) -> NativePolicy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()


def full_rate_cpu_match(level0: int, level1: int, seed: int
                        ) -> tuple[int, int, tuple[int, int], tuple[float, float]]:
    """(winner, ticks, final stocks, final damage) of ``bp_match_cpu_vs_cpu_ex``: CPU
    ``level0`` in slot 0 vs ``level1`` in slot 1, both deciding every tick -- the
    reference a held teacher is measured against (a CPU-vs-CPU collection at repeat 1
    is this match)."""
    ticks = ctypes.c_uint32()
    fin = (NetPlayer * 2)()
    w = lib().bp_match_cpu_vs_cpu_ex(level0, level1, seed, ctypes.byref(ticks), fin)
    return (int(w), int(ticks.value), (int(fin[0].stocks), int(fin[1].stocks)),
            (float(fin[0].damage), float(fin[1].damage)))


# ----------------------------------------------------------------- the dataset
_ROW_ARRAYS = ("inputs", "actions", "commands", "snapshots", "match", "tick", "student")


@dataclass(eq=False)
class DemoSet:
    """Decisions of one or more matches, one row each; ``matches`` one record each.

    Rows: ``inputs`` (N, D) float32 = the policy input of the teacher's slot (layout
    ``meta['input_layout']``, D its size); ``actions`` (N, 6) float32 = the label, an
    action vector that :func:`~brawlkit.env.actions.decode_action` maps back to exactly
    the teacher's command; ``commands`` (N,) :data:`COMMAND_DTYPE` = the command
    executed; ``snapshots`` (N, 92) uint8 = the SNAPSHOT the input was built from;
    ``match`` (N,) uint32 = index into ``matches``; ``tick`` (N,) uint32; ``student``
    (N,) uint8 = 1 where the student's command was executed (DAgger).

    ``matches`` (M,) :data:`MATCH_DTYPE` (C's ``BpDemoMatch``): seed, ticks, first_row,
    rows, teacher_slot, winner (a slot, ``BP_WINNER_DRAW``, or ``BP_WINNER_NONE`` for a
    replay cut short), stocks[2] and damage[2] at the end (per slot), teacher_presses /
    teacher_presses_dropped (presses in the teacher's per-tick output, and those no
    label carries; for a replay, the recorded player's), student_decisions,
    executed_presses (presses the game applied to the teacher's slot; for a replay,
    the presses of its labels held R ticks), final_snapshot (92 bytes: the state the
    match ended in, which no row holds: what a reward needs for the last step).

    ``meta``: ``source`` ("collected", "replay" or "mixed"), ``input_layout``,
    ``input_dim``, ``action_repeat``, ``label_rule`` (a :data:`LABEL_RULES` name; a
    mixed concatenation: the parts' names joined by "+"), ``label_rule_text`` (the rule
    in words), and per source
    teacher / opponent / seeds / teacher_slot / student / beta / beta_seed /
    opponent_repeat, or replay / names / player / slot / presses / ticks_off_hold; a
    concatenation keeps its parts' metadata under ``parts``.
    """

    inputs: np.ndarray
    actions: np.ndarray
    commands: np.ndarray
    snapshots: np.ndarray
    match: np.ndarray
    tick: np.ndarray
    student: np.ndarray
    matches: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.inputs)

    @property
    def input_layout(self) -> int:
        return int(self.meta["input_layout"])

    @property
    def action_repeat(self) -> int:
        return int(self.meta["action_repeat"])

    def label_commands(self) -> list[tuple[float, float, int]]:
        """Every row's label decoded (the teacher's commands)."""
        return [decode_action(a) for a in self.actions]

    def results(self) -> dict[str, Any]:
        """Win / draw / loss of the teacher over the matches (a cut-short match, winner
        ``BP_WINNER_NONE``, counts as unfinished) and its score (wins + draws / 2) / played."""
        w = self.matches["winner"].astype(np.int64)
        slot = self.matches["teacher_slot"].astype(np.int64)
        draw = int(np.sum(w == C.BP_WINNER_DRAW))
        unfinished = int(np.sum(w == C.BP_WINNER_NONE))
        win = int(np.sum(w == slot))
        loss = len(w) - win - draw - unfinished
        played = win + draw + loss
        return {"matches": len(w), "win": win, "draw": draw, "loss": loss,
                "unfinished": unfinished, "score": (win + draw / 2) / played if played else math.nan}

    def check(self, where: str = "demo set") -> None:
        """Raise ValueError (prefixed ``where``) unless the arrays are one consistent set."""
        problems = _problems(self)
        if problems:
            raise ValueError(f"{where}: " + "; ".join(problems))

    # ------------------------------------------------------------ file
    def save(self, path: str | os.PathLike[str], *, compress: bool = True) -> Path:
        """One ``.npz`` (written atomically): the arrays plus ``meta_json`` (the metadata,
        with ``format`` / ``version``).  No pickles: :meth:`load` reads it with
        ``allow_pickle=False``."""
        self.check()
        meta = {**self.meta, "format": FORMAT, "version": FORMAT_VERSION}
        buf = io.BytesIO()
        arrays = {k: getattr(self, k) for k in (*_ROW_ARRAYS, "matches")}
        (np.savez_compressed if compress else np.savez)(
            buf, meta_json=np.array(json.dumps(meta, sort_keys=True)), **arrays)
        return atomic_write_bytes(path, buf.getvalue())

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, input_layout: int | None = None) -> DemoSet:
        """Read a set :meth:`save` wrote.  ValueError naming the file and the problem for:
        not an ``.npz`` (or truncated), another format or version, a missing or
        malformed array, arrays of inconsistent lengths, inputs whose width is not the
        recorded layout's, and (if ``input_layout`` is given) a set of another layout."""
        where = str(path)
        try:
            with np.load(path, allow_pickle=False) as z:
                data = {k: z[k] for k in z.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
            raise ValueError(f"{where}: not a readable .npz demo set ({e})") from None
        if "meta_json" not in data:
            raise ValueError(f"{where}: no meta_json entry: not a {FORMAT} file")
        try:
            meta = json.loads(str(data.pop("meta_json")))
        except ValueError as e:
            raise ValueError(f"{where}: meta_json is not JSON ({e})") from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            got = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
            raise ValueError(f"{where}: format {got!r}, expected {FORMAT!r}")
        if meta.get("version") != FORMAT_VERSION:
            raise ValueError(f"{where}: {FORMAT} version {meta.get('version')!r}; this brawlkit "
                             f"reads version {FORMAT_VERSION}")
        missing = [k for k in (*_ROW_ARRAYS, "matches") if k not in data]
        if missing:
            raise ValueError(f"{where}: missing arrays {missing}")
        ds = cls(**{k: data[k] for k in (*_ROW_ARRAYS, "matches")}, meta=meta)
        ds.check(where)
        if input_layout is not None and ds.input_layout != input_layout:
            raise ValueError(f"{where}: inputs of layout {ds.input_layout}, expected layout "
                             f"{input_layout}")
        return ds


def _problems(ds: DemoSet) -> list[str]:
    """What makes ``ds`` not one consistent set (empty list: it is one)."""
    out: list[str] = []
    layout = ds.meta.get("input_layout")
    if layout not in INPUT_LAYOUTS:
        return [f"input_layout {layout!r} is not a layout this brawlkit builds ({sorted(INPUT_LAYOUTS)})"]
    dim = INPUT_LAYOUTS[layout]
    want: dict[str, tuple[np.dtype[Any], tuple[int, ...]]] = {
        "inputs": (np.dtype(np.float32), (dim,)), "actions": (np.dtype(np.float32), (ACT_DIM,)),
        "commands": (COMMAND_DTYPE, ()), "snapshots": (np.dtype(np.uint8), (SNAPSHOT_SIZE,)),
        "match": (np.dtype(np.uint32), ()), "tick": (np.dtype(np.uint32), ()),
        "student": (np.dtype(np.uint8), ())}
    for name, (dtype, tail) in want.items():
        a = getattr(ds, name)
        if not isinstance(a, np.ndarray) or a.dtype != dtype or a.ndim != 1 + len(tail) \
                or a.shape[1:] != tail:
            shape = getattr(a, "shape", None)
            what = f"{getattr(a, 'dtype', type(a).__name__)} {shape}"
            out.append(f"{name} is {what}, expected {dtype} (N, {', '.join(map(str, tail))})"
                       if tail else f"{name} is {what}, expected {dtype} (N,)")
    if out:
        return out
    lengths = {k: len(getattr(ds, k)) for k in _ROW_ARRAYS}
    if len(set(lengths.values())) != 1:
        return [f"arrays of inconsistent length {lengths}"]
    if not isinstance(ds.matches, np.ndarray) or ds.matches.dtype != MATCH_DTYPE or ds.matches.ndim != 1:
        return [f"matches is {getattr(ds.matches, 'dtype', None)}, expected the BpDemoMatch records"]
    n, m = lengths["inputs"], len(ds.matches)
    if n and int(ds.match.max()) >= m:
        out.append(f"a row refers to match {int(ds.match.max())} of {m}")
    if int(ds.matches["rows"].sum(dtype=np.uint64)) != n:
        out.append(f"the matches' row counts sum to {int(ds.matches['rows'].sum(dtype=np.uint64))}, "
                   f"the arrays have {n} rows")
    if ds.meta.get("input_dim", dim) != dim:
        out.append(f"input_dim {ds.meta.get('input_dim')} but layout {layout} has {dim} values")
    return out


def concat(sets: Sequence[DemoSet]) -> DemoSet:
    """One set of several, rows and matches in order (match indices and ``first_row``
    renumbered).  They must share the input layout and the action repeat; the parts'
    metadata is kept under ``meta['parts']``."""
    if not sets:
        raise ValueError("concat: no demo sets")
    layouts = {s.input_layout for s in sets}
    repeats = {s.action_repeat for s in sets}
    if len(layouts) != 1:
        raise ValueError(f"concat: input layouts differ {sorted(layouts)}")
    if len(repeats) != 1:
        raise ValueError(f"concat: action repeats differ {sorted(repeats)}")
    match_off = row_off = 0
    matches, match_idx = [], []
    for s in sets:
        s.check()
        mt = s.matches.copy()
        mt["first_row"] += row_off
        matches.append(mt)
        match_idx.append(s.match + np.uint32(match_off))
        match_off += len(s.matches)
        row_off += len(s)
    sources = {s.meta.get("source") for s in sets}
    parts = [p for s in sets for p in (s.meta.get("parts") or [s.meta])]
    rules = sorted({str(p["label_rule"]) for p in parts if "label_rule" in p})
    meta = {"source": sources.pop() if len(sources) == 1 else "mixed",
            "input_layout": layouts.pop(), "action_repeat": repeats.pop(),
            "input_dim": sets[0].inputs.shape[1], "parts": parts,
            **({"label_rule": "+".join(rules)} if rules else {})}
    return DemoSet(
        **{k: np.concatenate([getattr(s, k) for s in sets]) for k in _ROW_ARRAYS if k != "match"},
        match=np.concatenate(match_idx).astype(np.uint32), matches=np.concatenate(matches), meta=meta)


# ----------------------------------------------------------------- collecting in C
PlayerSpec = int | str | os.PathLike[str]
"""a CPU level (``3`` or ``"cpu:3"``) or the path of a ``.bpw`` policy"""

_U32 = 1 << 32
#: matches per C call: bounds the buffers (at repeat 1 a match is 9,000 rows)
_CHUNK_MATCHES = 16


def _int_arg(value: Any, name: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(f"{name} must be an integer in {lo}..{hi}, got {value!r}")
    if not lo <= int(value) <= hi:
        raise ValueError(f"{name} must be in {lo}..{hi}, got {value}")
    return int(value)


def _player(spec: PlayerSpec, name: str) -> tuple[int, int, Path | None, str]:
    """(kind, level, policy path, description) of a player spec."""
    lo, hi = int(C.BP_CPU_LEVEL_MIN), int(C.BP_CPU_LEVEL_MAX)
    if isinstance(spec, str) and spec.startswith("cpu:"):
        try:
            level = int(spec[4:])
        except ValueError:
            raise ValueError(f"{name}: {spec!r} is not cpu:L with a level {lo}..{hi}") from None
        spec = level
    if isinstance(spec, int | np.integer) and not isinstance(spec, bool):
        level = _int_arg(spec, f"{name} (a CPU level)", lo, hi)
        return D["BP_DEMO_CPU"], level, None, f"cpu:{level}"
    if isinstance(spec, str | os.PathLike):
        path = Path(spec)
        if not path.is_file():
            raise ValueError(f"{name}: {path} is neither cpu:L nor an existing .bpw file")
        return D["BP_DEMO_POLICY"], 0, path, f"policy:{path}"
    raise ValueError(f"{name} must be a CPU level or a .bpw path, got {spec!r}")


def _raise_for(code: int) -> None:
    names = {v: k for k, v in D.items() if k.startswith("BP_DEMO_ERR_")}
    arg = _ERR_ARG.get(names.get(code, ""), "arguments")
    raise ValueError(f"{arg}: {strerror(code)} (bp_demo_collect error {code})")


def _collect_chunk(settings: BpDemoSettings, seeds: Sequence[int], dim: int,
                   row_capacity: int | None) -> DemoSet:
    so = lib()
    cap = so.bp_demo_max_rows(settings.action_repeat, len(seeds)) if row_capacity is None else row_capacity
    inputs = np.empty((cap, dim), np.float32)
    actions = np.empty((cap, ACT_DIM), np.float32)
    commands = np.empty(cap, COMMAND_DTYPE)
    snaps = np.empty((cap, SNAPSHOT_SIZE), np.uint8)
    match = np.empty(cap, np.uint32)
    tick = np.empty(cap, np.uint32)
    student = np.empty(cap, np.uint8)
    matches = np.zeros(len(seeds), MATCH_DTYPE)
    seed_arr = (ctypes.c_uint32 * max(1, len(seeds)))(*seeds)
    out = BpDemoOutput(inputs.ctypes.data, actions.ctypes.data, commands.ctypes.data,
                       snaps.ctypes.data, match.ctypes.data, tick.ctypes.data, student.ctypes.data,
                       cap, matches.ctypes.data, len(matches), 0, 0)
    rc = so.bp_demo_collect(ctypes.byref(settings), seed_arr, len(seeds), ctypes.byref(out))
    if rc != D["BP_DEMO_OK"]:
        _raise_for(rc)
    n = out.n_rows
    return DemoSet(inputs[:n].copy(), actions[:n].copy(), commands[:n].copy(), snaps[:n].copy(),
                   match[:n].copy(), tick[:n].copy(), student[:n].copy(), matches,
                   meta={"input_layout": settings.input_layout, "action_repeat": settings.action_repeat})


def _label_rule(rule: str) -> str:
    if rule not in LABEL_RULES:
        raise ValueError(f"label_rule must be one of {sorted(LABEL_RULES)}, got {rule!r}")
    return rule


def _slot_code(teacher_slot: int | str) -> int:
    if teacher_slot == "alternate":
        return D["BP_DEMO_SLOT_ALTERNATE"]
    if teacher_slot in (0, 1) and not isinstance(teacher_slot, bool):
        return int(teacher_slot)
    raise ValueError(f"teacher_slot must be 0, 1 or 'alternate', got {teacher_slot!r}")


def _check_dagger(student: str | os.PathLike[str] | None, beta: float, beta_seed: int) -> int:
    if isinstance(beta, bool) or not isinstance(beta, int | float) or not 0.0 <= beta <= 1.0:
        raise ValueError(f"beta must be a probability in [0, 1], got {beta!r}")
    if beta > 0 and student is None:
        raise ValueError(f"beta is {beta} but no student is given")
    return _int_arg(beta_seed, "beta_seed", 0, _U32 - 1)


def collect_demos(teacher: PlayerSpec, opponents: PlayerSpec | Sequence[PlayerSpec], matches: int,
                  seed: int, *, action_repeat: int = 4, input_layout: int = INPUT_LAYOUT,
                  teacher_slot: int | str = "alternate", student: str | os.PathLike[str] | None = None,
                  beta: float = 0.0, beta_seed: int = 0, opponent_repeat: int = 0,
                  row_capacity: int | None = None, label_rule: str = "held") -> DemoSet:
    """Play ``matches`` matches of ``teacher`` against each of ``opponents`` in C and
    return every teacher decision (the label rules are the module docstring's).

    Args:
        teacher, opponents: a CPU level (``4``, ``"cpu:4"``) or a ``.bpw`` path each; a
            policy plays its own blob's layout with its own previous command, exactly
            as ``brawlpit_bot``; a policy opponent decides every ``opponent_repeat``
            ticks (0 = its blob's action_repeat), a CPU opponent every tick.
        matches, seed: match i against every opponent is seeded ``seed + i`` (mod 2^32),
            so opponents are compared on the same seeds.
        action_repeat: R, ticks per teacher decision, 1..BP_MAX_REPEAT.
        input_layout: the layout of the recorded inputs (what the student will read).
        teacher_slot: 0, 1 or ``"alternate"`` (match i in slot i % 2).
        student, beta, beta_seed: DAgger -- at each decision the executed command is the
            student's deterministic command with probability ``beta`` (draws seeded by
            ``beta_seed`` and the match seed); the label is always the teacher's.
        row_capacity: rows allocated per C call (default: enough for any match); a
            smaller one makes the call fail with a ValueError naming it.
        label_rule: ``"held"`` or ``"carry"`` (:data:`LABEL_RULES`): how a CPU teacher's
            every-tick output becomes one command per decision (a policy teacher's rows
            are the same under both).

    Deterministic in the arguments: the same call returns the same bytes.
    """
    t_kind, t_level, t_path, t_desc = _player(teacher, "teacher")
    opp_list: list[PlayerSpec] = ([opponents] if isinstance(opponents, int | str | os.PathLike)
                                  else list(opponents))
    if not opp_list:
        raise ValueError("opponents: at least one opponent is needed")
    opps = [_player(o, f"opponents[{i}]") for i, o in enumerate(opp_list)]
    matches = _int_arg(matches, "matches", 1, _U32 - 1)
    seed = _int_arg(seed, "seed", 0, _U32 - 1)
    action_repeat = _int_arg(action_repeat, "action_repeat", 1, int(C.BP_MAX_REPEAT))
    if input_layout not in INPUT_LAYOUTS:
        raise ValueError(f"input_layout must be one of {sorted(INPUT_LAYOUTS)}, got {input_layout!r}")
    opponent_repeat = 0 if opponent_repeat == 0 else _int_arg(
        opponent_repeat, "opponent_repeat", 1, int(C.BP_MAX_REPEAT))
    slot_code, rule = _slot_code(teacher_slot), _label_rule(label_rule)
    beta_seed = _check_dagger(student, beta, beta_seed)
    if row_capacity is not None:
        row_capacity = _int_arg(row_capacity, "row_capacity", 0, 1 << 40)
    dim = INPUT_LAYOUTS[input_layout]
    seeds = [(seed + i) % _U32 for i in range(matches)]
    meta = {"source": "collected", "teacher": t_desc, "action_repeat": action_repeat,
            "input_layout": input_layout, "input_dim": dim, "teacher_slot": teacher_slot,
            "seeds": seeds, "opponent_repeat": opponent_repeat,
            "student": str(student) if student is not None else None, "beta": float(beta),
            "beta_seed": beta_seed, "label_rule": rule,
            "label_rule_text": LABEL_RULE_TEXT[rule] + _COLLECTED_TAIL,
            "snapshot_header": "bp_sim_snapshot(sim, seq 0, 2 players, lockstep, ack 0)"}

    loaded: list[NativePolicy] = []
    try:
        def handle(path: Path | None, name: str) -> int | None:
            if path is None:
                return None
            pol = NativePolicy(path, name)
            loaded.append(pol)
            return pol.ptr

        t_ptr = handle(t_path, "teacher")
        s_ptr = handle(Path(student), "student") if student is not None else None
        parts = []
        for i, (o_kind, o_level, o_path, o_desc) in enumerate(opps):
            settings = BpDemoSettings(
                BpDemoPlayer(t_kind, t_level, t_ptr),
                BpDemoPlayer(o_kind, o_level, handle(o_path, f"opponents[{i}]")), slot_code,
                action_repeat, input_layout, opponent_repeat, s_ptr, float(beta), beta_seed,
                LABEL_RULES[rule])
            chunks = [_collect_chunk(settings, seeds[k:k + _CHUNK_MATCHES], dim, row_capacity)
                      for k in range(0, len(seeds), _CHUNK_MATCHES)]
            part = concat(chunks) if len(chunks) > 1 else chunks[0]
            part.meta = {**meta, "opponent": o_desc}
            parts.append(part)
    finally:
        for pol in loaded:
            pol.close()
    if len(parts) == 1:
        return parts[0]
    ds = concat(parts)
    ds.meta.update({k: v for k, v in meta.items() if k not in ds.meta},
                   opponents=[p.meta["opponent"] for p in parts])
    return ds


def collect_cpu_demos(teacher_level: int, opponent_levels: int | Sequence[int], matches: int, seed: int,
                      action_repeat: int = 4, input_layout: int = INPUT_LAYOUT,
                      teacher_slot: int | str = "alternate",
                      student: str | os.PathLike[str] | None = None, beta: float = 0.0,
                      beta_seed: int = 0, label_rule: str = "held") -> DemoSet:
    """CPU ``teacher_level`` against each of ``opponent_levels`` (:func:`collect_demos`
    with CPU levels only; errors name ``teacher_level`` / ``opponent_levels``)."""
    lo, hi = int(C.BP_CPU_LEVEL_MIN), int(C.BP_CPU_LEVEL_MAX)
    _int_arg(teacher_level, "teacher_level", lo, hi)
    levels = list(opponent_levels) if isinstance(opponent_levels, Iterable) else [opponent_levels]
    if not levels:
        raise ValueError("opponent_levels: at least one level is needed")
    for i, lvl in enumerate(levels):
        _int_arg(lvl, f"opponent_levels[{i}]", lo, hi)
    return collect_demos(teacher_level, levels, matches, seed, action_repeat=action_repeat,
                         input_layout=input_layout, teacher_slot=teacher_slot, student=student,
                         beta=beta, beta_seed=beta_seed, label_rule=label_rule)


# ----------------------------------------------------------------- replays
def action_of(stick_x: float, stick_y: float, buttons: int) -> np.ndarray:
    """The label of a command: (stick_x, stick_y, then +1 / -1 per button in
    :data:`~brawlkit.env.actions.BUTTON_BITS` order), float32; ``decode_action`` gives
    the command back exactly (sticks already in [-1, 1], as every applied input is)."""
    return np.array([stick_x, stick_y, *(1.0 if buttons & b else -1.0 for b in BUTTON_BITS)],
                    dtype=np.float32)


def press_stats(buttons: np.ndarray, action_repeat: int, label_rule: str = "held") -> dict[str, Any]:
    """What deciding every ``action_repeat`` ticks by ``label_rule`` does to a per-tick
    button stream (the accounting of ``demos.c``, whose ``teacher_presses_dropped`` it
    reproduces).

    A press is a maximal run of ticks with a button held.  It is carried when the label
    (:func:`label_ticks`) of the first decision tick at or after its start has that
    button -- one press per button per label -- and else ``dropped`` (under ``"held"``:
    no decision tick falls in the run, so a clone at repeat R never sees it); a press
    runs out of decisions when the stream ends first.  ``delayed``: carried, but by a
    label at whose tick no press of the button started -- seen late.  Per button and in
    total."""
    b = np.asarray(buttons, np.int64)
    _, label = label_ticks(b, action_repeat, label_rule)
    out: dict[str, Any] = {"presses": 0, "dropped": 0, "delayed": 0, "per_button": {}}
    names = ("jump", "attack", "special", "shield")
    for name, bit in zip(names, BUTTON_BITS, strict=True):
        held = (b & bit) != 0
        starts = np.flatnonzero(held & ~np.concatenate([[False], held[:-1]]))
        first = -(-starts // action_repeat)  # index of the first decision at or after the start
        pending = np.bincount(first, minlength=len(label) + 1)[:len(label)]
        has = (label & bit) != 0
        carried = has & (pending > 0)
        on_tick = np.zeros(len(label), bool)
        on_tick[starts[starts % action_repeat == 0] // action_repeat] = True
        n, kept = len(starts), int(carried.sum())
        delayed = int(np.sum(carried & ~on_tick))
        out["per_button"][name] = {"presses": n, "dropped": n - kept, "delayed": delayed}
        out["presses"] += n
        out["dropped"] += n - kept
        out["delayed"] += delayed
    return out


def label_ticks(buttons: np.ndarray, action_repeat: int, label_rule: str = "held"
                ) -> tuple[np.ndarray, np.ndarray]:
    """(tick whose stick each decision's label takes, the label's buttons) for a per-tick
    input stream, decision ticks t = 0, R, 2R, ... below ``len(buttons)``, by the rule
    (``demos.h``): ``"held"`` tick t and its buttons; ``"carry"`` tick t and the OR of
    the buttons over the window t-R < u <= t; ``"last_press"`` the latest tick of the
    window that pressed a button not held the tick before (t if none) and its buttons.
    The C collector applies the same rules to a CPU teacher's every-tick output."""
    _label_rule(label_rule)
    b = np.asarray(buttons, np.int64)
    t = np.arange(0, len(b), action_repeat)
    if label_rule == "held" or action_repeat == 1:
        return t, b[t]
    ticks = np.arange(len(b))
    window = [np.clip(t - k, 0, None) for k in range(action_repeat)]  # k = 0 .. R-1 back
    valid = [t - k >= 0 for k in range(action_repeat)]
    if label_rule == "carry":
        out = b[t].copy()
        for w, ok in zip(window[1:], valid[1:], strict=True):
            out |= np.where(ok, b[w], 0)
        return t, out
    prev = np.concatenate([[0], b[:-1]])
    rising = (b & ~prev) != 0
    latest = t.copy()
    found = np.zeros(len(t), bool)
    for w, ok in zip(window, valid, strict=True):  # newest first: the first hit is the latest
        hit = ok & rising[w] & ~found
        latest[hit], found[hit] = ticks[w][hit], True
    return latest, b[latest]


def _presses_of_labels(buttons: np.ndarray) -> int:
    """Presses of a label stream as the game applies it (each label held R ticks): the
    rising edges of each button from one decision to the next."""
    b = np.concatenate([[0], np.asarray(buttons, np.int64)])
    return int(sum(np.sum(((b[1:] & bit) != 0) & ((b[:-1] & bit) == 0)) for bit in BUTTON_BITS))


def demos_from_replay(path: str | os.PathLike[str], slot: int, action_repeat: int = 4,
                      input_layout: int = INPUT_LAYOUT, *, verify_first: bool = True,
                      label_rule: str = "held") -> DemoSet:
    """Rows from a ``.bpr`` recording: ``slot``'s recorded input at every R-th tick.

    The recording is re-simulated (:func:`brawlkit.replay.replay_states`; with
    ``verify_first`` it is first proven to reproduce, :func:`brawlkit.replay.verify`).
    At each decision tick t (t % R == 0) the row is: the SNAPSHOT the server would send
    for the state after t ticks (``pack_snapshot``: seq 0, ack 0, the recording's mode),
    the policy input built from it by the env's own builder
    (:func:`brawlkit.env.observation.build_input`) with the previous command = the label
    of the previous decision (neutral at the first), and the label = the input the
    player applied at tick t, its buttons by ``label_rule`` (:func:`label_buttons`).

    What is lost: a human (or a CPU) acts every tick, so under ``"held"`` the inputs
    between decision ticks are dropped -- a press released before the next decision
    tick never appears in any label (``"carry"`` moves it to the next decision).
    ``meta['presses']`` counts them (:func:`press_stats`: presses, ``dropped``,
    ``delayed``) and ``meta['ticks_off_hold']`` counts the ticks whose recorded input
    differs from the one at the preceding decision tick.  Unlike the C collector, the
    states are the recording's, not those a clone holding its commands would visit: the
    label rule differs (``meta['label_rule_text']``).
    """
    from brawlkit.replay import read_replay, verify

    slot = _int_arg(slot, "slot", 0, 1)
    action_repeat = _int_arg(action_repeat, "action_repeat", 1, int(C.BP_MAX_REPEAT))
    if input_layout not in INPUT_LAYOUTS:
        raise ValueError(f"input_layout must be one of {sorted(INPUT_LAYOUTS)}, got {input_layout!r}")
    _label_rule(label_rule)
    rep = read_replay(path)
    if verify_first:
        verify(rep)
    n = rep.n_ticks
    per_tick = rep.inputs()[:, slot, :] if n else np.zeros((0, 3))
    src, buttons = label_ticks(per_tick[:, 2].astype(np.int64), action_repeat, label_rule)
    ds, final = _replay_rows(rep, slot, per_tick[src], buttons, action_repeat, input_layout)
    held_idx = (np.arange(n) // action_repeat) * action_repeat
    off_hold = int(np.sum(np.any(per_tick != per_tick[held_idx], axis=1))) if n else 0
    presses = press_stats(per_tick[:, 2].astype(np.int64), action_repeat, label_rule)
    fin = rep.final_players
    m = ds.matches[0]
    m["seed"], m["ticks"], m["first_row"], m["rows"] = rep.seed, n, 0, len(ds)
    m["teacher_slot"], m["winner"] = slot, rep.winner
    m["stocks"] = (fin[0].stocks, fin[1].stocks)
    m["damage"] = (fin[0].damage, fin[1].damage)
    m["teacher_presses"], m["teacher_presses_dropped"] = presses["presses"], presses["dropped"]
    m["executed_presses"] = _presses_of_labels(buttons)
    m["final_snapshot"] = np.frombuffer(final, np.uint8)
    ds.meta = {
        "source": "replay", "replay": str(path), "names": list(rep.names),
        "player": rep.names[slot], "slot": slot, "seed": rep.seed, "match_id": rep.match_id,
        "complete": bool(rep.complete), "cpu_level": rep.cpu_level,
        "action_repeat": action_repeat, "input_layout": input_layout,
        "input_dim": INPUT_LAYOUTS[input_layout], "label_rule": label_rule,
        "label_rule_text": LABEL_RULE_TEXT[label_rule] + _REPLAY_TAIL, "presses": presses,
        "ticks": n, "ticks_off_hold": off_hold,
        "snapshot_header": "pack_snapshot(seq 0, 2 players, the replay's mode, ack 0)",
    }
    return ds


def _replay_rows(rep: Any, slot: int, labels: np.ndarray, buttons: np.ndarray,
                 action_repeat: int, input_layout: int) -> tuple[DemoSet, bytes]:
    """The rows of a re-simulated recording (row r's label: the stick of ``labels[r]``,
    the buttons ``buttons[r]``) and the SNAPSHOT of its final state; ``matches`` left
    to fill."""
    from brawlkit.replay import replay_states

    n, rows = rep.n_ticks, len(buttons)
    dim = INPUT_LAYOUTS[input_layout]
    inputs = np.empty((rows, dim), np.float32)
    actions = np.empty((rows, ACT_DIM), np.float32)
    commands = np.empty(rows, COMMAND_DTYPE)
    snaps = np.empty((rows, SNAPSHOT_SIZE), np.uint8)
    tick = np.empty(rows, np.uint32)
    prev: tuple[float, float, int] = NEUTRAL_COMMAND
    r, final = 0, b""
    for st in replay_states(rep, every=action_repeat):
        snap = pack_snapshot(st.players, match_id=rep.match_id, ticks_left=st.ticks_left,
                             phase=st.phase, winner=st.winner, n_players=2, mode=rep.mode,
                             tick=st.tick)
        if st.tick >= n:
            final = snap
            break
        inputs[r] = build_input(snap, slot, input_layout, prev)
        sx, sy, b = float(labels[r, 0]), float(labels[r, 1]), int(buttons[r])
        actions[r] = action_of(sx, sy, b)
        commands[r] = (sx, sy, b)
        snaps[r] = np.frombuffer(snap, np.uint8)
        tick[r] = st.tick
        prev = (sx, sy, b)
        r += 1
    if r != rows or not final:
        raise ValueError(f"{rep.path}: re-simulation gave {r} decision states and "
                         f"{'a' if final else 'no'} final state, expected {rows} and one")
    return DemoSet(inputs, actions, commands, snaps, np.zeros(rows, np.uint32), tick,
                   np.zeros(rows, np.uint8), np.zeros(1, MATCH_DTYPE)), final


__all__ = [
    "COMMAND_DTYPE", "FORMAT", "FORMAT_VERSION", "LABEL_RULES", "LABEL_RULE_TEXT", "label_ticks",
    "MATCH_DTYPE", "DemoSet", "NativePolicy", "action_of", "collect_cpu_demos", "collect_demos",
    "concat", "demos_from_replay", "full_rate_cpu_match", "lib", "press_stats", "strerror",
]
