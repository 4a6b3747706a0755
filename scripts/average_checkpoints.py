"""Average the weights of a run's last or best N step checkpoints into one checkpoint.

    python scripts/average_checkpoints.py RUN_DIR --last 5
    python scripts/average_checkpoints.py RUN_DIR --best 3 --output avg.safetensors
    transformer-evaluate checkpoint=RUN_DIR/checkpoints/avg_last5.safetensors

Only the step checkpoints still on disk can be averaged (trainer.keep_last /
trainer.keep_best decide how many are kept).
"""

import argparse
from pathlib import Path

import torch

from transformer.checkpoint import load_checkpoint, save_checkpoint


def pick(run_dir: Path, last: int, best: int) -> list[Path]:
    """The step checkpoints to average, newest or best (by val BLEU) first."""
    files = sorted((run_dir / "checkpoints").glob("step_*.safetensors"))
    if not files:
        raise SystemExit(f"error: no step checkpoints in {run_dir}/checkpoints")
    if last:
        return files[-last:]
    scored = [(float(load_checkpoint(str(f)).meta.get("val_bleu") or "nan"), f) for f in files]
    return [f for _, f in sorted(scored, key=lambda x: -x[0])[:best]]


def average(files: list[Path], output: Path) -> None:
    """Write the element-wise mean of the checkpoints' weights, with the newest one's config, tokenizer and progress."""
    ckpts = [load_checkpoint(str(f)) for f in files]
    states = [c.model.state_dict() for c in ckpts]
    mean = {name: sum(s[name].double() for s in states) / len(states) for name in states[0]}
    newest = max(ckpts, key=lambda c: int(c.meta["step"]))
    newest.model.load_state_dict({name: t.to(torch.float32) for name, t in mean.items()})
    steps = ",".join(c.meta["step"] for c in ckpts)
    progress = {k: newest.meta[k] for k in ("step", "epoch", "train_minutes") if k in newest.meta}
    save_checkpoint(output, newest.model, newest.tokenizer, newest.config, averaged=steps, **progress)
    print(f"averaged {len(files)} checkpoints (steps {steps}) -> {output}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--last", type=int, default=0, help="average the N newest step checkpoints")
    group.add_argument("--best", type=int, default=0, help="average the N best step checkpoints by val BLEU")
    parser.add_argument("--output", type=Path, help="default: RUN_DIR/checkpoints/avg_{last,best}N.safetensors")
    args = parser.parse_args()
    files = pick(args.run_dir, args.last, args.best)
    name = f"avg_last{args.last}" if args.last else f"avg_best{args.best}"
    average(files, args.output or args.run_dir / "checkpoints" / f"{name}.safetensors")


if __name__ == "__main__":
    main()
