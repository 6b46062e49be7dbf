"""The kept streams' wire format (server/streams/): lookup, a kept stream's state, and the control of a generation."""

from __future__ import annotations

from typing import Literal

import msgspec


class StreamLookup(msgspec.Struct, forbid_unknown_fields=True):
    conversation_id: str  # the X-Conversation-Id the stream was started with


class StreamInfo(msgspec.Struct):
    id: str  # the conversation id
    object: Literal["stream"]
    route: Literal["chat.completions", "messages"]  # the format of its events
    status: Literal["live", "done", "deleted"]  # live: still generating (GET /v1/stream/{id} tails it)
    bytes: int  # bytes kept so far: GET /v1/stream/{id}?offset= takes 0 up to this
    created: int  # unix seconds


class StreamControl(msgspec.Struct, forbid_unknown_fields=True):
    conversation_id: str  # the X-Conversation-Id of the generation
    action: Literal["cancel"]  # stop it at its next step: its stream ends with stop reason `cancelled`


class StreamControlled(msgspec.Struct):
    id: str
    object: Literal["stream.control"]
    action: Literal["cancel"]
    cancelled: bool  # false: the generation had ended already (its stream is kept as it ended)
    status: Literal["live", "done"]  # the stream's state when the control arrived
