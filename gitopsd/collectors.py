"""Prometheus collectors of gitopsd's own: counters that export 0 for every closed label set
of every source, each source's gauges from its last snapshot, and the cluster client's
request tally, all read at each scrape."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import Counter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector


class ZeroFilled(Collector):
    """A counter as it is, plus 0 for each closed label set (`closed`) of each source
    served that has not counted yet: no series object is kept for those, so a thousand
    sources cost their scrape lines, not their memory."""

    def __init__(
        self,
        counter: Counter,
        labels: list[str],
        closed: tuple[tuple[str, ...], ...],
        sources: Callable[[], list[str]],
    ) -> None:
        self.counter = counter
        self.labels = labels
        self.closed = closed
        self.sources = sources

    def collect(self) -> Iterator[Metric]:
        for family in self.counter.collect():
            total = family.name + "_total"
            names = self.labels
            counted = {
                tuple(sample.labels[n] for n in names)
                for sample in family.samples
                if sample.name == total
            }
            for source in self.sources():
                for labels in self.closed:
                    if (source, *labels) not in counted:
                        family.add_sample(
                            total, dict(zip(names, (source, *labels), strict=True)), 0.0
                        )
            yield family


@dataclass(frozen=True)
class SourceGauge:
    """A gauge of a source's last state, labelled `source` and then `labels`."""

    name: str
    help: str
    labels: tuple[str, ...] = ()


Series = tuple[tuple[str, ...], float]
"""One series of a source's gauge: the values of its labels after `source`, and its value."""

Snapshot = Mapping[SourceGauge, tuple[Series, ...]]
"""A source's last state: every series of each of its gauges, replaced whole, never changed
(a gauge it does not hold is one not measured yet: no series)."""


class LastStates(Collector):
    """The gauges of every source, from each one's snapshot at the scrape: a measurement
    replaces a source's series all at once, and a source forgotten leaves none."""

    def __init__(
        self, gauges: tuple[SourceGauge, ...], snapshots: Callable[[], Mapping[str, Snapshot]]
    ) -> None:
        self.gauges = gauges
        self.snapshots = snapshots

    def collect(self) -> Iterator[GaugeMetricFamily]:
        snapshots = sorted(self.snapshots().items())
        for gauge in self.gauges:
            family = GaugeMetricFamily(gauge.name, gauge.help, labels=["source", *gauge.labels])
            for source, snapshot in snapshots:
                for labels, value in snapshot.get(gauge, ()):
                    family.add_metric([source, *labels], value)
            yield family


class TalliedCounter(Collector):
    """A counter exported straight from a tally its owner keeps (the cluster client's
    requests, the informers' watch events), read at each scrape."""

    def __init__(
        self,
        name: str,
        help_text: str,
        labels: list[str],
        tally: Callable[[], Mapping[Any, int]],
    ) -> None:
        self.name, self.help_text, self.labels, self.tally = name, help_text, labels, tally

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(self.name, self.help_text, labels=self.labels)
        for values, count in sorted(self.tally().items()):
            family.add_metric([str(value) for value in values], count)
        yield family


class Reachability(Collector):
    """gitopsd_cluster_reachable: 1 for each cluster whose API server answered its last
    request, 0 for one that did not (the daemon's own, and those declared)."""

    def __init__(self, reachable: Callable[[], Mapping[str, bool]]) -> None:
        self.reachable = reachable

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "gitopsd_cluster_reachable",
            "1 while the cluster's API server answered its last request, else 0.",
            labels=["cluster"],
        )
        for name, answered in sorted(self.reachable().items()):
            family.add_metric([name], 1.0 if answered else 0.0)
        yield family
