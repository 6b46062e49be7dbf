"""The announcement of a request that may score (server/announce.py): made before its body is read, ended when it
ends, and ended by the chat route as soon as it sees the request generates rather than scores."""

from __future__ import annotations

import inspect

from .unready import ready_client


class Recorder:
    """An intake that records each announcement and which function ended it."""

    def __init__(self) -> None:
        self.open: set[object] = set()
        self.expected = 0
        self.withdrawn_by: list[str] = []

    def expect(self) -> object:
        handle = object()
        self.open.add(handle)
        self.expected += 1
        return handle

    def withdraw(self, handle: object) -> None:
        self.open.discard(handle)
        caller = next(frame.function for frame in inspect.stack()[1:] if frame.function != "withdraw")
        self.withdrawn_by.append(caller)


def test_a_scoring_request_is_announced_and_withdrawn_once_it_is_answered() -> None:
    with ready_client() as client:
        recorder = client.app.state.service.engine.intake = Recorder()
        assert client.post("/v1/score", json={"messages": []}).status_code == 400  # refused: it still ends
        assert client.get("/healthz").status_code == 200  # not a scoring route: not announced
        assert (recorder.expected, recorder.open, recorder.withdrawn_by) == (1, set(), ["handle"])


def test_a_chat_completion_that_generates_is_withdrawn_by_its_route() -> None:
    with ready_client() as client:
        recorder = client.app.state.service.engine.intake = Recorder()
        client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
        assert recorder.expected == 1 and not recorder.open
        assert recorder.withdrawn_by == ["chat_completions"]  # before it generates, and only once
