"""A real OpenAI-compatible chat-completions server on 127.0.0.1, answering from a script.

``http.server`` in a thread, on a free loopback port. Each POST to ``/v1/chat/completions`` takes
the next entry of ``script``:

- ``{"json": obj}``: an assistant message whose content is ``json.dumps(obj)``;
- ``{"text": s}``: an assistant message with content ``s`` (e.g. not JSON);
- ``{"refusal": s}``: a message with ``refusal`` set and no content;
- ``{"status": n}``: HTTP status ``n`` with an error body;
- ``"sleep"`` key (seconds) on any entry: wait that long before answering (a timeout).

An empty script answers ``{"summary": "", "facts": []}``.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ChatServer:
    """See the module docstring; ``requests`` records each request's path, auth and body."""

    def __init__(self) -> None:
        self.script: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                server.requests.append(
                    {"path": self.path, "auth": self.headers.get("Authorization"), "body": body}
                )
                entry = server.script.pop(0) if server.script else {"json": {"summary": ""}}
                if "sleep" in entry:
                    time.sleep(entry["sleep"])
                status = entry.get("status", 200)
                if status != 200:
                    payload: dict[str, Any] = {"error": {"message": f"scripted {status}"}}
                else:
                    message: dict[str, Any] = {"role": "assistant", "content": None}
                    if "json" in entry:
                        message["content"] = json.dumps(entry["json"])
                    elif "text" in entry:
                        message["content"] = entry["text"]
                    if "refusal" in entry:
                        message["refusal"] = entry["refusal"]
                    payload = {
                        "id": "chatcmpl-test",
                        "object": "chat.completion",
                        "model": body.get("model"),
                        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                    }
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout): nothing to answer

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    def user_messages(self) -> list[str]:
        """The user message of each request, in order."""
        return [r["body"]["messages"][-1]["content"] for r in self.requests]

    def close(self) -> None:
        """Stop serving and free the port."""
        self.httpd.shutdown()
        self.httpd.server_close()
