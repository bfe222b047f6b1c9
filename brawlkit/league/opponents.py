"""The opponents a league trainee meets, as the env plays them.

* the built-in CPU levels: the spec ``"cpu:L"`` — they play inside the server;
* the scripted baseline (:class:`BaselinePolicy`): a permanent member that starts
  at the same rating as everyone and never learns, the league's fixed yardstick;
* frozen checkpoints (:class:`FrozenOpponent`): the member's exported ``.bpw``
  through the numpy forward pass (no torch model per env), deterministic — the
  same policy ``brawlpit_bot`` would play;
* one of these for a whole run (:func:`fixed_opponent`: ``train --opponent``, the
  opponent ``bench exploit`` trains its exploiters against).

Each is a callable ``obs -> action`` with a ``label`` (its member id), which is
what the env reports as ``info["opponent"]`` and the payoff is keyed by.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np

from brawlkit.common.confined import read_confined
from brawlkit.env.observation import INPUT_LAYOUTS, INPUT_NAMES, OBS_DIM, OBS_NAMES
from brawlkit.export.actor import NoiseStream, NumpyPolicy
from brawlkit.export.bpw import MIX_MAGIC, mixture_pick, split_mixture
from brawlkit.league.directory import ARTIFACT_MAX_BYTES
from brawlkit.league.records import BASELINE_ID, Member, permanent_ids
from brawlkit.wire.cpu_level import CPU_LEVELS, CpuLevel

_I = {name: i for i, name in enumerate(OBS_NAMES)}


def permanent_opponent(spec: str) -> str:
    """``spec`` when it names a permanent member (``baseline``, ``cpu:1`` … ``cpu:8``):
    the opponents ``eval`` and ``league report`` judge a policy against; else
    ``ValueError`` naming the forms, said before any checkpoint loads."""
    if spec not in permanent_ids():
        raise ValueError(f"{spec!r} is no permanent member: give {BASELINE_ID} or cpu:L with L "
                         f"in {CPU_LEVELS[0]}..{CPU_LEVELS[-1]}")
    return spec


class BaselinePolicy:
    """A scripted fighter: walk at the opponent, attack in range (pressing and
    releasing, since attacks fire on a press), shield when the opponent is close
    and attacking-fast (closing quickly), and steer back (jump, up-special) when
    off the stage.  Reads only the 31-value observation, so it plays in any input
    layout (every layout starts with it)."""

    label = BASELINE_ID
    #: |relative x| (as a fraction of BP_OBS_DIST_SCALE) within which it attacks
    ATTACK_RANGE = 0.045
    #: closing velocity (normalised) above which a close opponent is shielded against
    SHIELD_CLOSING = 0.5
    #: |self x| (as a fraction of BP_OBS_POS_X_SCALE) beyond which it is off the stage (85/224)
    STAGE_EDGE = 0.38

    def __init__(self) -> None:
        self._t = 0

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        o = np.asarray(obs, np.float32)[:OBS_DIM]
        self._t += 1
        a = np.full(6, -1.0, np.float32)  # stick x, y, jump, attack, special, shield
        x, y, rel_x = o[_I["self_x"]], o[_I["self_y"]], o[_I["rel_x"]]
        if abs(x) > self.STAGE_EDGE and y <= 0.0:  # off the stage, below its top: recover
            a[0] = -np.sign(x)
            a[1] = 1.0
            a[2] = 1.0 if self._t % 2 else -1.0
            a[4] = 1.0 if self._t % 6 == 0 else -1.0
            return a
        a[0] = float(np.sign(rel_x))
        if abs(rel_x) < self.ATTACK_RANGE:
            if o[_I["closing_vel"]] > self.SHIELD_CLOSING:
                a[5] = 1.0
            else:
                a[3] = 1.0 if self._t % 2 else -1.0
        return a


class FrozenOpponent:
    """A registered member playing from its ``.bpw``: the deterministic mean, clipped —
    or, for a sampled blob (version 3, ``export --sampled``), the mean plus its noise by
    the blob's sampling rule, as ``brawlpit_bot`` would play it (one stream per
    opponent, seeded ``noise_seed``, drawn row by row in the order the env asks).

    The env hands it the observation in the env's own input layout; a member trained
    on layout 1 reads the first 31 values (every layout starts with the 31-value
    observation).  A member whose layout this env does not provide is refused.
    :meth:`from_file` plays a ``.bpw`` that is no league member the same way (``train
    --opponent POLICY.bpw``, ``bench exploit``).
    """

    def __init__(self, member: Member, league_dir: str | Path, env_layout: int,
                 noise_seed: int = 0) -> None:
        self.noise = NoiseStream(noise_seed)
        if member.blob is None:
            raise ValueError(f"member {member.id} has no .bpw blob to play from")
        self.member: Member | None = member
        # read under the league's confined-read rule (a regular file inside the directory)
        self._load(read_confined(league_dir, member.blob, ARTIFACT_MAX_BYTES), member.id,
                   env_layout)
        if self.policy.meta.action_repeat != member.settings.get("action_repeat",
                                                                self.policy.meta.action_repeat):
            warnings.warn(f"member {member.id}: blob and record disagree on the action repeat",
                          stacklevel=2)

    @classmethod
    def from_file(cls, path: str | Path, env_layout: int,
                  action_repeat: int | None = None, noise_seed: int = 0) -> FrozenOpponent:
        """The policy of the ``.bpw`` at ``path`` as an opponent labelled with its file
        name.  Read as a league artifact is (a regular file, bounded in size; a symlink
        given here is resolved first: the path is the user's own).  ``action_repeat``:
        the env's, refused when the blob was trained at another (a frozen policy played
        at a cadence it never learned is not that policy).  ``FileNotFoundError`` for a
        missing file, ``ValueError`` naming the file and what is wrong otherwise."""
        p = Path(path)
        return cls.from_bytes(read_policy_file(p), p.name, env_layout, action_repeat,
                              noise_seed, where=f"policy {p}")

    @classmethod
    def from_bytes(cls, blob: bytes, label: str, env_layout: int,
                   action_repeat: int | None = None, noise_seed: int = 0,
                   where: str = "policy") -> FrozenOpponent:
        """A ``.bpw``'s bytes as an opponent labelled ``label`` (``from_file``'s checks;
        ``where`` names it in the errors)."""
        opp = cls.__new__(cls)
        opp.member = None
        opp.noise = NoiseStream(noise_seed)
        try:
            opp._load(blob, label, env_layout)
        except (ValueError, KeyError) as e:
            raise ValueError(f"{where}: {e}") from None
        got = opp.policy.meta.action_repeat
        if action_repeat is not None and got != action_repeat:
            raise ValueError(f"{where} was trained at action repeat {got}, this env plays "
                             f"at {action_repeat}: pass --action-repeat {got}")
        return opp

    def _load(self, blob: bytes, label: str, env_layout: int) -> None:
        """The numpy policy of ``blob``, checked against the env's input layout."""
        self.label = label
        self.policy = NumpyPolicy(blob)
        layout = self.policy.meta.input_layout
        if layout not in INPUT_LAYOUTS:
            raise ValueError(f"{label} needs policy input layout {layout}")
        need = INPUT_LAYOUTS[layout]
        have = INPUT_NAMES[env_layout]
        if INPUT_NAMES[layout] != have[:need]:
            raise ValueError(f"{label} reads input layout {layout}, which the env's "
                             f"layout {env_layout} does not start with")
        self._n = need

    #: stateless and vectorised: the vec env's fast lane hands it every arena it plays in
    #: as one (k, dim) batch (brawlkit/env/fastlane.py)
    batched = True

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        return self.policy.play(np.asarray(obs, np.float32)[..., :self._n], self.noise)


def read_policy_file(p: Path) -> bytes:
    """A policy file's bytes, read as a league artifact is (a regular file, bounded in
    size; a symlink given here is resolved first: the path is the user's own)."""
    if not p.is_file():
        raise FileNotFoundError(f"policy {p} not found (a .bpw: `python -m brawlkit export "
                                "CKPT.zip -o POLICY.bpw`)")
    real = p.resolve()
    try:
        return read_confined(real.parent, real.name, ARTIFACT_MAX_BYTES)
    except (OSError, ValueError) as e:
        raise ValueError(f"policy {p}: {e}") from None


class MixtureOpponent:
    """A mixture ``.bpw`` (docs/bpw.md, "Mixtures") as an opponent: one component plays
    each match — :meth:`pick` of the match seed where the seed is known (evaluation: the
    component ``brawlpit_bot`` would play), :meth:`draw` from the trainer's generator where
    it is not (training: the same uniform mixture).  Every component carries the
    mixture's label, so its matches are counted as the mixture's."""

    def __init__(self, components: list[FrozenOpponent], label: str) -> None:
        self.components = components
        self.label = label
        for c in components:
            c.label = label

    @classmethod
    def from_bytes(cls, blob: bytes, label: str, env_layout: int,
                   action_repeat: int | None = None, noise_seed: int = 0,
                   where: str = "policy") -> MixtureOpponent:
        """A mixture's bytes as an opponent (each component checked as
        :meth:`FrozenOpponent.from_bytes` checks a blob; ``where`` names it in the errors)."""
        try:
            raws = split_mixture(blob)
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
        return cls([FrozenOpponent.from_bytes(r, label, env_layout, action_repeat,
                                              noise_seed + k, where=f"{where} component {k}")
                    for k, r in enumerate(raws)], label)

    def pick(self, seed: int) -> FrozenOpponent:
        return self.components[mixture_pick(seed, len(self.components))]

    def draw(self, rng: np.random.Generator) -> FrozenOpponent:
        return self.components[int(rng.integers(len(self.components)))]


def match_opponent(opponent: Any, seed: int) -> Any:
    """What plays the match of ``seed`` against ``opponent``: a mixture's component for
    that seed (:meth:`MixtureOpponent.pick`), anything else itself."""
    return opponent.pick(seed) if isinstance(opponent, MixtureOpponent) else opponent


def fixed_opponent(spec: str, env_layout: int, action_repeat: int, noise_seed: int = 0) -> Any:
    """What the env plays for one opponent spec that never changes (``train --opponent``):
    ``"cpu:L"`` itself (the server plays it), ``"baseline"`` the scripted
    :class:`BaselinePolicy`, anything else the path of a ``.bpw`` played as a frozen
    member is (:meth:`FrozenOpponent.from_file`; a sampled one draws from ``noise_seed``),
    a mixture's one component per match (:class:`MixtureOpponent`)."""
    if CpuLevel.is_spec(spec):
        return CpuLevel.parse(spec).spec
    if spec == BASELINE_ID:
        return BaselinePolicy()
    p = Path(spec)
    blob = read_policy_file(p)
    kind = MixtureOpponent if blob[:4] == MIX_MAGIC else FrozenOpponent
    return kind.from_bytes(blob, p.name, env_layout, action_repeat, noise_seed,
                           where=f"policy {p}")
