"""The wire format of spinfc's HTTP API: the msgspec structs of every request and response body.

    schemas.py      /v1/score, /v1/chat/completions, /v1/models, /v1/packs, errors, health
    decisions.py    /v1/decisions
    completions.py  /v1/completions and the logprobs of a chat completion

Plain structs (msgspec, no torch, no Litestar), so the server, the Python client and `spinfc score` import the same
ones: the client and the bulk job never import the server.
"""
