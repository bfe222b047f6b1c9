"""Run directories and checkpoints: where a run lives, what each generation leaves.

A run directory ``runs/<role>/<timestamp>-s<seed>/`` holds, per generation,
``gen_XXXX.zip`` (the SB3 checkpoint) and ``gen_XXXX.json`` (its metadata:
role, generation, parent, steps, the whole :class:`TrainConfig`, the reward's
weights, the sampler's state, the evaluation), plus the progress CSV and
TensorBoard logs.  The zip itself also carries how its policy was trained
(action repeat, input layout, reward preset: :data:`brawlkit.export.actor.CHECKPOINT_KEY`),
so export and eval need nothing beside it.  Both files are written
atomically, the JSON last: a generation counts only once both exist.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from brawlkit.common.io import atomic_write_json
from brawlkit.export.actor import CHECKPOINT_KEY
from brawlkit.export.bpw import PolicyMeta
from brawlkit.league.records import MemberId
from brawlkit.registry.client import RegistryClient, RegistryError
from brawlkit.training.config import DEFAULT_RUNS_ROOT


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def generation_paths(run_dir: Path, gen: int) -> tuple[Path, Path]:
    """(zip, json) of generation ``gen``."""
    return run_dir / f"gen_{gen:04d}.zip", run_dir / f"gen_{gen:04d}.json"


def list_checkpoints(run_dir: str | Path) -> list[tuple[int, Path]]:
    """(generation, json path) of every finished generation in ``run_dir``, oldest first."""
    out = []
    for p in Path(run_dir).glob("gen_*.json"):
        try:
            gen = int(p.stem.split("_")[1])
        except (IndexError, ValueError):
            continue
        if p.with_suffix(".zip").is_file():
            out.append((gen, p))
    return sorted(out)


def find_resume_dir(role: str, runs_root: str | Path = DEFAULT_RUNS_ROOT) -> Path | None:
    """The run dir of ``role`` holding the newest checkpoint, or None."""
    best: tuple[float, Path] | None = None
    root = Path(runs_root) / role
    if not root.is_dir():
        return None
    for d in root.iterdir():
        ck = list_checkpoints(d) if d.is_dir() else []
        if ck:
            mt = ck[-1][1].stat().st_mtime
            if best is None or mt > best[0]:
                best = (mt, d)
    return best[1] if best else None


def new_run_dir(role: str, seed: int, runs_root: str | Path = DEFAULT_RUNS_ROOT) -> Path:
    """A fresh ``runs/<role>/<timestamp>-s<seed>`` (suffixed if it exists)."""
    base = Path(runs_root) / role / f"{time.strftime('%Y%m%d-%H%M%S')}-s{seed}"
    d, i = base, 1
    while d.exists():
        i += 1
        d = base.with_name(f"{base.name}-{i}")
    return d


def newest_metadata(run_dir: Path) -> dict[str, Any]:
    """The metadata JSON of the newest generation of ``run_dir``."""
    ck = list_checkpoints(run_dir)
    if not ck:
        raise FileNotFoundError(f"no checkpoint in {run_dir}")
    data: dict[str, Any] = json.loads(ck[-1][1].read_text())
    return data


def stamp_model(model: Any, meta: PolicyMeta) -> None:
    """Record how the model's policy is trained inside the model, so SB3 saves it in the zip."""
    setattr(model, CHECKPOINT_KEY, {"action_repeat": meta.action_repeat,
                                    "input_layout": meta.input_layout, "reward": meta.reward})


def update_best(run_dir: Path, gen: int, zip_path: Path, score: float) -> Path:
    """Keep ``best.json`` naming the generation with the highest selection score (ties:
    the newer one); returns the best checkpoint's path.  Export and the league take
    this one: chosen by how the deterministic policy, the one that ships, plays."""
    best_path = run_dir / "best.json"
    try:
        best = json.loads(best_path.read_text())
        if float(best["score"]) > score and (run_dir / best["checkpoint"]).is_file():
            return run_dir / str(best["checkpoint"])
    except (OSError, ValueError, KeyError, TypeError):
        pass  # no (readable) best yet: this generation is it
    atomic_write_json(best_path, {"generation": gen, "checkpoint": zip_path.name, "score": score,
                                  "criterion": "95 % Wilson lower bound of the deterministic "
                                               "policy's wins over every evaluated match"})
    return zip_path


def save_generation(model: Any, run_dir: Path, gen: int, metadata: dict[str, Any]) -> Path:
    """Write ``gen_XXXX.zip`` (atomically) then its metadata JSON; returns the zip path."""
    zip_path, json_path = generation_paths(run_dir, gen)
    tmp = zip_path.with_name(zip_path.stem + ".tmp.zip")
    model.save(str(tmp))
    tmp.replace(zip_path)
    atomic_write_json(json_path, {**metadata, "generation": gen, "checkpoint": zip_path.name})
    return zip_path


def fetch_resume_checkpoint(client: RegistryClient, role: str,
                            runs_root: str | Path) -> Path | None:
    """Put the role's newest registry checkpoint where ``train --resume`` looks for it:
    ``<runs_root>/<role>/<run>/gen_XXXX.zip`` + ``.json``, the run named as in the
    member id (:class:`~brawlkit.league.records.MemberId`) so the next generations
    continue its ids.  None (and nothing written) when the registry has no checkpoint
    of the role."""
    record = client.newest(role)
    if record is None:
        return None
    gen = int(record["generation"])
    try:
        mid = MemberId.parse(str(record["id"]))
    except ValueError as e:
        raise RegistryError(f"registry checkpoint: {e}: cannot resume it as a run of {role}") \
            from None
    if mid.role != role or mid.generation != gen:
        raise RegistryError(f"registry checkpoint {record['id']!r} is not named "
                            f"{role}-<run>-g{gen:04d}: cannot resume it as a run of {role}")
    run_dir = Path(runs_root) / role / mid.run
    run_dir.mkdir(parents=True, exist_ok=True)
    zip_path, json_path = generation_paths(run_dir, gen)
    tmp = zip_path.with_name(f".{zip_path.name}.part")
    tmp.write_bytes(client.download_checkpoint(record))  # sha256-verified
    tmp.replace(zip_path)
    settings = dict(record.get("settings") or {})
    atomic_write_json(json_path, {
        "role": role, "generation": gen, "checkpoint": zip_path.name, "member": str(mid),
        "parent": record.get("parent"), "config": {k: v for k, v in settings.items()
                                                   if k != "stats"},
        "sampler": None, "resumed_from_registry": client.url, "created": record.get("created")})
    return zip_path
