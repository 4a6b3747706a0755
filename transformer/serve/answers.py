"""What every answer of a decoding request starts with: the model, the settings used, the batch joined, timings."""

import dataclasses
import time

from transformer.core.config import DecodingConfig
from transformer.core.strategies import STRATEGIES
from transformer.serve.batcher import BatchInfo
from transformer.serve.decode import Result
from transformer.serve.schemas import DecodingOptions


@dataclasses.dataclass
class Decoded:
    """A request's results with the batch it joined and its timings."""

    results: list[Result]
    batch: BatchInfo
    queue_ms: float
    cfg: DecodingConfig
    seed: int


def answer_head(model: str, decoded: Decoded, start: float) -> dict:
    """What every answer starts with: the model, the settings used, the batch joined, the timings."""
    cfg, entry = decoded.cfg, STRATEGIES[decoded.cfg.strategy]
    settings = {"strategy": cfg.strategy, "n_best": cfg.n_best}
    settings |= {name: getattr(cfg, name) for name in entry.reads() if name in DecodingOptions.model_fields}
    if "seed" in settings:
        settings["seed"] = decoded.seed
    if cfg.tag:
        settings["tag"] = cfg.tag
    settings |= {name: getattr(cfg, name) for name in ("suppress", "ban_unk", "alternatives") if getattr(cfg, name)}
    return {
        "model": model,
        "settings": settings,
        "batch": dataclasses.asdict(decoded.batch) | {"decode_ms": round(decoded.batch.decode_ms, 1)},
        "timings": {
            "queue_ms": round(decoded.queue_ms, 1),
            "total_ms": round(1000 * (time.monotonic() - start), 1),
        },
    }
