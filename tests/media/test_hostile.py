"""Hostile media: each refused from its header with a 4xx, a code and a remedy, in milliseconds, memory flat."""

from __future__ import annotations

import io
import struct
import time
import tracemalloc
import wave
import zlib

import numpy as np
import pytest

from spinfc.media import MediaError, MediaPolicy, MediaSource
from spinfc.media.decode import decode_audio, decode_image, decode_video
from spinfc.media.fetch import fetched
from spinfc.media.parts import from_url

from .snapshots import png

POLICY = MediaPolicy()


@pytest.fixture(autouse=True, scope="module")
def imported():
    """The decoders' libraries imported (and PIL's plugins registered) before any refusal is timed."""
    decode_image(MediaSource("image", "p", data=png(4, 4)), POLICY)
    decode_audio(MediaSource("audio", "a", data=wav(0.1)), POLICY)


def png_header_only(width: int, height: int) -> bytes:
    """A PNG whose header says width x height, with one tiny compressed row of data: a decompression bomb's
    header (a decoder trusting it would allocate width * height * 3 bytes)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + \
        chunk(b"IEND", b"")


def wav(seconds: float, rate: int = 16000) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes((np.sin(np.arange(int(seconds * rate)) / 10) * 3000).astype("<i2").tobytes())
    return buffer.getvalue()


def refused(decode, source: MediaSource, policy: MediaPolicy = POLICY) -> MediaError:
    started = time.perf_counter()
    with pytest.raises(MediaError) as caught:
        decode(source, policy)
    seconds = time.perf_counter() - started
    tracemalloc.start()  # a second time, for its memory (tracing slows it)
    with pytest.raises(MediaError):
        decode(source, policy)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    error = caught.value
    print(f"{error.code}: {error.status} in {seconds * 1e3:.1f} ms, peak {peak / 1e6:.1f} MB: {error.message}")
    assert 400 <= error.status < 500 and error.hint and error.param == source.param
    assert seconds < 0.5 and peak < 20e6
    return error


def image(data: bytes, mime: str | None = "image/png") -> MediaSource:
    return MediaSource("image", "messages[0].content[1].image_url", data=data, mime=mime)


def test_a_decompression_bomb_is_refused_from_its_header():
    error = refused(decode_image, image(png_header_only(40_000, 40_000)))
    assert (error.code, error.status) == ("max_image_pixels_exceeded", 413)


def test_a_strip_image_is_refused():
    error = refused(decode_image, image(png_header_only(100_000, 1)))
    assert error.code == "image_aspect_exceeded"


def test_a_truncated_image_is_refused():
    data = png(64, 64)
    assert refused(decode_image, image(data[: len(data) // 2])).code == "corrupt_media"


def test_bytes_that_are_no_image_are_refused():
    error = refused(decode_image, image(b"%PDF-1.7 not an image at all"))
    assert (error.code, error.status) == ("unsupported_media", 415) and "PDF" in error.message


def test_a_wrong_mime_type_is_refused():
    error = refused(decode_image, image(png(8, 8), mime="image/jpeg"))
    assert (error.code, error.status) == ("media_type_mismatch", 415) and "image/png" in error.hint
    assert refused(decode_audio, MediaSource("audio", "a", data=png(8, 8), mime="audio/wav")).status == 415


def test_a_good_image_is_read():
    assert decode_image(image(png(30, 20)), POLICY).size == (30, 20)


def test_audio_over_the_limit_is_refused_from_its_header():
    policy = MediaPolicy(max_audio_seconds=2)
    error = refused(decode_audio, MediaSource("audio", "a", data=wav(3.0), mime="audio/wav"), policy)
    assert (error.code, error.status) == ("max_audio_seconds_exceeded", 413)


def test_audio_that_lies_about_its_length_is_refused():
    data = bytearray(wav(1.0))
    data[40:44] = struct.pack("<I", 16000 * 2 * 5)  # the data chunk says 5 s; it holds 1 s
    error = refused(decode_audio, MediaSource("audio", "a", data=bytes(data), mime="audio/wav"))
    assert error.code == "truncated_media"


def test_good_audio_is_read():
    samples, rate = decode_audio(MediaSource("audio", "a", data=wav(0.5), mime="audio/wav"), POLICY)
    assert rate == 16000 and samples.shape == (8000,) and samples.dtype == np.float32


def test_a_huge_frame_count_is_refused_before_a_frame_is_decoded():
    frames = tuple(image(b"never decoded") for _ in range(2000))
    error = refused(decode_video, MediaSource("video", "v", frames=frames))
    assert (error.code, error.status) == ("max_frames_exceeded", 413)


def test_urls_are_refused_unless_their_host_is_allowed():
    source = from_url("image", "https://example.com/cat.png", "p")
    with pytest.raises(MediaError) as caught:
        fetched(source, POLICY)
    assert caught.value.code == "media_url_refused" and "data URL" in caught.value.hint


def test_bad_data_urls_are_refused():
    for url, code in (("data:image/png;base64,@@@", "invalid_base64"), ("data:image/png,rawtext", "invalid_media_url"),
                      ("file:///etc/passwd", "invalid_media_url"), ("data:image/png;base64,", "empty_media")):
        with pytest.raises(MediaError) as caught:
            from_url("image", url, "p")
        assert caught.value.code == code, url


@pytest.mark.parametrize("declared", [True, False])
def test_a_fetched_file_over_its_bound_is_refused(declared):
    """An allowed host's file of 5,000 bytes against a bound of 1,000: refused from its Content-Length, or (without
    one) after reading one byte more than the bound, never the whole file."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            if declared:
                self.send_header("Content-Length", "5000")
            self.end_headers()
            self.wfile.write(b"\0" * 5000)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/big.png"
        policy = MediaPolicy(max_fetch_bytes=1000, fetch_hosts=("127.0.0.1",))
        with pytest.raises(MediaError) as caught:
            fetched(from_url("image", url, "messages[0].content[1].image_url"), policy)
        error = caught.value
        assert (error.code, error.status, error.param) == ("max_fetch_bytes_exceeded", 413,
                                                           "messages[0].content[1].image_url")
        assert "--max-fetch-bytes" in error.hint
    finally:
        server.shutdown()


def test_a_redirect_is_followed_only_to_an_allowed_host():
    """An allowed host that redirects to another (here 127.0.0.1 -> localhost): refused unless that host is allowed
    too, so an allow-listed server cannot hand the fetch to an internal one."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/moved":
                self.send_response(302)
                self.send_header("Location", f"http://localhost:{self.server.server_address[1]}/cat.png")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.end_headers()
            self.wfile.write(png(4, 4))

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        source = from_url("image", f"http://127.0.0.1:{server.server_address[1]}/moved", "p")
        with pytest.raises(MediaError) as caught:
            fetched(source, MediaPolicy(fetch_hosts=("127.0.0.1",)))
        assert caught.value.code == "media_url_refused" and "redirects to host 'localhost'" in caught.value.message
        both = fetched(source, MediaPolicy(fetch_hosts=("127.0.0.1", "localhost")))
        assert both.data == png(4, 4) and both.mime == "image/png"
    finally:
        server.shutdown()
