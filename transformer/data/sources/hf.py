"""A Hugging Face dataset, read through `datasets`."""

from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path

from transformer.core.config import SourceConfig
from transformer.core.errors import UserError
from transformer.data.sources.base import Source, file_stats, same_language
from transformer.data.sources.streams import plain_suffix


class HFDataset(Source):
    """A Hugging Face dataset read through `datasets`: a hub name (`name` its configuration, `split`), a local
    folder (a `save_to_disk` folder, or a dataset repository's layout) or a data file (.parquet, .jsonl, .json,
    .arrow, .csv). Text from the `field` column of {language: text} dicts, or two named text `columns`."""

    given_as = "{key}.path=DATASET (a Hugging Face dataset: {key}.name, {key}.split)"
    DATA_FILES = {".parquet": "parquet", ".jsonl": "json", ".json": "json", ".arrow": "arrow", ".csv": "csv"}
    BATCH = 1000  # rows read at a time

    @classmethod
    def claims(cls, cfg: SourceConfig) -> bool:
        return bool(cfg.path)

    def check(self) -> None:
        super().check()
        columns = self.cfg.columns
        if columns is not None and (len(columns) != 2 or not all(isinstance(c, str) for c in columns)):
            raise UserError(f"{self.key}.columns={list(columns)} must be two column names (or none: the field)")

    def _load(self):
        import datasets  # seconds of start-up: only where a dataset is read

        cfg, path = self.cfg, Path(self.cfg.path)
        try:
            if (path / "state.json").is_file() or (path / "dataset_dict.json").is_file():
                saved = datasets.load_from_disk(str(path))  # memory-mapped Arrow: read as it is iterated
                return saved[cfg.split] if isinstance(saved, datasets.DatasetDict) else saved
            if path.is_file():
                builder = self.DATA_FILES.get(plain_suffix(path))
                if builder is None:
                    raise self.error(f"a data file must end in {', '.join(self.DATA_FILES)}")
                files = {cfg.split: str(path)}
                return datasets.load_dataset(builder, data_files=files, split=cfg.split, streaming=cfg.streaming)
            return datasets.load_dataset(
                cfg.path, cfg.name, split=cfg.split, revision=cfg.revision, streaming=cfg.streaming
            )
        except (OSError, ValueError, KeyError) as err:
            raise self.error(f"cannot load it ({type(err).__name__}: {err})") from None

    def _batches(self) -> Iterator[dict[str, list]]:
        data = self._load()
        wanted = list(self.cfg.columns) if self.cfg.columns is not None else [self.cfg.field]
        known = data.column_names  # None for a stream whose features are unknown until read
        if known is not None:
            if missing := [c for c in wanted if c not in known]:
                raise self.error(f"no column {missing[0]!r}; its columns: {', '.join(known)}")
            data = data.select_columns(wanted)
        try:
            for batch in data.iter(batch_size=self.BATCH):
                if missing := [c for c in wanted if c not in batch]:
                    raise self.error(f"no column {missing[0]!r}; its columns: {', '.join(batch)}")
                yield batch
        except (OSError, ValueError) as err:
            raise self.error(f"cannot read it ({type(err).__name__}: {err})") from None

    def _texts(self, batch: dict[str, list], lang: str) -> list[str | None]:
        """The texts in `lang` of a batch: its column, or its entries of the `field` dicts."""
        if self.cfg.columns is not None:
            return batch[self.cfg.columns[self.side_index(lang)]]
        dicts = batch[self.cfg.field]
        codes = {code for row in dicts[:1] if isinstance(row, Mapping) for code in row}
        code = next((c for c in sorted(codes) if same_language(c, lang)), None)
        if code is None:
            held = ", ".join(sorted(codes)) or "none"
            raise self.error(f"its {self.cfg.field!r} column has no language {lang!r} (its languages: {held})")
        return [row.get(code) if row else None for row in dicts]

    def rows(self, skipped: Counter) -> Iterator[tuple[str, str]]:
        for batch in self._batches():
            for src, tgt in zip(*(self._texts(batch, lang) for lang in self.langs)):
                if src is None or tgt is None:
                    skipped["missing language"] += 1
                    continue
                yield src, tgt

    def side(self, lang: str) -> Iterator[str]:
        self.side_index(lang)
        for batch in self._batches():
            yield from (text for text in self._texts(batch, lang) if text is not None)

    def fingerprint(self) -> dict:
        cfg, path = self.cfg, Path(self.cfg.path)
        if not path.exists():  # a hub dataset
            return {"dataset": cfg.path, "name": cfg.name, "split": cfg.split, "revision": cfg.revision}
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        return {"dataset": str(path), "files": [file_stats(p, self.key) for p in files]}

    def describe(self) -> str:
        config = f"{self.cfg.name}, " if self.cfg.name else ""
        return f"dataset {self.cfg.path} ({config}split {self.cfg.split})"
