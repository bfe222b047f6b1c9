"""A Hugging Face causal language model as a ``/move`` policy, sampled and trained here.

``policy serve --hf DIR`` and ``policy train --hf DIR`` (docs/move_training.md, "A
Hugging Face model") load any causal LM with a chat template — a local folder (the
tests' tiny model, :mod:`brawlkit.policy_server.tiny_lm`) or a hub id the user has —
and play it through the real ``/move`` endpoint with the same chooser as a remote
model (:class:`brawlkit.policy_server.llm.LlmChooser`: the same system prompt, state
text, parse and re-ask).  What a trainer needs is kept exactly as the model saw it:

* **Prompt ids.** The chat template renders the chooser's full message list
  (system, user, and a re-ask's assistant + user) with the generation prompt, and
  those ids *are* the prompt: never re-tokenised text (verl's warning: re-tokenising
  broke PPO convergence).
* **Sampling.** Token by token at ``temperature`` with a KV cache, until the
  tokenizer's end-of-turn token or ``max_new_tokens``; each sampled id keeps its
  log-probability under the same temperature.  :meth:`HfPolicy.logprobs` recomputes
  them in a batch with gradients (left-padded, position ids from the mask, so a
  padded row computes what the unpadded sample did; the tests check they agree).
* **Batched sampling.** The endpoint answers each rollout worker from its own thread;
  on a CPU one forward per answer behind one lock left the workers queueing on one
  core (docs/move_training.md, "The tiny model").  :meth:`HfPolicy.ask` therefore
  queues its prompt: the first waiting thread becomes the batch's leader, gathers the
  prompts that arrive within ``batch_wait_s`` (up to ``max_batch``) and samples them
  in one left-padded forward per token (:meth:`HfPolicy.sample_batch`); each row keeps
  its own sampled ids and their logprobs, as sampling it alone would record them.
* **LoRA** (peft, ``lora_rank`` > 0): only the adapter trains, and the frozen base
  model — the adapter disabled — is the reference of the KL term, at no extra memory.
  After a supervised start the reference is the cloned model instead
  (:meth:`HfPolicy.set_reference`: a copy of the trainable parameters only — the
  adapter's, for LoRA — swapped in for the reference's forward), as RLHF's reference
  is its SFT model, not the pretrained one.

transformers and peft are the optional extra ``llm`` (``pip install -e '.[llm]'``):
they are imported inside the functions, so the core package never needs them.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from pathlib import Path
from typing import Any

import torch

from brawlkit.policy_server.llm import ChatReply

#: the file of a checkpoint that says how to load it (base model, LoRA or not, meta)
META_FILE = "brawlkit_hf.json"
#: a checkpoint's KL reference (:meth:`HfPolicy.set_reference`), when it is not the base
REFERENCE_FILE = "reference.pt"
#: LoRA's target modules for the usual decoder blocks (Qwen2/3, Llama, Mistral)
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
#: a shared prompt prefix shorter than this is computed with each row (a second forward
#: would cost more than it saves)
MIN_SHARED_PREFIX = 16
#: ``policy serve --hf``: concurrent requests sampled in one batch at most (no waiting
#: for more: a served model does not know how many callers it has)
SERVE_MAX_BATCH = 8
INSTALL_HINT = "pip install -e '.[llm]' (transformers, tokenizers, peft)"


def _require() -> Any:
    try:
        import transformers
    except ImportError as e:  # pragma: no cover - the extra is installed by make test
        raise RuntimeError(f"a Hugging Face model needs transformers: {INSTALL_HINT}") from e
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    return transformers


def pick_device(device: str | None = None) -> torch.device:
    """``device``, else CUDA where present, else the CPU."""
    if device:
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


class _Pending:
    """A prompt queued for :meth:`HfPolicy._sample_queued`, then its row (or the error)."""

    __slots__ = ("deadline", "error", "prompt", "result")

    def __init__(self, prompt: list[int], deadline: float) -> None:
        self.prompt, self.deadline = prompt, deadline
        self.result: tuple[list[int], list[float]] | None = None
        self.error: BaseException | None = None


class HfPolicy:
    """A causal LM with its tokenizer: a :class:`~brawlkit.policy_server.llm.ChatModel`
    (``ask(messages, timeout_s)``) that samples and records token ids and logprobs,
    batch log-probabilities with gradients for the trainer, save and load."""

    def __init__(self, model: Any, tokenizer: Any, *, name: str, device: torch.device,
                 temperature: float = 1.0, max_new_tokens: int = 8, seed: int = 0,
                 base: str | None = None, max_batch: int = 1, batch_wait_s: float = 0.0) -> None:
        self.lm, self.tokenizer = model, tokenizer
        self.model = name  # the ChatModel's name (the chooser's label is llm:NAME)
        self.device = device
        #: decode the most likely token at each step instead of sampling: the deterministic
        #: policy (``policy train --eval-greedy`` evaluates it; ``temperature`` 0 serves it,
        #: its logprobs then at temperature 1)
        self.greedy = float(temperature) <= 0
        self.temperature = float(temperature) if not self.greedy else 1.0
        self.max_new_tokens = int(max_new_tokens)
        self.base = base  # the base model of a LoRA adapter (what the adapter is saved against)
        self.gen = torch.Generator(device="cpu").manual_seed(seed)
        self.lock = threading.Lock()  # the endpoint's threads sample, the trainer updates
        #: prompts sampled in one forward at most (the trainer sets its rollout workers'
        #: count: each worker waits on one answer at a time), and how long a batch's leader
        #: waits for more of them to arrive before it samples (0: takes what is queued)
        self.max_batch, self.batch_wait_s = max(1, int(max_batch)), float(batch_wait_s)
        self._queue: list[_Pending] = []
        self._queue_cv = threading.Condition()
        self._leading = False  # a thread is gathering or sampling a batch
        stop = {tokenizer.eos_token_id}
        end_turn = tokenizer.convert_tokens_to_ids("<|im_end|>") if "<|im_end|>" in tokenizer.get_vocab() else None
        stop.add(end_turn)
        self.stop_ids = {int(t) for t in stop if t is not None}
        self.pad_id = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id)
        self._ref: Any = None
        #: the KL reference's values of the trainable parameters, once :meth:`set_reference`
        #: has fixed one (after a supervised start: the cloned model); None: the base
        self.ref_params: dict[str, torch.Tensor] | None = None
        # the keyword the forward takes its KV cache by: ``cache`` (transformers >= 5.2x)
        # or ``past_key_values`` (earlier)
        import inspect

        inner = model.get_base_model() if hasattr(model, "get_base_model") else model
        self._cache_kw = "cache" if "cache" in inspect.signature(inner.forward).parameters else "past_key_values"

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, path: str, *, device: str | None = None, lora_rank: int = 0, lora_alpha: int | None = None,
             dtype: str | None = None, temperature: float = 1.0, max_new_tokens: int = 8,
             seed: int = 0, max_batch: int = 1, batch_wait_s: float = 0.0) -> HfPolicy:
        """A local folder or hub id: a plain model, or a brawlkit checkpoint (a LoRA
        adapter over its base, or a full model) saved by :meth:`save`.  ``lora_rank``
        > 0 wraps a plain model in a fresh LoRA adapter (peft); a saved adapter keeps
        its own rank and stays trainable.  ``max_batch``, ``batch_wait_s``: how
        concurrent :meth:`ask` calls are batched (:meth:`_sample_queued`)."""
        import warnings

        tf = _require()
        dev = pick_device(device)
        # peft calls an API transformers 5 renamed (is_gradient_checkpointing): its warning only
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        torch_dtype = getattr(torch, dtype) if dtype else (torch.bfloat16 if dev.type == "cuda" else torch.float32)
        p = Path(path)
        meta = json.loads((p / META_FILE).read_text()) if (p / META_FILE).is_file() else {}
        if not p.exists() and (p.is_absolute() or str(path).startswith(".")):
            raise FileNotFoundError(f"--hf {path}: no such folder (a local model folder or a hub id)")
        name = meta.get("name") or p.name or str(path)
        if (p / "adapter_config.json").is_file():
            from peft import PeftModel

            base = meta.get("base") or json.loads((p / "adapter_config.json").read_text())["base_model_name_or_path"]
            model = tf.AutoModelForCausalLM.from_pretrained(base, dtype=torch_dtype)
            model = PeftModel.from_pretrained(model, str(p), is_trainable=True)
            tok_src = str(p) if (p / "tokenizer_config.json").is_file() else base
        else:
            base = None
            model = tf.AutoModelForCausalLM.from_pretrained(str(path), dtype=torch_dtype)
            tok_src = str(path)
            if lora_rank > 0:
                from peft import LoraConfig, get_peft_model

                names = {n.rsplit(".", 1)[-1] for n, _ in model.named_modules()}
                targets = [t for t in LORA_TARGETS if t in names]
                if not targets:
                    raise ValueError(f"--lora-rank: {path} has none of the modules {', '.join(LORA_TARGETS)}")
                cfg = LoraConfig(r=lora_rank, lora_alpha=int(lora_alpha or 2 * lora_rank), lora_dropout=0.0,
                                 target_modules=targets, task_type="CAUSAL_LM")
                base = str(p.resolve()) if p.exists() else str(path)  # a saved adapter finds it anywhere
                model = get_peft_model(model, cfg)
        tokenizer = tf.AutoTokenizer.from_pretrained(tok_src)
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(f"--hf {path}: the tokenizer has no chat template (an instruct/chat model is needed)")
        model.to(dev)
        model.eval()
        pol = cls(model, tokenizer, name=name, device=dev, temperature=temperature,
                  max_new_tokens=max_new_tokens, seed=seed, base=base, max_batch=max_batch,
                  batch_wait_s=batch_wait_s)
        if (p / REFERENCE_FILE).is_file():
            ref = torch.load(p / REFERENCE_FILE, map_location=dev, weights_only=True)
            trainable = {n for n, q in model.named_parameters() if q.requires_grad}
            if set(ref) == trainable:
                pol.ref_params = ref
        return pol

    @property
    def is_lora(self) -> bool:
        return hasattr(self.lm, "disable_adapter") and hasattr(self.lm, "peft_config")

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        return [p for p in self.lm.parameters() if p.requires_grad]

    # ------------------------------------------------------------------ prompts
    def render(self, messages: list[dict[str, str]]) -> list[int]:
        """The prompt's token ids: the chat template over ``messages`` with the
        generation prompt (what the model reads before its answer).  ``enable_thinking``
        off: a Qwen3 template then opens the answer with an empty think block, so an
        8-token answer is the move, not the start of a reasoning trace (templates
        without the switch ignore it)."""
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                                  enable_thinking=False)
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def completion_ids(self, text: str) -> list[int]:
        """``text`` as an answer: its ids and the end-of-turn token (a supervised target)."""
        end = self.tokenizer.convert_tokens_to_ids("<|im_end|>") if "<|im_end|>" in self.tokenizer.get_vocab() \
            else self.tokenizer.eos_token_id
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"]) + [int(end)]

    # ------------------------------------------------------------------ sampling
    def _forward(self, ids: torch.Tensor, att: torch.Tensor, pos: torch.Tensor, cache: Any
                 ) -> tuple[torch.Tensor, Any]:
        out = self.lm(input_ids=ids, attention_mask=att, position_ids=pos, use_cache=True, logits_to_keep=1,
                      **{self._cache_kw: cache})
        new = getattr(out, "cache", None)
        return out.logits[:, -1].float(), new if new is not None else getattr(out, "past_key_values", None)

    @torch.no_grad()
    def sample_batch(self, prompts: list[list[int]], deadlines: list[float | None] | None = None
                     ) -> list[tuple[list[int], list[float]]]:
        """Per prompt: the sampled ids and their log-probabilities (at ``temperature``),
        up to the end-of-turn token (kept: it is part of what the model wrote) or
        ``max_new_tokens``; an answer still running at its deadline is cut there.

        The prompts are left-padded into one batch (mask and position ids as
        :meth:`logprobs` builds them, so each row computes what it would alone) and every
        new token is one forward of all rows; a finished row is fed padding, masked out,
        and records nothing more."""
        n = len(prompts)
        dl = list(deadlines) if deadlines is not None else [None] * n
        k = self.shared_prefix(prompts)
        cache = None
        if k:  # the shared prefix once, its keys and values repeated for every row
            _, cache = self._forward(torch.tensor([prompts[0][:k]], device=self.device),
                                     torch.ones(1, k, dtype=torch.long, device=self.device),
                                     torch.arange(k, device=self.device)[None], None)
            cache.batch_repeat_interleave(n)
        p_len = max(len(p) for p in prompts) - k
        x = torch.tensor([[self.pad_id] * (p_len + k - len(p)) + p[k:] for p in prompts], device=self.device)
        att = torch.tensor([[1] * k + [0] * (p_len + k - len(p)) + [1] * (len(p) - k) for p in prompts],
                           device=self.device)
        pos = (att.cumsum(-1) - 1).clamp(min=0)[:, k:]
        out: list[tuple[list[int], list[float]]] = [([], []) for _ in range(n)]
        alive = [True] * n
        for _ in range(self.max_new_tokens):
            logits, cache = self._forward(x, att, pos, cache)
            logp = torch.log_softmax(logits / self.temperature, dim=-1).cpu()
            toks = (logp.argmax(-1) if self.greedy else
                    torch.multinomial(logp.exp(), 1, generator=self.gen).squeeze(1)).tolist()
            now = time.monotonic()
            for i, t in enumerate(toks):
                if not alive[i]:
                    continue
                out[i][0].append(int(t))
                out[i][1].append(float(logp[i, t]))
                d = dl[i]
                if t in self.stop_ids or (d is not None and now > d):
                    alive[i] = False
            if not any(alive):
                break
            live = torch.tensor([[int(a)] for a in alive], device=self.device)
            x = torch.where(live.bool(), torch.tensor([[t] for t in toks], device=self.device), self.pad_id)
            pos = pos[:, -1:] + 1
            att = torch.cat([att, live], dim=1)
        return out

    def sample(self, prompt_ids: list[int], deadline: float | None = None) -> tuple[list[int], list[float]]:
        """One prompt's sampled ids and logprobs (:meth:`sample_batch` of one row)."""
        return self.sample_batch([prompt_ids], [deadline])[0]

    def _sample_queued(self, prompt: list[int], deadline: float) -> tuple[list[int], list[float]]:
        """``prompt`` sampled in a batch with whatever other threads queue with it: the
        first thread to find no leader leads — it waits up to ``batch_wait_s`` for
        ``max_batch`` prompts, samples up to that many under :attr:`lock` and hands each
        thread its row; the others wait for theirs (or lead the next batch)."""
        job = _Pending(prompt, deadline)
        cv = self._queue_cv
        with cv:
            self._queue.append(job)
            cv.notify_all()
        while True:
            with cv:
                while job.result is None and job.error is None and self._leading:
                    cv.wait()
                if job.result is not None or job.error is not None:
                    break
                self._leading = True
                if self.batch_wait_s > 0 and len(self._queue) < self.max_batch:
                    cv.wait_for(lambda: len(self._queue) >= self.max_batch, timeout=self.batch_wait_s)
                jobs, self._queue = self._queue[:self.max_batch], self._queue[self.max_batch:]
            try:
                with self.lock:
                    was = self.lm.training
                    self.lm.eval()
                    try:
                        rows = self.sample_batch([j.prompt for j in jobs], [j.deadline for j in jobs])
                    finally:
                        self.lm.train(was)
                for j, r in zip(jobs, rows, strict=True):
                    j.result = r
            except BaseException as e:  # every thread of the batch sees the failure
                for j in jobs:
                    j.error = e
            finally:
                with cv:
                    self._leading = False
                    cv.notify_all()
        if job.error is not None:
            raise job.error
        assert job.result is not None
        return job.result

    def ask(self, messages: list[dict[str, str]], timeout_s: float) -> ChatReply:
        """One answer to ``messages`` (the :class:`ChatModel` call), sampled in a batch
        with the other threads' concurrent prompts."""
        prompt = self.render(messages)
        ids, logps = self._sample_queued(prompt, time.monotonic() + max(0.0, timeout_s))
        text = self.tokenizer.decode([t for t in ids if t not in self.stop_ids], skip_special_tokens=True)
        return ChatReply(text, tokens=ids, token_logprobs=logps, prompt_ids=prompt)

    # ------------------------------------------------------------------ training
    @staticmethod
    def shared_prefix(prompts: list[list[int]]) -> int:
        """The length of the prompts' common first tokens (the system prompt and the
        user turn's opening, ~120 tokens of the tiny model's ~280), kept below every
        prompt's length so each row has a token of its own: 0 for a single prompt or a
        prefix shorter than :data:`MIN_SHARED_PREFIX` (not worth a second forward)."""
        if len(prompts) < 2:
            return 0
        first, n = prompts[0], min(len(p) for p in prompts) - 1
        for p in prompts[1:]:
            n = min(n, next((i for i, (a, b) in enumerate(zip(first[:n], p[:n], strict=True)) if a != b), n))
        return n if n >= MIN_SHARED_PREFIX else 0

    def _prefixed(self, model: Any, prefix: list[int], rows: int, kw: dict[str, Any]) -> Any:
        """``model``'s forward of ``kw``'s rows after ``prefix``: the prefix's keys and
        values computed once (one row, with gradients when enabled) and repeated for every
        row, then the rows with the prefix's columns prepended to their mask and its length
        added to their positions — what each full row computes alone, at the prefix's cost
        once instead of ``rows`` times (the tests check the logprobs agree)."""
        if not prefix:
            return model(**kw)
        pre = model(input_ids=torch.tensor([prefix], device=self.device), use_cache=True, logits_to_keep=1)
        cache = getattr(pre, "cache", None)
        cache = cache if cache is not None else pre.past_key_values
        cache.batch_repeat_interleave(rows)
        ones = torch.ones(rows, len(prefix), dtype=kw["attention_mask"].dtype, device=self.device)
        return model(**{**kw, "attention_mask": torch.cat([ones, kw["attention_mask"]], dim=1),
                        "position_ids": kw["position_ids"] + len(prefix), "use_cache": True,
                        self._cache_kw: cache})

    def _batch(self, prompts: list[list[int]], completions: list[list[int]]
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int]:
        """Prompts left-padded to one length P, completions right-padded to R: every
        completion starts at column P, so the logits of the last R + 1 positions are
        all the loss needs (``logits_to_keep``: memory bounded by R, not P + R)."""
        p_len = max(len(p) for p in prompts)
        r_len = max(len(c) for c in completions)
        rows, mask, cmask = [], [], []
        for p, c in zip(prompts, completions, strict=True):
            rows.append([self.pad_id] * (p_len - len(p)) + p + c + [self.pad_id] * (r_len - len(c)))
            mask.append([0] * (p_len - len(p)) + [1] * (len(p) + len(c)) + [0] * (r_len - len(c)))
            cmask.append([1] * len(c) + [0] * (r_len - len(c)))
        ids = torch.tensor(rows, device=self.device)
        att = torch.tensor(mask, device=self.device)
        pos = (att.cumsum(-1) - 1).clamp(min=0)
        return ids, att, pos, torch.tensor(cmask, device=self.device, dtype=torch.bool), r_len

    def logprobs(self, prompts: list[list[int]], completions: list[list[int]], *, reference: bool = False
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-token log-probabilities (B, R; 0 where masked) of ``completions`` after
        ``prompts`` at ``temperature``, and the mask (B, R).  ``reference``: under the
        frozen reference — the base model with the LoRA adapter disabled, else a frozen
        copy made on first use — without gradients.  The prompts' shared prefix is
        computed once (:meth:`_prefixed`)."""
        k = self.shared_prefix(prompts)
        ids, att, pos, cmask, r = self._batch([p[k:] for p in prompts], completions)
        prefix = prompts[0][:k]
        kw = {"input_ids": ids, "attention_mask": att, "position_ids": pos, "logits_to_keep": r + 1}
        if reference:
            with torch.no_grad():
                if self.ref_params is not None:
                    logits = self._swapped_forward(prefix, kw)
                elif self.is_lora:
                    with self.lm.disable_adapter():
                        logits = self._prefixed(self.lm, prefix, len(prompts), kw).logits
                else:
                    if self._ref is None:
                        self._ref = copy.deepcopy(self.lm).eval().requires_grad_(False)
                    logits = self._prefixed(self._ref, prefix, len(prompts), kw).logits
        else:
            logits = self._prefixed(self.lm, prefix, len(prompts), kw).logits
        logp_all = torch.log_softmax(logits[:, :-1].float() / self.temperature, dim=-1)
        target = ids[:, -r:]
        logp = logp_all.gather(-1, target.unsqueeze(-1)).squeeze(-1)
        return logp * cmask, cmask

    def set_reference(self) -> None:
        """The KL reference becomes the model as it is now (called after the supervised
        start, so RL is held near the cloned model, not the pretrained one)."""
        self.ref_params = {n: p.detach().clone() for n, p in self.lm.named_parameters() if p.requires_grad}

    def _swapped_forward(self, prefix: list[int], kw: dict[str, Any]) -> torch.Tensor:
        """The reference's logits: its parameter values swapped in, the forward, the
        current values back.  Called with no autograd graph alive (the trainer computes
        the reference before the policy), so the in-place swap is safe."""
        assert self.ref_params is not None
        params = dict(self.lm.named_parameters())
        keep = {n: params[n].detach().clone() for n in self.ref_params}
        try:
            for n, v in self.ref_params.items():
                params[n].data.copy_(v)
            return self._prefixed(self.lm, prefix, len(kw["input_ids"]), kw).logits
        finally:
            for n, v in keep.items():
                params[n].data.copy_(v)

    # ------------------------------------------------------------------ files
    def save(self, path: str | Path, meta: dict[str, Any] | None = None) -> None:
        """A folder :meth:`load` (and ``policy serve --hf``) reads: the LoRA adapter
        (against ``base``) or the full model, the tokenizer, and ``brawlkit_hf.json``.
        Written beside and renamed into place, so a reader never sees half of one."""
        path = Path(path)
        tmp = path.with_name(f".{path.name}.tmp")
        if tmp.exists():
            import shutil

            shutil.rmtree(tmp)
        self.lm.save_pretrained(str(tmp))
        self.tokenizer.save_pretrained(str(tmp))
        if self.ref_params is not None:
            torch.save(self.ref_params, tmp / REFERENCE_FILE)
        (tmp / META_FILE).write_text(json.dumps({"format": "brawlkit-hf", "version": 1, "name": self.model,
                                                 "base": self.base, "lora": self.is_lora,
                                                 "meta": meta or {}}, default=str))
        if path.exists():
            import shutil

            old = path.with_name(f".{path.name}.old")
            if old.exists():
                shutil.rmtree(old)
            path.rename(old)
            tmp.rename(path)
            shutil.rmtree(old)
        else:
            tmp.rename(path)
