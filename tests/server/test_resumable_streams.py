"""Kept streams and cancel against a live server (uvicorn on a free port, the real gemma3-270m on the CPU): a stream
dropped mid-way goes on generating and is read again from its offset with no byte lost or repeated; a cancel stops
only its own generation (stop reason `cancelled`, its place in the engine freed), for its owner only; a bad id, a
stranger's token and an expired stream are each one named error. One server for the module."""

from __future__ import annotations

import json

import anthropic
import httpx
import pytest

from spinfc.config import EngineSettings, FeatureSettings, ServerSettings, Settings
from spinfc.server.app import create_app

from packaged import load_shared

from .live import live_server, wait_until

pytestmark = pytest.mark.slow  # a live server on gemma3-270m

ALICE, BOB = {"Authorization": "Bearer alice"}, {"Authorization": "Bearer bob"}  # an open server: owners by token
COUNT = [{"role": "user", "content": "Count from one to one hundred: one, two, three,"}]
SETTINGS = Settings(engine=EngineSettings(model="gemma3-270m", device="cpu", token_budget=512, warmup="short"),
                    server=ServerSettings(stream_count=2), features=FeatureSettings(extraction=False))


@pytest.fixture(scope="module")
def live():
    app = create_app(SETTINGS, load_model=load_shared)
    with live_server(app) as url:
        yield url, app.state.service


@pytest.fixture(scope="module")
def base_url(live) -> str:
    return live[0]


def chat(max_tokens: int, stream: bool = True) -> dict:
    return {"messages": COUNT, "max_tokens": max_tokens, "temperature": 0, "stream": stream}


def lookup(base_url: str, id: str, headers=ALICE) -> httpx.Response:
    return httpx.post(f"{base_url}/v1/streams/lookup", json={"conversation_id": id}, headers=headers, timeout=60)


def start(base_url: str, id: str, body: dict) -> None:
    """A kept stream started and its connection closed at once: the generation goes on without a reader."""
    with httpx.stream("POST", f"{base_url}/v1/chat/completions", json=body, timeout=300,
                      headers={**ALICE, "X-Conversation-Id": id}) as answer:
        assert answer.status_code == 200 and answer.headers["x-conversation-id"] == id


def finished(base_url: str, id: str) -> bytes:
    """The whole kept stream, once it has ended."""
    wait_until(lambda: lookup(base_url, id).json()["status"] == "done", timeout=300, what=f"{id} to end")
    return httpx.get(f"{base_url}/v1/stream/{id}", headers=ALICE, timeout=60).content


def chunks(stream: bytes) -> list:
    """The data of each event: the chat chunks as dicts, then "[DONE]"."""
    data = [line[len(b"data: "):] for line in stream.splitlines() if line.startswith(b"data: ")]
    return [item.decode() if item == b"[DONE]" else json.loads(item) for item in data]


def text_of(events: list) -> str:
    return "".join(e["choices"][0]["delta"].get("content", "") for e in events if isinstance(e, dict) and e["choices"])


def test_a_stream_dropped_midway_is_resumed_from_its_offset_with_no_byte_lost_or_repeated(live) -> None:
    base_url, service = live
    received = b""
    with httpx.stream("POST", f"{base_url}/v1/chat/completions", json=chat(24), timeout=300,
                      headers={**ALICE, "X-Conversation-Id": "resume-1"}) as answer:
        assert answer.headers["content-type"].startswith("text/event-stream")
        for chunk in answer.iter_raw():
            received += chunk
            if received.count(b"data: ") >= 3:  # the role chunk and two pieces: the connection is dropped here
                break
    assert lookup(base_url, "resume-1").json()["status"] == "live"  # mid-way, and nobody reads it now
    whole = finished(base_url, "resume-1")  # it went on generating to its end without a reader
    with httpx.stream("GET", f"{base_url}/v1/stream/resume-1", params={"offset": len(received)}, headers=ALICE,
                      timeout=60) as rest:
        assert rest.headers["x-stream-offset"] == str(len(received))
        tail = b"".join(rest.iter_raw())
    assert received + tail == whole and len(tail) > 0
    events = chunks(whole)
    assert events[-1] == "[DONE]" and events[-2]["choices"][0]["finish_reason"] in ("stop", "length")
    plain = httpx.post(f"{base_url}/v1/chat/completions", json=chat(24, stream=False), timeout=300).json()
    assert text_of(events) == plain["choices"][0]["message"]["content"]  # the whole answer, each piece once
    before = len(service.streams.streams)
    with httpx.stream("POST", f"{base_url}/v1/chat/completions", json=chat(2), headers=ALICE, timeout=300) as bare:
        assert "x-conversation-id" not in bare.headers and b"[DONE]" in b"".join(bare.iter_raw())
    assert len(service.streams.streams) == before  # nothing kept without the header


def test_a_cancel_stops_only_its_own_generation_for_its_owner_only(live) -> None:
    base_url, service = live
    start(base_url, "other", chat(60))  # generating beside the one cancelled
    with httpx.stream("POST", f"{base_url}/v1/chat/completions", json=chat(400), timeout=300,
                      headers={**ALICE, "X-Conversation-Id": "cancel-me"}) as answer:
        lines = answer.iter_lines()
        while '"content":"' not in (line := next(lines)) or '"content":""' in line:  # its first piece
            pass
        control = {"conversation_id": "cancel-me", "action": "cancel"}
        stranger = httpx.post(f"{base_url}/v1/chat/completions/control", json=control, headers=BOB, timeout=60)
        assert stranger.status_code == 403 and stranger.json()["error"]["code"] == "not_stream_owner"
        assert lookup(base_url, "other").json()["status"] == "live"  # the other one is generating meanwhile
        owner = httpx.post(f"{base_url}/v1/chat/completions/control", json=control, headers=ALICE, timeout=60)
        assert owner.json() == {"id": "cancel-me", "object": "stream.control", "action": "cancel",
                                "cancelled": True, "status": "live"}
        rest = [line for line in lines if line.startswith("data: ")]
    events = chunks("\n".join(rest).encode())
    assert events[-1] == "[DONE]" and events[-2]["choices"][0]["finish_reason"] == "cancelled"
    other = chunks(finished(base_url, "other"))
    plain = httpx.post(f"{base_url}/v1/chat/completions", json=chat(60, stream=False), timeout=300).json()
    assert text_of(other) == plain["choices"][0]["message"]["content"]  # untouched: the answer it gets alone
    assert other[-2]["choices"][0]["finish_reason"] == plain["choices"][0]["finish_reason"]
    wait_until(lambda: not service.engine.scheduler.turns.active and not service.generator.queued_turns(),
               timeout=60, what="the engine to free the generations")  # the cancelled one's rows went with it
    again = httpx.post(f"{base_url}/v1/chat/completions/control", json=control, headers=ALICE, timeout=60).json()
    assert again["cancelled"] is False and again["status"] == "done"


def test_a_messages_stream_cancelled_ends_with_stop_reason_cancelled(base_url) -> None:
    client = anthropic.Anthropic(base_url=base_url, api_key="alice", max_retries=0, timeout=300)
    with client.messages.stream(model="gemma3-270m", max_tokens=400, messages=COUNT, extra_body={"temperature": 0},
                                extra_headers={"X-Conversation-Id": "cancel-message"}) as stream:
        for event in stream:
            if event.type == "text":  # x-api-key: alice is the owner, as `Bearer alice` is
                cancel = {"conversation_id": "cancel-message", "action": "cancel"}
                assert httpx.post(f"{base_url}/v1/chat/completions/control", json=cancel, headers=ALICE,
                                  timeout=60).json()["cancelled"] is True
                break
        final = stream.get_final_message()
    assert final.stop_reason == "cancelled" and 0 < final.usage.output_tokens < 400 and final.content[0].text


def test_a_bad_id_a_strangers_token_and_an_expired_stream_are_each_one_named_error(base_url) -> None:
    for k in range(3):  # --stream-count 2: the third pushes out the first
        start(base_url, f"expire-{k}", chat(1))
        finished(base_url, f"expire-{k}")
    refusals = {
        "bad id": httpx.get(f"{base_url}/v1/stream/not%20an%20id", headers=ALICE, timeout=60),
        "unknown": lookup(base_url, "never-started"),
        "stranger": httpx.get(f"{base_url}/v1/stream/expire-2", headers=BOB, timeout=60),
        "stranger delete": httpx.delete(f"{base_url}/v1/stream/expire-2", headers=BOB, timeout=60),
        "expired": httpx.get(f"{base_url}/v1/stream/expire-0", headers=ALICE, timeout=60),
        "offset": httpx.get(f"{base_url}/v1/stream/expire-2", params={"offset": 10**6}, headers=ALICE, timeout=60),
    }
    got = {name: (answer.status_code, answer.json()["error"]["code"]) for name, answer in refusals.items()}
    assert got == {"bad id": (400, "invalid_conversation_id"), "unknown": (404, "stream_not_found"),
                   "stranger": (403, "not_stream_owner"), "stranger delete": (403, "not_stream_owner"),
                   "expired": (410, "stream_expired"), "offset": (400, "invalid_offset")}
    assert all("Traceback" not in answer.text for answer in refusals.values())
    deleted = httpx.delete(f"{base_url}/v1/stream/expire-2", headers=ALICE, timeout=60).json()
    assert deleted["status"] == "deleted" and lookup(base_url, "expire-2").status_code == 404
