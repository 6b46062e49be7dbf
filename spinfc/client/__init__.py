"""spinfc's Python client: `Client` (blocking) and `AsyncClient` (asyncio) over httpx, answers typed as the server's
own response structs. Needs only `pip install "spinfc[client]"` (httpx, msgspec): no torch. See docs/client.md.

    from spinfc.client import Client

    with Client("http://localhost:8000") as client:        # or SPINFC_BASE_URL / SPINFC_API_KEY
        answer = client.score(messages=[{"role": "user", "content": "..."}], scoring={"queries": [
            {"id": "q", "template": "Is it spam?<?>", "options": [" yes", " no"]}]})
        answer.results[0].combinations[0].options[0].p

    from spinfc.client import image_part, user_message      # media in the content (client/media.py)

    client.score(messages=[user_message("What is shown?", image_part("cat.png"))], scoring={...})
"""

from spinfc.client.aio import AsyncClient
from spinfc.client.batches import Batch
from spinfc.client.calls import SpinfcError
from spinfc.client.media import audio_part, frames_part, image_part, text_part, user_message, video_part
from spinfc.client.sync import Client
from spinfc.wire.decisions import DecisionAnswer, DecisionResponse
from spinfc.wire.results import Combination, OptionScore, QueryResult
from spinfc.wire.schemas import InputResult, ModelCard, ModelList, PackList, PackResult, ScoreRequest, ScoreResponse

__all__ = [
    "Client", "AsyncClient", "SpinfcError", "Batch",
    "image_part", "audio_part", "video_part", "frames_part", "text_part", "user_message",
    "ScoreRequest", "ScoreResponse", "InputResult", "QueryResult", "Combination", "OptionScore", "PackResult",
    "DecisionResponse", "DecisionAnswer", "ModelList", "ModelCard", "PackList",
]
