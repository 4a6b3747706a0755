"""One encoder self-attention heatmap PNG per variant, so the band, the strides and the buckets can be seen.

With `--checkpoint NAME=PATH` (repeatable) a trained model's first encoder layer is shown on
`--sentence`; otherwise a `small`-sized model with random weights on a random 40-token input
(the pattern, not what a trained model learns).

    python scripts/attention_heatmaps.py --out docs/attention
"""

import argparse
from pathlib import Path

import matplotlib.pyplot as plt
import torch

from transformer.core.config import AttentionConfig
from transformer.decoding.heatmaps import heatmap
from transformer.models.attention import VARIANTS, usable
from transformer.models.transformer import Transformer
from transformer.runs.checkpoint import load_checkpoint

KNOBS = dict(window=6, stride=8, bucket_size=8, n_hashes=2, rank=16)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="docs/attention")
    parser.add_argument("--checkpoint", action="append", default=[], help="NAME=PATH of a trained model")
    parser.add_argument("--sentence", default="un homme en t-shirt rouge joue de la guitare devant une foule .")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    trained = dict(item.split("=", 1) for item in args.checkpoint)
    for name in VARIANTS:
        if not usable(name, "encoder"):
            continue
        if name in trained:
            ckpt = load_checkpoint(trained[name])
            ids = ckpt.tokenizer.src.encode(args.sentence)
            model, labels = ckpt.model, [ckpt.tokenizer.src.id_to_piece(i) for i in ids]
            src = torch.tensor([ids])
        else:
            torch.manual_seed(0)
            model = Transformer(100, 100, attention=AttentionConfig(encoder=name, **KNOBS)).eval()
            src = torch.randint(3, 100, (1, 40))
            labels = [str(i) for i in range(40)]
        weights = model.self_attention(src)[0, 0].mean(dim=0)  # first layer, mean over heads: (S, S)
        fig = heatmap(weights, labels, labels, f"encoder self-attention: {name}")
        fig.axes[0].set_xlabel("key position")
        fig.axes[0].set_ylabel("query position")
        fig.savefig(out / f"{name}.png", dpi=50)  # small files for docs/
        plt.close(fig)
        print(out / f"{name}.png")


if __name__ == "__main__":
    main()
