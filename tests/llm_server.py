"""A local HTTP server that speaks the OpenAI Chat Completions protocol, for the LLM judge's
tests and benchmark: the real `openai` client talks to it over a socket, as to any endpoint.

Each request is answered by a scripted `Reply`: a grade, an HTTP error (429 with Retry-After,
500, 400), a reply slower than the client's timeout, or any content (malformed JSON, empty,
prose). A reply is chosen per pair — the pair being the request's query and document lines, as
the default template writes them — from the replies planned for it, in order, then from
`default` (a function of the pair). Every request is counted per pair.

Run as a script it serves every request a grade after a fixed delay (for the benchmark):
``python tests/llm_server.py --delay 0.3`` prints its URL and serves until killed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
import zlib
from collections import Counter, defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Key = tuple[str, str]  # (query, document's first line)
QUERY = re.compile(r"^Query: (.*)$", re.MULTILINE)
DOCUMENT = re.compile(r"^Document: (.*)$", re.MULTILINE)


@dataclass(frozen=True)
class Reply:
    status: int = 200
    content: str | None = None
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    message: str = ""

    @staticmethod
    def grade(grade: Any, reason: str = "scripted", delay: float = 0.0) -> Reply:
        return Reply(content=json.dumps({"reason": reason, "grade": grade}), delay=delay)

    @staticmethod
    def text(content: str | None) -> Reply:
        """Any content as the model's message: prose, malformed JSON, empty, None."""
        return Reply(content=content)

    @staticmethod
    def error(status: int, message: str = "", retry_after: str | None = None) -> Reply:
        headers = {"Retry-After": retry_after} if retry_after is not None else {}
        return Reply(status=status, headers=headers, message=message or f"error {status}")

    @staticmethod
    def slow(seconds: float, grade: int = 2) -> Reply:
        """A grade that comes after `seconds`: beyond the client's timeout, a timeout."""
        return Reply.grade(grade, delay=seconds)


def key_of(body: dict[str, Any]) -> Key:
    text = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
    query, document = QUERY.search(text), DOCUMENT.search(text)
    return (query.group(1) if query else "", document.group(1) if document else "")


class LLMServer:
    """The server, started on 127.0.0.1 at a free port; `stop` ends it."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay  # added to every reply
        self.default: Callable[[Key], Reply] = lambda key: Reply.grade(2)
        self.planned: dict[Key, deque[Reply]] = defaultdict(deque)
        self.counts: Counter[Key] = Counter()
        self.bodies: list[dict[str, Any]] = []
        self.keys_sent: set[str] = set()  # the Authorization headers seen
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.httpd.daemon_threads = True
        self.httpd.request_queue_size = 128
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    @property
    def requests(self) -> int:
        with self.lock:
            return sum(self.counts.values())

    def plan(self, key: Key, *replies: Reply) -> None:
        with self.lock:
            self.planned[key].extend(replies)

    def reply_for(self, body: dict[str, Any]) -> Reply:
        key = key_of(body)
        with self.lock:
            self.counts[key] += 1
            self.bodies.append(body)
            queue = self.planned.get(key)
            if queue:
                return queue.popleft()
        return self.default(key)

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _handler(server: LLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: the client reuses its connections
        # Headers and body go out in two writes: with Nagle's algorithm the body would wait
        # for the client's delayed ACK (40 ms on Linux), an endpoint slower than it says.
        disable_nagle_algorithm = True

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if not self.path.endswith("/chat/completions"):
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            server.keys_sent.add(self.headers.get("Authorization", ""))
            reply = server.reply_for(body)
            pause = reply.delay + server.delay
            if pause:
                time.sleep(pause)
            if reply.status != 200:
                self._send(reply.status, {"error": {"message": reply.message}}, reply.headers)
                return
            self._send(200, completion(body, reply.content))

        def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout): nobody to answer

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def completion(body: dict[str, Any], content: str | None) -> dict[str, Any]:
    """A Chat Completions response; tokens are counted as characters / 4, as a rough model."""
    prompt = sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
    used = len(content or "")
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "test"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt // 4,
            "completion_tokens": used // 4,
            "total_tokens": prompt // 4 + used // 4,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=0.3, help="seconds before every reply")
    args = parser.parse_args()
    server = LLMServer(delay=args.delay)
    server.default = lambda key: Reply.grade(zlib.crc32("/".join(key).encode()) % 4, "intent")
    print(server.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()
    sys.exit(0)


if __name__ == "__main__":
    main()
