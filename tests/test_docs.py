"""README.md and docs/ stay true where a machine can check them: links resolve, README commands parse."""

import contextlib
import importlib
import io
import re
import shlex
import sys
from pathlib import Path

import pytest

from transformer.cli import CONFIG_PATH, compose_checked

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs" / "lab").glob("*.md"))]
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*$", re.M)
SHELL_OPERATORS = {"|", "||", "&&", ";", "&"}
REDIRECTS = {">", ">>", "<", "2>"}


def prose(text: str) -> str:
    """Markdown without its fenced blocks and code spans (links there are examples, not links)."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def anchors(page: Path) -> set[str]:
    """The heading anchors GitHub gives `page`: lower case, punctuation dropped, spaces as '-', repeats numbered."""
    seen: dict[str, int] = {}
    found = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text())):
        slug = re.sub(r"[^\w\- ]", "", heading.replace("`", "").lower()).replace(" ", "-")
        seen[slug] = seen.get(slug, -1) + 1
        found.add(f"{slug}-{seen[slug]}" if seen[slug] else slug)
    return found


def relative_links() -> list[tuple[Path, str]]:
    """(page, target) for each link of README.md and docs/*.md that is not a URL."""
    return [
        (page, target)
        for page in PAGES
        for target in LINK.findall(prose(page.read_text()))
        if not re.match(r"[a-z]+:", target)
    ]


@pytest.mark.parametrize("page, target", relative_links(), ids=lambda x: x.name if isinstance(x, Path) else x)
def test_relative_link_resolves(page, target):
    path, _, anchor = target.partition("#")
    file = (page.parent / path).resolve() if path else page
    assert file.is_file(), f"{page.name}: {target} names no file"
    if anchor:
        assert file.suffix == ".md", f"{page.name}: {target} has an anchor in a file that is not Markdown"
        assert anchor in anchors(file), f"{page.name}: {target}: no such heading in {file.name}"


def commands(page: Path) -> list[list[str]]:
    """Each `transformer-NAME ...` (or `-m transformer.cli.NAME ...`) in `page`'s bash blocks, as its words.

    A literal `...` word ("the rest of the run's settings") is left out.
    """
    found = []
    for block in re.findall(r"^```bash\n(.*?)^```", page.read_text(), re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            words = list(lexer)
            starts = [0] + [i + 1 for i, word in enumerate(words) if word in SHELL_OPERATORS]
            for start in starts:
                command = []
                for word in words[start:]:
                    if word in SHELL_OPERATORS or word in REDIRECTS:
                        break
                    command.append(word)
                if "-m" in command and command.index("-m") + 1 < len(command):
                    module = command[command.index("-m") + 1]
                    if module.startswith("transformer.cli."):
                        command = [f"transformer-{module.rsplit('.', 1)[1]}", *command[command.index("-m") + 2 :]]
                if command and command[0].startswith("transformer-"):
                    found.append([word for word in command if word != "..."])
    return found


def console_scripts() -> dict[str, str]:
    """pyproject.toml's [project.scripts]: command -> 'module:function'."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]


README_COMMANDS = commands(ROOT / "README.md")


def test_readme_has_commands_to_check():
    assert len({command[0] for command in README_COMMANDS}) >= 6


@pytest.mark.slow  # about 0.3 s a command
@pytest.mark.parametrize("command", README_COMMANDS, ids=shlex.join)
def test_readme_command_parses(command, monkeypatch):
    """The command's own entry point accepts its settings (`--cfg job`), and they pass the start-up checks."""
    name = command[0].removeprefix("transformer-")
    scripts = console_scripts()
    if command[0] not in scripts:
        pytest.skip(f"{command[0]} is not in pyproject's [project.scripts] on this branch")
    if not (Path(CONFIG_PATH) / f"{name}.yaml").exists():
        pytest.skip(f"{command[0]} is not a Hydra app (no configs/{name}.yaml)")
    module, function = scripts[command[0]].split(":")
    main = getattr(importlib.import_module(module), function)
    monkeypatch.setattr(sys, "argv", [*command, "--cfg", "job"])
    stderr = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()) as stdout, contextlib.redirect_stderr(stderr):
        try:
            main()
        except SystemExit as stop:
            pytest.fail(f"exit status {stop.code}: {stderr.getvalue()[-2000:]}")
    assert stdout.getvalue().strip(), "--cfg job printed no config"
    compose_checked(name, command[1:])


def help_choices() -> list[tuple[str, str, list[str]]]:
    """Each `group=a|b|...` that a console script's --help text (configs/hydra/help/) offers."""
    found = []
    for page in sorted((Path(CONFIG_PATH) / "hydra" / "help").glob("*.yaml")):
        for group, options in re.findall(r"^\s+(\w+)=([\w|]+\|[\w|]+)\s", page.read_text(), re.M):
            if (Path(CONFIG_PATH) / group).is_dir():
                found.append((page.stem, group, options.split("|")))
    return found


HELP_CHOICES = help_choices()


@pytest.mark.parametrize("app, group, options", HELP_CHOICES, ids=[f"{app} {group}" for app, group, _ in HELP_CHOICES])
def test_help_offers_existing_options(app, group, options):
    existing = sorted(path.stem for path in (Path(CONFIG_PATH) / group).glob("*.yaml"))
    assert set(options) <= set(existing), f"{app} --help offers {group}={'|'.join(options)}; there are {existing}"
    if group == "model":  # the sizes line lists them all
        assert sorted(options) == existing


LAB = ROOT / "docs" / "lab"
REFERENCES = {ROOT / "README.md": 250, ROOT / "docs" / "results.md": 200, ROOT / "docs" / "speed.md": 200}


@pytest.mark.parametrize("page, limit", REFERENCES.items(), ids=lambda x: x.name if isinstance(x, Path) else str(x))
def test_reference_stays_short(page, limit):
    lines = len(page.read_text().splitlines())
    assert lines <= limit, f"{page.name} has {lines} lines, over {limit}: dated entries go to docs/lab/"


def test_lab_is_linked_once_and_only_from_the_references():
    """docs/lab/ holds the dated notes; each reference links it once, and no other page quotes from it."""
    for page in PAGES:
        if page.parent.name == "lab":
            continue
        targets = [target for target in LINK.findall(prose(page.read_text())) if not re.match(r"[a-z]+:", target)]
        into_lab = [target for target in targets if LAB in (page.parent / target.partition("#")[0]).resolve().parents]
        expected = 1 if page in REFERENCES and page.name != "README.md" else 0
        assert len(into_lab) == expected, f"{page.name} links docs/lab/ {len(into_lab)} times: {into_lab}"
