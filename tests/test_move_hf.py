"""A Hugging Face language model through ``/move`` (docs/move_training.md, "A Hugging Face
model"): a tiny Qwen2 model and tokenizer this test builds from the project's own text
(no download) plays through ``policy serve --hf``, its recorded logprobs equal a
recomputation, ``policy train --hf`` trains it (supervised start, one RL batch with the
KL term, LoRA), its checkpoint reloads and a run resumes; a remote model's token ids
and errors are recorded, and the exported rows load into TRL's batch shape.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import ROOT, Listening, last_json, run_cli

from brawlkit.policy_server.hf_train import HfBatch, policy_loss, trl_batch
from brawlkit.policy_server.llm import SYSTEM_PROMPT, ChatClient, LlmChooser
from brawlkit.policy_server.moves import NAMES
from brawlkit.policy_server.prompt import render_state

FAKE_CHAT = ROOT / "tests" / "fake_chat_server.py"
sys.path.insert(0, str(ROOT / "tests"))
from fake_chat_server import fake_prompt_ids  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny chat model, built and saved by the package's own builder."""
    pytest.importorskip("transformers", reason="the llm extra (make test installs it)")
    pytest.importorskip("peft", reason="the llm extra (make test installs it)")
    from brawlkit.policy_server.tiny_lm import build_tiny_lm

    torch.set_num_threads(1)
    return build_tiny_lm(tmp_path_factory.mktemp("tiny") / "tiny-lm", seed=0)


def _template_ids(tok: Any, messages: list[dict[str, str]]) -> list[int]:
    out = tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
    return list(out if isinstance(out, list) else out["input_ids"])


def test_tiny_model_renders_the_messages_it_sees_and_its_logprobs_recompute(tiny: Path) -> None:
    from brawlkit.policy_server.hf_policy import HfPolicy
    from brawlkit.policy_server.tiny_lm import _random_request

    pol = HfPolicy.load(str(tiny), max_new_tokens=6, seed=1)
    chooser = LlmChooser(pol, budget_s=60, reasks=1)
    rng = random.Random(0)
    reqs = [_random_request(rng) for _ in range(6)]
    got = [chooser.answer(r) for r in reqs]
    for g, r in zip(got, reqs, strict=True):
        msgs = g["messages"]
        assert msgs[0] == {"role": "system", "content": SYSTEM_PROMPT}
        assert msgs[1]["role"] == "user" and msgs[1]["content"].startswith(render_state(r))
        # the prompt ids ARE the chat template over exactly these messages
        assert g["prompt_ids"] == _template_ids(pol.tokenizer, msgs)
        text = pol.tokenizer.decode(g["prompt_ids"])
        assert text.endswith("<|im_start|>assistant\n") and text.count("<|im_start|>") == len(msgs) + 1
        assert all(m["content"] in text for m in msgs)
        assert len(g["tokens"]) == len(g["token_logprobs"]) >= 1 and g["logprob"] == pytest.approx(
            sum(g["token_logprobs"]))
    # an untrained model rarely names a move: re-asked, the prompt holds all four messages
    reasked = [g for g in got if g["asks"] == 2]
    assert reasked and all(len(g["messages"]) == 4 and g["messages"][2]["role"] == "assistant" for g in reasked)
    lp, mask = pol.logprobs([g["prompt_ids"] for g in got], [g["tokens"] for g in got])
    for i, g in enumerate(got):
        n = len(g["tokens"])
        assert mask[i].sum() == n
        assert lp[i, :n].tolist() == pytest.approx(g["token_logprobs"], abs=1e-4)
    ref, _ = pol.logprobs([g["prompt_ids"] for g in got], [g["tokens"] for g in got], reference=True)
    assert torch.allclose(ref, lp.detach(), atol=1e-6)  # the frozen copy: the same model, untrained
    # a supervised target is the move written as the model's answer, ended as a turn ends
    for name in NAMES:
        ids = pol.completion_ids(name)
        assert ids[-1] in pol.stop_ids and pol.tokenizer.decode(ids[:-1]) == name


def test_batched_sampling_records_what_a_recomputation_gives(tiny: Path) -> None:
    """Concurrent answers are sampled in one left-padded batch (the shared system prompt
    computed once): each keeps its own ids and logprobs, equal to a recomputation of that
    answer alone; the shared-prefix forward gives what full rows give, gradients too."""
    import threading

    from brawlkit.policy_server.hf_policy import HfPolicy
    from brawlkit.policy_server.llm import build_messages
    from brawlkit.policy_server.tiny_lm import _random_request

    pol = HfPolicy.load(str(tiny), max_new_tokens=6, seed=3, max_batch=4, batch_wait_s=0.5)
    rng = random.Random(5)
    reqs = [_random_request(rng) for _ in range(8)]
    msgs = [build_messages(r, r.available_moves()) for r in reqs]
    prompts = [pol.render(m) for m in msgs]
    assert len({len(p) for p in prompts}) > 1 and pol.shared_prefix(prompts) >= 100  # padded, a long shared prefix
    batches: list[int] = []
    real = pol.sample_batch

    def counted(ps: list[list[int]], deadlines: Any = None) -> Any:
        batches.append(len(ps))
        return real(ps, deadlines)

    pol.sample_batch = counted  # type: ignore[method-assign]
    replies: list[Any] = [None] * len(msgs)

    def ask(i: int) -> None:
        replies[i] = pol.ask(msgs[i], 60)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(msgs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sum(batches) == len(msgs) and max(batches) == 4 and len(batches) < len(msgs)  # batched, <= max_batch
    for r, p in zip(replies, prompts, strict=True):
        assert r.prompt_ids == p and 1 <= len(r.tokens) == len(r.token_logprobs) <= 6
        alone, _ = pol.logprobs([p], [r.tokens])  # one row: no padding, no shared prefix
        assert alone[0].tolist() == pytest.approx(r.token_logprobs, abs=1e-4)
    # the batch's recomputation (shared prefix, left padding) gives the same, gradients too
    comps = [r.tokens for r in replies]
    together, mask = pol.logprobs(prompts, comps)
    together.sum().backward()
    g_batch = [q.grad.clone() for q in pol.trainable_parameters()]  # type: ignore[union-attr]
    pol.lm.zero_grad()
    for i, (p, c) in enumerate(zip(prompts, comps, strict=True)):
        lp, _ = pol.logprobs([p], [c])
        assert lp[0].tolist() == pytest.approx(together[i, :len(c)].tolist(), abs=1e-4)
        lp.sum().backward()
    for gb, q in zip(g_batch, pol.trainable_parameters(), strict=True):
        assert torch.allclose(gb, q.grad, atol=1e-4)  # type: ignore[arg-type]
    # the deadline cuts an answer at its first token; max_new_tokens caps the rest
    cut = real(prompts[:3], [0.0, None, None])
    assert len(cut[0][0]) == 1 and all(1 <= len(ids) <= 6 for ids, _ in cut)
    # greedy (the deterministic policy): the most likely token at each step, the same every time
    pol.greedy = True
    first, again = real(prompts[:3]), real(prompts[:3])
    assert [ids for ids, _ in first] == [ids for ids, _ in again]
    with torch.no_grad():
        for p, (ids, lps) in zip(prompts[:3], first, strict=True):
            assert ids[0] == int(pol.lm(input_ids=torch.tensor([p])).logits[0, -1].argmax())
            assert pol.logprobs([p], [ids])[0][0].tolist() == pytest.approx(lps, abs=1e-4)
    served = HfPolicy.load(str(tiny), temperature=0, max_new_tokens=6)  # policy serve --hf --temperature 0
    assert served.greedy and served.temperature == 1.0
    assert [ids for ids, _ in served.sample_batch(prompts[:3])] == [ids for ids, _ in first]


def test_loss_is_trls_grpo_and_micro_batches_change_nothing(tiny: Path) -> None:
    from brawlkit.policy_server import hf_train
    from brawlkit.policy_server.hf_policy import HfPolicy
    from brawlkit.policy_server.tiny_lm import _random_request

    # TRL's GRPOTrainer._compute_loss (loss_type "dapo"), transcribed: the same numbers
    g = torch.Generator().manual_seed(0)
    logp, old, ref = (torch.randn(3, 4, generator=g) * 0.3 - 2 for _ in range(3))
    adv = torch.tensor([0.5, -1.0, 0.2])
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]])
    coef_1 = torch.exp(logp - old)
    coef_2 = torch.clamp(coef_1, 1 - 0.2, 1 + 0.2)
    per_token = -torch.min(coef_1 * adv.unsqueeze(1), coef_2 * adv.unsqueeze(1))
    per_token = per_token + 0.04 * (torch.exp(ref - logp) - (ref - logp) - 1)
    trl = (per_token * mask).sum() / mask.sum().clamp(min=1.0)
    ours, stats = policy_loss(logp, old, ref, adv, mask, clip=0.2, kl_coef=0.04, n_tokens=int(mask.sum()))
    assert float(ours) == pytest.approx(float(trl), rel=1e-6) and stats["kl"] > 0

    # one optimizer step over 6 moves: in micro-batches of 2 or all at once, the same step
    rng = random.Random(3)
    a = HfPolicy.load(str(tiny), max_new_tokens=4, seed=2)
    chooser = LlmChooser(a, budget_s=60, reasks=0)
    got = [chooser.answer(_random_request(rng)) for _ in range(6)]
    batch = HfBatch([x["prompt_ids"] for x in got], [x["tokens"] for x in got],
                    [x["token_logprobs"] for x in got], [0.3, -0.5, 1.0, -0.1, 0.2, -0.7])
    params, pols = [], []
    for micro in (2, 6):
        pol = HfPolicy.load(str(tiny), seed=2)
        if micro == 2:  # the reference as a snapshot swapped in, against a frozen copy: the same
            pol.set_reference()
        opt = torch.optim.SGD(pol.trainable_parameters(), lr=0.5)
        st = hf_train.update(pol, opt, batch, epochs=1, clip=0.2, kl_coef=0.1, minibatch=6, micro_batch=micro,
                             max_grad_norm=1e9)
        assert st["grad_steps"] == 1
        params.append(torch.cat([p.detach().flatten() for p in pol.trainable_parameters()]))
        pols.append(pol)
    base = torch.cat([p.detach().flatten() for p in a.trainable_parameters()])
    assert not torch.allclose(params[0], base)  # the step moved the weights
    assert torch.allclose(params[0], params[1], atol=1e-6)
    # after the step the snapshot still answers for the weights before it
    snap = (batch.prompts[:2], batch.completions[:2])
    for pol in pols:  # the swapped snapshot and the frozen copy
        assert torch.allclose(pol.logprobs(*snap, reference=True)[0], a.logprobs(*snap)[0].detach(), atol=1e-6)


@pytest.mark.servers
def test_hf_model_plays_a_fight_through_move(tiny: Path, tmp_path: Path) -> None:
    srv = Listening([sys.executable, "-m", "brawlkit", "policy", "serve", "--hf", str(tiny), "--port", "0",
                     "--member", "tiny-lm", "--max-new-tokens", "6"], tmp_path / "serve.log")
    trace = tmp_path / "trace.jsonl"
    try:
        r = run_cli("policy", "play", "--endpoint", srv.url, "--vs", "cpu:1", "--max-ticks", "120",
                    "--seed", "3", "--trace", str(trace), "--json", timeout=300)
    finally:
        srv.stop()
    assert r.returncode == 0, r.stdout + r.stderr
    res = last_json(r.stdout)
    m = res["matches"][0]
    assert res["member"] == "tiny-lm" and m["ticks"] == 120 and m["decisions"] >= 10
    assert m["failed_calls"] == 0 and m["model_errors"] == 0 and set(m["moves"]) <= set(NAMES)
    lines = [json.loads(x) for x in trace.read_text().splitlines()]
    assert len(lines) == m["decisions"] and all(x["logprob"] < 0 for x in lines)  # its own sampling logprobs


@pytest.mark.servers
@pytest.mark.training
def test_policy_train_hf_clones_trains_exports_saves_and_resumes(tiny: Path, tmp_path: Path) -> None:
    from brawlkit.policy_server.hf_policy import HfPolicy

    out = tmp_path / "run"
    common = ["--fights-per-batch", "2", "--eval-fights", "0", "--final-eval-fights", "0", "--max-ticks", "120",
              "--workers", "1", "--no-progress", "--json", "--lr", "1e-2"]
    r = run_cli("policy", "train", "--hf", str(tiny), "--lora-rank", "4", "--out", str(out), "--batches", "1",
                "--export", "--clone-fights", "2", "--clone-rounds", "1", "--dagger-fights", "1", "--clone-epochs", "1",
                "--clone-minibatch", "16", "--seed", "2",
                *common, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    summary = last_json(r.stdout)
    assert summary["member"] == "hf-tiny-lm-s2" and summary["batches_total"] == 1
    assert summary["failed_calls"] == 0 and summary["model_errors"] == 0
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    clone, dagger = [x for x in lines if x["kind"] == "clone"]
    assert clone["clone_pairs"] > 0 and clone["clone_steps"] >= -(-clone["clone_pairs"] // 16)  # minibatches of 16
    assert clone["fights"] == 2 and dagger["player"] == "policy" and dagger["fights"] == 1  # --dagger-fights
    assert dagger["clone_pairs"] > clone["clone_pairs"]
    (batch,) = [x for x in lines if x["kind"] == "batch"]
    assert batch["grad_steps"] >= 1 and batch["moves"] > 0 and batch["kl"] >= 0 and "logp_drift" in batch
    assert (out / "policy_clone" / "adapter_config.json").is_file()

    # the exported rows: the messages the model saw, their ids, its own ids and logprobs
    rows = [json.loads(x) for x in (out / "rollouts" / "batch_00000.jsonl").read_text().splitlines()]
    assert rows and all(x["messages"][0]["role"] == "system" and x["completion_ids"] for x in rows)
    clone_start = HfPolicy.load(str(out / "policy_clone"))  # what sampled batch 0
    assert all(x["prompt_ids"] == _template_ids(clone_start.tokenizer, x["messages"]) for x in rows)
    lp, _ = clone_start.logprobs([x["prompt_ids"] for x in rows[:8]], [x["completion_ids"] for x in rows[:8]])
    for i, x in enumerate(rows[:8]):
        assert lp[i, :len(x["logprobs"])].tolist() == pytest.approx(x["logprobs"], abs=1e-4)
    tb = trl_batch(rows, clone_start.pad_id)
    n, p_len = tb["prompt_ids"].shape
    assert n == len(rows) and tb["prompt_mask"].sum(1).tolist() == [len(x["prompt_ids"]) for x in rows]
    assert tb["completion_mask"].sum(1).tolist() == [len(x["completion_ids"]) for x in rows]
    assert tb["advantages"].tolist() == pytest.approx([x["advantage"] for x in rows])
    assert tb["old_per_token_logps"].shape == tb["completion_ids"].shape

    # the checkpoint reloads: the trained adapter over the base; the KL reference is the
    # cloned model (the supervised start), not the untrained base
    ck = HfPolicy.load(str(out / "policy"))
    base = HfPolicy.load(str(tiny))
    assert ck.is_lora and (out / "policy" / "trainer_state.pt").is_file() and ck.ref_params is not None
    some = ([x["prompt_ids"] for x in rows[:4]], [x["completion_ids"] for x in rows[:4]])
    trained, ref = ck.logprobs(*some)[0], ck.logprobs(*some, reference=True)[0]
    cloned, base_lp = clone_start.logprobs(*some)[0], base.logprobs(*some)[0]
    assert not torch.allclose(trained, cloned, atol=1e-4)  # RL moved it
    assert torch.allclose(ref, cloned, atol=1e-5) and not torch.allclose(ref, base_lp, atol=1e-4)
    assert torch.allclose(ck.logprobs(*some)[0], trained)  # the swap put the trained values back

    # resumed: the batch count, the baseline and the curriculum continue
    r2 = run_cli("policy", "train", "--hf", str(out / "policy"), "--resume", "--out", str(tmp_path / "run2"),
                 "--batches", "1", "--seed", "2", *common, "--final-eval-fights", "1", "--eval-greedy", timeout=600)
    assert r2.returncode == 0, r2.stdout[-2000:] + r2.stderr[-4000:]
    # --eval-greedy: the final evaluation plays the greedy policy, and the sampled one beside it
    finals = [json.loads(x) for x in (tmp_path / "run2" / "metrics.jsonl").read_text().splitlines()
              if json.loads(x).get("final")]
    assert [f["decode"] for f in finals] == ["sampled", "greedy"] and all(f["fights"] == 1 for f in finals)
    assert last_json(r2.stdout)["eval_decode"] == "greedy" and "final_sampled_win_rate" in last_json(r2.stdout)
    assert last_json(r2.stdout)["batches_total"] == 2
    assert last_json(r2.stdout)["member"] == "hf-tiny-lm-s2"  # the same member as the run it resumes
    (b2,) = [json.loads(x) for x in (tmp_path / "run2" / "metrics.jsonl").read_text().splitlines()
             if json.loads(x)["kind"] == "batch"]
    assert b2["batch"] == 1 and set(b2["baseline"]) >= set(batch["baseline"])
    bad = run_cli("policy", "train", "--hf", str(tmp_path / "nowhere"), "--out", str(tmp_path / "x"))
    assert bad.returncode == 2 and "--hf" in bad.stderr and "no such folder" in bad.stderr
    fresh = run_cli("policy", "train", "--hf", str(tiny), "--resume", "--out", str(tmp_path / "y"))
    assert fresh.returncode == 2 and "trainer_state.pt" in fresh.stderr


@pytest.mark.servers
def test_remote_model_token_ids_and_errors_are_recorded(tmp_path: Path) -> None:
    """``policy serve --llm --token-ids``: the server's ids and the prompt's ids reach the
    exported rows (TRL's batch shape); its 500s and malformed bodies are counted per fight."""
    from brawlkit.policy_server.move_reward import MoveRewardWeights
    from brawlkit.policy_server.rollouts import FightSpec, RolloutRunner, WorkerConfig
    from brawlkit.policy_server.trainer import batch_metrics, export_rows, fight_rewards

    client = ChatClient("http://127.0.0.1:9", "m", token_ids=True)
    assert client.token_ids
    fake = Listening([sys.executable, str(FAKE_CHAT), "--port", "0", "--script", "valid*6,missing,malformed,valid*4"],
                     tmp_path / "fake.log")
    srv = Listening([sys.executable, "-m", "brawlkit", "policy", "serve", "--llm", fake.url, "--model", "fake",
                     "--token-ids", "--member", "llm-ids", "--port", "0"], tmp_path / "serve.log")
    runner = RolloutRunner(WorkerConfig(srv.url), workers=1, progress=False)
    try:
        (res,) = runner.run([FightSpec(seed=1, opponent="cpu:1", max_ticks=200)])
    finally:
        runner.close()
        srv.stop()
        fake.stop()
    assert res.ok, res.void
    errs = [s for s in res.steps if s.error]
    assert errs and not any(s.failed for s in res.steps)  # the endpoint answered; its model had failed
    assert any("500" in str(s.error) for s in errs) and any("JSON" in str(s.error) or "Expecting" in str(s.error)
                                                            for s in errs)
    m = batch_metrics([res], [[0.0] * len(res.steps)])
    assert m["model_errors"] == len(errs) and m["failed_calls"] == 0 and m["errors"]
    rewards = fight_rewards([res], MoveRewardWeights())
    rows = export_rows([res], rewards, rewards, 0)
    ok = [x for x in rows if x["completion_ids"]]
    assert ok and all(x["prompt_ids"] == fake_prompt_ids(x["messages"]) for x in ok)
    assert all(len(x["logprobs"]) == len(x["completion_ids"]) for x in ok)
    assert [x for x in rows if x["error"]]  # the row says its answer came after a failed call
    tb = trl_batch(rows, 0)
    assert tb["completion_ids"].shape[0] == len(ok) and tb["rewards"].tolist() == pytest.approx(
        [x["reward"] for x in ok])
