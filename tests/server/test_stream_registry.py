"""The kept streams' registry (server/streams/): bounded in count and bytes, least recently used out, a TTL on a
clock the test turns, owner-checked; each refusal one named error; a reader gets the bytes from its offset, then the
live tail, each byte once. No model: the streams are filled by the test."""

from __future__ import annotations

import asyncio

import pytest

from spinfc.server.errors import ApiError
from spinfc.server.streams import StreamRegistry

ALICE, BOB = "alice-digest", "bob-digest"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def error_frame(error: ApiError) -> bytes:
    return f"error {error.code}\n".encode()


def registry(count: int = 4, max_bytes: int = 1000, ttl: float = 60) -> tuple[StreamRegistry, Clock]:
    clock = Clock()
    return StreamRegistry(count, max_bytes, ttl, clock), clock


def finished(streams: StreamRegistry, id: str, data: bytes = b"x", owner: str = ALICE):
    stream = streams.open(id, owner, "messages", error_frame)
    stream.append(data)
    stream.end()
    return stream


def refused(call, *args) -> tuple[int, str]:
    with pytest.raises(ApiError) as raised:
        call(*args)
    return raised.value.status, raised.value.code


def test_only_the_owner_finds_a_stream_and_an_unknown_id_is_not_found() -> None:
    streams, _ = registry()
    kept = finished(streams, "c1")
    assert streams.find("c1", ALICE) is kept
    assert refused(streams.find, "c1", BOB) == (403, "not_stream_owner")
    assert refused(streams.delete, "c1", BOB) == (403, "not_stream_owner")
    assert refused(streams.find, "c2", ALICE) == (404, "stream_not_found")
    assert streams.delete("c1", ALICE) is kept
    assert refused(streams.find, "c1", ALICE) == (404, "stream_not_found")  # deleted: gone, not expired


def test_a_finished_stream_expires_ttl_after_it_was_last_read_and_a_live_one_never() -> None:
    streams, clock = registry(ttl=60)
    finished(streams, "done")
    live = streams.open("live", ALICE, "messages", error_frame)
    clock.now = 59
    streams.find("done", ALICE)  # read: its TTL starts again
    clock.now = 118
    assert streams.find("done", ALICE) and streams.find("live", ALICE) is live
    clock.now = 178.5
    assert refused(streams.find, "done", ALICE) == (410, "stream_expired")
    assert refused(streams.find, "done", BOB) == (403, "not_stream_owner")  # even gone, a stranger learns nothing more
    clock.now = 10_000
    assert streams.find("live", ALICE) is live


def test_the_count_pushes_out_the_least_recently_used_finished_stream_and_never_a_live_one() -> None:
    streams, _ = registry(count=3)
    finished(streams, "a"), finished(streams, "b"), finished(streams, "c")
    streams.find("a", ALICE)  # b is now the least recently used
    finished(streams, "d")
    assert refused(streams.find, "b", ALICE) == (410, "stream_expired")
    assert [s.id for s in streams.streams.values()] == ["c", "a", "d"]
    full, _ = registry(count=2)
    full.open("x", ALICE, "messages", error_frame), full.open("y", ALICE, "messages", error_frame)
    assert refused(full.open, "z", ALICE, "messages", error_frame) == (429, "too_many_streams")
    assert set(full.streams) == {"x", "y"}


def test_the_bytes_bound_drops_finished_streams_first_then_the_least_recently_used_live_one() -> None:
    streams, _ = registry(count=8, max_bytes=100)
    finished(streams, "old", b"o" * 40)
    first = streams.open("first", ALICE, "chat.completions", error_frame)
    second = streams.open("second", ALICE, "chat.completions", error_frame)
    first.append(b"f" * 40)
    second.append(b"s" * 40)  # 120 bytes: the finished one goes
    assert set(streams.streams) == {"first", "second"} and streams.bytes == 80
    second.append(b"s" * 30)  # 110 bytes of live streams: the least recently used live one is stopped
    assert set(streams.streams) == {"second"} and streams.bytes == 70
    assert not first.live and first.data.endswith(b"error stream_evicted\n")  # its readers are told why
    assert refused(streams.find, "first", ALICE) == (410, "stream_expired")


def test_an_id_is_reused_once_its_stream_ended_not_while_it_generates_nor_by_a_stranger() -> None:
    streams, _ = registry()
    live = streams.open("c1", ALICE, "messages", error_frame)
    assert refused(streams.open, "c1", ALICE, "messages", error_frame) == (409, "stream_in_progress")
    assert refused(streams.open, "c1", BOB, "messages", error_frame) == (403, "not_stream_owner")
    live.end()
    again = streams.open("c1", ALICE, "messages", error_frame)
    assert again is not live and streams.find("c1", ALICE) is again and not again.data


def test_deleting_a_live_stream_stops_its_producer_and_tells_its_readers() -> None:
    async def case():
        streams, _ = registry()
        stream = streams.open("c1", ALICE, "messages", error_frame)
        stopped = asyncio.Event()

        async def frames():
            try:
                yield b"one\n"
                await asyncio.sleep(30)
                yield b"never\n"
            finally:
                stopped.set()  # the generation's clean-up: its admission place freed

        stream.start(frames())
        read = asyncio.ensure_future(collect(stream.read_from(0)))
        await asyncio.sleep(0.01)
        streams.delete("c1", ALICE)
        await asyncio.wait_for(stopped.wait(), 5)
        return await asyncio.wait_for(read, 5)

    assert asyncio.run(case()) == b"one\nerror stream_deleted\n"


async def collect(chunks) -> bytes:
    return b"".join([chunk async for chunk in chunks])


def test_a_reader_gets_the_bytes_from_its_offset_then_the_live_tail_each_byte_once() -> None:
    async def case():
        streams, _ = registry()
        stream = streams.open("c1", ALICE, "chat.completions", error_frame)
        gate = asyncio.Event()

        async def frames():
            for k in range(3):
                yield f"event {k}\n".encode()
            await gate.wait()
            for k in range(3, 6):
                yield f"event {k}\n".encode()

        stream.start(frames())
        await asyncio.sleep(0.01)  # the first three are kept
        whole = b"".join(f"event {k}\n".encode() for k in range(6))
        readers = [asyncio.ensure_future(collect(stream.read_from(offset))) for offset in (0, 7, len(stream.data))]
        await asyncio.sleep(0.01)
        gate.set()  # the live tail
        got = await asyncio.wait_for(asyncio.gather(*readers), 5)
        return whole, got, stream.live

    whole, got, live = asyncio.run(case())
    assert got == [whole, whole[7:], whole[24:]] and not live
