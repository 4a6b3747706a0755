"""What the routes do: check a request, split its texts, queue it for a batch, shape the answer."""

import asyncio
import dataclasses
import re
import secrets
import time

from transformer.core.config import DecodingConfig, ServeSettings
from transformer.core.strategies import STRATEGIES
from transformer.core.strategies import problems as strategy_problems
from transformer.decoding.heatmaps import attention_matrix, attention_tokens
from transformer.decoding.sentences import join_text, split_text
from transformer.decoding.steered_text import SteeringError
from transformer.runs.loading import Loaded
from transformer.runs.run_folder import RunFolder
from transformer.serve.batcher import Batcher, BatchInfo, Job, QueueFull, ShuttingDown
from transformer.serve.decode import Result, Steered, check_steering, decode_batch, decoding_settings
from transformer.serve.schemas import AttentionRequest, DecodingOptions, TranslateRequest

LONE_SURROGATE = re.compile("[\ud800-\udfff]")


RETRY_AFTER = {"Retry-After": "1"}  # seconds, on a 503 (busy or timed out)


class RequestError(Exception):
    """A request the service refuses or cannot answer: an HTTP status, a message and headers for the answer."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers


def lone_surrogate(text: str) -> int | None:
    """The index of the first lone surrogate in `text` (not Unicode text, no UTF-8 for it), or None."""
    match = LONE_SURROGATE.search(text)
    return match.start() if match else None


def sentence_lines(text: str, split: bool) -> list[list[str]]:
    """A text's lines as lists of sentences: split into sentences, or (`split` false) each line one sentence."""
    return split_text(text) if split else [[line.strip()] for line in text.split("\n")]


def steered_sentence(request: TranslateRequest, max_chars: int) -> Steered | None:
    """The request's text as one sentence with its `target_prefix` and `constraints`, where it gives them; refuses
    a prefix over `max_chars` and a lone surrogate in either."""
    if request.target_prefix is None and request.constraints is None:
        return None
    prefix = request.target_prefix or ""
    if len(prefix) > max_chars:
        raise RequestError(413, f"target_prefix has {len(prefix)} characters; at most {max_chars}")
    for name, text in [("target_prefix", prefix), *(("constraints", c) for c in request.constraints or [])]:
        if (at := lone_surrogate(text)) is not None:
            raise RequestError(422, f"{name} has a lone surrogate at character {at + 1}: not Unicode text")
    constraints = tuple(request.constraints) if request.constraints is not None else None
    return Steered(" ".join(request.text.split()), prefix, constraints)


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


class Service:
    """A loaded model behind a `Batcher`, with the server's decoding defaults and limits."""

    def __init__(self, loaded: Loaded, defaults: DecodingConfig, settings: ServeSettings):
        """`loaded`: the model, or an ensemble served as one; it translates with `defaults` unless asked otherwise."""
        self.model, self.tokenizer, self.defaults, self.settings = loaded.model, loaded.tokenizer, defaults, settings
        self.translator = loaded.translator(defaults)  # weights packed once for the server's life; the tag checked
        run = RunFolder.holding(loaded.path)
        self.name = f"{run.path.name}/{loaded.path.name}" if run else loaded.path.name
        self.meta = loaded.meta
        self.batcher = Batcher(
            lambda sentences, cfg_seed: decode_batch(self.translator, sentences, *cfg_seed),  # settings: (cfg, seed)
            settings.max_batch_tokens,
            settings.max_wait_ms,
            settings.batching,
            settings.workers,
            settings.max_waiting,
        )

    def info(self) -> dict:
        """The model, its vocabularies, the decoding defaults and the limits."""
        return {
            "model": self.name,
            "step": self.meta.get("step"),
            "val_bleu": self.meta.get("val_bleu"),
            "vocabulary": {
                "source": self.tokenizer.src_vocab_size,
                "target": self.tokenizer.tgt_vocab_size,
                "joint": self.tokenizer.joint,
                "tags": list(self.tokenizer.tags),
            },
            "max_tokens_per_sentence": self.model.max_positions - 1,
            "decoding": dataclasses.asdict(self.defaults),
            "serve": dataclasses.asdict(self.settings),
        }

    def _config(self, options: DecodingOptions) -> DecodingConfig:
        cfg = decoding_settings(self.defaults, **options.given())
        if found := strategy_problems(cfg, bounds=False):
            raise RequestError(422, "; ".join(found))
        if cfg.tag and cfg.tag not in self.tokenizer.tags:
            raise RequestError(422, f"tag={cfg.tag!r} is not one of this model's tags: {list(self.tokenizer.tags)}")
        return cfg

    def _check(self, texts: list[str]) -> None:
        limits = self.settings
        if not texts:
            raise RequestError(422, "texts is empty: give at least one text")
        if len(texts) > limits.max_texts:
            raise RequestError(413, f"{len(texts)} texts; at most {limits.max_texts} per request")
        for i, text in enumerate(texts):
            if not text.strip():
                raise RequestError(422, f"text {i + 1} is empty")
            if len(text) > limits.max_chars:
                raise RequestError(413, f"text {i + 1} has {len(text)} characters; at most {limits.max_chars}")
            if (at := lone_surrogate(text)) is not None:
                raise RequestError(422, f"text {i + 1} has a lone surrogate at character {at + 1}: not Unicode text")

    def _tokens(self, sentences: list[str], tag: str) -> int:
        """Source tokens (tag and EOS included) of `sentences`; refuses one longer than the model allows."""
        limit = self.model.max_positions - 1
        lengths = [len(ids) for ids in self.tokenizer.encode_src(sentences, tag)]
        for i, n in enumerate(lengths):
            if n > limit:
                raise RequestError(422, f"sentence {i + 1} has {n} tokens, more than the model's {limit}; split it")
        return sum(n + 1 for n in lengths)

    async def decode(self, sentences: list[Steered], options: DecodingOptions) -> Decoded:
        """Queue `sentences` (each with what steers it) for a batch and wait for their results, at most
        `timeout_s`."""
        cfg = self._config(options)
        seed = options.seed if options.seed is not None else secrets.randbits(63)
        try:
            check_steering(self.translator, sentences, cfg)
        except SteeringError as err:
            raise RequestError(422, str(err)) from None
        # Sampling draws from the request's own generator, so a sampled request is a batch of its own.
        key = ("draws", object()) if STRATEGIES[cfg.strategy].draws(cfg) else dataclasses.astuple(cfg)
        job = Job(sentences, self._tokens([s.source for s in sentences], cfg.tag), key, (cfg, seed))
        try:
            future = asyncio.wrap_future(self.batcher.submit(job))
            results, batch = await asyncio.wait_for(future, self.settings.timeout_s)
        except QueueFull as err:
            raise RequestError(503, f"the server is busy ({err}); try again later", RETRY_AFTER) from None
        except TimeoutError:
            message = f"not translated within {self.settings.timeout_s} s; try again later"
            raise RequestError(503, message, RETRY_AFTER) from None
        except ShuttingDown as err:  # a failed search is not this: it is the server's fault, a 500
            raise RequestError(503, str(err)) from None
        queue_ms = 1000 * (time.monotonic() - job.arrived) - batch.decode_ms
        return Decoded(results, batch, queue_ms, cfg, seed)

    def _sentence(self, source: str, result: Result, prefix: str = "") -> dict:
        hyps = result[1]
        texts = self.translator.detokenize(hyps, prefix)
        n_best = [{"text": t, "score": round(h.score, 4)} for t, h in zip(texts, hyps)]
        return {
            "source": source,
            "translation": texts[0] if texts else "",
            "score": n_best[0]["score"] if hyps else None,
            "n_best": n_best,
        }

    async def translate(self, request: TranslateRequest) -> dict:
        """Every text split into sentences, all decoded in one job, joined back line by line; a text with a prefix
        or constraints is one sentence."""
        start = time.monotonic()
        texts = request.all_texts()
        self._check(texts)
        steered = steered_sentence(request, self.settings.max_chars)
        layouts = [[[steered.source]]] if steered else [sentence_lines(t, request.split) for t in texts]
        sentences = [s for layout in layouts for line in layout for s in line if s]
        if len(sentences) > self.settings.max_sentences:
            limit = self.settings.max_sentences
            raise RequestError(413, f"{len(sentences)} sentences; at most {limit} per request")
        decoded = await self.decode([steered] if steered else [Steered(s) for s in sentences], request)
        answers, results, prefix = [], iter(decoded.results), steered.prefix if steered else ""
        for layout in layouts:
            lines = [[self._sentence(s, next(results), prefix) for s in line if s] for line in layout]
            text = join_text([[s["translation"] for s in line] for line in lines])
            answers.append({"text": text, "sentences": [s for line in lines for s in line]})
        return answer_head(self.name, decoded, start) | {"translations": answers}

    async def attention(self, request: AttentionRequest) -> dict:
        """The sentence's best translation and its cross-attention (target tokens × source tokens)."""
        start = time.monotonic()
        self._check([request.text])
        layers = self.model.cross_attention_layers
        if request.layer is not None and not -layers <= request.layer < layers:
            raise RequestError(422, f"layer={request.layer}: the model has {layers} decoder layers")
        decoded = await self.decode([Steered(request.text.strip())], request)
        src_ids, hyps = decoded.results[0]
        tgt_ids = hyps[0].tokens if hyps else []

        def matrix() -> list[list[float]]:
            with self.batcher.model_lock.exclusive():  # the teacher-forced pass runs while no search does
                weights = attention_matrix(self.model, src_ids, tgt_ids, request.layer)
            return [[round(w, 4) for w in row] for row in weights.cpu().tolist()]

        weights = await asyncio.to_thread(matrix)
        source_tokens, target_tokens = attention_tokens(self.tokenizer, src_ids, tgt_ids)
        return answer_head(self.name, decoded, start) | {
            "translation": self.tokenizer.decode_tgt([tgt_ids])[0],
            "source_tokens": source_tokens,
            "target_tokens": target_tokens,
            "weights": weights,
        }
