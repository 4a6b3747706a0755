"""What the routes do: check a request, split its texts, queue it for a batch, shape the answer."""

import asyncio
import dataclasses
import secrets
import time

from transformer.core.config import AlignmentConfig, DecodingConfig, ServeSettings
from transformer.core.strategies import STRATEGIES
from transformer.core.strategies import problems as strategy_problems
from transformer.decoding.alignment import pharaoh
from transformer.decoding.markup import restore
from transformer.decoding.sentences import join_text, split_text
from transformer.decoding.steered_text import SteeringError
from transformer.runs.loading import Loaded
from transformer.runs.run_folder import RunFolder
from transformer.serve.answers import Decoded, answer_head
from transformer.serve.batcher import Batcher, Job, QueueFull, ShuttingDown
from transformer.serve.decode import Result, Steered, check_steering, decode_batch, decoding_settings, source_tokens
from transformer.serve.errors import RETRY_AFTER, RequestError, lone_surrogate
from transformer.serve.inspection import Inspector
from transformer.serve.schemas import AttentionRequest, DecodingOptions, ScoreRequest, TranslateRequest


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


class Service:
    """A loaded model behind a `Batcher`, with the server's decoding defaults and limits."""

    def __init__(
        self,
        loaded: Loaded,
        defaults: DecodingConfig,
        settings: ServeSettings,
        alignment: AlignmentConfig | None = None,
    ):
        """`loaded`: the model, or an ensemble served as one; it translates with `defaults` unless asked otherwise,
        and aligns words with the attention `alignment` names."""
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
        self.inspector = Inspector(self, loaded.aligner(alignment or AlignmentConfig()))

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

    def config_for(self, options: DecodingOptions | ScoreRequest) -> DecodingConfig:
        """The server's decoding defaults overridden by a request's settings; refuses settings that cannot work."""
        cfg = decoding_settings(self.defaults, **options.given())
        if found := strategy_problems(cfg, bounds=False):
            raise RequestError(422, "; ".join(found))
        if cfg.tag and cfg.tag not in self.tokenizer.tags:
            raise RequestError(422, f"tag={cfg.tag!r} is not one of this model's tags: {list(self.tokenizer.tags)}")
        return cfg

    def check_texts(self, texts: list[str]) -> None:
        """Refuse no texts, too many, an empty or too long one, or one that is not Unicode text."""
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

    async def decode(self, sentences: list[Steered], options: DecodingOptions) -> Decoded:
        """Queue `sentences` (each with what steers it) for a batch and wait for their results, at most
        `timeout_s`."""
        cfg = self.config_for(options)
        seed = options.seed if options.seed is not None else secrets.randbits(63)
        try:
            check_steering(self.translator, sentences, cfg)
        except SteeringError as err:
            raise RequestError(422, str(err)) from None
        # Sampling draws from the request's own generator, so a sampled request is a batch of its own.
        key = ("draws", object()) if STRATEGIES[cfg.strategy].draws(cfg) else dataclasses.astuple(cfg)
        tokens = source_tokens(self.translator, [s.source for s in sentences], cfg.tag)
        job = Job(sentences, tokens, key, (cfg, seed))
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

    def _sentence(self, source: str, result: Result, prefix: str = "", links=None, marked=None) -> dict:
        """A sentence's answer; with its word `links`, its alignment, and `marked`'s markup put back."""
        hyps = result[1]
        texts = self.translator.detokenize(hyps, prefix)
        n_best = [{"text": t, "score": round(h.score, 4)} for t, h in zip(texts, hyps)]
        translation = texts[0] if texts else ""
        answer = {
            "source": source,
            "translation": translation if marked is None else restore(marked, translation, links),
            "score": n_best[0]["score"] if hyps else None,
            "n_best": n_best,
        }
        return answer | ({"alignment": pharaoh(links)} if links is not None else {})

    async def translate(self, request: TranslateRequest) -> dict:
        """Every text split into sentences, all decoded in one job, joined back line by line; a text with a prefix
        or constraints is one sentence."""
        start = time.monotonic()
        texts = request.all_texts()
        self.check_texts(texts)
        steered = steered_sentence(request, self.settings.max_chars)
        marked = self.inspector.marked(texts) if request.markup == "xml" else None
        if marked:
            layouts = [[[m.text.strip()] for m in lines] for lines in marked]
        else:
            layouts = [[[steered.source]]] if steered else [sentence_lines(t, request.split) for t in texts]
        sentences = [s for layout in layouts for line in layout for s in line if s]
        if not sentences:
            raise RequestError(422, "nothing to translate outside the markup")
        if len(sentences) > self.settings.max_sentences:
            limit = self.settings.max_sentences
            raise RequestError(413, f"{len(sentences)} sentences; at most {limit} per request")
        decoded = await self.decode([steered] if steered else [Steered(s) for s in sentences], request)
        found = await self.inspector.links(decoded.results) if request.alignments or marked else None
        links, markups = iter(found or []), iter(m for lines in marked or [] for m in lines if m.text.strip())
        answers, results, prefix = [], iter(decoded.results), steered.prefix if steered else ""
        for layout in layouts:
            lines = [
                [self._sentence(s, next(results), prefix, next(links, None), next(markups, None)) for s in line if s]
                for line in layout
            ]
            text = join_text([[s["translation"] for s in line] for line in lines])
            if marked:  # a line of markup alone keeps it
                kept = zip(lines, marked[len(answers)])
                text = "\n".join(line[0]["translation"] if line else restore(m, "", []) for line, m in kept)
            answers.append({"text": text, "sentences": [s for line in lines for s in line]})
        return answer_head(self.name, decoded, start) | {"translations": answers}

    async def score(self, request: ScoreRequest) -> dict:
        """Given pairs scored (`serve.inspection`)."""
        return await self.inspector.score(request)

    async def attention(self, request: AttentionRequest) -> dict:
        """The sentence's best translation and its cross-attention (`serve.inspection`)."""
        return await self.inspector.attention(request)
