"""Real shells (bash; zsh and fish from Debian's packages, tests/shells/provide.sh) asked what
they complete for a command line, with a completion script loaded as a user loads it.

bash: the script's function called as readline calls it, COMP_WORDS and COMP_CWORD set,
then COMPREPLY read. fish: `complete -C LINE`, fish's own way to ask. zsh completes only
inside its line editor, so an interactive zsh runs on a pseudo-terminal, the line is typed
and TAB pressed; every match the completion system adds (its `compadd`, wrapped) is written
to a file, apart from the terminal's drawing.
"""

from __future__ import annotations

import fcntl
import os
import select
import shlex
import struct
import subprocess
import termios
import time
from collections.abc import Callable
from pathlib import Path

from tests.harness.controlplane import provided

PROVIDE_SCRIPT = Path(__file__).resolve().parent.parent / "shells" / "provide.sh"
ZSH_SECONDS = 20.0
Completer = Callable[[Path, Path, str, Path], list[str]]
"""(the shell, the script, the line typed, the directory it is typed in) -> the matches."""


def provide_shells() -> dict[str, Path]:
    """Each shell by its name: bash, zsh, fish."""
    return {name.lower(): path for name, path in provided(PROVIDE_SCRIPT).items()}


def bash_completions(bash: Path, script: Path, line: str, cwd: Path) -> list[str]:
    words = [*line.split(), *([""] if line.endswith(" ") else [])]
    program = (
        f"source {shlex.quote(str(script))}\n"
        f"COMP_WORDS=({' '.join(shlex.quote(word) for word in words)})\n"
        f"COMP_CWORD={len(words) - 1} COMP_LINE={shlex.quote(line)} COMP_POINT={len(line)}\n"
        '_gitopsd && printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    return _lines(_run([str(bash), "--norc", "--noprofile", "-c", program], cwd))


def fish_completions(fish: Path, script: Path, line: str, cwd: Path) -> list[str]:
    program = f"source {shlex.quote(str(script))}; complete -C {shlex.quote(line)}"
    found = _run([str(fish), "--no-config", "-c", program], cwd)
    return _lines("\n".join(match.partition("\t")[0] for match in found.splitlines()))


ZSHRC = """\
PS1='% '
autoload -Uz compinit && compinit -u -D
source {script}
bindkey '^I' complete-word
unsetopt auto_list beep
compadd() {{
    # -O, -A and -D ask for matches back instead of adding them: not what is offered
    if [[ ${{@[1,(i)(-|--)]}} == *-(O|A|D)\\ * ]]; then
        builtin compadd "$@"
        return
    fi
    local -a __matches
    builtin compadd -A __matches "$@"
    (( $#__matches )) && print -rl -- $__matches >> {matches}
    builtin compadd "$@"
}}
_capture_done() {{ print done > {done} }}
comppostfuncs=(_capture_done)
print ready > {ready}
"""


def zsh_completions(zsh: Path, script: Path, line: str, cwd: Path) -> list[str]:
    """TAB pressed after `line` in an interactive zsh: the matches it offers."""
    home = cwd / ".zsh-home"
    home.mkdir(exist_ok=True)
    files = {name: home / name for name in ("matches", "done", "ready")}
    for path in files.values():
        path.unlink(missing_ok=True)
    quoted = {name: shlex.quote(str(path)) for name, path in files.items()}
    (home / ".zshrc").write_text(ZSHRC.format(script=shlex.quote(str(script)), **quoted))
    environment = {
        "HOME": str(home),
        "ZDOTDIR": str(home),
        "TERM": "xterm",
        "PATH": "/usr/bin:/bin",
    }
    terminal, child = os.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
    shell = subprocess.Popen(
        [str(zsh), "--no-globalrcs", "-i"],
        stdin=child,
        stdout=child,
        stderr=child,
        cwd=cwd,
        env=environment,
        start_new_session=True,
    )
    os.close(child)
    screen = bytearray()
    try:
        _drain_until(terminal, files["ready"].exists, screen)
        os.write(terminal, line.encode() + b"\t")
        _drain_until(terminal, files["done"].exists, screen)
    finally:
        shell.kill()
        shell.wait()
        os.close(terminal)
    matches = files["matches"].read_text() if files["matches"].exists() else ""
    return _lines(matches)


def _drain_until(terminal: int, done: Callable[[], bool], screen: bytearray) -> None:
    """Reads what zsh draws (else it blocks on a full terminal) until `done()`."""
    deadline = time.monotonic() + ZSH_SECONDS
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(
                f"zsh did not finish; its terminal:\n{screen.decode(errors='replace')}"
            )
        readable, _, _ = select.select([terminal], [], [], 0.05)
        if readable:
            try:
                screen += os.read(terminal, 65536)
            except OSError:  # zsh is gone: `done()` says whether it finished first
                time.sleep(0.05)


def _run(argv: list[str], cwd: Path) -> str:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False, timeout=30)
    assert done.returncode == 0 and not done.stderr, f"{argv[0]}: {done.stderr}"
    return done.stdout


def _lines(text: str) -> list[str]:
    return sorted({line for line in text.splitlines() if line})


COMPLETERS: dict[str, Completer] = {
    "bash": bash_completions,
    "zsh": zsh_completions,
    "fish": fish_completions,
}
