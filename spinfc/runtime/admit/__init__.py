"""Admission: a request becomes the engine's work here, or is refused. The policy and its checks (`policy`,
`prechecks`, `limits`, `refused`), the one scoring entry (`scoring`, `request_packs`), the compile thread (`intake`:
a request to `Compiled`, its segments as arrays and their score map), and the routes' side of a generation
(`generator`, `chat_format`)."""
