"""The conventions users bring from vLLM, TEI and the OpenAI API (no model needed): /health, HEAD on the health
routes, --api-key as --token, --served-model-name, OpenAI's error types, an OpenAPI schema whose errors are the
envelope the server sends, HTTP framing errors in the envelope, and an access log without the query string's
values."""

from __future__ import annotations

import argparse
import json
import threading
import time

import httpx
import pytest
import uvicorn
from litestar.testing import TestClient

from spinfc.config import EngineSettings, ServerSettings, Settings, add_arguments, load_settings
from spinfc.server.app import create_app
from spinfc.server.framing import framed_protocol
from spinfc.server.logs import log_config

from .unready import no_model, ready_client

SCORE = {"messages": [{"role": "user", "content": "Hello"}],
         "scoring": {"queries": [{"id": "q", "template": "Is it?<?>", "options": [" yes", " no"]}]}}


def settings_of(argv: list[str], environ: dict | None = None) -> Settings:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return load_settings(parser.parse_args(argv), environ=environ or {})


def test_api_key_is_the_token() -> None:
    assert settings_of(["--api-key", "k1"]).server.token == "k1"
    assert settings_of([], {"SPINFC_API_KEY": "k2"}).server.token == "k2"
    assert settings_of(["--token", "k3"], {"SPINFC_API_KEY": "k2"}).server.token == "k3"
    assert settings_of([], {"SPINFC_TOKEN": "k4", "SPINFC_API_KEY": "k2"}).server.token == "k4"


def test_health_answers_get_and_head_without_the_token() -> None:
    app = create_app(Settings(server=ServerSettings(token="s3cret")), load_model=no_model)
    with TestClient(app) as client:
        for path in ("/health", "/healthz"):
            assert client.get(path).json() == {"status": "ok", "model": "gemma3-270m"}
            head = client.head(path)
            assert head.status_code == 200 and head.content == b""
        time.sleep(0.2)  # the loader fails at once: /livez and /readyz say so, to HEAD as to GET
        for path in ("/livez", "/readyz"):
            assert client.head(path).status_code == client.get(path).status_code == 503
        assert client.get("/v1/models").json()["error"]["type"] == "authentication_error"


def test_served_model_name_is_reported_and_accepted() -> None:
    settings = Settings(engine=EngineSettings(served_model_name=("scorer", "scorer-v1")))
    with TestClient(create_app(settings, load_model=no_model)) as client:
        card = client.get("/v1/models").json()["data"][0]
        assert card["id"] == "scorer" and {"scorer-v1", "gemma3-270m"} <= set(card["aliases"])
        assert client.get("/health").json()["model"] == "scorer"
    with ready_client(settings) as client:
        for name in ("scorer", "scorer-v1", "gemma3-270m"):  # accepted: the request gets as far as the frontend
            body = {**SCORE, "scoring": {"queries": []}, "model": name}
            assert client.post("/v1/score", json=body).json()["error"]["code"] == "no_queries", name
        other = client.post("/v1/score", json={**SCORE, "model": "gpt-4"}).json()["error"]
        assert other["code"] == "model_not_served" and "'scorer'" in other["message"]


def test_error_types_are_openais() -> None:
    app = create_app(Settings(server=ServerSettings(token="t", trusted_token="front")), load_model=no_model)
    user = {"Authorization": "Bearer t"}
    with TestClient(app) as client:
        assert client.get("/v1/models").json()["error"]["type"] == "authentication_error"
        for method in ("POST", "DELETE"):
            drain = client.request(method, "/v0/drain", headers=user)
            assert drain.status_code == 403 and drain.json()["error"]["type"] == "permission_error"
        assert client.get("/v1/nothing", headers=user).json()["error"]["type"] == "not_found_error"
        time.sleep(0.2)
        unready = client.post("/v1/score", json=SCORE, headers=user)
        assert unready.status_code == 503 and unready.json()["error"]["type"] == "server_error"
        allow = client.options("/v0/drain", headers=user).headers["allow"]
        assert set(allow.replace(" ", "").split(",")) == {"DELETE", "OPTIONS", "POST"}


def test_the_schema_documents_every_error_as_the_envelope() -> None:
    schema = create_app(load_model=no_model).openapi_schema.to_schema()
    text = str(schema)
    assert "'status_code'" not in text and "'extra'" not in text  # Litestar's own error body: never sent
    expected = {"/v1/score": {"400", "401", "403", "413", "415", "429", "500", "503"},
                "/v1/models": {"401"}, "/readyz": {"503"}}
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            for status, response in operation["responses"].items():
                if status.startswith(("4", "5")):
                    ref = response["content"]["application/json"]["schema"]["$ref"]
                    envelope = "/MessagesErrorResponse" if path == "/v1/messages" else "/ErrorResponse"  # Anthropic's
                    assert ref.endswith(envelope), (path, method, status)
            assert expected.get(path, set()) <= set(operation["responses"]), (path, method)
    assert set(schema["paths"]["/v0/drain"]) >= {"post", "delete"}
    assert "403" in schema["paths"]["/v0/drain"]["delete"]["responses"]
    assert "head" in schema["paths"]["/healthz"] and "/health" in schema["paths"]
    components = schema["components"]["schemas"]
    for name in ("ScoreRequest", "ScoringQuery", "Message", "ChatRequest", "DecisionRequest", "DecisionQuestion",
                 "MessagesRequest", "ContentBlock", "StreamLookup", "StreamControl"):
        assert components[name]["additionalProperties"] is False, name  # as body.py refuses an unknown field
    assert components["ChatRequest"]["properties"]["messages"]["minItems"] == 1


def test_a_token_in_the_query_string_stays_out_of_the_access_log(capfd) -> None:
    app = create_app(Settings(server=ServerSettings(token="real")), load_model=no_model)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_config=log_config(),
                                           log_level="info", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline
            time.sleep(0.05)
        port = server.servers[0].sockets[0].getsockname()[1]
        answer = httpx.get(f"http://127.0.0.1:{port}/v1/models?api_key=leaked-s3cret&x=1")
        assert answer.status_code == 401  # a token is read from the Authorization header only
    finally:
        server.should_exit = True
        thread.join(timeout=30)
    captured = capfd.readouterr()
    access = [line for line in (captured.out + captured.err).splitlines() if '"GET /v1/models' in line]
    assert access and all("/v1/models?api_key=***&x=***" in line for line in access), access  # uvicorn's line


@pytest.mark.parametrize("flag", ["--token", "--api-key"])
def test_the_help_names_both_flags(flag, capsys) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--help"])
    assert "--token TOKEN, --api-key TOKEN" in capsys.readouterr().out


def test_http_framing_errors_are_answered_in_the_envelope(capfd) -> None:
    import socket

    app = create_app(load_model=no_model)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on",
                                           http=framed_protocol()))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline
            time.sleep(0.05)
        port = server.servers[0].sockets[0].getsockname()[1]
        replies = []
        for raw in (b"GARBAGE\r\n\r\n", b"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n",
                    b"POST /v1/score HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(raw)
                replies.append(b"".join(iter(lambda: sock.recv(65536), b"")))
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:  # a body cut off: a 400
            sock.sendall(b"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 100\r\n\r\n{\"messages\"")
        time.sleep(0.5)
        counted = httpx.get(f"http://127.0.0.1:{port}/metrics").text
    finally:
        server.should_exit = True
        thread.join(timeout=30)
    for reply in replies:
        head, _, body = reply.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400") and b"application/json" in head, reply
        assert json.loads(body)["error"]["code"] == "invalid_http"
    logged = "".join(capfd.readouterr())
    assert "unhandled error" not in logged and "Exception in ASGI application" not in logged, logged
    assert 'route="/v1/score",status="400"' in counted and 'status="500"' not in counted, counted
