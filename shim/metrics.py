"""`camus serve --metrics HOST:PORT`: the broker's counters in Prometheus's text format.

Exposition is prometheus_client's; the figures are read from the broker when Prometheus
scrapes, on the broker's own event loop (so they are read between requests, never while one
is half done), except request latencies, which the server observes per request. Served at
`/metrics` (any path answers the same) by a minimal HTTP/1.0 responder on that loop.

Families:
  camus_requests_total{api}, camus_request_seconds{api} (histogram)
  camus_topic_bytes_in_total{topic}, camus_topic_records_in_total{topic},
  camus_topic_bytes_out_total{topic} (Fetch answers)
  camus_schema_misses_total{topic,field} (records that lacked a schema field)
  camus_view_packets_total{view,port} (packets the switch delivered to a view's port)
  camus_switch_packets_in_total, camus_switch_records_in_total, camus_switch_deliveries_total
  camus_switch_port_packets_total{port} (every egress port: views and group members)
  camus_subscription_syncs_total, camus_subscription_writes_total (entry and group writes)
  camus_switch_entries, camus_switch_entry_budget (entries the switch holds; --max-entries)
  camus_switch_alpha{field} (the approximation in use per field; none while exact),
  camus_switch_approximations_total (times the switch went from exact to approximated rules)
  camus_edge_rechecked_total{view}, camus_edge_false_positives_total{view} (records a view
    received while the switch held a superset of its filter, and those its exact filter
    dropped: the extra traffic of the approximation; shim.approximation)
"""

from __future__ import annotations

import asyncio
import logging
import time

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

log = logging.getLogger("camus.metrics")


class Metrics:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.registry = CollectorRegistry()
        self.latency = Histogram("camus_request_seconds", "Time to answer a request, by API",
                                 ["api"], registry=self.registry,
                                 buckets=(.0001, .0005, .001, .005, .01, .05, .1, .5, 1, 5))
        self.registry.register(_BrokerCollector(broker))

    def observe(self, api: str, started: float) -> None:
        self.latency.labels(api).observe(time.perf_counter() - started)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    async def serve(self, host: str, port: int) -> asyncio.Server:
        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
                body = self.render()
                writer.write(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
                             b"Content-Length: %d\r\n\r\n" % len(body) + body)
                await writer.drain()
            except (asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                    ConnectionError):
                pass
            finally:
                writer.close()

        server = await asyncio.start_server(answer, host, port)
        log.info("metrics on http://%s:%d/metrics", host, server.sockets[0].getsockname()[1])
        return server


class _BrokerCollector:
    """Reads the broker's own counters at scrape time."""

    def __init__(self, broker) -> None:
        self.broker = broker

    def collect(self):
        b = self.broker
        requests = CounterMetricFamily("camus_requests", "Requests answered, by API", labels=["api"])
        for api, n in sorted(b.requests.items()):
            requests.add_metric([api], n)
        yield requests
        traffic = {key: CounterMetricFamily(f"camus_topic_{key}", text, labels=["topic"])
                   for key, text in (("bytes_in", "Bytes produced (record batches as sent)"),
                                     ("records_in", "Records produced"),
                                     ("bytes_out", "Record bytes in Fetch answers"))}
        for topic, counters in sorted(b.traffic.items()):
            for key, family in traffic.items():
                family.add_metric([topic], counters.get(key, 0))
        yield from traffic.values()
        misses = CounterMetricFamily("camus_schema_misses", "Records that lacked a schema field "
                                     "(given the zero value)", labels=["topic", "field"])
        views = CounterMetricFamily("camus_view_packets", "Packets the switch delivered to a "
                                    "view's port", labels=["view", "port"])
        stats = b.datapath.stats
        for t in b.catalog:
            if t.schema is not None and not t.is_view:
                for f in t.schema.fields:
                    misses.add_metric([t.name, f.name], t.schema.misses.get(f.name, 0))
        for port, view in sorted(b.view_ports.items()):
            views.add_metric([view, str(port)], stats.packets_out.get(port, 0))
        yield misses
        yield views
        for name, value, text in (("packets_in", stats.packets_in, "Packets sent into the switch"),
                                  ("records_in", stats.records_in, "Records sent into the switch"),
                                  ("deliveries", stats.deliveries, "Records reassembled at views")):
            yield CounterMetricFamily(f"camus_switch_{name}", text, value=value)
        ports = CounterMetricFamily("camus_switch_port_packets", "Packets out of each switch "
                                    "port (views and group members)", labels=["port"])
        for port, n in sorted(stats.packets_out.items()):
            ports.add_metric([str(port)], n)
        yield ports
        yield CounterMetricFamily("camus_subscription_syncs", "Times the subscription set was "
                                  "recompiled and written to the switch", value=stats.syncs)
        yield CounterMetricFamily("camus_subscription_writes", "Entry and multicast group "
                                  "writes to the switch", value=stats.writes)
        yield from _approximation(b, stats)


def _approximation(b, stats):
    """The entry budget and the edge's re-check (shim.approximation)."""
    dp = b.datapath
    yield GaugeMetricFamily("camus_switch_entries", "Table entries the switch holds",
                            value=dp.held.entries)
    yield GaugeMetricFamily("camus_switch_entry_budget", "The switch's entry budget "
                            "(--max-entries; 0: none)", value=dp.budget.max_entries)
    alpha = GaugeMetricFamily("camus_switch_alpha", "The approximation's alpha per field "
                              "(numeric bounds rounded to multiples of it)", labels=["field"])
    for name, a in sorted(dp.held.alpha.items()):
        alpha.add_metric([name], a)
    yield alpha
    yield CounterMetricFamily("camus_switch_approximations", "Times the switch went from the "
                              "exact rules to approximated ones", value=stats.approximations)
    rechecked = CounterMetricFamily("camus_edge_rechecked", "Records a view received while the "
                                    "switch held a superset of its filter, re-checked exactly",
                                    labels=["view"])
    dropped = CounterMetricFamily("camus_edge_false_positives", "Records a view received that "
                                  "its exact filter rejects, dropped before storing",
                                  labels=["view"])
    for port, view in sorted(b.view_ports.items()):
        rechecked.add_metric([view], stats.rechecked.get(port, 0))
        dropped.add_metric([view], stats.false_positives.get(port, 0))
    yield rechecked
    yield dropped
