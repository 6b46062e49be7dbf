"""What one call may do: the server's limits and features, or a trusted caller's own for this call, and whether
the response shows the engine's internals (`debug`: the plan of the request).

    limits    a trusted caller's `"limits": {"max_options": 2000}` replaces those limits for this call
              (max_body_bytes excepted: a body is refused before it is read); others get 403
    features  a trusted caller's `"features": {"extraction": false}` likewise (the boolean [features] settings)
    debug     for a trusted caller, and for everyone when the server runs with --debug
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs
from litestar import Request

from spinfc.config import FeatureSettings, Limits
from spinfc.errors import RequestError
from spinfc.runtime.admit.policy import Policy
from spinfc.server.auth import is_trusted, require_trusted

FEATURES = tuple(f.name for f in attrs.fields(FeatureSettings) if f.metadata["kind"] == "bool"
                 and f.name != "no_official_packs")


@attrs.frozen
class CallContext:
    limits: Limits
    features: dict[str, bool]
    trusted: bool
    debug: bool

    def policy(self, longest_token: int | None) -> Policy:
        """The call's limits and features as the runtime checks a request against them (runtime/admit/policy.py);
        `longest_token`: characters one token of the served model covers at most (None: no character bound)."""
        return Policy(self.limits, self.features, longest_token)


def call_context(request: Request, limits: Mapping | None = None, features: Mapping | None = None) -> CallContext:
    """The limits and features of this call; 403 trusted_token_required when an untrusted caller sends its own,
    400 invalid_limits / invalid_features for a name that does not exist or a value of the wrong kind."""
    settings = request.app.state.service.settings
    trusted = is_trusted(request)
    effective = settings.limits
    if limits is not None:
        require_trusted(request, "sending `limits`", param="limits")
        if "max_body_bytes" in limits:
            raise RequestError("limits.max_body_bytes cannot change per call: the body is refused before it is read",
                               code="invalid_limits", param="limits.max_body_bytes",
                               hint="start the server with a higher --max-body-bytes")
        effective = effective.with_overrides(limits)
    enabled = {name: getattr(settings.features, name) for name in FEATURES}
    if features is not None:
        require_trusted(request, "sending `features`", param="features")
        for name, value in features.items():
            if name not in FEATURES or not isinstance(value, bool):
                raise RequestError(f"features.{name}: unknown feature or not a boolean", code="invalid_features",
                                   param=f"features.{name}", hint="the features are " + ", ".join(FEATURES)
                                   + ", each true or false")
            enabled[name] = value
    return CallContext(effective, enabled, trusted, trusted or settings.server.debug)
