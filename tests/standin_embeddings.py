"""A stand-in for an OpenAI-compatible embeddings endpoint (Q2): a real HTTP server on
loopback, in a thread of the test process, serving `POST /v1/embeddings` as Ollama, vLLM
or a hosted API does. Its vectors are made from the words of each text (each word a fixed
random direction, summed, deliberately not normalised: memdir must normalise), so texts
that share words are alike; `dimensions` in the request shortens them, as OpenAI's API
does. Every request is logged (path, headers, body) for tests to assert on."""

from __future__ import annotations

import json
import re
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

from memdir.testing import free_port

DIM = 48


def vector(text: str, dim: int = DIM) -> list[float]:
    out = np.zeros(DIM, dtype=np.float64)
    for word in re.findall(r"\w+", text.lower()):
        out += np.random.default_rng(zlib.crc32(word.encode())).standard_normal(DIM)
    return [float(x) * 3.0 for x in out[:dim]]


class StandIn:
    """`key`: the bearer token it requires (None: none). `fail`: an HTTP status to answer
    every request with instead, or "garbage" for a body that is not JSON."""

    def __init__(self, key: str | None = None) -> None:
        self.key = key
        self.fail: int | str | None = None
        self.requests: list[dict[str, Any]] = []
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # quiet: the log is `requests`
                pass

            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(size) or b"null")
                standin.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "body": body}
                )
                if standin.fail == "garbage":
                    return self._answer(200, b"<html>not json</html>")
                if standin.fail is not None:
                    return self._answer(int(standin.fail), b'{"error": "overloaded"}')
                if standin.key is not None and (
                    self.headers.get("Authorization") != f"Bearer {standin.key}"
                ):
                    return self._answer(401, b'{"error": {"message": "invalid api key"}}')
                if self.path != "/v1/embeddings":
                    return self._answer(404, b'{"error": "not found"}')
                dim = int(body.get("dimensions") or DIM)
                texts = body["input"]
                data = [
                    {"object": "embedding", "index": i, "embedding": vector(t, dim)}
                    for i, t in enumerate(texts)
                ]
                data.reverse()  # the order is by "index", not by position
                answer = {"object": "list", "model": body["model"], "data": data}
                self._answer(200, json.dumps(answer).encode())

            def _answer(self, status: int, payload: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> StandIn:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()

    def texts(self) -> list[str]:
        """Every text it was asked to embed, in order."""
        return [t for r in self.requests if isinstance(r["body"], dict) for t in r["body"]["input"]]
