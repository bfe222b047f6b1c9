"""A language model behind ``/move``: the adapter to an OpenAI-compatible chat server.

``python -m brawlkit policy serve --llm URL --model NAME`` puts any model that a local
LLM server exposes through the chat-completions API (vLLM, llama.cpp's server, Ollama,
SGLang, …) behind the ``/move`` contract, so it plays, is rated, and its fights can be
exported for training like any other endpoint's (docs/move_training.md, "A language
model"):

* **Prompt.** A system message with the rules and the instruction, then the state as
  text (:func:`brawlkit.policy_server.prompt.render_state`: both fighters, the clock,
  the last moves) and the state's *available* moves (:func:`build_messages`).
* **Parse.** The answer is read case- and punctuation-tolerantly (:func:`parse_move`):
  ``"Dash Right!"``, ``"dash-right"`` and ``"I'll dash_right."`` all name
  ``dash_right``; an answer naming several available moves takes the one named first.
* **Re-ask.** An answer that names no available move is asked again once, with the
  bad answer quoted back and the list repeated, if the latency budget still has time;
  then the adapter returns the answer as it was, which the worker plays as
  ``no_move`` and penalises.  A missing answer (an HTTP error, a malformed body, a
  timeout: the call is cut at the budget) is handled the same way.  Nothing of it is
  fatal: the worker always gets a reply.
* **logprob.** The sum of the answer's token log-probabilities when the server
  returns them (``logprobs: true``), with the tokens (their ids with ``token_ids``,
  vLLM's ``return_tokens_as_token_ids``) and the prompt's ids when the server returns
  them; else 0 and no tokens.
* **Local models.** The same chooser drives a Hugging Face model in this process
  (:class:`brawlkit.policy_server.hf_policy.HfPolicy`, a :class:`ChatModel`), so a
  served and a local model are prompted, parsed and recorded by one piece of code.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeGuard

from brawlkit.policy_server.moves import NAMES
from brawlkit.policy_server.prompt import render_state

SYSTEM_PROMPT = (
    "You are playing BRAWLPIT, a two-player platform fighter: 3 stocks each, 150 seconds. "
    "A stock is lost by flying past the blast zone; the higher a fighter's damage percent, "
    "the further a hit sends it. Attack when close, use the special (the finisher) on a "
    "heavily damaged opponent, and use up_special to recover toward the stage when "
    "offstage. Each turn you see the state and the moves available in it. Answer with the "
    "name of exactly ONE available move and nothing else.")
#: the budget one decision may spend on the server, first ask and re-ask together
DEFAULT_BUDGET_S = 2.0
#: below this much budget left a re-ask is not tried
MIN_REASK_S = 0.05


def build_messages(req: Any, available: tuple[str, ...], bad: str | None = None) -> list[dict[str, str]]:
    """The chat messages for one decision; ``bad``: the previous answer, which named no
    available move (the re-ask quotes it back)."""
    user = f"{render_state(req)}\navailable moves: {', '.join(available)}\nYour move:"
    msgs = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]
    if bad is not None:
        msgs += [{"role": "assistant", "content": bad},
                 {"role": "user", "content": f"{bad.strip()[:80]!r} is not one of the available moves. "
                                             f"Answer with exactly one of: {', '.join(available)}"}]
    return msgs


def _norm(text: str) -> str:
    return "_".join(re.findall(r"[a-z0-9]+", text.lower()))


def parse_move(text: str | None, available: tuple[str, ...]) -> str | None:
    """The available move ``text`` names, case and punctuation aside (None if none).

    The whole answer normalised (``"Dash-Right!"`` -> ``dash_right``) first; else the
    available move whose name occurs earliest as a whole run of words in the answer
    (longer names first at the same place: ``up_special_left`` before ``up_special``)."""
    if not text:
        return None
    norm = _norm(text)
    if norm in available:
        return norm
    best: tuple[int, int, str] | None = None
    padded = f"_{norm}_"
    for name in available:
        i = padded.find(f"_{name}_")
        if i >= 0 and (best is None or (i, -len(name)) < best[:2]):
            best = (i, -len(name), name)
    return best[2] if best else None


@dataclass
class ChatReply:
    """One answer of a chat model, with what a trainer needs of it: the text, the
    sampled tokens (ids where the server gives them, else strings) and their
    log-probabilities, and the ids of the prompt the model read (where known)."""

    text: str
    tokens: list[Any] = field(default_factory=list)
    token_logprobs: list[float] | None = None
    prompt_ids: list[int] | None = None

    @property
    def logprob(self) -> float | None:
        return sum(self.token_logprobs) if self.token_logprobs is not None else None


def _token_id(tok: Any) -> Any:
    """vLLM's ``return_tokens_as_token_ids`` writes a token as ``"token_id:123"``: the id."""
    if isinstance(tok, str) and tok.startswith("token_id:") and tok[9:].isdigit():
        return int(tok[9:])
    return tok


class ChatClient:
    """POST ``{url}/v1/chat/completions`` (the OpenAI-compatible API) with a timeout.

    ``token_ids``: also ask for the sampled token *ids* and the prompt's ids (vLLM's
    ``return_tokens_as_token_ids`` and ``return_token_ids``; a server without them keeps
    answering with token strings, recorded as such), which a trainer needs so it never
    re-tokenises text.  Off by default:
    a server that rejects unknown keys (OpenAI's) would refuse every call."""

    def __init__(self, url: str, model: str, temperature: float = 0.7, max_tokens: int = 8,
                 api_key: str | None = None, token_ids: bool = False) -> None:
        base = url.rstrip("/")
        for suffix in ("/chat/completions", "/v1"):
            base = base.removesuffix(suffix)
        self.endpoint = f"{base}/v1/chat/completions"
        self.model, self.temperature, self.max_tokens = model, temperature, max_tokens
        self.api_key, self.token_ids = api_key, token_ids

    def ask(self, messages: list[dict[str, str]], timeout_s: float) -> ChatReply:
        """The answer; raises ``OSError`` / ``ValueError`` on a failed call or a body
        without ``choices[0].message.content``."""
        body: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": self.temperature,
                                "max_tokens": self.max_tokens, "logprobs": True}
        if self.token_ids:
            body.update(return_tokens_as_token_ids=True, return_token_ids=True)
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(self.endpoint, data=json.dumps(body).encode(), headers=headers,
                                     method="POST")
        with urllib.request.urlopen(req, timeout=max(0.01, timeout_s)) as r:  # noqa: S310 - the user's URL
            reply = json.loads(r.read())
        choice = reply["choices"][0] if isinstance(reply, dict) and reply.get("choices") else None
        content = choice.get("message", {}).get("content") if isinstance(choice, dict) else None
        if not isinstance(content, str):
            raise ValueError(f"no choices[0].message.content in {str(reply)[:120]}")
        assert isinstance(choice, dict)
        items = (choice.get("logprobs") or {}).get("content") or []
        lps = [x.get("logprob") for x in items if isinstance(x, dict)]
        nums = [float(v) for v in lps if isinstance(v, int | float)]
        prompt_ids = reply.get("prompt_token_ids") or choice.get("prompt_token_ids")
        prompt_ids = prompt_ids if _ints(prompt_ids) else None
        out = ChatReply(content, prompt_ids=prompt_ids)
        if items and len(nums) == len(items):
            out.tokens = [_token_id(x.get("token", "")) for x in items]
            out.token_logprobs = nums
            ids = choice.get("token_ids")
            if _ints(ids) and len(ids) == len(items):
                out.tokens = list(ids)
        return out


def _ints(v: Any) -> TypeGuard[list[int]]:
    return isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v)


class ChatModel(Protocol):
    """What :class:`LlmChooser` asks: a remote server (:class:`ChatClient`) or a model in
    this process (:class:`brawlkit.policy_server.hf_policy.HfPolicy`)."""

    model: str

    def ask(self, messages: list[dict[str, str]], timeout_s: float) -> ChatReply: ...


class LlmChooser:
    """The ``/move`` chooser of a chat model: prompt, parse, re-ask (``reasks``, default
    once), then give up.

    The reply keeps what a trainer needs, exactly as the model saw and wrote it: the
    full ``messages`` of the answer that counts (system, user, and a re-ask's two more),
    the model's ``prompt_ids`` where known, the sampled ``tokens`` (ids where known)
    with their ``token_logprobs``; and every failed call of the decision in ``error``
    (``asks`` calls in all), so errors are counted, not dropped."""

    #: it waits on the chat server: the endpoint answers it from a thread pool
    blocking = True

    def __init__(self, client: ChatModel, budget_s: float = DEFAULT_BUDGET_S,
                 decision_ticks: int = 8, reasks: int = 1) -> None:
        self.client, self.budget_s = client, float(budget_s)
        self.decision_ticks = int(decision_ticks)
        self.reasks = int(reasks)
        self.label = f"llm:{client.model}"

    def _try(self, messages: list[dict[str, str]], deadline: float) -> tuple[ChatReply | None, str | None]:
        try:
            return self.client.ask(messages, deadline - time.monotonic()), None
        except (OSError, ValueError, KeyError, TypeError, urllib.error.URLError) as e:
            return None, f"{type(e).__name__}: {str(e)[:160]}"

    def answer(self, req: Any) -> dict[str, Any]:
        deadline = time.monotonic() + self.budget_s
        available = req.available_moves()
        messages = build_messages(req, available)
        reply, err = self._try(messages, deadline)
        errors = [err] if err else []
        name, asks = parse_move(reply.text if reply else None, available), 1
        while name is None and asks <= self.reasks and deadline - time.monotonic() > MIN_REASK_S:
            messages = build_messages(req, available, bad=reply.text if reply is not None else "(no answer)")
            reply, err = self._try(messages, deadline)
            errors += [err] if err else []
            name, asks = parse_move(reply.text if reply else None, available), asks + 1
        text = reply.text if reply is not None else None
        lp = reply.logprob if reply is not None else None
        out: dict[str, Any] = {"move": name if name is not None else (text or "").strip()[:80],
                               "logprob": lp if lp is not None else 0.0, "prompt": messages[1]["content"],
                               "messages": messages, "response": text, "asks": asks}
        if reply is not None and reply.tokens:
            out["tokens"] = reply.tokens
            out["token_logprobs"] = reply.token_logprobs
        if reply is not None and reply.prompt_ids is not None:
            out["prompt_ids"] = reply.prompt_ids
        if errors:
            out["error"] = " | ".join(errors)
        return out

    def choose(self, req: Any) -> tuple[str, float]:
        a = self.answer(req)
        return a["move"], a["logprob"]


__all__ = ["NAMES", "ChatClient", "ChatModel", "ChatReply", "LlmChooser", "SYSTEM_PROMPT", "build_messages", "parse_move"]
