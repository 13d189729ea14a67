"""`make mutation`: the pure core's unit tests, run against mutants of the core (mutmut 3).

Runs mutmut afresh over the modules pyproject.toml's [tool.mutmut] names, against the unit
test files it selects, counts each module's mutants by verdict, and writes the table to
MUTATION.md with the survivors docs/testing.md does not explain. Exits 1 when the tests of
a module kill less than the target share of its mutants.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from tests.bench.machine import REPOSITORY, gitopsd_revision

MUTANTS = REPOSITORY / "mutants"
MUTMUT = Path(sys.executable).parent / "mutmut"
EXPLANATIONS = REPOSITORY / "docs" / "testing.md"
TARGET = 85.0
"""The least share of a module's mutants its tests must kill, in percent."""
CAUGHT = ("killed", "timeout")
"""A timeout is caught too: the mutant made a test run until mutmut stopped it."""
COLUMNS = ("killed", "timeout", "survived", "no tests", "suspicious")
"""The verdicts counted one by one; any other (a crash, one not checked) counts as other."""
RESULT = re.compile(r"^\s+(?P<mutant>\S+): (?P<verdict>.+)$", re.MULTILINE)
MUTANT_NAME = re.compile(r"gitopsd\.[\wǁ.]+__mutmut_\d+")


@dataclass(frozen=True)
class Score:
    module: str
    verdicts: Counter[str]

    @property
    def mutants(self) -> int:
        return sum(self.verdicts.values())

    @property
    def caught(self) -> int:
        return sum(self.verdicts[verdict] for verdict in CAUGHT)

    @property
    def percent(self) -> float:
        return 100.0 * self.caught / self.mutants if self.mutants else 100.0


def main() -> int:
    options = parser().parse_args()
    started = time.monotonic()
    run_mutmut(options.workers)
    minutes = (time.monotonic() - started) / 60
    verdicts = verdicts_of_mutants()
    scores = [score_of(module, verdicts) for module in mutated_modules()]
    unexplained = sorted(name for name, verdict in verdicts.items() if verdict not in CAUGHT)
    unexplained = [name for name in unexplained if name not in explained()]
    header = circumstances(options.workers, minutes)
    text = document(header, scores, unexplained)
    print("\n" + table(scores))
    options.output.write_text(text)
    print(f"mutation: wrote {options.output}")
    missed = [score.module for score in scores if score.percent < TARGET]
    if missed:
        print(f"mutation: under {TARGET:.0f} % killed: {', '.join(missed)}", file=sys.stderr)
    return 1 if missed else 0


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tests.mutation", description=__doc__)
    parser.add_argument("--workers", type=int, default=2, help="mutants run at once (2)")
    parser.add_argument("--output", type=Path, default=REPOSITORY / "MUTATION.md")
    return parser


def run_mutmut(workers: int) -> None:
    """A fresh run: mutmut keeps the verdicts of unchanged code, so a survivor that a new test
    kills would still read as a survivor. Its progress goes to mutants/mutmut.log."""
    shutil.rmtree(MUTANTS, ignore_errors=True)
    MUTANTS.mkdir()
    log = MUTANTS / "mutmut.log"
    print(f"mutation: mutmut runs with {workers} workers; its progress: {log}")
    with log.open("w") as output:
        command = [str(MUTMUT), "run", "--max-children", str(workers)]
        done = subprocess.run(command, cwd=REPOSITORY, stdout=output, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        sys.exit(f"mutation: mutmut failed ({done.returncode}); see {log}")


def verdicts_of_mutants() -> dict[str, str]:
    """Each mutant's verdict, by name (gitopsd.plan.x_tiers__mutmut_3)."""
    command = [str(MUTMUT), "results", "--all", "true"]
    done = subprocess.run(command, cwd=REPOSITORY, capture_output=True, text=True, check=True)
    return {found["mutant"]: found["verdict"] for found in RESULT.finditer(done.stdout)}


def mutated_modules() -> list[str]:
    """The modules [tool.mutmut] mutates, as it lists them (gitopsd/plan.py)."""
    settings = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())
    modules: list[str] = settings["tool"]["mutmut"]["only_mutate"]
    return modules


def score_of(module: str, verdicts: dict[str, str]) -> Score:
    dotted = module.removesuffix(".py").replace("/", ".")
    own = [verdict for name, verdict in verdicts.items() if name.rsplit(".", 1)[0] == dotted]
    return Score(module, Counter(own))


def explained() -> set[str]:
    """The mutants docs/testing.md names as equivalent to the code they mutate."""
    text = EXPLANATIONS.read_text() if EXPLANATIONS.exists() else ""
    return set(MUTANT_NAME.findall(text))


def circumstances(workers: int, minutes: float) -> str:
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"Written by `make mutation` ([tests/mutation.py](tests/mutation.py), described in\n"
        f"[docs/testing.md](docs/testing.md)) on {when}: gitopsd at {gitopsd_revision()}, "
        f"mutmut with {workers} workers, {minutes:.1f} minutes in all, on {platform.machine()} "
        f"with {os.cpu_count()} cores and Python {platform.python_version()}."
    )


def table(scores: list[Score]) -> str:
    head = ["module", "mutants", *COLUMNS, "other", "killed %"]
    rows = [_row(score.module, score) for score in scores]
    total = Score("all", sum((score.verdicts for score in scores), Counter()))
    rows.append(_row("**all**", total))
    lines = [head, ["---"] * len(head), *rows]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)


def _row(name: str, score: Score) -> list[str]:
    counts = [score.verdicts[column] for column in COLUMNS]
    other = score.mutants - sum(counts)
    return [name, str(score.mutants), *map(str, counts), str(other), f"{score.percent:.1f} %"]


def document(header: str, scores: list[Score], unexplained: list[str]) -> str:
    missed = [score.module for score in scores if score.percent < TARGET]
    verdict = (
        f"Every module's tests kill at least {TARGET:.0f} % of its mutants."
        if not missed
        else f"Under the target of {TARGET:.0f} %: {', '.join(missed)}."
    )
    survivors = (
        "Every mutant not killed is explained in [docs/testing.md](docs/testing.md)."
        if not unexplained
        else "Not killed, and not explained in [docs/testing.md](docs/testing.md):\n\n"
        + "\n".join(f"- `{name}`" for name in unexplained)
    )
    return f"# Mutation testing\n\n{header}\n\n{table(scores)}\n\n{verdict} {survivors}\n"


if __name__ == "__main__":
    sys.exit(main())
