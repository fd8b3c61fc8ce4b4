"""A real OpenAI-compatible chat-completions server on loopback, scripted per test."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ChatServer:
    """Answers POST /v1/chat/completions from a queue of (status, content|payload, headers,
    delay_s), or — with `responder` — with responder(request body) as the message content;
    records every request body and header it got."""

    def __init__(self, replies, responder=None):
        self.replies = list(replies)
        self.responder = responder
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length))
                server.requests.append(body)
                server.headers.append(dict(self.headers))
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": "not found"}, {})
                if server.responder is not None:
                    status, content, headers, delay = 200, server.responder(body), {}, 0
                else:
                    status, content, headers, delay = (server.replies.pop(0) if server.replies
                                                       else (500, "script exhausted", {}, 0))
                if delay:
                    time.sleep(delay)
                if status != 200:
                    return self._send(status, {"error": {"message": content}}, headers)
                payload = content if isinstance(content, dict) else {
                    "id": "x", "object": "chat.completion", "model": body.get("model"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": content}}],
                    "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}}
                self._send(200, payload, headers)

            def _send(self, status, payload, headers):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except BrokenPipeError:  # the client timed out and left
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def ok(content, headers=None, delay=0.0):
    return (200, content, headers or {}, delay)


def fail(status, message="boom", headers=None, delay=0.0):
    return (status, message, headers or {}, delay)
