"""`gitopsd completion SHELL`: the completion script of each shell, written from what the
parser declares (`gitopsd.cli.completion`): bash's function over COMP_WORDS, zsh's
`_arguments` specs and fish's `complete` lines, each flag with its help's summary where the
shell shows one."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable, Iterable

from gitopsd.cli.completion import Argument, Command, Program, Value, program
from gitopsd.cli.render import emit
from gitopsd.errors import ExitCode


def run_completion(parser: argparse.ArgumentParser, arguments: argparse.Namespace) -> int:
    """The script that has the shell complete what `parser` declares."""
    emit(SCRIPTS[arguments.shell](program(parser)))
    return ExitCode.OK


HEADER = """\
# gitopsd completion for {name}, written by `gitopsd completion {name}` from gitopsd's own
# command line: run that again after an upgrade. {load}
"""


def bash(declared: Program) -> str:
    """One function per command: a flag's value (its choices, a path, or nothing), else its
    flags after a `-`, else its operand's values."""
    load = "Load it with:\n#   source <(gitopsd completion bash)"
    top = _bash_offer(
        _names(declared.flags), _bash_words(" ".join(c.name for c in declared.commands))
    )
    commands = "|".join(command.name for command in declared.commands)
    return "\n".join(
        [
            HEADER.format(name="bash", load=load),
            BASH_MAIN.replace("@TOP@", top).replace("@COMMANDS@", commands),
            BASH_PATHS,
            *(_bash_command(command) for command in declared.commands),
            "complete -F _gitopsd gitopsd",
        ]
    )


BASH_MAIN = """\
_gitopsd() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} command= word
    # bash splits --flag=value at the "=" (COMP_WORDBREAKS)
    if [[ $cur == = ]]; then
        cur=
    elif [[ $prev == = ]]; then
        prev=${COMP_WORDS[COMP_CWORD-2]}
    fi
    for word in "${COMP_WORDS[@]:1:COMP_CWORD-1}"; do
        if [[ $word != -* ]]; then
            command=$word
            break
        fi
    done
    case $command in
        '') @TOP@ ;;
        @COMMANDS@) "_gitopsd_${command//-/_}" ;;
    esac
}
"""

BASH_PATHS = """\
# a path: left to the shell's own completion of file names
__gitopsd_paths() {
    compopt -o default 2>/dev/null
    COMPREPLY=()
}
"""


def _bash_command(command: Command) -> str:
    """Flags whose values complete alike share an arm of the `case`."""
    arms: dict[str, list[str]] = {}
    for flag in command.flags:
        if flag.value != Value.NONE:
            arms.setdefault(_bash_values(flag), []).extend(flag.names)
    operand = _bash_values(command.operand) if command.operand else "COMPREPLY=()"
    return "\n".join(
        [
            f"_gitopsd_{command.name.replace('-', '_')}() {{",
            "    case $prev in",
            *(f"        {'|'.join(names)}) {values} ;;" for values, names in arms.items()),
            f"        *) {_bash_offer(_names(command.flags), operand)} ;;",
            "    esac",
            "}",
            "",
        ]
    )


def _bash_offer(flags: str, otherwise: str) -> str:
    """The flags after a `-`, else what `otherwise` offers."""
    return f"if [[ $cur == -* ]]; then {_bash_words(flags)}; else {otherwise}; fi"


def _bash_values(argument: Argument) -> str:
    if argument.value == Value.CHOICE:
        return _bash_words(" ".join(argument.choices))
    return "__gitopsd_paths" if argument.value == Value.PATH else "COMPREPLY=()"


def _bash_words(words: str) -> str:
    return f'COMPREPLY=($(compgen -W {shlex.quote(words)} -- "$cur"))'


def _names(flags: Iterable[Argument]) -> str:
    return " ".join(name for flag in flags for name in flag.names)


def zsh(declared: Program) -> str:
    """`_arguments` specs: each flag with its summary and its value's completion, a
    repeatable one marked `*`, aliases excluding each other once one is given."""
    load = (
        "Load it:\n#   save it as _gitopsd in a directory of $fpath, before compinit runs;"
        "\n#   or, after compinit: source <(gitopsd completion zsh)"
    )
    described = [f"            {_quoted(f'{c.name}:{c.summary}')}" for c in declared.commands]
    arms = [_zsh_command(command) for command in declared.commands]
    main = ZSH_MAIN.replace("@FLAGS@", _zsh_specs(declared.flags, "        "))
    main = main.replace("@DESCRIBED@", "\n".join(described)).replace("@ARMS@", "\n".join(arms))
    return "\n".join(["#compdef gitopsd", HEADER.format(name="zsh", load=load), main])


ZSH_MAIN = """\
_gitopsd() {
    local curcontext=$curcontext state line ret=1
    typeset -A opt_args
    _arguments -C \\
@FLAGS@
        '1: :->command' \\
        '*:: :->argument' && ret=0
    case $state in
    command)
        local -a commands=(
@DESCRIBED@
        )
        _describe -t commands 'gitopsd command' commands && ret=0
        ;;
    argument)
        curcontext=${curcontext%:*:*}:gitopsd-$line[1]:
        case $line[1] in
@ARMS@
        esac
        ;;
    esac
    return ret
}

if [[ $funcstack[1] == _gitopsd ]]; then
    _gitopsd "$@"  # autoloaded from $fpath
else
    compdef _gitopsd gitopsd
fi
"""


def _zsh_command(command: Command) -> str:
    specs = [_zsh_flag(flag) for flag in command.flags]
    if command.operand is not None:
        operand = command.operand
        specs.append(_quoted(f"1:{_zsh_escaped(operand.metavar)}:{_zsh_action(operand)}"))
    lines = [f"        {command.name})", "            _arguments \\"]
    lines += [f"                {spec} \\" for spec in specs]
    lines += ["                && ret=0", "            ;;"]
    return "\n".join(lines)


def _zsh_specs(flags: Iterable[Argument], indent: str) -> str:
    return "".join(f"{indent}{_zsh_flag(flag)} \\\n" for flag in flags).rstrip("\n")


def _zsh_flag(flag: Argument) -> str:
    """`'(-o --output)'{-o,--output=}'[summary]:OUTPUT:(text json yaml)'`: a long flag that
    takes a value takes it after `=` too."""
    takes = flag.value != Value.NONE
    names = [f"{n}=" if takes and n.startswith("--") else n for n in flag.names]
    prefix = "*" if flag.repeatable else f"({' '.join(flag.names)})" if len(names) > 1 else ""
    spec = f"[{_zsh_escaped(flag.summary)}]"
    if takes:
        spec += f":{_zsh_escaped(flag.metavar)}:{_zsh_action(flag)}"
    if len(names) == 1:
        return _quoted(f"{prefix}{names[0]}{spec}")
    return f"{_quoted(prefix)}{{{','.join(names)}}}{_quoted(spec)}"


def _zsh_action(argument: Argument) -> str:
    if argument.value == Value.CHOICE:
        return f"({' '.join(argument.choices)})"
    return "_files" if argument.value == Value.PATH else " "


def _zsh_escaped(text: str) -> str:
    """Text inside a spec, where `[`, `]` and `:` delimit its parts."""
    for special in "\\[]:":
        text = text.replace(special, f"\\{special}")
    return text


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def fish(declared: Program) -> str:
    """`complete` lines, each under the condition that the command typed is its own."""
    load = "Load it with:\n#   gitopsd completion fish | source"
    lines = [HEADER.format(name="fish", load=load), FISH_USING, "complete -c gitopsd -f"]
    lines += _fish_flags("", declared.flags)
    lines += [
        f"complete -c gitopsd -n '__gitopsd_using {NO_COMMAND}' -a {c.name}"
        f" -d {_fish_quoted(c.summary)}"
        for c in declared.commands
    ]
    for command in declared.commands:
        lines += _fish_flags(command.name, command.flags)
        if command.operand is not None:
            condition = f"-n '__gitopsd_using {command.name}'"
            lines.append(f"complete -c gitopsd {condition}{_fish_values(command.operand)}")
    return "\n".join(lines) + "\n"


NO_COMMAND = '""'
FISH_USING = """\
# whether the gitopsd command typed is WANTED ("" before one is)
function __gitopsd_using --argument-names wanted
    set -l words (commandline -opc)
    for word in $words[2..-1]
        if not string match -q -- '-*' $word
            test "$word" = "$wanted"
            return
        end
    end
    test -z "$wanted"
end
"""


def _fish_flags(command: str, flags: Iterable[Argument]) -> list[str]:
    condition = f"-n '__gitopsd_using {command or NO_COMMAND}'"
    return [
        f"complete -c gitopsd {condition}{_fish_names(flag)}{_fish_values(flag)}"
        f" -d {_fish_quoted(flag.summary)}"
        for flag in flags
    ]


def _fish_names(flag: Argument) -> str:
    return "".join(
        f" -l {name[2:]}" if name.startswith("--") else f" -s {name[1:]}" for name in flag.names
    )


def _fish_values(argument: Argument) -> str:
    """-x: a value, and no file names; -r -F: a path; for an operand, its values alone."""
    required = " -x" if argument.names else ""
    if argument.value == Value.CHOICE:
        return f"{required} -a {_fish_quoted(' '.join(argument.choices))}"
    if argument.value == Value.PATH:
        return " -r -F" if argument.names else " -F"
    return required if argument.value == Value.WORD else ""


def _fish_quoted(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


SCRIPTS: dict[str, Callable[[Program], str]] = {"bash": bash, "zsh": zsh, "fish": fish}
