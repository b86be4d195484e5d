"""The Typer app of ``skill-eval``, its two consoles, and the one path a named error takes.

Exit codes are the verdict's: 0 PASS, 1 FAIL, 2 BLOCKED (any named guard, bad flags, a usage
error, an infra crash), 3 WARN (schemas.status.ExitCode).

Errors take one path: a command raises the typed error (``ConfigError`` for bad flags, any
``SkillEvalError``), :class:`_Commands` prints it once as ``<STATUS>: <detail>`` and exits 2;
Click's own usage errors (an unknown command or option) print the usage line and the
``--help`` hint and exit 2; anything else is the evaluator crashing (producer/commands/cli.py: main).
Every command module registers its commands on :data:`app`, so each takes this path.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import typer
from typer.core import TyperGroup

from producer.commands.console import InertConsole
from schemas.errors import BlockedError, ConfigError, SkillEvalError
from schemas.status import ExitCode, Verdict


class _Commands(TyperGroup):
    """The one place a named error becomes its printed line and exit code 2."""

    def invoke(self, ctx: Any) -> Any:  # a click Context (typer vendors click: no public name for it)
        try:
            return super().invoke(ctx)
        except SkillEvalError as exc:
            err.print(str(exc), markup=False, highlight=False)
            raise typer.Exit(ExitCode.BLOCKED) from exc

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            _plain_types(command, ctx)
            command.help = reflowed(command.help)
            _refuse_repeats(command)
        return command

    def format_help(self, ctx: Any, formatter: Any) -> None:
        _plain_types(self, ctx)
        super().format_help(ctx, formatter)


def reflowed(help_text: str | None) -> str | None:
    """A command's docstring as ``--help`` shows it: each paragraph (blank-line separated) one
    line, for the console to fold at the terminal's width. Typer joins the first paragraph's
    lines but prints the others' hard line breaks as they are, mid-sentence at any width. A
    paragraph starting with Click's ``\\b`` keeps its lines."""
    if help_text is None:
        return None
    paragraphs = inspect.cleandoc(help_text).split("\n\n")
    return "\n\n".join(p if p.startswith("\b") else " ".join(p.split()) for p in paragraphs)


def _refuse_repeats(command: Any) -> None:
    """Make ``command`` refuse an option that takes one value given twice (``--baseline no-skill
    --baseline same``), naming the option (with its aliases: ``--epochs/--runs``) and both values:
    Click keeps the last one silently, and which one the user meant cannot be guessed. Repeatable
    options (``--model``) are checked where their values are used; a flag given twice means what it
    means once."""
    parse = type(command).parse_args

    def checked(ctx: Any, args: list[str]) -> list[str]:
        if not any(a in ("--help", "-h") for a in args):
            _, _, order = command.make_parser(ctx).parse_args(args=list(args))
            seen: set[int] = set()
            for param in order:
                single = param.param_type_name == "option" and not (param.is_flag or param.multiple or param.count)
                if single and param.nargs == 1 and id(param) in seen:
                    values = _values_of(param.opts + param.secondary_opts, args)
                    names = "/".join(param.opts)  # every spelling: the values may have come under either
                    raise ConfigError(f"{names} given more than once ({', '.join(values)}): it takes one value")
                seen.add(id(param))
        rest: list[str] = parse(command, ctx, args)
        return rest

    command.parse_args = checked


def _values_of(names: list[str], args: list[str]) -> list[str]:
    """The values ``args`` gives the option spelled ``names`` (``--opt V`` or ``--opt=V``), quoted."""
    values = []
    for i, arg in enumerate(args):
        if arg == "--":
            break
        if arg in names and i + 1 < len(args):
            values.append(args[i + 1])
        elif "=" in arg and arg.split("=", 1)[0] in names:
            values.append(arg.split("=", 1)[1])
    return [repr(v) for v in values]


def _plain_types(command: Any, ctx: Any) -> None:
    """``--help`` shows what to write, not Python's types (``<list[str]>``, ``<bool>``): a flag shows
    nothing, a value its option's name (``--model MODEL``), a choice its values (``bwrap|none``),
    an argument its name alone."""
    for param in command.get_params(ctx):
        if param.param_type_name == "argument":
            param.display_type_rich = lambda ctx: None
        elif param.metavar is not None:
            continue
        elif param.is_flag:
            param.metavar = ""
        elif not param.type_descriptor.is_choice:
            param.metavar = param.opts[0].lstrip("-").upper()


app = typer.Typer(
    name="skill-eval",
    cls=_Commands,
    help="Does this agent skill's text make a coding agent behave the way it promises?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = InertConsole(soft_wrap=True)
err = InertConsole(stderr=True, soft_wrap=True)


def ends_with_verdict(command: Callable[..., None]) -> Callable[..., None]:
    """``command`` (``run``, ``grade``, ``report``: the commands whose exit code is a verdict) with a
    BLOCKED refusal ending as every other outcome does: its named error, then ``verdict: BLOCKED`` as
    the last line of stdout. A detached run's goes to stderr: its stdout holds a run id or nothing,
    for a script to capture. A ``ConfigError`` (bad flags, before any run) and a dry run's refusal print
    as they did."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        try:
            command(*args, **kwargs)
        except BlockedError as exc:
            if kwargs.get("dry_run"):
                raise  # a plan, not an outcome: its --json stdout stays JSON or nothing
            err.print(str(exc), markup=False, highlight=False)
            detached = bool(getattr(kwargs.get("shared"), "detach", False))
            (err if detached else out).print(f"verdict: {Verdict.BLOCKED.value}", markup=False, highlight=False)
            raise typer.Exit(ExitCode.BLOCKED) from exc

    return wrapper
