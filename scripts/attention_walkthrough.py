"""Attention explained by running it: writes every number and figure of docs/attention.md.

    python scripts/attention_walkthrough.py --checkpoint outputs/fren_s33/checkpoints/best.safetensors  # JSON, page

The numbers come from `transformer/walkthrough/` (one function per section, the same ones
the tests recompute and compare); they land in docs/attention_walkthrough.json and the page
is rendered from that file. Without --checkpoint the cross-attention section of the existing
JSON is kept.
"""

import argparse
import json
from pathlib import Path

import torch

from transformer.walkthrough.page import draw, render
from transformer.walkthrough.sections import FIGURES, compute, cross_section
from transformer.walkthrough.variants import draw_variants

DOCS = Path(__file__).resolve().parent.parent / "docs"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", help="a run directory or .safetensors file for the cross-attention section")
    parser.add_argument("--docs", type=Path, default=DOCS, help="where attention.md, its JSON and figures go")
    parser.add_argument("--timing-rounds", type=int, default=5, help="rounds of the KV-cache timing (median)")
    args = parser.parse_args()
    figures, numbers = args.docs / FIGURES, args.docs / "attention_walkthrough.json"
    torch.set_num_threads(1)  # timings comparable between runs on a shared machine
    data = compute(args.timing_rounds)
    if args.checkpoint:
        data["cross"] = cross_section(args.checkpoint, figures)
    elif numbers.exists():
        data["cross"] = json.loads(numbers.read_text()).get("cross")
    draw(data, figures)
    draw_variants(data, figures)
    numbers.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    (args.docs / "attention.md").write_text(render(data))
    summary(data)


def summary(data: dict) -> None:
    """The key numbers, printed."""
    f, t, s, m, kv = (data[k] for k in ("five_token", "three_keys", "scaling", "masks", "kv_cache"))
    print(f"1 'quick': scores {f['scores']} weights {f['weights']} output {f['output']}")
    print(f"2 query {t['query']}: scores {t['scores']} weights {t['unscaled']['weights']} (seed 0, .5, .5)")
    print(f"3 row weights {s['weights']} (seed {s['seed_weights']})")
    for p in s["random"]:
        print(f"  d_k={p['d_k']}: max weight {p['max_unscaled']:.3f} unscaled, {p['max_scaled']:.3f} scaled")
    print(
        f"4 change at {m['changed_position']}: before {m['change_before']:.2e}, after {m['change_after']:.2e}; "
        f"alone vs batched {m['alone_vs_batched']:.2e}; weight on pads {m['weight_on_pads']}"
    )
    print(f"5 shapes {data['multi_head']['shapes']}")
    a, p = data["additive_vs_dot"], data["patterns"]
    print(f"6 additive weights {a['additive_weights']}, dot weights {a['dot_weights']}")
    print(
        f"7 ids equal {kv['ids_equal']}; multiply-adds step 1/{kv['steps']}: cache {kv['madds_cache'][0]}/"
        f"{kv['madds_cache'][-1]}, no cache {kv['madds_no_cache'][0]}/{kv['madds_no_cache'][-1]}; "
        f"ms {kv['ms_cache'][:1]}..{kv['ms_cache'][-1:]} vs {kv['ms_no_cache'][:1]}..{kv['ms_no_cache'][-1:]}"
    )
    for item in (data.get("cross") or {}).get("sentences", []):
        print(f"8 {item['source']} -> {item['translation']} (cache equal: {item['cache_equal']})")
    print(f"9 pairs of {p['length']}x{p['length']}: {p['pairs']}")


if __name__ == "__main__":
    main()
