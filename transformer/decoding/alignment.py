"""Word alignments from cross-attention: each target piece is linked to the source piece it attends to most (the
usual heuristic), and pieces are merged into words as whitespace splits the text. Links are written as Pharaoh
`i-j`: source word i, target word j, both 0-based.

The attention of target piece t is the one at the step that predicts it (decoder input: BOS and the pieces before
t), as guided alignment trains it (Garg et al., 2019). The EOS row and column take part in no link.
"""

from dataclasses import dataclass

import torch
from omegaconf import OmegaConf
from torch import Tensor

from transformer.data.batching import collate
from transformer.data.tokenizer import word_index
from transformer.models.interface import Seq2SeqModel


@dataclass(frozen=True)
class AttentionHead:
    """Where links are read: a decoder layer's cross-attention (negative counts from the last), one head or the
    mean over heads (None)."""

    layer: int = -2
    head: int | None = None

    def describe(self) -> str:
        heads = "mean over heads" if self.head is None else f"head {self.head}"
        return f"decoder layer {self.layer}, {heads}"


def piece_links(weights: Tensor, src_words: list[int], tgt_words: list[int]) -> list[tuple[int, int]]:
    """(target piece, source piece): each target piece of a word and the source piece of a word it attends to most,
    from piece weights (T, S) whose first rows and columns are the target and source pieces (EOS and padding after
    them are ignored)."""
    if not any(w >= 0 for w in src_words) or not tgt_words:
        return []
    src_of = torch.tensor(src_words)
    candidates = weights[: len(tgt_words), : len(src_words)].float().masked_fill(src_of < 0, -1.0)
    best = candidates.argmax(dim=1).tolist()  # (T,) each target piece's most attended source piece
    return [(t, s) for t, s in enumerate(best) if tgt_words[t] >= 0]


def links(weights: Tensor, src_words: list[int], tgt_words: list[int]) -> list[tuple[int, int]]:
    """Word links (source word, target word), sorted: those of `piece_links`, pieces merged into their words."""
    return sorted({(src_words[s], tgt_words[t]) for t, s in piece_links(weights, src_words, tgt_words)})


def pharaoh(pairs: list[tuple[int, int]]) -> str:
    """Links as a Pharaoh line: `i-j` separated by spaces."""
    return " ".join(f"{i}-{j}" for i, j in pairs)


def parse_pharaoh(line: str) -> set[tuple[int, int]]:
    """The links of a Pharaoh line (`i-j` or, for possible links, `i?j`)."""
    out = set()
    for link in line.split():
        i, sep, j = link.replace("?", "-").partition("-")
        if not sep or not i.isdigit() or not j.isdigit():
            raise ValueError(f"not a Pharaoh link: {link!r} (expected i-j with 0-based word positions)")
        out.add((int(i), int(j)))
    return out


def _head_weights(model: Seq2SeqModel, src: Tensor, tgt_in: Tensor, head: AttentionHead) -> Tensor:
    """Cross-attention (B, T, S) of `head` for a teacher-forced batch."""
    weights = model.cross_attention(src, tgt_in)  # (layers, B, H, T, S)
    layers = weights.size(0)
    if not -layers <= head.layer < layers:
        raise ValueError(f"alignment layer {head.layer} does not exist: the model has {layers} decoder layer(s)")
    chosen = weights[head.layer]  # (B, H, T, S)
    if head.head is None:
        return chosen.mean(dim=1)
    if not -chosen.size(1) <= head.head < chosen.size(1):
        raise ValueError(f"alignment head {head.head} does not exist: the model has {chosen.size(1)} head(s)")
    return chosen[:, head.head]


@torch.inference_mode()
def attention_weights(
    model: Seq2SeqModel, src_ids: list[list[int]], tgt_ids: list[list[int]], head: AttentionHead
) -> list[Tensor]:
    """Each pair's cross-attention (T, S) of `head`, teacher-forced on its target: one row per target piece and
    one for EOS, one column per source piece and one for EOS."""
    if not src_ids:
        return []
    device = next(model.parameters()).device
    batch = collate(src_ids, tgt_ids)  # src + EOS (B, S), BOS + target (B, T)
    weights = _head_weights(model, batch.src.to(device), batch.tgt_in.to(device), head).cpu()  # (B, T, S)
    return [w[: len(t) + 1, : len(s) + 1] for w, s, t in zip(weights, src_ids, tgt_ids)]


def default_head(layer: int | None, head: int | None, guided: dict | None, layers: int) -> AttentionHead:
    """The head asked for; where not given, a guided model's trained head (`guided`: its trainer.guided_alignment
    settings), else the mean over the heads of the second-to-last layer (of the only one, for one layer)."""
    trained = guided is not None and guided.get("weight", 0) > 0
    if layer is None:
        layer = guided["layer"] if trained else (-2 if layers > 1 else -1)
    if head is None and trained and layer % layers == guided["layer"] % layers:
        head = guided["head"]
    return AttentionHead(layer, head)


def model_head(config, layer: int | None, head: int | None, layers: int) -> AttentionHead:
    """`default_head` for a checkpoint of training `config` (its trainer.guided_alignment, if any)."""
    guided = OmegaConf.select(config, "trainer.guided_alignment")
    return default_head(layer, head, OmegaConf.to_container(guided) if guided is not None else None, layers)


class Aligner:
    """Word alignments of (source ids, target ids) pairs, read from `head` of `model`'s cross-attention in one
    teacher-forced pass per batch."""

    def __init__(self, model: Seq2SeqModel, src_pieces: list[str], tgt_pieces: list[str], head: AttentionHead):
        """`src_pieces`, `tgt_pieces`: each vocabulary's pieces by id."""
        self.model, self.head = model, head
        self.src_pieces, self.tgt_pieces = src_pieces, tgt_pieces

    def links(
        self, src_ids: list[list[int]], tgt_ids: list[list[int]], batch_size: int = 64, pieces: bool = False
    ) -> list[list[tuple[int, int]]]:
        """Each pair's word links (source word, target word), sorted; with `pieces`, the piece links they come from
        (target piece, source piece: `piece_links`)."""
        out = []
        for start in range(0, len(src_ids), batch_size):
            srcs, tgts = src_ids[start : start + batch_size], tgt_ids[start : start + batch_size]
            weights = attention_weights(self.model, srcs, tgts, self.head)
            for w, s, t in zip(weights, srcs, tgts):
                words = word_index([self.src_pieces[i] for i in s]), word_index([self.tgt_pieces[i] for i in t])
                out.append(piece_links(w, *words) if pieces else links(w, *words))
        return out
