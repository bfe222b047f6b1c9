"""A fake OpenAI-compatible chat-completions server: the far end of the LLM adapter's tests.

Only this end is fake: the adapter (``brawlkit.policy_server.llm``), its prompts and its
parsing are the real ones.  Each ``POST /v1/chat/completions`` is answered by the next
mode of ``--script`` (cyclic; ``mode*N`` repeats a mode):

* ``valid``     one available move, lower-case (cycling through the offered list);
* ``case``      the same, shouted with punctuation (``"Dash-Right!"``);
* ``chatty``    a sentence naming the move (``"I think dash_right is best."``);
* ``invalid``   ``"moonwalk"`` — no move at all;
* ``malformed`` a 200 whose body is not JSON;
* ``empty``     a 200 with ``{"choices": []}``;
* ``missing``   HTTP 500;
* ``slow``      a valid answer after ``--slow-ms`` (beyond the adapter's budget).

Every answer carries token logprobs.  A request with ``return_tokens_as_token_ids`` gets its
tokens as ``"token_id:N"`` and one with ``return_token_ids`` the ids themselves
(``choices[0].token_ids``) and the prompt's (``prompt_token_ids``), as vLLM answers them: the
prompt's ids are the UTF-8 bytes of the messages rendered ``role\ncontent\n``, each + 3, so
a test can check them.  ``GET /stats`` returns the modes served, each with
whether the request was a re-ask (it quotes a bad answer back).
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def parse_script(text: str) -> list[str]:
    out: list[str] = []
    for part in text.split(","):
        mode, _, n = part.partition("*")
        out += [mode.strip()] * (int(n) if n else 1)
    return out


def fake_id(token: str) -> int:
    """A token's id here: a stable number per token text."""
    return sum(token.encode()) % 50_000 + 3


def fake_prompt_ids(messages: list[dict[str, str]]) -> list[int]:
    """The prompt's ids here: the bytes of ``role\ncontent\n`` per message, each + 3."""
    return [b + 3 for m in messages for b in f"{m['role']}\n{m['content']}\n".encode()]


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, addr: tuple[str, int], script: list[str], slow_s: float) -> None:
        super().__init__(addr, Handler)
        self.script, self.slow_s = script, slow_s
        self.lock = threading.Lock()
        self.n = 0
        self.log: list[dict[str, Any]] = []


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Server

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def _send(self, status: int, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802
        self._send(200, json.dumps(self.server.log).encode())

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        msgs = body["messages"]
        offered = re.findall(r"available moves: (.*)", msgs[1]["content"])[0].split(", ")
        with self.server.lock:
            i = self.server.n
            self.server.n += 1
            mode = self.server.script[i % len(self.server.script)]
            self.server.log.append({"mode": mode, "reask": len(msgs) > 2, "model": body.get("model")})
        name = [m for m in offered if m != "no_move"][i % max(1, len(offered) - 1)] if len(offered) > 1 \
            else offered[0]
        content = {"valid": name, "slow": name, "case": name.replace("_", "-").upper() + "!",
                   "chatty": f"I think {name} is best.", "invalid": "moonwalk"}.get(mode)
        if mode == "slow":
            time.sleep(self.server.slow_s)
        if mode == "missing":
            return self._send(500, b'{"error": "overloaded"}')
        if mode == "malformed":
            return self._send(200, b"{not json")
        if mode == "empty":
            return self._send(200, b'{"choices": []}')
        toks = re.findall(r"\w+|\W", content or "")
        ids = [fake_id(t) for t in toks]
        shown = [f"token_id:{n}" for n in ids] if body.get("return_tokens_as_token_ids") else toks
        reply = {"id": f"fake-{i}", "object": "chat.completion", "model": body.get("model"),
                 "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                              "logprobs": {"content": [{"token": t, "logprob": -0.25} for t in shown]},
                              "finish_reason": "stop"}]}
        if body.get("return_token_ids"):
            reply["prompt_token_ids"] = fake_prompt_ids(msgs)
            reply["choices"][0]["token_ids"] = ids
        self._send(200, json.dumps(reply).encode())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--script", default="valid")
    ap.add_argument("--slow-ms", type=float, default=1000.0)
    args = ap.parse_args()
    srv = Server(("127.0.0.1", args.port), parse_script(args.script), args.slow_ms / 1e3)
    print(f"listening {srv.server_address[1]}", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
