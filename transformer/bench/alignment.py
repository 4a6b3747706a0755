"""Word alignments measured against a human gold standard: the English-French Hansards test set of the HLT-NAACL
2003 shared task (447 sentence pairs with sure and possible links; Mihalcea & Pedersen 2003, annotation by Och & Ney)
and the alignment error rate (AER; Och & Ney 2003)."""

import gzip
import re
import urllib.request
from dataclasses import dataclass
from pathlib import Path

# The gold as a course repository keeps it (uva-slpl/nlp2, the shared task's files, tokenized and lower-cased)
GOLD_URL = (
    "https://raw.githubusercontent.com/uva-slpl/nlp2/2d80c84152369453bcf67d8bab0e54520b2eb427/"
    "resources/project_neuralibm/data/test/{name}"
)
GOLD_FILES = {"english": "test.e", "french": "test.f", "links": "test.wa.nonullalign"}

Links = set[tuple[int, int]]


@dataclass
class Gold:
    """The gold standard: French (source) and English (target) sentences, as tokens joined by spaces, and per
    sentence its sure and possible links (French word, English word), 0-based; sure links are possible too."""

    french: list[str]
    english: list[str]
    sure: list[Links]
    possible: list[Links]


def _read_text(folder: Path, name: str) -> list[str]:
    plain, packed = folder / name, folder / f"{name}.gz"
    raw = plain.read_bytes() if plain.exists() else gzip.decompress(packed.read_bytes())
    return [" ".join(line.split()) for line in raw.decode("utf-8").splitlines()]


def fetch_gold(folder: Path) -> None:
    """Download the gold's three files into `folder` (where missing)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in GOLD_FILES.values():
        if not (folder / name).exists() and not (folder / f"{name}.gz").exists():
            remote = name if name.endswith("nonullalign") else f"{name}.gz"
            urllib.request.urlretrieve(GOLD_URL.format(name=remote), folder / remote)


def read_gold(folder: Path) -> Gold:
    """The gold in `folder`: test.e and test.f (plain or .gz, one sentence a line), test.wa.nonullalign (lines
    `SENTENCE ENGLISH_POSITION FRENCH_POSITION S|P`, 1-based)."""
    english, french = _read_text(folder, GOLD_FILES["english"]), _read_text(folder, GOLD_FILES["french"])
    sure: list[Links] = [set() for _ in english]
    possible: list[Links] = [set() for _ in english]
    for line in (folder / GOLD_FILES["links"]).read_text().splitlines():
        number, e, f, kind = line.split()[:4]
        link = (int(f) - 1, int(e) - 1)
        possible[int(number) - 1].add(link)
        if kind == "S":
            sure[int(number) - 1].add(link)
    return Gold(french, english, sure, possible)


def aer(predicted: list[Links], gold: Gold) -> float:
    """Alignment error rate: 1 - (|A∩S| + |A∩P|) / (|A| + |S|), over the whole set."""
    a_s = sum(len(a & s) for a, s in zip(predicted, gold.sure))
    a_p = sum(len(a & p) for a, p in zip(predicted, gold.possible))
    size = sum(map(len, predicted)) + sum(map(len, gold.sure))
    return 1.0 - (a_s + a_p) / size


def diagonal(gold: Gold) -> list[Links]:
    """The baseline: each target word linked to the source word at the same relative position."""
    out = []
    for french, english in zip(gold.french, gold.english):
        n_src, n_tgt = len(french.split()), len(english.split())
        out.append({(min(n_src - 1, round(j * n_src / n_tgt)), j) for j in range(n_tgt)})
    return out


def normalized(line: str) -> str:
    """Lower-cased, punctuation split off: the gold's own tokenization, roughly, for a statistical aligner."""
    return " ".join(re.findall(r"\w+|[^\w\s]", line.lower()))
