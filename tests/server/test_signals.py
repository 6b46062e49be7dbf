"""`spinfc serve` as a process, stopped by real signals while a stream runs (smollm2-135m on the CPU, greedy, asked
to count to 1000, so the answer outlasts the test): the first SIGTERM ends the stream with a last `shutting_down`
event at --shutdown-timeout and the process exits; a second SIGTERM answers it at once (the same last event) and
exits. No traceback either way."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
COUNT = {"messages": [{"role": "user", "content": "Count from 1 to 1000, separated by commas."}], "stream": True,
         "max_tokens": 2048, "temperature": 0}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve(port: int, shutdown_timeout: int, tmp_path: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    log = open(tmp_path / "stderr.txt", "w")
    process = subprocess.Popen(
        [sys.executable, "-m", "spinfc.cli", "serve", "smollm2-135m", "--warmup", "none", "--host", "127.0.0.1",
         "--port", str(port), "--shutdown-timeout", str(shutdown_timeout)], env=env, stderr=log, cwd=tmp_path)
    deadline = time.monotonic() + 600
    while True:
        assert process.poll() is None, (tmp_path / "stderr.txt").read_text()
        assert time.monotonic() < deadline, "the server did not get ready"
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200:
                return process
        except httpx.HTTPError:
            pass
        time.sleep(0.3)


def stream(port: int, events: list) -> None:
    try:
        with httpx.stream("POST", f"http://127.0.0.1:{port}/v1/chat/completions", json=COUNT, timeout=120) as answer:
            for line in answer.iter_lines():
                if line.startswith("data: "):
                    events.append((time.monotonic(), line.removeprefix("data: ")))
    except httpx.HTTPError as error:
        events.append((time.monotonic(), error))


@pytest.mark.parametrize("signals", [1, 2])
def test_sigterm_ends_streams_at_the_deadline_and_a_second_one_at_once(tmp_path, signals):
    port = free_port()
    process = serve(port, shutdown_timeout=3 if signals == 1 else 600, tmp_path=tmp_path)
    try:
        events: list = []
        reader = threading.Thread(target=stream, args=(port, events), daemon=True)
        reader.start()
        deadline = time.monotonic() + 120
        while len(events) < 3:  # the role chunk and two pieces: the answer is being generated
            assert time.monotonic() < deadline and reader.is_alive(), events
            time.sleep(0.05)
        signalled = time.monotonic()
        for _ in range(signals):
            process.send_signal(signal.SIGTERM)
            time.sleep(1.0)
        status = process.wait(timeout=60)
        reader.join(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert status == -signal.SIGTERM  # uvicorn ends by its signal's default action, as a supervisor expects
    stopped_after = time.monotonic() - signalled
    at, last = events[-1]
    if signals == 1:
        assert json.loads(last)["error"]["code"] == "shutting_down"
        assert 2.9 <= at - signalled < 8 and stopped_after < 12
    else:  # answered at once, not cut: the stream's last event is the error
        assert json.loads(last)["error"]["code"] == "shutting_down" and at - signalled < 3 and stopped_after < 6
    assert "Traceback" not in (tmp_path / "stderr.txt").read_text()
