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
  returns them (``logprobs: true``), with the tokens; else 0 and no tokens.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from typing import Any

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


class ChatClient:
    """POST ``{url}/v1/chat/completions`` (the OpenAI-compatible API) with a timeout."""

    def __init__(self, url: str, model: str, temperature: float = 0.7, max_tokens: int = 8,
                 api_key: str | None = None) -> None:
        base = url.rstrip("/")
        for suffix in ("/chat/completions", "/v1"):
            base = base.removesuffix(suffix)
        self.endpoint = f"{base}/v1/chat/completions"
        self.model, self.temperature, self.max_tokens = model, temperature, max_tokens
        self.api_key = api_key

    def ask(self, messages: list[dict[str, str]], timeout_s: float) -> tuple[str, float | None, list[str]]:
        """(answer text, its log-probability or None, its tokens); raises ``OSError`` /
        ``ValueError`` on a failed call or a body without ``choices[0].message.content``."""
        body = {"model": self.model, "messages": messages, "temperature": self.temperature,
                "max_tokens": self.max_tokens, "logprobs": True}
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
        items = ((choice.get("logprobs") or {}).get("content") or []) if isinstance(choice, dict) else []
        lps = [x.get("logprob") for x in items if isinstance(x, dict)]
        nums = [float(v) for v in lps if isinstance(v, int | float)]
        if items and len(nums) == len(items):
            return content, sum(nums), [str(x.get("token", "")) for x in items]
        return content, None, []


class LlmChooser:
    """The ``/move`` chooser of a chat model: prompt, parse, re-ask once, then give up."""

    #: it waits on the chat server: the endpoint answers it from a thread pool
    blocking = True

    def __init__(self, client: ChatClient, budget_s: float = DEFAULT_BUDGET_S,
                 decision_ticks: int = 8) -> None:
        self.client, self.budget_s = client, float(budget_s)
        self.decision_ticks = int(decision_ticks)
        self.label = f"llm:{client.model}"

    def _try(self, messages: list[dict[str, str]], deadline: float) -> tuple[str | None, float | None, list[str], str | None]:
        try:
            text, lp, toks = self.client.ask(messages, deadline - time.monotonic())
            return text, lp, toks, None
        except (OSError, ValueError, KeyError, TypeError, urllib.error.URLError) as e:
            return None, None, [], f"{type(e).__name__}: {str(e)[:160]}"

    def answer(self, req: Any) -> dict[str, Any]:
        deadline = time.monotonic() + self.budget_s
        available = req.available_moves()
        messages = build_messages(req, available)
        text, lp, toks, err = self._try(messages, deadline)
        name, asks = parse_move(text, available), 1
        if name is None and deadline - time.monotonic() > MIN_REASK_S:
            messages = build_messages(req, available, bad=text if text is not None else "(no answer)")
            text, lp, toks, err = self._try(messages, deadline)
            name, asks = parse_move(text, available), 2
        out: dict[str, Any] = {"move": name if name is not None else (text or "").strip()[:80],
                               "logprob": lp if lp is not None else 0.0, "prompt": messages[1]["content"],
                               "response": text, "asks": asks}
        if toks:
            out["tokens"] = toks
        if err is not None:
            out["error"] = err
        return out

    def choose(self, req: Any) -> tuple[str, float]:
        a = self.answer(req)
        return a["move"], a["logprob"]


__all__ = ["NAMES", "ChatClient", "LlmChooser", "SYSTEM_PROMPT", "build_messages", "parse_move"]
