"""``python -m brawlkit policy train``: the text policy — or a Hugging Face language model
(``--hf DIR``, :mod:`brawlkit.policy_server.hf_train`) — learns through the real ``/move``.

The run serves the policy as a real ``/move`` endpoint (FastAPI + uvicorn, in a
thread of this process, on 127.0.0.1), plays its fights with rollout worker
processes against real ``brawlpit_server`` arenas, and updates it between batches
(:mod:`brawlkit.policy_server.trainer` has the recipe).  Every ``eval_every_s``
seconds it plays ``eval_fights`` fights against ``eval_vs`` (``cpu:1``) with the
policy as it plays (sampled), on the same seeds each time, so the curve of
``win_rate`` from the untrained value up is paired.

With ``clone_fights`` > 0 the RL loop starts from a supervised start
(:mod:`brawlkit.policy_server.clone`: the example's scripted player cloned, then DAgger
rounds), evaluated both before it (random weights) and after it (``cloned: true``), so
a run never reports the clone's rise as RL's.  ``cpu_minutes`` bounds a run by the CPU
it used, the budget that means the same on a loaded machine.

Written to ``--out DIR``: ``metrics.jsonl`` (one line per batch and per evaluation),
``policy.pt`` (the newest weights; ``policy_NNNN.pt`` at each evaluation;
``policy_clone.pt`` after a supervised start),
``rollouts/batch_NNNNN.jsonl`` with ``--export`` (one row per move), and
``summary.json`` at the end.  docs/move_training.md documents every flag and file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from brawlkit.common.cli_args import command_parser
from brawlkit.league.curriculum import CpuCurriculum
from brawlkit.policy_server.move_reward import MoveRewardWeights
from brawlkit.policy_server.results import ResultSink
from brawlkit.policy_server.rollouts import FightResult, FightSpec, RolloutRunner, WorkerConfig
from brawlkit.policy_server.text_policy import TextPolicy, TextPolicyConfig
from brawlkit.policy_server.trainer import (
    Batch,
    StratifiedBaseline,
    WriteupCurriculum,
    batch_metrics,
    export_rows,
    fight_rewards,
    signal_filter,
    update,
    write_jsonl,
)


@dataclass
class MoveTrainOptions:
    """Every setting of a run (the CLI's flags, the notebook's parameters)."""

    out: str = "runs/move"
    seed: int = 1
    minutes: float = 30.0
    cpu_minutes: float | None = None
    batches: int | None = None
    fights_per_batch: int = 6
    workers: int = 2
    decision_ticks: int = 8
    reaction_frames: int = 6
    lr: float = 2e-3
    entropy_coef: float = 0.0
    clip: float | None = 0.2
    epochs: int = 2
    minibatch: int = 512
    temperature: float = 1.0
    response: str = "names"
    baseline_decay: float = 0.9
    baseline_start: str = "mean"
    curriculum_k: int = 10
    curriculum_floor: float = 0.05
    eval_vs: str = "cpu:1"
    eval_fights: int = 12
    eval_every_s: float = 300.0
    final_eval_fights: int = 32
    max_ticks: int | None = None
    fight_timeout_s: float = 300.0
    export: bool = False
    #: evaluations play the greedy (deterministic) policy, the final one the sampled beside it
    eval_greedy: bool = False
    league_dir: str | None = None
    registry: str | None = None
    member: str | None = None
    clone_fights: int = 0
    clone_rounds: int = 1
    #: the policy's own fights per DAgger round (None: ``clone_fights``): on a CPU a
    #: policy fight costs a model call per decision where a teacher fight costs none
    dagger_fights: int | None = None
    clone_epochs: int = 8
    clone_lr: float = 1e-2
    clone_minibatch: int = 128
    clone_vs: str = "cpu:1,cpu:2,cpu:3"
    progress: bool = True
    reward: MoveRewardWeights = field(default_factory=MoveRewardWeights)
    #: a Hugging Face causal LM (folder or hub id) trained instead of the text policy
    hf: str | None = None
    lora_rank: int = 0
    kl_coef: float = 0.04
    micro_batch: int = 8
    device: str | None = None
    max_new_tokens: int = 6
    reasks: int = 0
    resume: bool = False
    curriculum: str = "writeup"

    @property
    def member_id(self) -> str:
        if self.member:
            return self.member
        if self.hf:
            return f"hf-{_slug(self.hf)}-s{self.seed}"
        return f"text-policy-s{self.seed}"


#: the time one decision of a --hf model may take (its answer is cut there): generous, so a
#: busy CPU does not turn answers into invalid ones
HF_BUDGET_S = 30.0
#: how long a --hf batch's first prompt waits for the other workers' (HfPolicy.batch_wait_s):
#: a worker asks again about a millisecond after its answer (one env step), so the workers
#: stay in one batch per decision instead of splitting into a big and a small one
HF_BATCH_WAIT_S = 0.003


def _slug(path: str) -> str:
    """A model folder or hub id as a member id's part: ``Qwen/Qwen3-0.6B`` -> ``qwen3-0.6b``;
    a checkpoint folder of a run (``OUT/policy``) by the model it trains, so a resumed run
    plays as the same member."""
    import re

    from brawlkit.policy_server.hf_policy import META_FILE

    meta = Path(path) / META_FILE
    name = (json.loads(meta.read_text()).get("name") if meta.is_file() else None) or \
        Path(path.rstrip("/")).name or "model"
    return re.sub(r"[^a-z0-9.]+", "-", name.lower()).strip("-") or "model"


class ServedPolicy:
    """A chooser served as a real ``/move`` endpoint from a thread of this process."""

    def __init__(self, chooser: Any, member: str | None = None) -> None:
        import uvicorn

        from brawlkit.common.net import listen_tcp
        from brawlkit.policy_server.app import create_app

        sock = listen_tcp("127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        config = uvicorn.Config(create_app(chooser, member=member), log_level="warning",
                                timeout_keep_alive=600, access_log=False, server_header=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.02)

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def _evaluate(runner: RolloutRunner, opts: MoveTrainOptions, n: int, st: _State,
              t0: float, greedy: bool | None = None) -> dict[str, Any]:
    """``n`` fights against ``eval_vs`` on fixed seeds, played by the greedy policy
    (``greedy``, default ``eval_greedy``: the most likely token at each step, the
    deterministic policy) or the sampled one; their metrics line (``decode``)."""
    greedy = opts.eval_greedy if greedy is None else greedy
    specs = [FightSpec(seed=10_000 + i, opponent=opts.eval_vs, max_ticks=opts.max_ticks) for i in range(n)]
    was, st.policy.greedy = st.policy.greedy, greedy
    try:
        results = runner.run(specs, desc=f"eval vs {opts.eval_vs}")
    finally:
        st.policy.greedy = was
    _post(st.sink, opts, results)
    m = batch_metrics(results, fight_rewards([r for r in results if r.ok], opts.reward))
    return {"kind": "eval", "batch": st.batch, "time_s": round(time.monotonic() - t0, 1),
            "cpu_s": _cpu(runner), "decode": "greedy" if greedy else "sampled",
            "vs": opts.eval_vs, **m, "eval_win_rate": m["win_rate"].get(opts.eval_vs, 0.0)}


def _post(sink: ResultSink, opts: MoveTrainOptions, results: list[FightResult]) -> dict[str, Any]:
    """The finished fights' match records, one batch to the league dir and registry: the
    policy fights sampled while it still learns, so its side is ``training`` (kept in the
    log, not rated: docs/ratings.md)."""
    recs = [sink.record(opts.member_id, r.opponent_id, str(r.outcome), r.ticks,
                        seed=r.spec.seed, a_policy="training")
            for r in results if r.ok and opts.max_ticks is None]
    return sink.post(recs) if recs else {}


@dataclass
class _State:
    policy: Any  # a TextPolicy, or an HfPolicy (``--hf``)
    opt: torch.optim.Optimizer
    curriculum: CpuCurriculum
    baseline: StratifiedBaseline
    sink: ResultSink
    batch: int = 0

    @property
    def hf(self) -> bool:
        return not isinstance(self.policy, TextPolicy)

    def parameters(self) -> list[torch.nn.Parameter]:
        return list(self.policy.net.parameters()) if not self.hf else self.policy.trainable_parameters()


#: a checkpoint folder's training state (optimizer, baseline, curriculum, batch): --resume
TRAIN_STATE = "trainer_state.pt"


def _save(st: _State, out: Path, stem: str, meta: dict[str, Any]) -> Path:
    """The policy as ``OUT/STEM.pt`` (the text policy) or the folder ``OUT/STEM`` (a
    Hugging Face model: adapter or full model, tokenizer, and the training state that
    ``--resume`` continues from)."""
    if not st.hf:
        st.policy.save(out / f"{stem}.pt", meta)
        return out / f"{stem}.pt"
    st.policy.save(out / stem, meta)
    torch.save({"opt": st.opt.state_dict(), "baseline": st.baseline.state_dict(),
                "curriculum": st.curriculum.state_dict(), "batch": st.batch}, out / stem / TRAIN_STATE)
    return out / stem


def _resume(st: _State, folder: Path) -> None:
    """Continue a ``--hf`` run from its checkpoint folder's training state."""
    if not (folder / TRAIN_STATE).is_file():
        raise ValueError(f"--resume: {folder} has no {TRAIN_STATE} (a `policy train --hf` checkpoint folder)")
    state = torch.load(folder / TRAIN_STATE, map_location="cpu", weights_only=False)
    st.opt.load_state_dict(state["opt"])
    st.baseline.load_state_dict(state["baseline"])
    st.curriculum.load_state_dict(state["curriculum"])
    st.batch = int(state["batch"])


def _learn(st: _State, opts: MoveTrainOptions, results: list[FightResult], b: int,
           out: Path) -> dict[str, Any]:
    """Rewards, stratified advantages, the signal filter, the update, the export."""
    ok = [r for r in results if r.ok]
    for r in ok:
        st.curriculum.record(r.spec.opponent, str(r.outcome))
    rewards = fight_rewards(ok, opts.reward)
    flat_r = [x for rs in rewards for x in rs]
    strata = [r.spec.difficulty for r, rs in zip(ok, rewards, strict=True) for _ in rs]
    flat_a = iter(st.baseline.advantages(flat_r, strata))
    advantages = [[next(flat_a) for _ in rs] for rs in rewards]
    keep = signal_filter(advantages)
    kept = [(f, a) for f, a, k in zip(ok, advantages, keep, strict=True) if k]
    if st.hf:
        from brawlkit.policy_server import hf_train

        hb = hf_train.HfBatch.build([f for f, _ in kept], [a for _, a in kept])
        stats = hf_train.update(st.policy, st.opt, hb, epochs=opts.epochs, clip=opts.clip,
                                kl_coef=opts.kl_coef, minibatch=opts.minibatch, micro_batch=opts.micro_batch,
                                seed=opts.seed + b) if hb is not None else {}
    else:
        batch = Batch.build(st.policy, [f for f, _ in kept], [a for _, a in kept])
        stats = update(st.policy, st.opt, batch, epochs=opts.epochs, clip=opts.clip,
                       entropy_coef=opts.entropy_coef, minibatch=opts.minibatch,
                       seed=opts.seed + b) if batch is not None else {}
    if opts.export:
        write_jsonl(out / "rollouts" / f"batch_{b:05d}.jsonl", export_rows(ok, rewards, advantages, b))
    sent = _post(st.sink, opts, results)
    return {**batch_metrics(results, rewards), **stats, "dropped_groups": keep.count(False),
            "baseline": dict(st.baseline.values), "unlocked": st.curriculum.max_level,
            "curriculum": st.curriculum.stats(), "sent": sent}


def _log(f: Any, line: dict[str, Any]) -> None:
    f.write(json.dumps(line) + "\n")
    f.flush()


def _done(opts: MoveTrainOptions, b: int, t0: float, runner: RolloutRunner) -> bool:
    """The batch count, the wall-clock minutes, or the CPU minutes (the budget that
    means the same on a loaded machine: ``cpu_minutes``) is spent."""
    if opts.batches is not None and b >= opts.batches:
        return True
    if opts.cpu_minutes is not None and _cpu(runner) >= opts.cpu_minutes * 60:
        return True
    return time.monotonic() - t0 >= opts.minutes * 60


def _clone(st: _State, opts: MoveTrainOptions, runner: RolloutRunner, log: Any, t0: float) -> None:
    """The supervised start (:mod:`brawlkit.policy_server.clone`): the scripted teacher,
    served as a real endpoint, plays ``clone_fights`` fights through the same workers;
    the policy is fitted to its moves; then ``clone_rounds`` DAgger rounds (the policy
    plays ``dagger_fights`` fights, the teacher labels the states it reached, fit again).  One ``kind: clone``
    metrics line per round, with ``cpu_s`` (the budget counts all of it)."""
    from brawlkit.policy_server import clone

    pairs_fn: Any = clone.clone_pairs
    fit_fn: Any = clone.fit
    if st.hf:  # the same fights and labels; the pairs are chat prompts and answer ids
        from brawlkit.policy_server import hf_train

        pairs_fn = hf_train.clone_pairs

        def fit_fn(policy: Any, opt: Any, p: Any, r: Any, *, epochs: int, minibatch: int, seed: int) -> Any:
            return hf_train.fit(policy, opt, p, r, epochs=epochs, minibatch=minibatch,
                                micro_batch=opts.micro_batch, seed=seed)

    teacher = clone.ScriptedTeacher(seed=opts.seed, decision_ticks=opts.decision_ticks)
    served = ServedPolicy(teacher, "scripted-teacher")
    levels = [v.strip() for v in opts.clone_vs.split(",") if v.strip()]
    rng = np.random.default_rng(opts.seed + 7919)
    opt = torch.optim.Adam(st.parameters(), lr=opts.clone_lr)
    prompts: list[list[int]] = []
    responses: list[list[int]] = []
    try:
        for rnd in range(1 + opts.clone_rounds):
            specs = [FightSpec(seed=int(rng.integers(2**31)), opponent=levels[i % len(levels)],
                               endpoint=served.url if rnd == 0 else None, max_ticks=opts.max_ticks)
                     for i in range(opts.clone_fights if rnd == 0 or opts.dagger_fights is None
                                    else opts.dagger_fights)]
            results = runner.run(specs, desc=f"clone round {rnd}")
            ok = [r for r in results if r.ok]
            p, r = pairs_fn(st.policy, ok, teacher if rnd else None)
            prompts += p
            responses += r
            stats = fit_fn(st.policy, opt, prompts, responses, epochs=opts.clone_epochs,
                           minibatch=opts.clone_minibatch, seed=opts.seed + rnd)
            _log(log, {"kind": "clone", "round": rnd, "player": "teacher" if rnd == 0 else "policy",
                       "time_s": round(time.monotonic() - t0, 1), "cpu_s": _cpu(runner),
                       **batch_metrics(results, [[0.0] * len(f.steps) for f in ok]), **stats})
    finally:
        served.close()


def train(opts: MoveTrainOptions) -> dict[str, Any]:
    """The run; returns its summary (also written to ``OUT/summary.json``)."""
    from tqdm.auto import tqdm

    torch.set_num_threads(1)
    out = Path(opts.out)
    (out / "rollouts").mkdir(parents=True, exist_ok=True)
    chooser: Any
    if opts.hf:
        from brawlkit.policy_server.hf_policy import HfPolicy
        from brawlkit.policy_server.llm import LlmChooser

        # each rollout worker waits on one answer at a time: a batch of up to ``workers``
        # prompts is every worker's decision in one forward
        policy: Any = HfPolicy.load(opts.hf, device=opts.device, lora_rank=opts.lora_rank,
                                    temperature=opts.temperature, max_new_tokens=opts.max_new_tokens,
                                    seed=opts.seed, max_batch=opts.workers, batch_wait_s=HF_BATCH_WAIT_S)
        # the write-up's rule: an invalid answer is played (as no_move) and penalised; a
        # re-ask (--reasks) would hide it from the gradient
        chooser = LlmChooser(policy, budget_s=HF_BUDGET_S, decision_ticks=opts.decision_ticks,
                             reasks=opts.reasks)
    else:
        policy = TextPolicy(TextPolicyConfig(temperature=opts.temperature, response=opts.response),
                            seed=opts.seed, decision_ticks=opts.decision_ticks)
        chooser = policy
    curriculum = (WriteupCurriculum if opts.curriculum == "writeup" else CpuCurriculum)(
        k=opts.curriculum_k, floor=opts.curriculum_floor, seed=opts.seed)
    st = _State(policy, torch.optim.Adam([p for p in (policy.net.parameters() if not opts.hf
                                                       else policy.trainable_parameters())], lr=opts.lr),
                curriculum, StratifiedBaseline(opts.baseline_decay, opts.baseline_start),
                ResultSink(opts.league_dir, opts.registry))
    if opts.resume:
        if not opts.hf:
            raise ValueError("--resume continues a --hf run from its checkpoint folder (--hf RUN/policy)")
        _resume(st, Path(opts.hf))
    served = ServedPolicy(chooser, opts.member_id)
    runner = RolloutRunner(WorkerConfig(served.url, decision_ticks=opts.decision_ticks,
                                        reaction_frames=opts.reaction_frames,
                                        call_timeout_s=HF_BUDGET_S + 5.0 if opts.hf else 5.0,
                                        fight_timeout_s=opts.fight_timeout_s),
                           workers=opts.workers, progress=opts.progress)
    rng = np.random.default_rng(opts.seed + st.batch)
    t0 = time.monotonic()
    evals: list[dict[str, Any]] = []
    sampled: dict[str, Any] | None = None  # the final sampled evaluation beside a greedy one
    bar = tqdm(total=opts.batches or round(opts.minutes * 60), disable=not opts.progress,
               desc="move training", unit="batch" if opts.batches else "s")
    b = 0  # this run's batches; st.batch counts them over resumed runs too
    with open(out / "metrics.jsonl", "a" if opts.resume else "w") as log:
        try:
            evals.append(_evaluate(runner, opts, opts.eval_fights, st, t0))
            _log(log, evals[-1])
            if opts.clone_fights:
                _clone(st, opts, runner, log, t0)
                if st.hf:  # the KL term holds RL near the cloned model, not the pretrained one
                    st.policy.set_reference()
                evals.append({**_evaluate(runner, opts, opts.eval_fights, st, t0), "cloned": True})
                _log(log, evals[-1])
                _save(st, out, "policy_clone", {"batch": st.batch, "cloned": True})
            last_eval = time.monotonic()
            while not _done(opts, b, t0, runner):
                specs = [FightSpec(seed=int(rng.integers(2**31)), opponent=st.curriculum.sample(),
                                   max_ticks=opts.max_ticks) for _ in range(opts.fights_per_batch)]
                line = _learn(st, opts, runner.run(specs, desc=f"batch {st.batch}"), st.batch, out)
                _log(log, {"kind": "batch", "batch": st.batch, "time_s": round(time.monotonic() - t0, 1),
                           "cpu_s": _cpu(runner), **line})
                b += 1
                st.batch += 1
                bar.update(1 if opts.batches else round(time.monotonic() - t0) - bar.n)
                bar.set_postfix(level=line["unlocked"], invalid=round(line["invalid_rate"] or 0, 3),
                                win=json.dumps(line["win_rate"]))
                if time.monotonic() - last_eval >= opts.eval_every_s:
                    evals.append(_evaluate(runner, opts, opts.eval_fights, st, t0))
                    _log(log, evals[-1])
                    _save(st, out, f"policy_{st.batch:04d}", {"batch": st.batch})
                    last_eval = time.monotonic()
            if opts.eval_greedy:  # the sampled policy beside the deterministic one
                sampled = _evaluate(runner, opts, opts.final_eval_fights, st, t0, greedy=False)
                _log(log, {**sampled, "final": True})
            evals.append(_evaluate(runner, opts, opts.final_eval_fights, st, t0))
            _log(log, {**evals[-1], "final": True})
            _save(st, out, "policy", {"batch": st.batch, "options": _jsonable(opts)})
        finally:
            bar.close()
            runner.close()
            served.close()
            st.sink.close()
    return _summary(out, opts, evals, b, t0, st, runner, sampled)


def _cpu(runner: RolloutRunner) -> float:
    """CPU seconds of the whole run so far: this process (trainer and endpoint), the
    workers and their servers."""
    t = os.times()
    return round(t.user + t.system + runner.cpu_seconds(), 1)


def _jsonable(opts: MoveTrainOptions) -> dict[str, Any]:
    return json.loads(json.dumps(asdict(opts), default=str))


def _summary(out: Path, opts: MoveTrainOptions, evals: list[dict[str, Any]], batches: int, t0: float,
             st: _State, runner: RolloutRunner, sampled: dict[str, Any] | None = None) -> dict[str, Any]:
    first_07 = next((e for e in evals if e["eval_win_rate"] >= 0.7), None)
    summary = {"out": str(out), "seed": opts.seed, "member": opts.member_id, "batches": batches,
               "minutes": round((time.monotonic() - t0) / 60, 2),
               "cpu_minutes": round(evals[-1]["cpu_s"] / 60, 2),
               "untrained_win_rate": evals[0]["eval_win_rate"],
               "cloned_win_rate": next((e["eval_win_rate"] for e in evals if e.get("cloned")), None),
               "final_win_rate": evals[-1]["eval_win_rate"], "eval_vs": opts.eval_vs,
               "eval_decode": evals[-1]["decode"],
               "final_sampled_win_rate": sampled["eval_win_rate"] if sampled else evals[-1]["eval_win_rate"],
               "best_win_rate": max(e["eval_win_rate"] for e in evals),
               "first_at_0.7": first_07 and {k: first_07[k] for k in ("batch", "time_s", "cpu_s")},
               "max_level_unlocked": st.curriculum.max_level,
               "final_invalid_rate": evals[-1]["invalid_rate"],
               "final_spam_fraction": evals[-1]["spam_fraction"], "voids": runner.voids,
               "workers_replaced": runner.replaced, "sent": st.sink.counts,
               "batches_total": st.batch, **_call_totals(out / "metrics.jsonl"),
               "options": _jsonable(opts)}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def _call_totals(metrics: Path) -> dict[str, int]:
    """Failed calls and model errors over every line of the run's metrics (the summary
    reports them: an endpoint's or its model's failures are counted, never dropped)."""
    tot = {"failed_calls": 0, "model_errors": 0}
    for line in metrics.read_text().splitlines():
        rec = json.loads(line)
        for k in tot:
            tot[k] += int(rec.get(k) or 0)
    return tot


def reward_weights(spec: str) -> MoveRewardWeights:
    """``"damage_weight=1,invalid_penalty=0.2"`` -> the weights with those fields changed."""
    fields = MoveRewardWeights().to_json()
    kw: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        key, eq, value = part.partition("=")
        if not eq or key not in fields:
            raise ValueError(f"{part!r}: a field=value of {', '.join(fields)}")
        kw[key] = float(value)
    return MoveRewardWeights(**kw)


#: each numeric flag of ``policy train``: its type and what it sets (docs/move_training.md
#: has the why)
NUMERIC_FLAGS: dict[str, tuple[type, str]] = {
    "seed": (int, "seeds the policy, the fights and the curriculum"),
    "batches": (int, "stop after this many RL batches (default: when --minutes are spent)"),
    "fights_per_batch": (int, "fights per RL batch (one update each)"),
    "workers": (int, "rollout worker processes, each with its own game server"),
    "decision_ticks": (int, "ticks between the policy's decisions (8 = 7.5 decisions per second)"),
    "reaction_frames": (int, "the fixed human reaction added to each move's latency, in frames"),
    "epochs": (int, "passes over a batch per update"),
    "minibatch": (int, "moves per optimizer step"),
    "curriculum_k": (int, "recent fights per CPU level the curriculum reads"),
    "eval_fights": (int, "fights of each periodic evaluation"),
    "final_eval_fights": (int, "fights of the final evaluation (fresh seeds)"),
    "max_ticks": (int, "cut each fight after this many ticks (smoke runs)"),
    "clone_fights": (int, "the supervised start: teacher fights to clone first (0 = none)"),
    "clone_rounds": (int, "DAgger rounds of the supervised start"),
    "dagger_fights": (int, "the policy's own fights per DAgger round (None: as many as --clone-fights)"),
    "clone_epochs": (int, "epochs of each supervised fit"),
    "clone_minibatch": (int, "pairs per optimizer step of the supervised fit"),
    "lora_rank": (int, "with --hf: LoRA rank (0 = train every weight)"),
    "micro_batch": (int, "with --hf: moves per forward/backward (gradients accumulate to a minibatch)"),
    "max_new_tokens": (int, "with --hf: answer length cap in tokens"),
    "reasks": (int, "re-asks after an answer naming no available move (training: 0, the write-up's rule)"),
    "minutes": (float, "wall-clock budget of the whole run, the supervised start included"),
    "lr": (float, "learning rate of the RL update"),
    "clone_lr": (float, "learning rate of the supervised start"),
    "entropy_coef": (float, "entropy bonus of the text policy's update"),
    "clip": (float, "PPO clip range of the ratio (0 = plain REINFORCE)"),
    "temperature": (float, "sampling temperature while training"),
    "baseline_decay": (float, "decay of the stratified moving-average baseline"),
    "curriculum_floor": (float, "least weight of an unlocked CPU level in the draw"),
    "eval_every_s": (float, "seconds between periodic evaluations"),
    "fight_timeout_s": (float, "a fight running longer is void"),
    "kl_coef": (float, "with --hf: weight of the KL term toward the reference model"),
}


def _parser() -> argparse.ArgumentParser:
    d = MoveTrainOptions()
    ap = command_parser(
        "policy train",
        "Train the small text policy (or, with --hf, a Hugging Face language model) through "
        "the real /move endpoint: rollout worker "
        "processes, real brawlpit_server arenas, the per-move backward reward, the p(1-p) CPU "
        "curriculum and a stratified moving-average baseline (docs/move_training.md).")
    ap.add_argument("--out", default=d.out, help=f"run directory (default {d.out})")
    for name, (kind, text) in NUMERIC_FLAGS.items():
        ap.add_argument("--" + name.replace("_", "-"), type=kind, default=getattr(d, name),
                        help=f"{text} (default {getattr(d, name)})")
    ap.add_argument("--baseline-start", choices=("zero", "mean"), default=d.baseline_start,
                    help="an unseen difficulty's baseline: 0 (the write-up) or its first batch's mean "
                         f"(default {d.baseline_start})")
    ap.add_argument("--response", choices=("names", "pieces"), default=d.response,
                    help="the text policy's response vocabulary: one move-name token, or the name "
                         f"spelled in pieces (default {d.response}; docs/move_training.md)")
    ap.add_argument("--cpu-minutes", type=float, default=None,
                    help="stop once the run used this many CPU minutes (trainer, endpoint, workers, "
                         "servers; the budget that means the same on a loaded machine)")
    ap.add_argument("--clone-vs", default=d.clone_vs,
                    help=f"opponents of the clone rounds' fights, cycled (default {d.clone_vs})")
    ap.add_argument("--eval-vs", default=d.eval_vs, help=f"opponent of the evaluations ({d.eval_vs})")
    ap.add_argument("--reward", default="", metavar="FIELD=VALUE,...",
                    help="override the per-move reward's weights (MoveRewardWeights: half_life_frames, "
                         "damage_weight, win_bonus, invalid_penalty, health_max), e.g. damage_weight=1")
    ap.add_argument("--export", action="store_true", help="write rollouts/batch_NNNNN.jsonl (one row per move)")
    ap.add_argument("--eval-greedy", action="store_true",
                    help="evaluations play the greedy policy (the most likely token at each step: the "
                         "deterministic policy, what a served model at --temperature 0 plays); the final "
                         "evaluation plays the sampled policy too, reported beside it")
    ap.add_argument("--league-dir", default=None, help="record every finished fight in this league directory")
    ap.add_argument("--registry", default=None, help="post every finished fight to this registry (URL)")
    ap.add_argument("--member", default=None, help="the policy's id in the match log (text-policy-sSEED)")
    ap.add_argument("--hf", default=None, metavar="DIR",
                    help="train a Hugging Face causal LM (a local folder or hub id with a chat template) "
                         "instead of the text policy: clipped policy gradient over its completion tokens "
                         "with --kl-coef to the frozen reference; needs the llm extra")
    ap.add_argument("--device", default=None, help="with --hf: torch device (default cuda if present, else cpu)")
    ap.add_argument("--resume", action="store_true",
                    help="with --hf RUN/policy: continue that checkpoint's run (optimizer, baseline, "
                         "curriculum, batch count)")
    ap.add_argument("--curriculum", choices=("writeup", "ratchet"), default=d.curriculum,
                    help="writeup: the levels are recomputed at every draw, so a level re-locks when its "
                         "recent win rate falls below 0.5; ratchet: the PPO runs' CpuCurriculum, which only "
                         f"unlocks (default {d.curriculum})")
    ap.add_argument("--no-progress", action="store_true", help="no tqdm bars")
    ap.add_argument("--json", action="store_true", help="print the summary as one JSON line")
    return ap


def _hf_problem(hf: str | None, resume: bool) -> str | None:
    """Why ``--hf`` / ``--resume`` cannot work, in one line (None: they can)."""
    if resume and not hf:
        return "--resume continues a --hf run: pass --hf RUN/policy (a checkpoint folder of `policy train --hf`)"
    if hf is None:
        return None
    p = Path(hf)
    hub_id = hf.count("/") == 1 and not hf.startswith((".", "/", "~"))
    if not p.exists() and not hub_id:
        return f"--hf {hf}: no such folder (a model folder, e.g. one `python -m brawlkit.policy_server.tiny_lm DIR` " \
               "wrote, or a hub id like Qwen/Qwen3-0.6B)"
    if p.is_dir() and not (p / "config.json").is_file() and not (p / "adapter_config.json").is_file():
        return f"--hf {hf}: the folder has no config.json (not a Hugging Face model)"
    if resume and not (p / TRAIN_STATE).is_file():
        return f"--resume: {hf} has no {TRAIN_STATE} (resume from a `policy train --hf` checkpoint folder, OUT/policy)"
    try:
        import transformers  # noqa: F401
    except ImportError:
        return "--hf needs transformers: pip install -e '.[llm]'"
    return None


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    kw = {k: v for k, v in vars(args).items() if k not in ("no_progress", "json", "reward")}
    try:
        reward = reward_weights(args.reward)
    except ValueError as e:
        _parser().error(f"--reward: {e}")
    if problem := _hf_problem(args.hf, args.resume):
        _parser().error(problem)
    opts = MoveTrainOptions(**kw, progress=not args.no_progress, reward=reward)
    summary = train(opts)
    print(json.dumps(summary) if args.json else
          f"untrained {summary['untrained_win_rate']:.2f} -> final {summary['final_win_rate']:.2f} "
          f"vs {opts.eval_vs}; max level {summary['max_level_unlocked']}; {summary['batches']} batches "
          f"in {summary['minutes']} min", file=sys.stdout)
    return 0
