"""From corpus files to training batches: the formats a corpus comes in (`sources/`), the corpora of a config and their
mixture, cleaning, screening, SentencePiece (`tokenizer`), the prepared folder (`preparation`: sharded, resumable,
reused) and the batches. It may import `compute` and `core`; never a model."""
