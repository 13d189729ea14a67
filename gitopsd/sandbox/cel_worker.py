"""The process that evaluates health rules for the daemon (`gitopsd.sandbox.expressions`):
`python -m gitopsd.sandbox.cel_worker MEMORY_BYTES`.

It bounds its own address space before it reads anything, says `{"ready": true}` once the
CEL runtime is loaded (a start on a loaded machine is not charged to the first rule's
deadline), then answers one JSON line per JSON line: {"expression", "variables"} in,
{"holds", "why"} or {"over": "memory"} out. An allocation past the bound fails
(MemoryError, from CEL's std::bad_alloc) and is answered; the memory is given back as the
expression's values go, so the worker serves the next."""

from __future__ import annotations

import json
import resource
import sys
from typing import IO

from gitopsd.health.expressions import BoundExceeded, in_process


def serve(requests: IO[str], replies: IO[str]) -> None:
    for line in requests:
        reply = answer(line)
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


def answer(line: str) -> dict[str, object]:
    try:
        request = json.loads(line)
        holds, why = in_process(request["expression"], request["variables"])
    except (MemoryError, BoundExceeded):  # MemoryError: reading a request past the bound
        return {"over": "memory"}
    return {"holds": holds, "why": why}


def main(argv: list[str]) -> int:
    limit = int(argv[1])
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    in_process("true", {})  # loads the runtime
    sys.stdout.write(json.dumps({"ready": True}) + "\n")
    sys.stdout.flush()
    serve(sys.stdin, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
