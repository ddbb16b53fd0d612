"""The registry of APIs this broker speaks, from which the ApiVersions answer is built.

Each API family module (`metadata.py`, `produce.py`, ...) declares the versions it
handles and registers an `Api` here when imported. Registration refuses a second
entry for the same key and checks that kio has a request and a response schema for
every version in the declared range, so the advertised ranges can never promise a
version the codec cannot decode and encode completely.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

from kio.index import UnknownEntity, load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map
from kio.static.constants import EntityType

from .errors import ErrorCode

__all__ = ["Api", "Registry", "REGISTRY", "DuplicateApi"]

# (request body, version, error code, message) -> response data for `entities.build`.
ErrorBuilder = Callable[[Any, int, ErrorCode, "str | None"], dict[str, Any]]


class DuplicateApi(ValueError):
    pass


def _always(body: Any) -> bool:
    return True


@dataclasses.dataclass(frozen=True)
class Api:
    key: int
    name: str
    min_version: int
    max_version: int
    # Builds the answer to `body` when the whole request fails with one error code;
    # per-topic/partition APIs echo every item they were asked about.
    error_response: ErrorBuilder
    # False for requests that get no answer at all (Produce with acks=0).
    expects_response: Callable[[Any], bool] = _always
    # The floor ApiVersions advertises when it is below the first version served: Kafka
    # 4.3.1 advertises Produce from v0 (for old clients' feature checks) but closes the
    # connection on v0-2, as camus does for every version the codec lacks.
    advertised_min: int | None = None

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def request_class(self, version: int) -> type:
        return load_request_schema(self.key, version)

    def response_class(self, version: int) -> type:
        return load_response_schema(self.key, version)


class Registry:
    def __init__(self) -> None:
        self._apis: dict[int, Api] = {}

    def register(self, api: Api) -> Api:
        if api.key in self._apis:
            raise DuplicateApi(
                f"API key {api.key} ({api.name}) registered twice: "
                f"already by {self._apis[api.key].name}"
            )
        if api.min_version > api.max_version:
            raise ValueError(f"{api.name}: empty version range {api.min_version}..{api.max_version}")
        # kio's index says which classes exist without importing ~300 modules at
        # startup; the round-trip tests import and exercise every one of them.
        versions = schema_name_map.get(api_key_map.get(api.key, ""), {})
        for version in range(api.min_version, api.max_version + 1):
            entry = versions.get(version, {})
            if EntityType.request not in entry or EntityType.response not in entry:
                raise UnknownEntity(f"{api.name} v{version}: kio has no schema for it")
        self._apis[api.key] = api
        return api

    def get(self, key: int) -> Api | None:
        return self._apis.get(key)

    def __iter__(self) -> Iterator[Api]:
        return iter(sorted(self._apis.values(), key=lambda a: a.key))

    def __len__(self) -> int:
        return len(self._apis)

    def __contains__(self, key: object) -> bool:
        return key in self._apis

    def version_ranges(self) -> list[tuple[int, int, int]]:
        """(api_key, min_version, max_version) for every registered API, by key."""
        return [(a.key, a.min_version if a.advertised_min is None else a.advertised_min,
                 a.max_version) for a in self]


# The registry the family modules fill when `shim.protocol` is imported.
REGISTRY = Registry()
