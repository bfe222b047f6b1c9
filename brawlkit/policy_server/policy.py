"""The ``/move`` request as data, and the PPO checkpoint behind an endpoint.

The request (docs/move.md, "Request") carries what a client of the game knows:
both fighters' ``NetPlayer`` fields by name (``self`` = the fighter the model
controls, ``opponent`` = the other), the match clock and the last four moves.
:class:`MoveRequest` validates it with pydantic, so a bad request is refused with
a 422 naming the field.

:class:`CheckpointPolicy` answers it with a trained PPO checkpoint (SB3 zip or
``.bpw`` blob): it builds the policy input from the state with the env's own
builder (:func:`brawlkit.env.observation.build_input_values`), takes the
deterministic action (the Gaussian mean, clipped) and maps it to the nearest named
move (:func:`brawlkit.policy_server.moves.nearest_moves`).  Its log-probability is
the probability mass that the policy's Gaussian puts on the move's region of the
action box, estimated with a fixed set of draws (docs/move.md, "PPO checkpoints").
"""

from __future__ import annotations

import base64
import binascii
import math
import warnings
from pathlib import Path
from typing import Annotated, Any

import numpy as np

try:  # the request model is pydantic's, as FastAPI validates it (the `move` extra)
    from pydantic import BaseModel, ConfigDict, Field, field_validator
except ImportError as e:  # pragma: no cover - depends on what is installed
    raise ImportError("the /move endpoint needs FastAPI and pydantic, which plain `pip install "
                      "brawlkit` leaves out: pip install -e '.[move]' (docs/move.md)") from e

from brawlkit.env.observation import build_input_values, check_input_layout
from brawlkit.policy_server.moves import (
    HISTORY,
    MOVES,
    NAMES,
    NEUTRAL,
    Command,
    available_moves,
    move,
    nearest_moves,
)
from brawlkit.wire.protocol import PlayerState

_U8 = Annotated[int, Field(ge=0, le=255)]
_FLOAT = Annotated[float, Field(allow_inf_nan=False)]
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class Fighter(BaseModel):
    """One fighter: the ``NetPlayer`` fields of a SNAPSHOT, by name (docs/protocol.md)."""

    model_config = ConfigDict(extra="ignore")

    x: _FLOAT
    y: _FLOAT
    vx: _FLOAT
    vy: _FLOAT
    damage: _FLOAT
    shield: _FLOAT
    stocks: _U8
    facing: Annotated[int, Field(ge=-128, le=127)]
    flags: _U8 = 0
    action_state: _U8 = 0
    hitstun_ticks: Annotated[int, Field(ge=0, le=65535)] = 0
    jumps_left: _U8 = 0
    slot: Annotated[int, Field(ge=0, le=1)] = 0

    def state(self) -> PlayerState:
        return PlayerState(**self.model_dump())

    @classmethod
    def from_state(cls, p: PlayerState) -> Fighter:
        return cls(**p._asdict())


class MoveRequest(BaseModel):
    """The body of ``POST /move``."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    me: Fighter = Field(alias="self")
    opponent: Fighter
    tick: Annotated[int, Field(ge=0, le=2**32 - 1)] = 0
    ticks_left: Annotated[int, Field(ge=0, le=2**32 - 1)]
    last_moves: list[str] = Field(default_factory=list, max_length=HISTORY)
    frame: str | None = None
    available: list[str] | None = None

    @field_validator("last_moves", "available")
    @classmethod
    def _known_moves(cls, v: list[str] | None, info: Any) -> list[str] | None:
        for i, name in enumerate(v or ()):
            if name not in NAMES:
                raise ValueError(f"{info.field_name}[{i}] is {name!r}, not one of the moves "
                                 f"(GET /moves lists them)")
        return v

    @field_validator("frame")
    @classmethod
    def _png(cls, v: str | None) -> str | None:
        if v is None:
            return v
        try:
            head = base64.b64decode(v[:24], validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("frame is not base64 (standard alphabet, padded)") from None
        if not head.startswith(_PNG_MAGIC):
            raise ValueError("frame is base64 but not a PNG image") from None
        return v

    def available_moves(self) -> tuple[str, ...]:
        """The moves offered in this state: the request's ``available`` when it says them
        (the worker always does), else the rule of :func:`moves.available_moves`."""
        if self.available is not None:
            return tuple(self.available)
        return available_moves(self.me)

    def previous_command(self) -> Command:
        """The command of the last move's first tick: what the player "sent last step"
        for input layout 2 (a match starts from the neutral command)."""
        return move(self.last_moves[-1]).first if self.last_moves else NEUTRAL


def request_json(me: PlayerState, opponent: PlayerState, tick: int, ticks_left: int,
                 last_moves: list[str], frame: str | None = None) -> dict[str, Any]:
    """A request body built from decoded players (what the worker sends); ``available`` is
    the state's available moves (:func:`~brawlkit.policy_server.moves.available_moves`)."""
    body: dict[str, Any] = {"self": me._asdict(), "opponent": opponent._asdict(), "tick": tick,
                            "ticks_left": ticks_left, "last_moves": list(last_moves[-HISTORY:]),
                            "available": list(available_moves(me))}
    if frame is not None:
        body["frame"] = frame
    return body


# ----------------------------------------------------------------- PPO checkpoints
#: draws of the fixed Gaussian sample that estimates a move's probability
LOGPROB_DRAWS = 1024
_Z = np.random.default_rng(0).standard_normal((LOGPROB_DRAWS, 6)).astype(np.float32)


class CheckpointPolicy:
    """A PPO checkpoint (SB3 zip or ``.bpw``) answering ``/move`` requests in numpy.

    ``decision_ticks`` is the checkpoint's action repeat: how often it was trained to
    decide, which the worker uses as its decision period.
    """

    def __init__(self, path: str | Path) -> None:
        from brawlkit.export.actor import NumpyPolicy, checkpoint_meta, load_sb3_policy

        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"checkpoint {self.path} not found")
        self.log_std: np.ndarray | None
        if self.path.suffix == ".bpw":
            self.net = NumpyPolicy(self.path)
            # a version-3 blob carries the std it trained with; a version-2 blob the mean only
            std = self.net.noise_std
            self.log_std = None if std is None else np.log(std.astype(np.float64)).astype(np.float32)
        else:
            meta = checkpoint_meta(self.path)
            sb3 = load_sb3_policy(self.path)
            self.net = NumpyPolicy.from_sb3(sb3, meta)
            self.log_std = sb3.log_std.detach().cpu().numpy().astype(np.float32)
        self.meta = self.net.meta
        check_input_layout(self.meta.input_layout, str(self.path))
        self.decision_ticks = int(self.meta.action_repeat)
        self.label = self.path.name

    def action(self, req: MoveRequest) -> np.ndarray:
        """The Gaussian mean (unclipped) for the request's state."""
        x = build_input_values(req.me.state(), req.opponent.state(), req.ticks_left,
                               self.meta.input_layout, req.previous_command())
        return self.net.forward(np.asarray(x, np.float32))

    def choose(self, req: MoveRequest) -> tuple[str, float]:
        """(move name, log-probability) of the request's state."""
        mean = self.action(req)
        allowed = req.available_moves()
        idx = int(nearest_moves(mean, allowed)[0])
        if self.log_std is None:
            return MOVES[idx].name, 0.0  # deterministic: the move it plays has probability 1
        draws = mean[None, :] + np.exp(self.log_std)[None, :] * _Z
        hits = int(np.count_nonzero(nearest_moves(draws, allowed) == idx))
        return MOVES[idx].name, math.log((hits + 1) / (LOGPROB_DRAWS + len(allowed)))


def find_member(checkpoint: str | Path) -> str | None:
    """The league member whose checkpoint or blob *is* this file, when it lies in a
    league directory's ``artifacts/`` (None otherwise): served from there, a checkpoint
    plays under its member id without a ``--member``."""
    p = Path(checkpoint).resolve()
    if p.parent.name != "artifacts" or not (p.parent.parent / "members").is_dir():
        return None
    from brawlkit.league.directory import LeagueDir

    league = LeagueDir(p.parent.parent, create=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        members = league.members(include_permanent=False)
    for m in members:
        for rel in (m.checkpoint, m.blob):
            if rel and (league.path / rel).resolve() == p:
                return m.id
    return None
