"""POST /v1/chat/completions/control: `{"conversation_id", "action": "cancel"}` stops one streamed generation (sent
with X-Conversation-Id, chat or messages) at its next step. Its stream ends as an answer with stop reason
`cancelled` (chat's `finish_reason`, messages' `stop_reason`), the engine drops it from its turns and frees its KV
cache, and no other request is touched. Owner only: the same refusals as the kept streams' routes (streams.py).
"""

from __future__ import annotations

from typing import Annotated

from litestar import Request, post
from litestar.params import Body

from spinfc.server.auth import owner_of
from spinfc.server.conversation import check_id
from spinfc.server.routes.streams import REFUSALS
from spinfc.server.service import ServiceDep
from spinfc.wire.streams import StreamControl, StreamControlled


@post("/v1/chat/completions/control", status_code=200, sync_to_thread=False, responses=REFUSALS)
def control(data: Annotated[StreamControl, Body(title="Which generation, and what to do")], service: ServiceDep,
            request: Request) -> StreamControlled:
    stream = service.streams.find(check_id(data.conversation_id, "conversation_id"), owner_of(request),
                                  "conversation_id")
    live = stream.live
    stream.cancel.set()  # read by the engine's thread before the generation's next step
    return StreamControlled(id=stream.id, object="stream.control", action=data.action, cancelled=live,
                            status="live" if live else "done")
