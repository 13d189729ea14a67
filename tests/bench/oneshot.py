"""gitopsd's one-shot commands against kubectl, side by side in one run: a cold sync, a
no-op sync and a no-op diff, each tool on a set of objects of its own (the catalogue's LD-01
and LD-02 at 10,000 objects: durations, requests per object, peak RSS).

kubectl cannot apply a CRD and its custom resources in one command ("ensure CRDs are
installed first"), so its cold sync is what a kubectl user has to run: apply cluster/
(Namespaces, CRD), wait for the CRD to be Established, apply apps/. The three count as one.
"""

from __future__ import annotations

from tests.bench.lab import Command, Lab
from tests.bench.measure import Figure
from tests.bench.repository import ObjectSet, generate, git_repository, write

COLD, NOOP_SYNC, NOOP_DIFF = "cold sync", "no-op sync", "no-op diff"
PHASES = (COLD, NOOP_SYNC, NOOP_DIFF)
TOOLS = ("gitopsd", "kubectl")
OneShot = dict[tuple[str, str], Figure]
"""(phase, tool) -> its figures in one run."""
NO_DRIFT = (0,)
SETTLING = (0, 1)
"""kubectl diff compares status too: with controllers at work, a Deployment still rolling
out differs between its read and its dry-run (exit 1). What is measured is the work a no-op
diff costs, not kubectl's verdict on a moving status (gitopsd's ignores status)."""


def deadline_seconds(size: int) -> float:
    """Generous: ten times what the slowest tool took per object on 2026-11-23."""
    return 120.0 + 0.1 * size


def side_by_side(lab: Lab, size: int, tag: str) -> OneShot:
    ours, theirs = generate(f"{tag}-g", size), generate(f"{tag}-k", size)
    url = lab.server.file_url(git_repository(lab.server, ours))
    folder = write(theirs, lab.workdir / "sets" / theirs.tag)
    sync = [(lab.gitopsd("sync", url, ours.tag), NO_DRIFT)]
    gitopsd = {
        COLD: sync,
        NOOP_SYNC: sync,
        NOOP_DIFF: [(lab.gitopsd("diff", url, ours.tag), NO_DRIFT)],
    }
    kubectl = kubectl_commands(lab, theirs, str(folder))
    figures: OneShot = {}
    for phase in PHASES:
        for tool, commands in (("gitopsd", gitopsd[phase]), ("kubectl", kubectl[phase])):
            label = f"{tag}-{tool}-{phase.replace(' ', '-')}"
            figures[phase, tool] = figure = lab.measured(label, commands, deadline_seconds(size))
            show(phase, tool, figure, size)
    return figures


def kubectl_commands(lab: Lab, objects: ObjectSet, folder: str) -> dict[str, list[Command]]:
    def kubectl(*arguments: str) -> list[str]:
        return lab.kubectl(*arguments, cache=objects.tag)

    apply = ("apply", "--server-side")
    return {
        COLD: [
            (kubectl(*apply, "-f", f"{folder}/cluster"), NO_DRIFT),
            (kubectl("wait", "--for=condition=Established", f"crd/{objects.crd}"), NO_DRIFT),
            (kubectl(*apply, "-R", "-f", f"{folder}/apps"), NO_DRIFT),
        ],
        NOOP_SYNC: [(kubectl(*apply, "-R", "-f", folder), NO_DRIFT)],
        NOOP_DIFF: [(kubectl("diff", "--server-side", "-R", "-f", folder), SETTLING)],
    }


def show(phase: str, tool: str, figure: Figure, size: int) -> None:
    print(
        f"  {phase:<11} {tool:<8} {figure.seconds:8.2f} s  {figure.requests:7,d} requests "
        f"({figure.requests / size:.2f}/object)  peak {figure.peak_rss / 2**20:5.0f} MiB",
        flush=True,
    )
