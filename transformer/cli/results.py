"""`transformer-results`: the results table of checkpoints x test sets x decodings, as Markdown."""

from pathlib import Path

from omegaconf import DictConfig

from transformer.cli import hydra_app, user_errors
from transformer.core.config import ResultsConfig
from transformer.core.errors import UserError
from transformer.core.files import atomic_write_text


@hydra_app("results", ResultsConfig)
def main(cfg: DictConfig) -> None:
    from transformer.runs.loading import checkpoint_paths, load  # torch: see transformer.cli
    from transformer.runs.results_table import Report, decoding, test_sets, val_sets

    with user_errors():
        if not cfg.checkpoints or not cfg.decodings or cfg.samples < 0:
            raise UserError("give checkpoints=[RUN_DIR|FILE,...] and decodings=[PRESET,...] (one at least), samples>=0")
        if Path(cfg.output).is_dir():
            raise UserError(f"output={cfg.output} is a folder; give the report's file name")
        report = Report({spec: decoding(spec) for spec in cfg.decodings}, cfg.samples)
        entries = {" + ".join(checkpoint_paths(entry)): entry for entry in cfg.checkpoints}  # a list: an ensemble
        for name, entry in entries.items():
            loaded = load(entry, device=cfg.device)
            data = loaded.config.data
            sets = val_sets(data) if cfg.tests == "chosen" else test_sets(data, cfg.extra_dir, cfg.val)
            report.score(name, loaded, sets, data.val_split if cfg.val else None)
        chosen: dict[str, list[str]] = {}  # tests=chosen: the test sets for the model val chooses, per decoding
        for spec, name in report.best().items() if cfg.tests == "chosen" else []:
            chosen.setdefault(name, []).append(spec)
        for name, specs in chosen.items():
            loaded = load(entries[name], device=cfg.device)
            report.score(name, loaded, test_sets(loaded.config.data, cfg.extra_dir), specs=specs)
        atomic_write_text(Path(cfg.output), report.markdown())
        print(f"wrote {cfg.output}")


if __name__ == "__main__":
    main()
