"""The figures as tables: medians over the runs, ratios against kubectl measured in the
same run, and each target (the project's, stated with each table) as met or missed."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from statistics import median

from tests.bench import charts
from tests.bench.daemon import CURRENT_DEADLINE_SECONDS, DaemonFigures
from tests.bench.fleet import FleetFigures
from tests.bench.fleet import table as fleet_table
from tests.bench.measure import Figure, percentile
from tests.bench.oneshot import COLD, NOOP_DIFF, NOOP_SYNC, PHASES, TOOLS, OneShot
from tests.bench.peers.source import FluxSourceFigures
from tests.bench.tenants import TenantFigures
from tests.bench.tenants import table as tenants_table

MiB = 2**20


@dataclass(frozen=True)
class Target:
    limit: float
    shown: str
    strict: bool = False
    """"under" rather than "at most"."""

    def verdict(self, value: float) -> str:
        met = value < self.limit if self.strict else value <= self.limit
        return "met" if met else "**missed**"


RATIO_TARGETS = {
    (COLD, "wall time"): Target(0.7, "≤ 0.7x"),
    (COLD, "peak RSS"): Target(0.75, "≤ 0.75x"),
    (NOOP_SYNC, "wall time"): Target(0.5, "≤ 0.5x"),
    (NOOP_DIFF, "wall time"): Target(0.2, "≤ 0.2x"),
}
"""gitopsd's figure over kubectl's."""
COLD_REQUESTS_PER_OBJECT = Target(2.0, "≤ 2 per object")
"""Judged on what each further object costs, measured between two sizes: every tool also
makes a few requests whatever the size (discovery, the parent, a LIST per kind)."""
IDLE_REQUESTS = Target(0.0, "0, as on 2026-11-23")
DETECTION_P50 = Target(0.5, "p50 ≤ 0.5 s")
HEAL_P99 = Target(3.0, "p99 ≤ 3 s, every edit healed")
ROLLOUT_CPU = Target(1.0, "< 1 s per 30 s", strict=True)
"""The daemon's CPU while every Deployment rolls out: nothing git asked for."""
ROLLOUT_DRY_RUNS = Target(0.0, "no dry-run")
"""Its requests are the status it writes as health moves (at most one a second)."""
DAEMON_RSS_AT_10K = Target(150.0 * MiB, "< 150 MiB at 10k", strict=True)


def commit_target(size: int) -> Target:
    return Target(0.5, "< 0.5 s", strict=True) if size <= 1000 else Target(1.0, "< 1 s", True)


CLUSTERS = {
    "bare": "etcd and kube-apiserver only",
    "controllers": "with kube-controller-manager, kube-scheduler and kwok's nodes",
}
"""The control planes measured, by name: what runs beside the API server."""


@dataclass
class SizeResults:
    size: int
    cluster: str
    """A key of CLUSTERS."""
    oneshot: list[OneShot] = field(default_factory=list)
    daemon: list[DaemonFigures] = field(default_factory=list)
    charts: list[charts.ChartFigures] = field(default_factory=list)
    flux: FluxSourceFigures | None = None
    """Flux on one source of this size, when measured (the largest size, bare, run 1)."""


def markdown(results: Sequence[SizeResults]) -> str:
    sections = []
    for cluster in CLUSTERS:
        measured = [result for result in results if result.cluster == cluster]
        sections += [section for result in measured for section in size_section(result)]
        sections += cost_section(measured)
    return "\n".join(sections)


def cost_section(results: Sequence[SizeResults]) -> list[str]:
    """What a cold sync's requests come to: a cost per object, measured as the growth from
    the smallest size to the largest, and a fixed part."""
    if len(results) < 2:
        return []
    small, large = results[0], results[-1]
    rows = []
    for tool in TOOLS:
        cold = [median([run[COLD, tool].requests for run in r.oneshot]) for r in (small, large)]
        each = (cold[1] - cold[0]) / (large.size - small.size)
        fixed = cold[0] - each * small.size
        verdict = ("", "")
        if tool == "gitopsd":  # judged as shown: one fixed request more or less at one
            # size (a discovery cached or not) must not move a slope of 2.000 past 2
            judged = round(each, 3)
            verdict = (COLD_REQUESTS_PER_OBJECT.shown, COLD_REQUESTS_PER_OBJECT.verdict(judged))
        rows.append((tool, f"{each:.3f}", f"{fixed:.0f}", *verdict))
    return [
        f"## Cold sync: requests per object, {CLUSTERS[small.cluster]}\n",
        f"From {small.size:,} to {large.size:,} objects: what each further object costs, and "
        "what is left whatever the size (discovery, the parent, a LIST per kind).\n",
        table(("tool", "per object", "fixed", "target", ""), rows),
    ]


def size_section(result: SizeResults) -> list[str]:
    return [
        f"## {result.size:,} objects, {CLUSTERS[result.cluster]}\n",
        "### gitopsd against kubectl, side by side\n",
        table(
            ("figure", "gitopsd", "kubectl", "ratio", "target", ""),
            [oneshot_row(result, phase, measure) for phase in PHASES for measure in MEASURES],
        ),
        "### The daemon (enforce, selfHeal, prune, webhook)\n",
        table(("figure", "gitopsd run", "target", ""), daemon_rows(result)),
        *chart_section(result),
    ]


NO_RENDER = Target(0.0, "0")
CHART_MEASURES = {True: ("wall time", "peak RSS"), False: ("wall time", "API requests")}
"""By whether the phase is the render: a render makes no request, and the sync's baseline is
a shell pipe whose children's memory is not sampled."""


def chart_section(result: SizeResults) -> list[str]:
    """A chart of the same size: gitopsd against `helm template` (render) and against
    `helm template | kubectl apply --server-side` (sync)."""
    if not result.charts:
        return []
    rows = [
        chart_row(result, phase, measure)
        for phase in charts.PHASES
        for measure in MEASURES
        if measure.name in CHART_MEASURES[phase == charts.RENDER]
    ]
    renders = median([run.renders_on_poll for run in result.charts])
    poll = "renders of a poll whose commit left the chart alone"
    rows.append((poll, f"{renders:.0f}", "", "", NO_RENDER.shown, NO_RENDER.verdict(renders)))
    return [
        "### A chart of as many objects (render: against `helm template`; sync: against "
        "`helm template | kubectl apply --server-side`)\n",
        table(("figure", "gitopsd", "helm", "ratio", "target", ""), rows),
    ]


def chart_row(result: SizeResults, phase: str, measure: Measure) -> tuple[str, ...]:
    ours = [measure.of(run.figures[phase, "gitopsd"]) for run in result.charts]
    theirs = [measure.of(run.figures[phase, "helm"]) for run in result.charts]
    ratio = median([o / t if t else math.inf for o, t in zip(ours, theirs, strict=True)])
    return (
        f"{phase}: {measure.name}",
        measure.shown(median(ours), result.size),
        measure.shown(median(theirs), result.size),
        f"{ratio:.2f}x",
        "",
        "",
    )


@dataclass(frozen=True)
class Measure:
    name: str
    of: Callable[[Figure], float]
    shown: Callable[[float, int], str]
    """The median value, and the number of objects."""


MEASURES = (
    Measure("wall time", lambda f: f.seconds, lambda v, _: seconds(v)),
    Measure("API requests", lambda f: f.requests, lambda v, size: per_object(v, size)),
    Measure("peak RSS", lambda f: f.peak_rss, lambda v, _: f"{v / MiB:.0f} MiB"),
)


def oneshot_row(result: SizeResults, phase: str, measure: Measure) -> tuple[str, ...]:
    ours = [measure.of(run[phase, "gitopsd"]) for run in result.oneshot]
    theirs = [measure.of(run[phase, "kubectl"]) for run in result.oneshot]
    ratio = median([o / t for o, t in zip(ours, theirs, strict=True)])
    row = (
        f"{phase}: {measure.name}",
        measure.shown(median(ours), result.size),
        measure.shown(median(theirs), result.size),
        f"{ratio:.2f}x",
    )
    if target := RATIO_TARGETS.get((phase, measure.name)):
        return (*row, target.shown, target.verdict(ratio))
    if (phase, measure.name) == (COLD, "API requests"):
        return (*row, COLD_REQUESTS_PER_OBJECT.shown, "see below")
    return (*row, "", "")


def daemon_rows(result: SizeResults) -> list[tuple[str, ...]]:
    runs, size = result.daemon, result.size

    def typical(what: Callable[[DaemonFigures], float]) -> float:
        return median([what(d) for d in runs])

    detected = samples(d.detected for d in runs)
    healed = samples(d.healed for d in runs)
    applied = samples(d.applied for d in runs)
    cold_requests = typical(lambda d: d.cold_start_requests)
    idle = typical(lambda d: d.idle_requests)
    rss = typical(lambda d: d.rss)
    settled_rss = typical(lambda d: d.settled_rss)
    commit = commit_target(size)
    window = f"idle {typical(lambda d: d.idle_seconds):.0f} s"
    return [
        plain(
            "cold start: start -> revision applied",
            seconds(typical(lambda d: d.cold_start_seconds)),
        ),
        plain("cold start: requests until settled", per_object(cold_requests, size)),
        rss_row(f"cold start: RSS once settled, {size:,} objects cached", size, settled_rss),
        *current_rows(runs),
        judged(f"{window}: requests", f"{idle:.0f}", IDLE_REQUESTS, idle),
        plain(f"{window}: CPU", seconds(typical(lambda d: d.idle_cpu_seconds))),
        *rollout_rows(runs),
        judged("edit -> metric", spread(detected), DETECTION_P50, percentile(detected, 0.5)),
        judged("edit -> heal", spread(healed), HEAL_P99, percentile(healed, 0.99)),
        judged("one-file commit -> applied", spread(applied), commit, percentile(applied, 0.5)),
        plain(
            "one-file commit: requests", f"{median(samples(d.commit_requests for d in runs)):,.0f}"
        ),
        rss_row(f"RSS with {size:,} objects cached, after the idle window", size, rss),
        plain("peak RSS (VmHWM)", f"{typical(lambda d: d.peak_rss) / MiB:.0f} MiB"),
    ]


def current_rows(runs: Sequence[DaemonFigures]) -> list[tuple[str, ...]]:
    """Where controllers roll the set out: how long until the daemon found it all Current,
    which the idle window waits for."""
    waited = [d.current_seconds for d in runs if d.current_seconds]
    if not waited:
        return []
    typical = median(waited)
    never = f"not within {CURRENT_DEADLINE_SECONDS:.0f} s"
    shown = seconds(typical) if math.isfinite(typical) else never
    return [plain("start -> every object Current (rolled out)", shown)]


def rollout_rows(runs: Sequence[DaemonFigures]) -> list[tuple[str, ...]]:
    """The window after every Deployment was restarted: what the cluster's churn cost (in
    the runs that measured it: the last at the largest size)."""
    runs = [d for d in runs if d.rollout_seconds]
    if not runs:
        return []

    def typical(what: Callable[[DaemonFigures], float]) -> float:
        return median([what(d) for d in runs])

    window = typical(lambda d: d.rollout_seconds)
    step = f"rollout of all {runs[0].deployments:,} Deployments, {window:.0f} s"
    outcomes = runs[0].rollout_events
    events = {o: median([d.rollout_events.get(o, 0) for d in runs]) for o in outcomes}
    total = sum(events.values())
    cpu = typical(lambda d: d.rollout_cpu_seconds)
    requested = typical(lambda d: d.rollout_requests)
    dry_runs = typical(lambda d: d.rollout_dry_runs)
    by_outcome = ", ".join(f"{outcome} {count:,.0f}" for outcome, count in events.items())
    per_event = f"{cpu / total * 1e6:,.0f} µs" if total else "no event"
    return [
        plain(f"{step}: watch events", f"{total:,.0f} ({by_outcome})"),
        judged(
            f"{step}: requests",
            f"{requested:,.0f} ({dry_runs:,.0f} dry-runs)",
            ROLLOUT_DRY_RUNS,
            dry_runs,
        ),
        judged(f"{step}: CPU", seconds(cpu), ROLLOUT_CPU, cpu * 30 / window),
        plain(f"{step}: CPU per watch event", per_event),
    ]


def per_object(requests: float, size: int) -> str:
    return f"{requests:,.0f} ({requests / size:.2f}/object)"


def plain(name: str, shown: str) -> tuple[str, ...]:
    return (name, shown, "", "")


def judged(name: str, shown: str, target: Target, value: float) -> tuple[str, ...]:
    return (name, shown, target.shown, target.verdict(value))


def rss_row(name: str, size: int, rss: float) -> tuple[str, ...]:
    shown = f"{rss / MiB:.0f} MiB"
    if size < 10_000:
        return plain(name, shown)
    return judged(name, shown, DAEMON_RSS_AT_10K, rss)


def samples(runs: Iterable[Sequence[float | None]]) -> list[float]:
    """Every run's samples in one list; one that never happened counts as forever."""
    return [math.inf if s is None else float(s) for one in runs for s in one]


def spread(values: Sequence[float]) -> str:
    if not values:
        return "no samples"
    never = sum(1 for v in values if v == math.inf)
    shown = (
        f"p50 {seconds(percentile(values, 0.5))}, p90 {seconds(percentile(values, 0.9))}, "
        f"max {seconds(max(values))}; n={len(values)}"
    )
    return shown + (f", {never} never within the deadline" if never else "")


def seconds(value: float) -> str:
    if value == math.inf:
        return "never"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = [header, ["---"] * len(header), *rows]
    return "\n".join("| " + " | ".join(line) + " |" for line in lines) + "\n"


@dataclass(frozen=True)
class Circumstances:
    """When, where and how the figures were taken."""

    date: str
    machine: str
    revision: str
    command: str
    runs: int
    minutes: float
    load: tuple[float, float]
    """The 1-minute load average at the start and at the end: other work on the machine."""


def document(
    results: Sequence[SizeResults],
    circumstances: Circumstances,
    fleet: FleetFigures | None,
    tenants: TenantFigures | None = None,
    peers: str = "",
) -> str:
    """The whole of BENCHMARKS.md; `peers` is the section of the peers measured beside
    gitopsd (tests/bench/peers/report.py), after the fleet's."""
    c = circumstances
    head = f"""# Benchmarks

Written by `make bench` ([tests/bench/](tests/bench/), described in
[docs/benchmarks.md](docs/benchmarks.md)) on {c.date}: gitopsd at {c.revision}, `{c.command}`,
{c.runs} run(s) per size, {c.minutes:.0f} minutes in all. Values are medians over the runs; a
ratio is gitopsd's figure over kubectl's (or Flux's) in the same run (the median of the
runs' ratios).
Machines of this class are noisy (±25% from run to run): compare ratios, not seconds
across runs.

Machine: {c.machine}. Load average (1 min): {c.load[0]:.1f} at the start, {c.load[1]:.1f}
at the end.
"""
    fleet_section = ["## A fleet of GitSyncs\n", fleet_table(fleet), ""] if fleet else []
    tenants_section = []
    if tenants:
        tenants_section = [
            "## One tenant at its bounds, another healed\n",
            tenants_table(tenants),
            "",
        ]
    peers_section = [peers, ""] if peers else []
    body = [head, markdown(results), *fleet_section, *peers_section, *tenants_section]
    return "\n".join([*body, METHOD])


METHOD = """## How it is measured

- One real control plane per kind for the whole run: etcd and kube-apiserver alone, then
  the same with kube-controller-manager, kube-scheduler and kwok's three simulated nodes
  (tests/harness/controllers.py), where every Deployment synced rolls out for real: a
  ReplicaSet and its Pods created, scheduled and made Ready while gitopsd and kubectl
  work, on the same 2 cores. Each tool, each run and each size syncs
  a set of its own: its own 10 Namespaces and its own CRD, so a cold sync is really cold.
  A set of N objects is N/4 apps (Deployment, Service, ConfigMap, a custom resource), the
  Namespaces and the CRD, in one YAML file per app, committed to a git repository that
  gitopsd reads over `file://`; kubectl reads the same files from a directory.
- `gitopsd sync|diff URL` and `kubectl apply --server-side -R -f DIR` / `kubectl diff
  --server-side -R -f DIR` run as child processes, one at a time. kubectl's cold sync is
  three commands, since kubectl cannot apply a CRD with its custom resources at once:
  apply the Namespaces and the CRD, `kubectl wait` for it to be Established, apply the
  rest. Wall time is the child's; peak RSS is its VmHWM, sampled every 20 ms until it
  exits (not `ru_maxrss`, which on Linux includes what the child shared with the
  benchmark's own process before exec: earlier versions of this file carry that floor);
  API requests are those the API server's audit log recorded for the tool's user in the
  window (discovery included; watches count when they end). A cold sync's requests per
  object are their growth from the smallest size to the largest over the growth in
  objects; what is left is the fixed part.
- The daemon (`gitopsd run`, enforce mode, selfHeal and prune on, interval 1h, a signed
  webhook) keeps a set of its own, beside the one-shot runs' sets (its watches of all
  namespaces read them, and keep none). Cold start: from the process's start to its
  `gitopsd_last_success_timestamp_seconds`; its requests are counted until it settled
  (nothing drifts, its request tally stood still 2 s). With controllers it then waits up
  to 10 min for the set rolled out (`gitopsd_source_health` Current; they roll the
  one-shot runs' sets out first) and settled again, so that the idle window finds a
  cluster at rest. Idle: audited requests and CPU over 30 s (`--idle-seconds`), then VmRSS
  (and VmRSS once the cold start settled, the moment an outside harness sees it first).
  Each edit patches one ConfigMap through the admin API; edit -> metric is the time until
  `gitopsd_drift_detection_seconds_count` grows, edit -> heal until the live field is
  git's again (sampled every 20 ms). Each commit changes one file, is pushed a second or
  more after the last webhook call (calls within a second are one, fetched when it ends),
  and the webhook is called; commit -> applied is the time from the push until the live
  ConfigMap carries the change. Last, at the largest size (in the last run), a rollout:
  every Deployment of the set restarted through the admin API (`kubectl rollout restart`,
  an annotation another manager owns), and, with controllers, rolled out (ReplicaSets
  replaced, Pods created and deleted, status in steps: tens of minutes for 2,500 on 2
  cores, so nothing else is measured after it on that control plane): over as long a
  window as the idle one from the restart, the daemon's audited requests, CPU and watch
  events by what each came to (`gitopsd_watch_events_total`).
- A chart of as many objects, at the smallest size (tests/bench/charts.py): `gitopsd
  validate` of it against `helm template` alone, and `gitopsd sync` against `helm template
  | kubectl apply --server-side -f -`, each on a release of its own; then a commit beside
  the chart, and the renders the next read made (the parse cache counts them).
- The fleet (tests/bench/fleet.py, `--fleet`, on a bare control plane of its own): one
  daemon in operator mode and that many GitSyncs, each in a namespace of its own, all of
  one repository of ten ConfigMaps and a Service (interval 1m, prune, a webhook). Ready:
  from creating the GitSyncs until every one is Ready=True; then an idle window of one
  interval, in which every GitSync polls once (audited requests but the Lease's, CPU,
  VmRSS, VmHWM); then a commit no webhook announces, until every GitSync's ConfigMap
  carries it (at their polls); then another, one GitSync's webhook
  called, until every GitSync's ConfigMap carries it. Threads: the most the daemon ran at
  once over all of it. Both steps are set against their CPU floor: the daemon's requests
  in them (audited) times the CPU a request costs kube-apiserver, etcd and the client,
  calibrated in the same run by 2,000 server-side applies of a ConfigMap, over the cores
  (tests/bench/floor.py). Beside each, the CPU each process spent per request the daemon
  sent in it (what a calibrated apply cost it in brackets), and how busy the machine was
  (`/proc/stat`): near 100 %, the step waits for the processor, and its distance from the
  floor is CPU spent beyond what its requests cost when calibrated.
- Tenants (tests/bench/tenants.py, `--tenants`, on a bare control plane of its own): one
  daemon in operator mode inside a 1 GiB memory cgroup, as the Deployment's limit, serving
  two namespaces. The victim's GitSync keeps 40 ConfigMaps (selfHeal, interval 1h); each
  edit patches one of them and edit -> heal is the time until its field is git's again
  (sampled every 20 ms), `--tenants` edits (20) with the attacker's namespace empty, then
  as many with it at the bounds an install has by default: `tenantQuota.gitSyncs` GitSyncs
  (one more refused), one holding a revision of `tenantQuota.objects` less 500 ConfigMaps
  in observe mode, one fetching from a server that sends a byte every half second until
  `network.fetchDeadline` (20 s here, so fetches end and start again), the rest rendering
  a chart stopped at `sandbox.renderMemory`, and a commit to its charts every 5 s, so
  that they render again. Edits start 2 s apart in both phases, so that the victim is
  measured while the attacker works. The target: the victim's
  p50 and p90 within 10 % of its own in the same run. The cgroup's peak memory and OOM
  kills are the kernel's.
- Targets are the project's, stated for 10k objects (the fleet's for 1,000
  GitSyncs), beside each figure.
"""
