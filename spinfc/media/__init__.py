"""Media in the content: images, audio clips and video frames, read once with the text.

    parts.py    what a request sends (`MediaSource`: the kind, its bytes or URL, the declared MIME type, where)
    policy.py   which kinds a server reads and its limits (`MediaPolicy`, from --media and the limits)
    decode.py   bytes -> a checked PIL image, a mono float32 waveform, a list of frames; every check made on the
                header before anything is decoded (size, pixels, aspect, frame count, duration)
    fetch.py    http(s) URLs, only for hosts on the allow-list, with a size cap and a timeout
    errors.py   `MediaError`: a 4xx with a code, the part's JSON path and what to do

The model's towers (spinfc/runtime/towers/) turn decoded media into placeholder tokens and embeddings; the
`read-media` pass (spinfc/passes/read_media.py) runs both, on the compile thread.
"""

from spinfc.media.errors import MediaError
from spinfc.media.parts import MediaSource
from spinfc.media.policy import KINDS, MediaPolicy

__all__ = ["KINDS", "MediaError", "MediaPolicy", "MediaSource"]
