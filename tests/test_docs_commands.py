"""Every `dslide ...` and `harness ...` command the README and docs/ show names a command that exists, with options
that command has: a renamed command or option fails here before a reader finds it. (tests/test_readme.py runs the
README's own command lines; this checks the names in every page, without running anything.)"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from dslide.cli import main as dslide_main
from harness.cli import main as harness_main

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PROGRAMS = {"dslide": dslide_main, "harness": harness_main}


def shown_commands() -> list[tuple[str, str]]:
    """(page, command) for every command in a code span, a fenced block or an indented block."""
    found = []
    for page in PAGES:
        text = page.read_text()
        spans = [m.group(1) for m in re.finditer(r"`((?:dslide|harness) [^`]+)`", text)]
        lines, fenced = [], False
        for line in text.splitlines():
            fenced ^= line.lstrip().startswith("```")
            if (fenced or line.startswith("    ")) and re.match(r"^\s*(dslide|harness) \S", line):
                lines.append(line.strip())
        found += [(page.name, c) for c in dict.fromkeys(spans + lines)]
    return found


def words(command: str) -> list[str]:
    """The command's words up to a comment, an alternative (`a / b`, `a|b`) or the system's own arguments (`--`);
    optional parts `[--opt X]` count as given."""
    command = re.split(r" # | / |\\\||\|", command.split("\n")[0])[0].replace("[", " ").replace("]", " ")
    tokens = shlex.split(command.rstrip("\\").strip(), comments=False)
    return tokens[: tokens.index("--")] if "--" in tokens else tokens


def resolve(tokens: list[str]) -> tuple[click.Command, list[str], str]:
    """The command the words name, the words after it, and its path."""
    command: click.Command = PROGRAMS[tokens[0]]
    path = [tokens[0]]
    rest = tokens[1:]
    while isinstance(command, click.Group) and rest and not rest[0].startswith("-"):
        sub = command.get_command(click.Context(command), rest[0])
        assert sub is not None, f"`{' '.join(path)}` has no command {rest[0]!r}"
        command, path, rest = sub, [*path, rest[0]], rest[1:]
    return command, rest, " ".join(path)


@pytest.mark.parametrize(("page", "command"), shown_commands(), ids=lambda v: v[:60])
def test_a_shown_command_exists_with_the_options_it_shows(page, command):
    if command.split()[1].endswith(":"):  # an error message quoted in prose ("dslide train: rank R ...")
        return
    cmd, rest, path = resolve(words(command))
    known = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} | {"--help"}
    unknown = [w.split("=")[0] for w in rest if w.startswith("--") and w.split("=")[0] not in known]
    assert not unknown, f"{page}: `{command}`: `{path}` has no option {unknown}"


def test_the_pages_show_commands():
    assert len(shown_commands()) >= 60
