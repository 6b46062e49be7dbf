"""A pack's golden fixtures (`packsrc.golden`) scored in this process, through the bulk job's engine transport."""

from __future__ import annotations

from spinfc.bulk.engine_transport import EngineTransport
from spinfc.bulk.questions import QuestionSet
from spinfc.packsrc.golden import Golden


async def score_golden(golden: Golden, pack, load_model=None) -> tuple[list[dict[str, float]], list[str | None]]:
    """Each fixture's category scores and decision for `pack` on the golden file's model, in this process."""
    transport = EngineTransport(QuestionSet((), (), (pack,), golden.model), load_model=load_model)
    await transport.start()
    try:
        results = await transport.score([f.content for f in golden.fixtures])
    finally:
        await transport.close()
    return [r.packs[0].categories for r in results], [r.packs[0].decision for r in results]
