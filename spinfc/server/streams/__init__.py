"""Resumable streams: a streamed generation sent with X-Conversation-Id is kept (registry.py), so a client that
reconnects reads it from a byte offset, then its live tail (kept.py)."""

from spinfc.server.streams.kept import KeptStream  # noqa: F401
from spinfc.server.streams.registry import StreamRegistry  # noqa: F401
