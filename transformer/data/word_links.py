"""Word alignments from a statistical aligner (eflomal, an optional extra): both directions, symmetrized with
grow-diag-final-and (Koehn et al., 2005), as Pharaoh-style sets of (source word, target word) links."""

import tempfile
from collections.abc import Iterable
from pathlib import Path

from transformer.core.errors import UserError

Links = set[tuple[int, int]]

NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def grow_diag_final_and(forward: Links, reverse: Links) -> Links:
    """Symmetrize two directional alignments: start from their intersection, grow into neighbouring links of the
    union that align a so-far unaligned word, then add union links whose two words are both unaligned."""
    union, links = forward | reverse, forward & reverse
    aligned_src, aligned_tgt = {i for i, _ in links}, {j for _, j in links}
    grown = True
    while grown:
        grown = False
        for i, j in sorted(links):
            for di, dj in NEIGHBOURS:
                link = (i + di, j + dj)
                if link in union and link not in links and (link[0] not in aligned_src or link[1] not in aligned_tgt):
                    links.add(link)
                    aligned_src.add(link[0]), aligned_tgt.add(link[1])
                    grown = True
    for directional in (forward, reverse):
        for i, j in sorted(directional):
            if i not in aligned_src and j not in aligned_tgt:
                links.add((i, j))
                aligned_src.add(i), aligned_tgt.add(j)
    return links


def _read_links(path: Path) -> list[Links]:
    with open(path, encoding="utf-8") as lines:
        return [{tuple(map(int, link.split("-"))) for link in line.split()} for line in lines]


def eflomal_links(src: Iterable[str], tgt: Iterable[str]) -> list[Links]:
    """Word links of each pair of whitespace-tokenized lines, from eflomal (its defaults) in both directions,
    symmetrized. eflomal seeds its samplers itself: two runs differ slightly."""
    try:
        import eflomal
    except ImportError as err:
        raise UserError("word alignments need eflomal: pip install '.[align]' (or pip install eflomal)") from err
    with tempfile.TemporaryDirectory(prefix="eflomal-") as work:
        fwd, rev = Path(work) / "fwd", Path(work) / "rev"
        eflomal.Aligner().align(list(src), list(tgt), links_filename_fwd=str(fwd), links_filename_rev=str(rev))
        return [grow_diag_final_and(f, r) for f, r in zip(_read_links(fwd), _read_links(rev), strict=True)]
