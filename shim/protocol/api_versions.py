"""ApiVersions (key 18), versions 0-4: the answer is the registry, so it cannot lie.

- v0: error code and the (key, min, max) list only.
- v1-v2: adds throttle_time_ms.
- v3 (flexible, KIP-511): the request carries client_software_name/version;
  librdkafka sends v3 first. The response still uses response header v0, at
  every version, so a client can read the error of a version it sent too new.
- v4: same body as v3; kafka-python 3.0 asks for it.
- A version above 4 is never parsed: `unsupported_version_response` answers error
  35 (UNSUPPORTED_VERSION) in the v0 body with every supported range, and the
  client retries at min(its max, ours). Disconnecting instead would push
  librdkafka into its 0.10-era fallback feature set.

No features (KIP-584) are advertised: finalized_features_epoch stays -1.
"""

from __future__ import annotations

from typing import Any

from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0

from .connection import Request, _encode
from .entities import build
from .errors import ErrorCode
from .registry import REGISTRY, Api, Registry

MIN_VERSION, MAX_VERSION = 0, 4


def _ranges(registry: Registry) -> list[dict[str, int]]:
    return [{"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in registry.version_ranges()]


def response(request: Request, registry: Registry = REGISTRY, error_code: ErrorCode = ErrorCode.none) -> Any:
    """The ApiVersions answer for `request`, listing every API in `registry`."""
    return request.response(error_code=error_code, api_keys=_ranges(registry))


def unsupported_version_response(registry: Registry, correlation_id: int) -> bytes:
    """Framed v0 answer (header v0) with UNSUPPORTED_VERSION and the supported ranges."""
    body = build(ApiVersionsResponseV0, error_code=ErrorCode.unsupported_version, api_keys=_ranges(registry))
    return _encode(ApiVersionsResponseV0, correlation_id, body)


def _error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    # Even a failing ApiVersions lists the ranges: clients use them to retry.
    return {"error_code": code, "api_keys": _ranges(REGISTRY)}


API = REGISTRY.register(Api(18, "ApiVersions", MIN_VERSION, MAX_VERSION, _error))
