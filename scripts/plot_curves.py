"""Training curves from a run's TensorBoard events to a PNG: train loss, val loss and val BLEU.

    python scripts/plot_curves.py RUN_DIR [RUN_DIR ...] --output docs/curves.png [--x minutes]

Several runs are drawn on the same axes, labelled by directory name.
"""

import argparse
from pathlib import Path

from transformer.bench.curves import plot


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", type=Path, nargs="+", help="run directories (with tensorboard/)")
    parser.add_argument("--output", type=Path, default=Path("curves.png"))
    parser.add_argument("--x", choices=["step", "minutes"], default="step", dest="x_axis")
    args = parser.parse_args()
    plot(args.runs, args.output, args.x_axis)


if __name__ == "__main__":
    main()
