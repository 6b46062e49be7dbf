"""Bytes -> checked media. Every limit is checked on what the file's header says before its body is decoded, so
a decompression bomb, a 100,000 x 1 image or a video of a million frames is refused in milliseconds with memory
flat; what is decoded is then checked against the header (a clip that lies about its length).

    decode_image(source, policy) -> PIL.Image (RGB)
    decode_audio(source, policy) -> (waveform [S] float32 mono, sample rate)
    decode_video(source, policy) -> Video: its frames (PIL images) and frame rate (a file's; None for a list)
"""

from __future__ import annotations

import io
import warnings

import attrs
import numpy as np

from spinfc.media.errors import MediaError
from spinfc.media.parts import MediaSource
from spinfc.media.policy import MediaPolicy

IMAGE_FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif",
                 "BMP": "image/bmp"}
AUDIO_FORMATS = {"WAV": "wav", "FLAC": "flac", "OGG": "ogg", "MP3": "mp3"}
_IMAGE_MAGIC = (b"\x89PNG", b"\xff\xd8", b"GIF8", b"BM")
_SAME_MIME = {"image/jpg": "image/jpeg", "image/pjpeg": "image/jpeg", "image/x-png": "image/png"}


def decode_image(source: MediaSource, policy: MediaPolicy):
    """The image of `source` in RGB, after its header passed the limits: raises `MediaError` 415 for bytes that
    are no image (or not the type declared), 413 for more than `max_image_pixels`, 400 for a strip more than
    `max_aspect` times longer than wide or a corrupt or truncated file."""
    from PIL import Image, UnidentifiedImageError

    where = source.param
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(source.data), formats=list(IMAGE_FORMATS))  # reads the header only
    except UnidentifiedImageError:
        if source.data.startswith(_IMAGE_MAGIC):  # an image's start whose header does not parse: cut short
            raise MediaError(f"the image is corrupt or truncated ({_magic(source.data)}, but its header does not "
                             "parse)", code="corrupt_media", param=where,
                             hint="send the whole file; check that it opens in an image viewer") from None
        raise MediaError(f"the bytes are not an image spinfc reads ({_magic(source.data)})", code="unsupported_media",
                         status=415, param=where, hint="send a PNG, JPEG, WebP, GIF or BMP file") from None
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise _too_many_pixels(None, policy, where) from None
    declared = _SAME_MIME.get(source.mime, source.mime)
    actual = IMAGE_FORMATS[image.format]
    if declared is not None and declared != actual:
        raise MediaError(f"the part says {source.mime} but the bytes are a {image.format} image",
                         code="media_type_mismatch", status=415, param=where,
                         hint=f"declare the type the file has: data:{actual};base64,...")
    width, height = image.size
    if width < 1 or height < 1:
        raise MediaError(f"the image is {width} x {height} pixels", code="corrupt_media", param=where,
                         hint="send an image with at least one pixel")
    if width * height > policy.max_image_pixels:
        raise _too_many_pixels((width, height), policy, where)
    if max(width, height) > policy.max_aspect * min(width, height):
        raise MediaError(f"the image is {width} x {height} pixels, more than {policy.max_aspect} times longer than "
                         "wide", code="image_aspect_exceeded", param=where,
                         hint="crop it to the part that matters, or pad it towards a square")
    try:
        image.load()
        return image.convert("RGB")
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as error:
        raise MediaError(f"the {image.format} image is corrupt or truncated ({error})", code="corrupt_media",
                         param=where, hint="send the whole file; check that it opens in an image viewer") from None


def _too_many_pixels(size, policy: MediaPolicy, where: str) -> MediaError:
    said = f"{size[0]} x {size[1]} = {size[0] * size[1]:,} pixels" if size else "more pixels than PIL opens"
    return MediaError(f"the image has {said}, over the server's limit of {policy.max_image_pixels:,}",
                      code="max_image_pixels_exceeded", status=413, param=where,
                      hint="downscale it (the tower reads it at a few hundred pixels a side anyway), or start the "
                      "server with a higher --max-image-pixels (SPINFC_MAX_IMAGE_PIXELS)")


def decode_audio(source: MediaSource, policy: MediaPolicy) -> tuple[np.ndarray, int]:
    """(mono float32 waveform [S], sample rate), after the header passed the limits: 415 for bytes that are no
    audio spinfc reads or not the declared format, 413 for more than `max_audio_seconds` (by the header, and by
    what was decoded: at most the limit's samples are read), 400 for a corrupt file or one whose data is shorter
    than its header says."""
    import soundfile

    where = source.param
    try:
        info = soundfile.info(io.BytesIO(source.data))
    except (soundfile.LibsndfileError, RuntimeError, TypeError):
        raise MediaError(f"the bytes are not audio spinfc reads ({_magic(source.data)})", code="unsupported_media",
                         status=415, param=where, hint="send WAV, FLAC, OGG or MP3 and name it in `format`") from None
    actual = AUDIO_FORMATS.get(info.format)
    declared = (source.mime or "").removeprefix("audio/").replace("x-wav", "wav").replace("mpeg", "mp3") or None
    if actual is None or (declared is not None and declared != actual):
        raise MediaError(f"the part says {declared!r} but the bytes are {info.format}", code="media_type_mismatch",
                         status=415, param=where, hint=f'set "format": "{actual or "wav"}" (the file\'s own type)')
    rate, limit = int(info.samplerate), policy.max_audio_seconds
    if rate <= 0:
        raise MediaError("the audio header gives no sample rate", code="corrupt_media", param=where,
                         hint="send a well-formed file")
    if info.duration > limit:
        raise _too_long(info.duration, limit, where)
    try:
        wave, _ = soundfile.read(io.BytesIO(source.data), frames=limit * rate + 1, dtype="float32", always_2d=True)
    except (soundfile.LibsndfileError, RuntimeError) as error:
        raise MediaError(f"the audio is corrupt ({error})", code="corrupt_media", param=where,
                         hint="send the whole file; check that it plays") from None
    if wave.shape[0] > limit * rate:  # a header that under-stated the length
        raise _too_long(wave.shape[0] / rate, limit, where)
    declared = _wav_declared_bytes(source.data) if actual == "wav" else None
    frame_bytes = info.channels * max(1, _SAMPLE_BYTES.get(info.subtype, 2))
    held = (len(source.data) - (declared or (0, 0))[1]) // frame_bytes
    if declared is not None and declared[0] // frame_bytes != held:  # libsndfile would read what the file holds
        raise MediaError(f"the WAV header says {declared[0] // frame_bytes / rate:.2f} s but the file holds "
                         f"{held / rate:.2f} s", code="truncated_media", param=where,
                         hint="send the whole file (it was cut short, or its header is wrong)")
    if wave.shape[0] == 0:
        raise MediaError("the audio holds no samples", code="empty_media", param=where, hint="send a clip with sound")
    return np.ascontiguousarray(wave.mean(axis=1, dtype=np.float32)), rate


_SAMPLE_BYTES = {"PCM_U8": 1, "PCM_S8": 1, "PCM_16": 2, "PCM_24": 3, "PCM_32": 4, "FLOAT": 4, "DOUBLE": 8}


def _wav_declared_bytes(data: bytes) -> tuple[int, int] | None:
    """(the bytes a WAV file's data chunk says it holds, where they start), from its RIFF chunks."""
    offset = 12
    while offset + 8 <= len(data):
        kind, size = data[offset:offset + 4], int.from_bytes(data[offset + 4:offset + 8], "little")
        if kind == b"data":
            return size, offset + 8
        offset += 8 + size + (size & 1)
    return None


def _too_long(seconds: float, limit: int, where: str) -> MediaError:
    return MediaError(f"the audio is {seconds:,.1f} s long, over the server's limit of {limit:,} s",
                      code="max_audio_seconds_exceeded", status=413, param=where,
                      hint="cut it into shorter clips, or start the server with a higher --max-audio-seconds "
                      "(SPINFC_MAX_AUDIO_SECONDS)")


@attrs.frozen
class Video:
    """A decoded video: every frame (PIL images, RGB) and the file's frame rate (frames a second; None for a list
    of frames, which carries none: each tower says what rate it reads a list at)."""

    frames: list
    fps: float | None = None


def decode_video(source: MediaSource, policy: MediaPolicy) -> Video:
    """The frames of a video: a list of images (each decoded and checked as an image), or a video file (PyAV,
    when installed: its frame count is checked from the container before a frame is decoded). 413 for more than
    `max_frames` frames."""
    if source.frames:
        _check_frames(len(source.frames), policy, source.param)
        return Video([decode_image(frame, policy) for frame in source.frames])
    try:
        import av
    except ImportError:
        raise MediaError("this server cannot decode video files (PyAV is not installed)", code="unsupported_media",
                         status=415, param=source.param, hint='send the frames instead: {"type": "video", '
                         '"video": ["data:image/jpeg;base64,...", ...]}') from None
    return _video_frames(av, source, policy)


def _video_frames(av, source: MediaSource, policy: MediaPolicy) -> Video:
    where = source.param
    try:
        container = av.open(io.BytesIO(source.data))
    except Exception:  # noqa: BLE001  (PyAV raises its own error classes per FFmpeg error)
        container_kind = _video_container(source.data)
        if container_kind is not None:  # a video's header, but FFmpeg cannot open it: cut short or damaged
            raise MediaError(f"the {container_kind} file is corrupt or cut short (FFmpeg cannot open it)",
                             code="corrupt_media", param=where, hint="send the whole file, or the frames as images")
        raise MediaError(f"the bytes are not a video spinfc reads ({_magic(source.data)})",
                         code="unsupported_media", status=415, param=where, hint="send MP4 or WebM, or the frames")
    with container:
        if not container.streams.video:
            raise MediaError("the file has no video stream", code="unsupported_media", status=415, param=where,
                             hint="send a video file, or the frames as images")
        stream = container.streams.video[0]
        _check_frames(stream.frames, policy, where)
        rate = stream.average_rate or stream.guessed_rate
        pixels = (stream.codec_context.width or 0) * (stream.codec_context.height or 0)
        if pixels > policy.max_image_pixels:
            raise _too_many_pixels((stream.codec_context.width, stream.codec_context.height), policy, where)
        frames = []
        try:
            for frame in container.decode(stream):
                frames.append(frame.to_image())
                _check_frames(len(frames), policy, where)
        except av.error.FFmpegError as error:
            raise MediaError(f"the video is corrupt ({error})", code="corrupt_media", param=where,
                             hint="send the whole file, or the frames as images") from None
    if not frames:
        raise MediaError("the video holds no frames", code="empty_media", param=where, hint="send a video with frames")
    return Video(frames, float(rate) if rate else None)


def _check_frames(count: int, policy: MediaPolicy, where: str) -> None:
    if count > policy.max_frames:
        raise MediaError(f"the video has {count:,} frames, over the server's limit of {policy.max_frames:,}",
                         code="max_frames_exceeded", status=413, param=where,
                         hint="sample fewer frames (e.g. one a second), or start the server with a higher "
                         "--max-frames (SPINFC_MAX_FRAMES)")


def _video_container(data: bytes) -> str | None:
    """The video container a file's first bytes name (MP4/MOV, WebM/Matroska, AVI), else None."""
    if data[4:8] == b"ftyp":
        return "MP4"
    if data.startswith(b"\x1a\x45\xdf\xa3"):
        return "WebM"
    if data.startswith(b"RIFF") and data[8:12] == b"AVI ":
        return "AVI"
    return None


def _magic(data: bytes) -> str:
    """What the first bytes look like, for an error message."""
    known = {b"\x89PNG": "a PNG", b"\xff\xd8": "a JPEG", b"RIFF": "a RIFF file (WAV, WebP, AVI)", b"GIF8": "a GIF",
             b"fLaC": "a FLAC file", b"OggS": "an Ogg file", b"ID3": "an MP3 file", b"%PDF": "a PDF",
             b"PK": "a zip file", b"{": "JSON or text"}
    for magic, name in known.items():
        if data.startswith(magic):
            return f"they look like {name}"
    return f"they start {data[:8].hex(' ')}"
