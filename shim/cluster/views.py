"""The front door's view hook: views created and deleted by Kafka clients through
`camus serve --kafka` go into the deployment's catalog (`shim.cluster.catalog`), where the
deployment's materialisers (`camus cluster materialise`, and the one `camus serve --kafka`
runs itself unless told not to) find them.

To a client this is the embedded broker's interface, unchanged: CreateTopics with
`camus.source` and `camus.filter` makes a view, with `camus.schema` a source topic with
filterable fields, DeleteTopics of a view removes it; the errors are the embedded broker's
(a filter that does not parse: INVALID_CONFIG with its line and column). The cluster itself
would refuse these configs, so the front door answers such topics here instead of
forwarding them (`FrontDoor.views`).

The catalog and admin calls are confluent-kafka's, which block: they run on one thread of
their own, one at a time, so the front door's event loop never waits on them and two
clients' view changes are checked and written in turn.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka import KafkaException

from compiler.errors import CamusError
from shim.protocol import ErrorCode
from shim.topics import FILTER, SCHEMA, SOURCE

from .catalog import (Catalog, CatalogError, create_source, create_view, delete_group,
                      delete_view)
from .connection import ClusterSettings

log = logging.getLogger("camus.cluster.views")


def _code(name: str) -> ErrorCode:
    try:
        return ErrorCode[name]
    except KeyError:
        return ErrorCode.unknown_server_error


class Views:
    """One deployment's views, as the front door's CreateTopics and DeleteTopics see them."""

    def __init__(self, settings: ClusterSettings, deployment: str) -> None:
        self.settings = settings
        self.deployment = deployment
        self._io = ThreadPoolExecutor(1, thread_name_prefix="camus-views")
        self._catalog: Catalog | None = None
        self._groups: set[asyncio.Task] = set()

    async def _call(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self._io, fn, *args)

    async def _answer(self, fn, *args) -> tuple[ErrorCode, str | None, object]:
        """(error code, message, what `fn(*args)` returned): NONE, or the error a Kafka
        client gets."""
        try:
            result = await self._call(fn, *args)
        except CatalogError as exc:
            return _code(exc.code), str(exc), None
        except CamusError as exc:  # the filter's or schema's parser: line and column
            return ErrorCode.invalid_config, str(exc), None
        except KafkaException as exc:
            return ErrorCode.unknown_server_error, exc.args[0].str(), None
        return ErrorCode.none, None, result

    async def create(self, name: str, partitions: int, replication: int, configs: dict[str, str],
                     validate_only: bool) -> tuple[ErrorCode, str | None, int, int]:
        """A topic of a CreateTopics whose configs name camus.*: a view (camus.source and
        camus.filter) or a source with a schema (camus.schema). (error code, message, the
        topic's partitions and replication factor, -1 where not known)."""
        camus = {k: v for k, v in configs.items() if k.startswith("camus.")}
        kafka = {k: v for k, v in configs.items() if not k.startswith("camus.")}
        unknown = sorted(set(camus) - {SOURCE, FILTER, SCHEMA})
        if unknown:
            return (ErrorCode.invalid_config, f"unknown camus config {unknown[0]!r}: camus knows "
                    f"{SCHEMA}, {SOURCE} and {FILTER}", -1, -1)
        if (SOURCE in camus) != (FILTER in camus):
            return ErrorCode.invalid_config, f"a view needs both {SOURCE} and {FILTER}", -1, -1
        if SOURCE in camus:
            if SCHEMA in camus:
                return ErrorCode.invalid_config, f"a view takes its source's {SCHEMA}", -1, -1
            # A view has its source's partitions whatever count the client's topic type
            # carries, as on the embedded broker; the answer says how many.
            code, message, made = await self._answer(
                create_view, self.settings, self.deployment, name, camus[SOURCE], camus[FILTER],
                replication if replication > 0 else None, kafka, validate_only)
            if made is None:
                return code, message, -1, -1
            if not validate_only:
                log.info("view %s of %s where %s: in the catalog of deployment %s", name,
                         camus[SOURCE], camus[FILTER], self.deployment)
            return code, message, made[1], made[2]
        if partitions == 0 or partitions < -1 or replication == 0 or replication < -1:
            return (ErrorCode.invalid_request,
                    "partitions and replication factor: -1 or at least 1", -1, -1)
        code, message, _ = await self._answer(create_source, self.settings, self.deployment,
                                              name, partitions, replication, kafka,
                                              camus[SCHEMA], validate_only)
        return code, message, partitions, replication

    async def view_sources(self) -> dict[str, str]:
        """{view: its source} for the deployment's views as of now (the catalog followed to
        its end)."""
        state = await self._call(self._follow)
        return {name: v.source for name, v in state.views.items()}

    def _follow(self):
        if self._catalog is None:
            catalog = Catalog(self.settings, self.deployment)
            catalog.ensure_topic()
            self._catalog = catalog
        return self._catalog.follow()

    async def delete(self, name: str) -> tuple[ErrorCode, str | None]:
        """A view named by a DeleteTopics: out of the catalog, its topic deleted; its consumer
        group is deleted afterwards, once the materialisers have left it, without holding
        back the client's answer."""
        answer = (await self._answer(delete_view, self.settings, self.deployment, name, 0))[:2]
        if answer[0] == ErrorCode.none:
            log.info("view %s: deleted from deployment %s", name, self.deployment)
            task = asyncio.ensure_future(self._delete_group(name))
            self._groups.add(task)
            task.add_done_callback(self._groups.discard)
        return answer

    async def _delete_group(self, name: str) -> None:
        try:
            await asyncio.get_running_loop().run_in_executor(
                None, delete_group, self.settings, self.deployment, name)
        except (CatalogError, KafkaException) as exc:
            log.warning("view %s: %s", name, exc)

    def close(self) -> None:
        for task in self._groups:
            task.cancel()
        if self._catalog is not None:
            self._io.submit(self._catalog.close)
        self._io.shutdown(wait=True)
