"""Cross-attention heatmaps: which source tokens each target token looked at."""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display needed
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from torch import Tensor  # noqa: E402

from transformer.core.files import atomic_write  # noqa: E402
from transformer.core.special_ids import BOS_ID, EOS_ID  # noqa: E402
from transformer.data.tokenizer import Tokenizer  # noqa: E402
from transformer.decoding.alignment import Aligner  # noqa: E402
from transformer.models.interface import Seq2SeqModel  # noqa: E402


def draw_heatmap(
    ax,
    weights: Tensor,
    src_tokens: list[str],
    tgt_tokens: list[str],
    title: str = "",
    links: list[tuple[int, int]] | None = None,
):
    """Draw a (T, S) attention matrix on `ax`: target tokens down, source tokens across, and a red frame on each
    alignment link's cell (`links`: (target piece, source piece)); returns the image."""
    height, width = len(tgt_tokens), len(src_tokens)
    image = ax.imshow(weights[:height, :width].float().numpy(), cmap="viridis", vmin=0.0, aspect="auto")
    for t, s in links or []:
        ax.add_patch(Rectangle((s - 0.5, t - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=1.5))
    ax.set_xticks(range(width), src_tokens, rotation=60, ha="right", fontsize=9)
    ax.set_yticks(range(height), tgt_tokens, fontsize=9)
    ax.set_xlabel("source")
    ax.set_ylabel("translation")
    if title:
        ax.set_title(title, fontsize=10)
    return image


def heatmap(
    weights: Tensor,
    src_tokens: list[str],
    tgt_tokens: list[str],
    title: str = "",
    links: list[tuple[int, int]] | None = None,
) -> Figure:
    """A (T, S) attention matrix as a figure: target tokens down, source tokens across, alignment links framed."""
    height, width = len(tgt_tokens), len(src_tokens)
    fig, ax = plt.subplots(figsize=(max(4.0, 0.45 * width + 1.5), max(3.0, 0.4 * height + 1.2)))
    fig.colorbar(draw_heatmap(ax, weights, src_tokens, tgt_tokens, title, links), ax=ax, fraction=0.04)
    fig.tight_layout()
    return fig


def save_figure(fig: Figure, path: Path) -> None:
    """Write a PNG atomically and release the figure."""
    try:
        atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=120, format="png"))
    finally:
        plt.close(fig)


def attention_matrix(model: Seq2SeqModel, src_ids: list[int], tgt_ids: list[int], layer: int | None = None) -> Tensor:
    """A translation's cross-attention (T+1, S+1), EOS included, mean over heads, of one decoder layer or all (None)."""
    device = next(model.parameters()).device
    src = torch.tensor([src_ids + [EOS_ID]], device=device)
    tgt_in = torch.tensor([[BOS_ID] + tgt_ids], device=device)
    weights = model.cross_attention(src, tgt_in)[:, 0].mean(dim=1)  # (layers, T, S): mean over heads
    return weights.mean(dim=0) if layer is None else weights[layer]


def attention_tokens(tokenizer: Tokenizer, src_ids: list[int], tgt_ids: list[int]) -> tuple[list[str], list[str]]:
    """The source and target pieces of a translation, EOS included, as the heatmaps label them."""
    src_tokens = [tokenizer.src.id_to_piece(i) for i in src_ids] + ["</s>"]
    return src_tokens, [tokenizer.tgt.id_to_piece(i) for i in tgt_ids] + ["</s>"]


def attention_figure(
    model: Seq2SeqModel,
    tokenizer: Tokenizer,
    src_ids: list[int],
    tgt_ids: list[int],
    layer: int | None = None,
    aligner: Aligner | None = None,
) -> Figure:
    """Heatmap of a translation's cross-attention, averaged over heads, for one decoder layer or all (None); with
    `aligner`, its alignment links framed in red (the piece each target piece is linked by)."""
    matrix = attention_matrix(model, src_ids, tgt_ids, layer)
    src_tokens, tgt_tokens = attention_tokens(tokenizer, src_ids, tgt_ids)
    title = f"cross-attention, {'all layers' if layer is None else f'decoder layer [{layer}]'}, mean over heads"
    links = aligner.links([src_ids], [tgt_ids], pieces=True)[0] if aligner is not None else None
    if aligner is not None:
        title += f"\nred: alignment links ({aligner.head.describe()})"
    return heatmap(matrix.cpu(), src_tokens, tgt_tokens, title, links)
