"""docs/design.md's "How to add ..." list stays true: the files it names exist, each `module.NAME` is defined there."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "transformer"
DESIGN = ROOT / "docs" / "design.md"
CONCEPTS = ("a corpus source", "a model size", "a decoding strategy", "a precision", "an attention kind")
CODE_SPAN = re.compile(r"`([^`]+)`")
DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")
FILE_SUFFIX = re.compile(r"\.(py|yaml|toml|md|json|txt)$")
PLACEHOLDER = re.compile(r"[\s=${}*<>\[\]:]|NAME")  # settings, shell lines, templates: not a place in the code


def bullets(text: str) -> dict[str, str]:
    """The "How to add ..." section's bullets as {what is added: the bullet joined on one line}."""
    section = text.split("## How to add ...", 1)[1].split("\n## ", 1)[0]
    found = {}
    for item in re.split(r"\n(?=- \*\*)", section):
        match = re.match(r"- \*\*(.+?)\*\*", item.strip())
        if match:
            found[match.group(1)] = " ".join(item.split())
    return found


def find_path(name: str) -> Path | None:
    """A file or folder the doc names: from the repository root, from the package, or (a bare file name) anywhere in
    the package."""
    for base in (ROOT, PACKAGE):
        if (base / name).exists():
            return base / name
    if "/" not in name:
        matches = sorted(PACKAGE.rglob(name))
        return matches[0] if len(matches) == 1 else None
    return None


def module_file(dotted: str) -> list[Path]:
    """The package files a dotted module name can mean (`kernels` is `fast_inference/kernels.py`)."""
    parts = dotted.removeprefix("transformer.").split(".")
    tail = Path(*parts)
    for candidate in (PACKAGE / tail.with_suffix(".py"), PACKAGE / tail / "__init__.py"):
        if candidate.is_file():
            return [candidate]
    return sorted({*PACKAGE.rglob(f"{tail}.py"), *PACKAGE.rglob(f"{tail}/__init__.py")})


def defines(file: Path, name: str) -> bool:
    """Whether `file` defines `name` (a def, a class, an assignment) or imports it by name."""
    text = file.read_text()
    patterns = (
        rf"^\s*(async\s+)?(def|class)\s+{name}\b",
        rf"^{name}\s*(:[^=\n]*)?=",
        rf"^\s*from\s+\S+\s+import\s+[^\n]*\b{name}\b",
    )
    return any(re.search(pattern, text, re.M) for pattern in patterns)


def config_key(dotted: str) -> bool:
    """Whether `dotted` is a setting (`data.shared_dir`): a section of config.py's schemas and a field in it."""
    config = (PACKAGE / "core" / "config.py").read_text()
    sections = set(re.findall(r"^\s+(\w+):\s*\w+Config\b", config, re.M))
    section, _, key = dotted.partition(".")
    return section in sections and re.search(rf"^\s+{key.split('.')[-1]}:", config, re.M) is not None


def problems(bullet: str) -> list[str]:
    """What in one bullet does not hold: files that do not exist, names not defined in the module they are put in."""
    found = []
    spans = CODE_SPAN.findall(bullet)
    for span in spans:
        token = re.sub(r"\(.*\)$", "", span)  # `cli.hydra_app(config_name, schema)` names cli.hydra_app
        if PLACEHOLDER.search(token):
            continue
        if "/" in token or FILE_SUFFIX.search(token):
            if find_path(token) is None:
                found.append(f"no file {token}")
        elif DOTTED.fullmatch(token) and len(module_file(token)) != 1:  # a module itself (`sources.streams`) exists
            module, name = token.rsplit(".", 1)
            files = module_file(module)
            if len(files) > 1:
                found.append(f"{token}: module {module} is ambiguous ({', '.join(str(f) for f in files)})")
            elif files and not defines(files[0], name) and not config_key(token):
                found.append(f"{token}: {name} is not defined in {files[0].relative_to(ROOT)}")
    # `NAME` (`file.py`), `NAME` in `file.py`, `file.py`'s `NAME`
    pairs = re.findall(r"`(\w+)` (?:\(|in |table in )`([\w/.]+\.py)`", bullet)
    pairs += [(name, file) for file, name in re.findall(r"`([\w/.]+\.py)`'s `(\w+)`", bullet)]
    for name, file in pairs:
        path = find_path(file)
        if path is not None and not defines(path, name):
            found.append(f"{name} is not defined in {file}")
    return found


BULLETS = bullets(DESIGN.read_text())


def test_every_concept_has_a_bullet():
    missing = [concept for concept in CONCEPTS if not any(title.startswith(concept) for title in BULLETS)]
    assert not missing, f'docs/design.md\'s "How to add ..." has no bullet for {missing}'


@pytest.mark.parametrize("title", list(BULLETS))
def test_bullet_names_real_places(title):
    bullet = BULLETS[title]
    assert len(CODE_SPAN.findall(bullet)) >= 2, f"{title}: names no places"
    assert not problems(bullet), f"How to add {title}: {problems(bullet)}"


def test_checker_finds_what_is_wrong():
    bullet = (
        "- **x**: `transformer/no_such_file.py`, `config.NoSuchThing`, `decoding.search`, "
        "`Strategy` (`transformer/core/config.py`), `NotThere` in `transformer/core/config.py`, `data.shared_dir`, "
        "`sources.streams`, `sources.no_stream`"
    )
    assert problems(bullet) == [
        "no file transformer/no_such_file.py",
        "config.NoSuchThing: NoSuchThing is not defined in transformer/core/config.py",
        "sources.no_stream: no_stream is not defined in transformer/data/sources/__init__.py",
        "NotThere is not defined in transformer/core/config.py",
    ]
