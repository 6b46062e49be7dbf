"""What the OpenAPI schema says about errors: every status a route can answer, each as OpenAI's envelope
(`ErrorResponse`), never Litestar's default `{status_code, detail, extra}` (which the server never sends).

    responses=errors(400, 401, 413)    on a route handler: those statuses, described, with the envelope's schema
    forbid_unknown_fields(app, ...)    request objects say `additionalProperties: false`, as the server refuses them
    exclusive_fields(app)              fields a body may not send together say so (`not`), as the server refuses them
    one_value(app, name, values)       fields honoured at one value only allow that value (or null)
"""

from __future__ import annotations

import msgspec
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import OpenAPIType, Schema

from spinfc.wire.schemas import ErrorResponse

WHEN = {
    400: "the body breaks the request format or a limit: `code` says which mistake, `param` the JSON path",
    401: "the server runs with --token (--api-key) and the request has no `Authorization: Bearer` token, or "
         "another one",
    403: "`limits` or `features` in the body, or /v0/drain, without the trusted token",
    404: "no served model has that name (model_not_found): GET /v1/models lists the names it answers to",
    413: "the body is larger than --max-body-bytes (max_body_bytes_exceeded)",
    415: "the body is not sent as application/json (unsupported_media_type)",
    429: "more than --queue requests are waiting beside the one running; retry after `Retry-After` seconds",
    500: "the forward pass holding this request's content failed (engine_error)",
    503: "the model is loading (warming_up, with Retry-After), failed to load (model_failed), or the server is "
         "draining (draining)",
}
BODY_ROUTE = (400, 401, 403, 413, 415, 429, 500, 503)  # a route that reads a JSON body and runs the engine


def error_spec(description: str, envelope: type = ErrorResponse) -> ResponseSpec:
    return ResponseSpec(data_container=envelope, description=description, generate_examples=False)


def errors(*statuses: int, envelope: type = ErrorResponse) -> dict[int, ResponseSpec]:
    """The error responses of a route: `statuses`, each with its description and the envelope's schema (OpenAI's;
    /v1/messages answers Anthropic's)."""
    return {status: error_spec(WHEN[status], envelope) for status in statuses}


def forbid_unknown_fields(app, modules) -> None:
    """Say in the schema what the server enforces: each struct of `modules` that forbids unknown fields is an object
    with `additionalProperties: false` (Litestar leaves it out). Run before the schema is first served."""
    components = app.openapi_schema.components.schemas or {}
    structs = {v for module in modules for v in vars(module).values()
               if isinstance(v, type) and issubclass(v, msgspec.Struct)}
    for struct in structs:
        if struct.__struct_config__.forbid_unknown_fields and struct.__name__ in components:
            components[struct.__name__].additional_properties = False


# Request objects -> the pairs of fields the server refuses together when both are sent (not null), even as an empty
# list: one content comes from one place (OpenAI refuses conflicting fields the same way). JSON Schema says it with
# `not` over "both present and not null"; Litestar has no way to, so it is written here.
EXCLUSIVE = {
    "ScoreRequest": (("messages", "inputs"),),
    "DecisionRequest": (("state", "messages"), ("inputs", "state"), ("inputs", "messages")),
}


def exclusive_fields(app) -> None:
    """Write `EXCLUSIVE` into the request objects' schemas. Run before the schema is first served."""
    components = app.openapi_schema.components.schemas or {}
    sent = Schema(schema_not=Schema(type=OpenAPIType.NULL))
    for name, pairs in EXCLUSIVE.items():
        if name in components:
            both = [Schema(required=list(pair), properties={field: sent for field in pair}) for pair in pairs]
            components[name].schema_not = both[0] if len(both) == 1 else Schema(any_of=both)


def one_value(app, name: str, values: dict) -> None:
    """In request object `name`'s schema, each field of `values` allows its one value or null (an empty object for
    `{}`), as the server refuses any other."""
    properties = app.openapi_schema.components.schemas[name].properties
    for field, value in values.items():
        only = Schema(type=OpenAPIType.OBJECT, max_properties=0) if value == {} else Schema(enum=[value])
        null = Schema(type=OpenAPIType.NULL)
        allowed = null if value is None else Schema(one_of=[only, null])
        properties[field] = Schema(all_of=[properties[field], allowed])  # its type kept
