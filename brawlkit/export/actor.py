"""The policy network, declared once: its shape, its actor as dense layers, its
numpy forward, and what a checkpoint says about how it was trained.

* Shape: an SB3 ``MlpPolicy`` with a ``obs -> 64 tanh -> 64 tanh -> 6`` actor (and
  a 64-64 tanh critic), no VecNormalize — exactly what the ``.bpw`` format
  carries.  :func:`policy_kwargs` is the one place that says so.
* The actor mean (what deterministic play and the native bot run) is computed
  three ways that must agree: :func:`torch_actor_mean` (SB3's own modules),
  :class:`NumpyPolicy` (the blob in numpy) and ``bp_policy_forward`` in C.
* The sampled policy (a version-3 blob: the mean plus Gaussian noise of the std PPO
  trained) draws its noise from :class:`NoiseStream`, the sampling rule of docs/bpw.md
  that ``bp_noise_*`` in C follows draw for draw.
* A checkpoint zip made by brawlkit carries a ``brawlkit`` entry in SB3's saved
  data (:data:`CHECKPOINT_KEY`): action repeat, policy input layout and reward
  preset.  :func:`checkpoint_meta` reads it without loading torch.

numpy-only at import time: torch and stable_baselines3 are imported inside the
functions that need them.
"""

from __future__ import annotations

import json
import math
import sys
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from brawlkit.export.bpw import (
    ACT_NONE,
    ACT_TANH,
    LZ4_FRAME_MAGIC,
    MAGIC,
    SHUFFLE_MAGIC,
    Bpw,
    Layer,
    PolicyMeta,
    load_bpw,
    pack_bpw,
    read_bpw,
)

#: hidden layers of the actor (and the critic), each followed by tanh: the default size
#: (``TrainConfig.hidden`` chooses another; the ``.bpw`` and the C forward take any)
NET_ARCH: tuple[int, ...] = (64, 64)
ACTIVATION = "tanh"
#: key of brawlkit's own entry in an SB3 checkpoint's saved data
CHECKPOINT_KEY = "brawlkit"


def policy_kwargs(log_std_init: float = 0.0,
                  hidden: tuple[int, ...] = NET_ARCH) -> dict[str, Any]:
    """SB3 ``policy_kwargs`` of the network the ``.bpw`` format carries: ``hidden`` tanh
    layers for the actor and, separately, the critic."""
    import torch

    return dict(net_arch=dict(pi=list(hidden), vf=list(hidden)), activation_fn=torch.nn.Tanh,
                log_std_init=log_std_init)


def network_description(hidden: tuple[int, ...] = NET_ARCH) -> dict[str, Any]:
    """The shape as plain data (run metadata)."""
    return {"net_arch": {"pi": list(hidden), "vf": list(hidden)}, "activation": ACTIVATION}


# ----------------------------------------------------------------- SB3 -> layers


def actor_layers(policy: Any) -> list[Layer]:
    """The actor of an SB3 ``ActorCriticPolicy`` as dense layers (mean head last).

    Accepts only what the format can express: a flatten features extractor, a
    ``policy_net`` of Linear/Tanh modules, a Linear ``action_net``.
    """
    import torch
    from stable_baselines3.common.torch_layers import FlattenExtractor

    fx = getattr(policy, "pi_features_extractor", None) or policy.features_extractor
    if not isinstance(fx, FlattenExtractor):
        raise ValueError(f"export: features extractor {type(fx).__name__} is not FlattenExtractor")
    mods = list(policy.mlp_extractor.policy_net) + [policy.action_net]
    layers: list[Layer] = []
    pending: tuple[np.ndarray, np.ndarray] | None = None
    for m in mods:
        if isinstance(m, torch.nn.Linear):
            if pending is not None:
                layers.append(Layer(pending[0], pending[1], ACT_NONE))
            w = m.weight.detach().cpu().to(torch.float32).numpy().copy()
            if m.bias is not None:
                b = m.bias.detach().cpu().to(torch.float32).numpy().copy()
            else:
                b = np.zeros(w.shape[0], np.float32)
            pending = (w, b)
        elif isinstance(m, torch.nn.Tanh):
            if pending is None:
                raise ValueError("export: Tanh without a preceding Linear")
            layers.append(Layer(pending[0], pending[1], ACT_TANH))
            pending = None
        else:
            raise ValueError(f"export: unsupported actor module {type(m).__name__}")
    if pending is not None:
        layers.append(Layer(pending[0], pending[1], ACT_NONE))
    return layers


def torch_actor_mean(policy: Any, obs: np.ndarray) -> np.ndarray:
    """The Gaussian mean of SB3's own actor (what ``predict(deterministic=True)`` clips)."""
    import torch

    with torch.no_grad():
        x = torch.as_tensor(np.asarray(obs, np.float32))
        f = policy.extract_features(x, policy.pi_features_extractor)
        return policy.action_net(policy.mlp_extractor.forward_actor(f)).numpy()


# ----------------------------------------------------------------- checkpoints


def load_sb3_policy(zip_path: str | Path) -> Any:
    """Load the SB3 PPO policy of a checkpoint zip on CPU."""
    return load_checkpoint(zip_path)[1]


def load_checkpoint(zip_path: str | Path) -> tuple[PolicyMeta, Any]:
    """(how the checkpoint's policy was trained, its SB3 PPO policy on CPU), from one read
    of the zip: SB3 restores the ``brawlkit`` entry as a model attribute."""
    checkpoint_meta(zip_path)  # what is not a checkpoint is refused before torch loads
    from stable_baselines3 import PPO

    model = PPO.load(str(zip_path), device="cpu")
    return _meta_of(getattr(model, CHECKPOINT_KEY, None), zip_path), model.policy


def checkpoint_meta(zip_path: str | Path) -> PolicyMeta:
    """How the checkpoint's policy was trained: its ``brawlkit`` entry, read without torch.

    A checkpoint from before brawlkit recorded it (no entry) is read as the
    version-1 defaults (action repeat 4, input layout 1, reward unknown), with a
    note on stderr, so old runs keep working.
    """
    if not Path(zip_path).is_file():
        raise FileNotFoundError(f"checkpoint {zip_path} not found (a checkpoint is a file: "
                                f"{CHECKPOINT_EXAMPLE})")
    if not zipfile.is_zipfile(zip_path):
        raise ValueError(_not_a_checkpoint(zip_path))
    try:
        with zipfile.ZipFile(zip_path) as zf:
            data = json.loads(zf.read("data"))
    except (KeyError, ValueError, zipfile.BadZipFile, zlib.error, EOFError) as e:
        raise ValueError(f"{zip_path} is not a readable SB3 checkpoint (its 'data' entry: "
                         f"{e}); give an intact one, e.g. {CHECKPOINT_EXAMPLE}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{zip_path} is not an SB3 checkpoint (its 'data' entry is not an "
                         f"object); give one such as {CHECKPOINT_EXAMPLE}")
    return _meta_of(data.get(CHECKPOINT_KEY), zip_path)


#: where a user finds a checkpoint, for the messages that ask for one
CHECKPOINT_EXAMPLE = "runs/<role>/<run>/gen_XXXX.zip"


def _not_a_checkpoint(path: str | Path) -> str:
    """Why ``path`` (not a zip) is no checkpoint, and what to give instead: a ``.bpw``
    blob is the usual mix-up (``export`` makes it from a checkpoint, not the reverse)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as e:
        return f"{path} cannot be read: {e}"
    if Path(path).suffix == ".bpw" or head in (MAGIC, SHUFFLE_MAGIC, LZ4_FRAME_MAGIC):
        return (f"{path} is a .bpw blob (an exported actor, for brawlpit_bot and `policy "
                f"serve`), not an SB3 checkpoint: give the checkpoint zip it was exported "
                f"from, e.g. {CHECKPOINT_EXAMPLE}")
    return (f"{path} is not a zip, so not an SB3 checkpoint (corrupt or another file): give "
            f"one such as {CHECKPOINT_EXAMPLE}")


def _meta_of(entry: Any, zip_path: str | Path) -> PolicyMeta:
    """The :class:`PolicyMeta` of a checkpoint's ``brawlkit`` entry (validated)."""
    if not isinstance(entry, dict):
        print(f"note: {zip_path} does not record how it was trained (an older checkpoint); "
              f"assuming {PolicyMeta()}", file=sys.stderr)
        return PolicyMeta()
    meta = PolicyMeta(int(entry["action_repeat"]), int(entry["input_layout"]),
                      str(entry.get("reward", "")))
    meta.validate()
    return meta


# ----------------------------------------------------------------- sampling rule

#: splitmix64's increment and mixing constants (Steele, Lea & Flood 2014), and the
#: double 2*pi the Box-Muller angle uses: one rule, written once per language
SPLITMIX_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
TWO_PI = 2.0 * math.pi


class NoiseStream:
    """Standard normals by the ``.bpw`` sampling rule (docs/bpw.md, "Sampling").

    Why a rule of our own rather than numpy's generator: the sampled policy that ships
    is played by ``brawlpit_bot`` in C, and a test replays the bot's decisions here, so
    both must draw the same numbers.  splitmix64 (a 64-bit counter through a mixer) gives
    uniforms ``u = ((x >> 11) + 0.5) * 2**-53`` in (0, 1); each pair (u1, u2) gives two
    normals by Box-Muller, ``r = sqrt(-2 ln u1)``, ``r cos(2 pi u2)`` and ``r sin(2 pi u2)``
    (float64, then float32).  A decision of ``act_dim`` actions uses ``ceil(act_dim/2)``
    pairs, the last sine dropped when ``act_dim`` is odd; rows draw one after another.
    The counter makes the n-th draw ``mix(seed + n*gamma)``, so a batch is one numpy
    expression, not a Python loop.
    """

    def __init__(self, seed: int = 0) -> None:
        self.state = np.uint64(int(seed) & 0xFFFF_FFFF_FFFF_FFFF)

    def uniforms(self, n: int) -> np.ndarray:
        """The next ``n`` uniforms in (0, 1), float64."""
        x = self.state + SPLITMIX_GAMMA * np.arange(1, n + 1, dtype=np.uint64)
        if n:
            self.state = x[-1]
        x = (x ^ (x >> np.uint64(30))) * _MIX1
        x = (x ^ (x >> np.uint64(27))) * _MIX2
        x = x ^ (x >> np.uint64(31))
        return ((x >> np.uint64(11)).astype(np.float64) + 0.5) * (2.0 ** -53)

    def normals(self, rows: int, dim: int) -> np.ndarray:
        """(rows, dim) standard normals, float32: one decision per row."""
        pairs = (dim + 1) // 2
        u = self.uniforms(2 * rows * pairs).reshape(rows * pairs, 2)
        r = np.sqrt(-2.0 * np.log(u[:, 0]))
        ang = TWO_PI * u[:, 1]
        z = np.stack([r * np.cos(ang), r * np.sin(ang)], axis=1)
        return z.reshape(rows, 2 * pairs)[:, :dim].astype(np.float32)


# ----------------------------------------------------------------- numpy forward


class NumpyPolicy:
    """The actor of a ``.bpw`` blob in numpy: ``policy(obs) -> clipped action``.

    ``source`` is a path, the blob bytes (any encoding) or a parsed :class:`Bpw`.
    ``forward`` returns the Gaussian mean (unclipped); ``act`` / ``__call__`` clip it
    to [-1, 1] (deterministic play).  Both accept (obs_dim,) or (N, obs_dim).
    ``sample`` adds the blob's noise (``noise_std``: a version-3 blob) from a
    :class:`NoiseStream`, then clips: the sampled policy, as ``brawlpit_bot`` plays it.
    ``meta`` says how the policy was trained (action repeat, input layout).
    """

    def __init__(self, source: str | Path | bytes | Bpw):
        if isinstance(source, Bpw):
            self.bpw = source
        elif isinstance(source, bytes | bytearray | memoryview):
            self.bpw = read_bpw(bytes(source))
        else:
            self.bpw = load_bpw(source)
        self.meta = self.bpw.meta
        self.obs_dim = self.bpw.obs_dim
        self.act_dim = self.bpw.act_dim
        self._wt = [np.ascontiguousarray(lay.weight.T) for lay in self.bpw.layers]
        self._b = [lay.bias for lay in self.bpw.layers]
        self._act = [lay.activation for lay in self.bpw.layers]
        self.noise_std = self.bpw.noise_std

    @classmethod
    def from_sb3(cls, policy: Any, meta: PolicyMeta | None = None,
                 sampled: bool = False) -> NumpyPolicy:
        """The exporter's own path: SB3 policy -> blob -> numpy (what the C bot would play).
        ``sampled``: carry the policy's Gaussian std (``export --sampled``)."""
        return cls(pack_bpw(actor_layers(policy), meta,
                            noise_std=policy_std(policy) if sampled else None))

    def forward(self, obs: np.ndarray) -> np.ndarray:
        x = np.asarray(obs, dtype=np.float32)
        if x.shape[-1] != self.obs_dim:
            raise ValueError(f"obs last dim {x.shape[-1]} != obs_dim {self.obs_dim}")
        for wt, b, act in zip(self._wt, self._b, self._act, strict=True):
            x = x @ wt + b
            if act == ACT_TANH:
                x = np.tanh(x)
        return x

    def act(self, obs: np.ndarray) -> np.ndarray:
        return np.clip(self.forward(obs), -1.0, 1.0).astype(np.float32)

    def sample(self, obs: np.ndarray, noise: NoiseStream) -> np.ndarray:
        """The sampled action: ``clip(mean + std * z, -1, 1)`` in float32, ``z`` the next
        normals of ``noise`` (one row per observation, in order)."""
        if self.noise_std is None:
            raise ValueError("this .bpw is the deterministic policy (version 2, no noise "
                             "section): export it with --sampled to play it sampled")
        mu = self.forward(obs)
        z = noise.normals(int(np.prod(mu.shape[:-1], dtype=np.int64)), self.act_dim)
        return np.clip(mu + self.noise_std * z.reshape(mu.shape), -1.0, 1.0).astype(np.float32)

    def play(self, obs: np.ndarray, noise: NoiseStream) -> np.ndarray:
        """The action as the blob says it plays (what ``brawlpit_bot`` sends): sampled from
        ``noise`` for a version-3 blob, the clipped mean otherwise."""
        return self.act(obs) if self.noise_std is None else self.sample(obs, noise)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        return self.act(obs)


def policy_std(policy: Any) -> np.ndarray:
    """The state-independent Gaussian std of an SB3 policy, float32 (``exp(log_std)``)."""
    log_std = policy.log_std.detach().cpu().numpy()
    return np.exp(np.asarray(log_std, np.float64)).astype(np.float32)
