#!/usr/bin/env python3
"""An outside harness for the release daemon, in Python's standard library only: a fake
Telegram Bot API (long-polled `getUpdates`, `sendMessage`) and a fake OpenAI chat
completions server (an SSE answer at once), both `http.server.ThreadingHTTPServer`, the way
the step-2 and step-18 outside checks were run. It sends DMs one at a time and splits each
reply like `hermes-bench` does: inbound (the `getUpdates` answer carrying the update is
written -> the LLM request's headers are read) and outbound (the answer stream is written ->
the `sendMessage` headers are read). Every inbound is also split at the LLM side: headers
read -> body read -> body parsed, and whether the request came on a new connection.

The switches are the suspects for why the inbound step was twice as slow through such a
fake as through the Rust one (docs/performance.md, "Step 18: the outside harness"):

  --http11     answer HTTP/1.1 with keep-alive (http.server's default is HTTP/1.0: every
               answer closes its connection, so each call opens a new one)
  --nodelay    TCP_NODELAY on the accepted sockets (http.server writes the status line and
               headers, then the body, in separate send()s)
  --home DIR   where the daemon's home (and its database) goes (default: under /tmp)

usage: harness.py --daemon target/release/hermes-gateway [-n 100] [--http11] [--nodelay]
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

now = time.perf_counter


class State:
    def __init__(self):
        self.lock = threading.Condition()
        self.queue = []  # pending updates
        self.next_update = 1
        self.served = {}  # update_id -> when the answer carrying it was written
        self.polls = []  # when each getUpdates arrived
        self.sent = []  # (chat_id, text, when the sendMessage headers were read)
        self.llm = []  # dicts: headers, body_read, parsed, new_connection, stream_end
        self.connections = set()


STATE = State()


class Handler(BaseHTTPRequestHandler):
    nodelay = False

    def setup(self):
        super().setup()
        if self.nodelay:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args):
        pass

    def body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def answer(self, obj, status=200):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class Telegram(Handler):
    def do_POST(self):
        headers_read = now()
        method = self.path.rsplit("/", 1)[-1].lower()
        raw = self.body()
        params = json.loads(raw) if raw.startswith(b"{") else {}
        if method == "getupdates":
            return self.get_updates(params)
        if method == "sendmessage":
            with STATE.lock:
                STATE.sent.append((params.get("chat_id"), params.get("text"), headers_read))
                STATE.lock.notify_all()
            chat = params.get("chat_id")
            return self.answer({"ok": True, "result": {
                "message_id": len(STATE.sent), "date": 1_700_000_000, "text": params.get("text"),
                "chat": {"id": chat, "type": "private", "first_name": "Someone"},
                "from": {"id": 123456, "is_bot": True, "first_name": "Hermes",
                         "username": "hermes_bot"}}})
        if method == "getme":
            return self.answer({"ok": True, "result": {
                "id": 123456, "is_bot": True, "first_name": "Hermes",
                "username": "hermes_bot", "can_join_groups": True,
                "can_read_all_group_messages": False, "supports_inline_queries": False,
                "can_connect_to_business": False, "has_main_web_app": False}})
        if method == "getwebhookinfo":
            return self.answer({"ok": True, "result": {
                "url": "", "has_custom_certificate": False, "pending_update_count": 0}})
        return self.answer({"ok": True, "result": True})

    def get_updates(self, params):
        offset = params.get("offset", 0)
        deadline = now() + min(params.get("timeout", 0), 30)
        with STATE.lock:
            STATE.polls.append(now())
            while True:
                STATE.queue = [u for u in STATE.queue if u["update_id"] >= offset]
                if STATE.queue or now() >= deadline:
                    batch = list(STATE.queue)
                    break
                STATE.lock.wait(max(0.0, deadline - now()))
        data = json.dumps({"ok": True, "result": batch}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        written = now()
        self.wfile.write(data)
        with STATE.lock:
            for u in batch:
                STATE.served.setdefault(u["update_id"], written)


class Llm(Handler):
    def do_GET(self):
        self.answer({"object": "list", "data": [{"id": "fake-model", "object": "model"}]})

    def do_POST(self):
        headers_read = now()
        peer = self.client_address
        new_connection = peer not in STATE.connections
        STATE.connections.add(peer)
        raw = self.body()
        body_read = now()
        request = json.loads(raw)
        parsed = now()
        events = [
            {"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]},
            {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": None}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        ]
        frames = [
            ("data: " + json.dumps({"id": "c", "object": "chat.completion.chunk",
                                    "model": "fake", **e}) + "\n\n").encode()
            for e in events
        ] + [b"data: [DONE]\n\n"]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        if self.protocol_version == "HTTP/1.1":
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for frame in frames:
            if self.protocol_version == "HTTP/1.1":
                frame = b"%x\r\n%s\r\n" % (len(frame), frame)
            self.wfile.write(frame)
        if self.protocol_version == "HTTP/1.1":
            self.wfile.write(b"0\r\n\r\n")
        stream_end = now()
        with STATE.lock:
            STATE.llm.append({
                "headers": headers_read, "body_read": body_read, "parsed": parsed,
                "stream_end": stream_end, "new_connection": new_connection,
                "bytes": len(raw), "last": request["messages"][-1].get("content"),
            })


def serve(handler):
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def p50(xs):
    return round(statistics.median(xs) * 1000, 3) if xs else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--daemon", required=True)
    ap.add_argument("-n", type=int, default=100)
    ap.add_argument("--http11", action="store_true")
    ap.add_argument("--nodelay", action="store_true")
    ap.add_argument("--home", default=None)
    a = ap.parse_args()
    for h in (Telegram, Llm):
        h.protocol_version = "HTTP/1.1" if a.http11 else "HTTP/1.0"
        h.nodelay = a.nodelay
    tg, llm = serve(Telegram), serve(Llm)
    home = tempfile.mkdtemp(prefix="hermes-outside-", dir=a.home)
    os.makedirs(os.path.join(home, "work"))
    with open(os.path.join(home, "config.yaml"), "w") as f:
        f.write(f"""model:
  provider: custom
  default: fake-model
  base_url: http://127.0.0.1:{llm.server_port}/v1
  api_key: sk-test-secret
  context_length: 131072
security:
  tirith_enabled: false
http:
  listen: 127.0.0.1:0
terminal:
  cwd: {home}/work
platforms:
  telegram:
    enabled: true
    extra:
      base_url: http://127.0.0.1:{tg.server_port}
      poll_timeout: 2
delivery:
  rate_per_second: 1000
  burst: 1000
  bot_rate_per_second: 100000
  bot_burst: 100000
""")
    with open(os.path.join(home, ".env"), "w") as f:
        f.write("TELEGRAM_BOT_TOKEN=123456:TEST-TOKEN\nTELEGRAM_ALLOW_ALL_USERS=true\n")
    for name in ("config.yaml", ".env"):
        os.chmod(os.path.join(home, name), 0o600)
    log = open(os.path.join(home, "daemon.log"), "w")
    env = dict(os.environ, HERMES_LOG=os.environ.get("HERMES_LOG", "warn"))
    daemon = subprocess.Popen([a.daemon, "run", "--home", home], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=log, env=env)
    try:
        deadline = now() + 10
        while not STATE.polls and now() < deadline:
            time.sleep(0.001)
        if not STATE.polls:
            log.flush()
            sys.exit("no getUpdates within 10 s; log:\n" + open(log.name).read()[-2000:])
        chat = 4242
        inbound, outbound, to_headers, body_read, parsed, new_conn = [], [], [], [], [], 0
        for i in range(a.n + 10):
            text = f"message {i}"
            with STATE.lock:
                uid = STATE.next_update
                STATE.next_update += 1
                STATE.queue.append({"update_id": uid, "message": {
                    "message_id": uid, "date": int(time.time()), "text": text,
                    "chat": {"id": chat, "type": "private", "first_name": "Ana"},
                    "from": {"id": chat, "is_bot": False, "first_name": "Ana"}}})
                llm_before, sent_before = len(STATE.llm), len(STATE.sent)
                STATE.lock.notify_all()
                end = now() + 15
                while len(STATE.sent) == sent_before and now() < end:
                    STATE.lock.wait(end - now())
                if len(STATE.sent) == sent_before:
                    sys.exit(f"no reply to message {i}")
                served = STATE.served[uid]
                call = STATE.llm[llm_before]
                sent_at = STATE.sent[sent_before][2]
            if i >= 10:  # warm-up
                inbound.append(call["headers"] - served)
                to_headers.append(call["headers"] - served)
                body_read.append(call["body_read"] - call["headers"])
                parsed.append(call["parsed"] - call["body_read"])
                outbound.append(sent_at - call["stream_end"])
                new_conn += call["new_connection"]
            time.sleep(0.01)
        print(json.dumps({
            "http": Telegram.protocol_version, "nodelay": a.nodelay, "home": home,
            "n": a.n, "request_bytes_last": STATE.llm[-1]["bytes"],
            "inbound_p50_ms": p50(inbound), "outbound_p50_ms": p50(outbound),
            "llm_body_read_p50_ms": p50(body_read), "llm_body_parse_p50_ms": p50(parsed),
            "llm_requests_on_a_new_connection": new_conn,
        }))
    finally:
        daemon.terminate()
        try:
            daemon.wait(10)
        except subprocess.TimeoutExpired:
            daemon.kill()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
