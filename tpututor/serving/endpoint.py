"""A small HTTP endpoint on 127.0.0.1 around a generate function, bounded in time: lesson 09a (inference
and serving) serves its model with it, lesson 13a (bring your own model) a fine-tuned checkpoint.

:func:`serve` answers the request shape of the OpenAI completions API that vLLM serves; the
:class:`Endpoint` it returns stops on ``stop()``, on leaving ``with``, or when its lifetime ends.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "Endpoint",
    "serve",
]

# --------------------------------------------------------------------------- a local HTTP endpoint


class Endpoint:
    """A running HTTP server on 127.0.0.1 (from :func:`serve`); ``stop()`` ends it, as does leaving ``with``."""

    def __init__(self, server, thread, timer):
        self._server, self._thread, self._timer = server, thread, timer
        host, port = server.server_address[:2]
        self.url = f"http://{host}:{port}"
        self.requests = 0

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        self._timer.cancel()
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> Endpoint:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def serve(
    complete: Callable[[str, int], str],
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    lifetime_s: float = 120,
    max_tokens: int = 256,
    model: str = "tpututor-lm",
) -> Endpoint:
    """Serve ``complete(prompt, max_tokens) -> text`` at ``POST /v1/completions`` and ``GET /health``,
    on 127.0.0.1 only (IPv4 loopback), for at most ``lifetime_s`` seconds.

    Requests and replies have the shape of the OpenAI completions API that vLLM serves: a reply
    carries ``id``, ``object``, ``created``, ``model``, ``choices`` and ``usage`` (prompt tokens
    counted as characters, lm's tokenizer); an error (a prompt that does not fit, bad JSON) is
    ``{"error": {"message", "type", "param", "code"}}`` with status 400 (404 for an unknown
    route). Requests are served one at a time, in order.
    """
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    if host not in ("127.0.0.1", "localhost"):
        raise ValueError(f"serve() binds the IPv4 loopback interface only, not {host!r}: use host='127.0.0.1'")
    if not lifetime_s or lifetime_s <= 0:
        raise ValueError(f"lifetime_s must be a positive number of seconds, got {lifetime_s!r}")
    lock = threading.Lock()
    endpoint: list[Endpoint] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # keep the notebook quiet
            pass

        def _reply(self, code: int, body: Mapping[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, code: int, kind: str, message: str) -> None:
            self._reply(code, {"error": {"message": message, "type": kind, "param": None, "code": code}})

        def do_GET(self) -> None:
            if self.path == "/health":
                self._reply(200, {"status": "ok"})
            else:
                self._error(404, "NotFoundError", f"no route {self.path}: use POST /v1/completions or GET /health")

        def do_POST(self) -> None:
            if self.path != "/v1/completions":
                self._error(404, "NotFoundError", f"no route {self.path}: use POST /v1/completions")
                return
            try:
                size = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(size) or b"{}")
                prompt, n = body["prompt"], int(body.get("max_tokens", 16))
                if not isinstance(prompt, str):
                    raise ValueError("'prompt' must be a string")
                if not 1 <= n <= max_tokens:
                    raise ValueError(f"max_tokens must be 1..{max_tokens}, got {n}")
                with lock:
                    text = complete(prompt, n)
                    endpoint[0].requests += 1
                    number = endpoint[0].requests
            except (KeyError, ValueError, TypeError) as err:
                self._error(400, "BadRequestError", f"{type(err).__name__}: {err}")
                return
            self._reply(
                200,
                {
                    "id": f"cmpl-{number}",
                    "object": "text_completion",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": "length"}],
                    "usage": {"prompt_tokens": len(prompt), "completion_tokens": n, "total_tokens": len(prompt) + n},
                },
            )

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True, name="tpututor-decode-serve"
    )
    timer = threading.Timer(lifetime_s, server.shutdown)
    timer.daemon = True
    endpoint.append(Endpoint(server, thread, timer))
    thread.start()
    timer.start()
    return endpoint[0]
