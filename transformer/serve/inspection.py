"""What the service lets a client look inside a translation with: scores of given pairs (/score), cross-attention
(/attention), word alignments and markup carried across (/translate's `alignments` and `markup`). Each runs one
teacher-forced pass, alone on the model (`Batcher.model_lock`), bounded like a translation."""

import asyncio
import time

from transformer.decoding.alignment import Aligner, pharaoh
from transformer.decoding.given_pairs import Unscored
from transformer.decoding.heatmaps import attention_matrix, attention_tokens
from transformer.decoding.markup import Marked, MarkupError, parse
from transformer.serve.answers import answer_head
from transformer.serve.decode import Result, Steered
from transformer.serve.errors import RETRY_AFTER, RequestError, lone_surrogate
from transformer.serve.schemas import AttentionRequest, ScoreRequest

Links = list[tuple[int, int]]


class Inspector:
    """Scores, alignments and markup for one `Service`."""

    def __init__(self, service, aligner: Aligner):
        """`service`: the `serve.service.Service` this works for (its model, settings, batcher and checks)."""
        self.service, self.aligner = service, aligner

    async def _alone(self, work):
        """`work()` in a thread while no search runs, within the service's timeout."""

        def locked():
            with self.service.batcher.model_lock.exclusive():
                return work()

        try:
            return await asyncio.wait_for(asyncio.to_thread(locked), self.service.settings.timeout_s)
        except TimeoutError:
            message = f"not done within {self.service.settings.timeout_s} s; try again later"
            raise RequestError(503, message, RETRY_AFTER) from None

    async def links(self, results: list[Result]) -> list[Links]:
        """The word links of each result's best hypothesis ([] for none)."""
        best = [(src, hyps[0].tokens) for src, hyps in results if hyps]
        found = iter(await self._alone(lambda: self.aligner.links([s for s, _ in best], [t for _, t in best])))
        return [next(found) if hyps else [] for _, hyps in results]

    def marked(self, texts: list[str]) -> list[list[Marked]]:
        """Each text's lines, their markup parsed off; a line whose markup is not well-formed is refused (422)."""
        out = []
        for i, text in enumerate(texts):
            lines = []
            for number, line in enumerate(text.split("\n"), start=1):
                try:
                    lines.append(parse(line))
                except MarkupError as err:
                    raise RequestError(422, f"text {i + 1}, line {number}: {err}") from None
            out.append(lines)
        return out

    def _check(self, request: ScoreRequest) -> None:
        """Refuse too many pairs, or a side that is empty, too long or not Unicode text."""
        limits = self.service.settings
        if len(request.pairs) > limits.max_texts:
            raise RequestError(413, f"{len(request.pairs)} pairs; at most {limits.max_texts} per request")
        for i, pair in enumerate(request.pairs, start=1):
            for side, text in (("source", pair.source), ("target", pair.target)):
                if not text.strip():
                    raise RequestError(422, f"pair {i}: the {side} is empty")
                if len(text) > limits.max_chars:
                    raise RequestError(
                        413, f"pair {i}: the {side} has {len(text)} characters; at most {limits.max_chars}"
                    )
                if (at := lone_surrogate(text)) is not None:
                    raise RequestError(422, f"pair {i}: the {side} has a lone surrogate at character {at + 1}")

    async def score(self, request: ScoreRequest) -> dict:
        """Each pair's score, log-probability and (asked for) token log-probabilities and word alignment."""
        start, service = time.monotonic(), self.service
        self._check(request)
        cfg = service.config_for(request)
        translator = service.translator.with_config(cfg)
        pairs = translator.given([p.source for p in request.pairs], [p.target for p in request.pairs])
        results = await self._alone(lambda: translator.score(pairs))
        for i, result in enumerate(results):
            if isinstance(result, Unscored):
                raise RequestError(422, f"pair {i + 1}: {result.reason}")
        answers = [{"score": round(r.score, 4), "logprob": round(r.logprob, 4)} for r in results]
        if request.tokens:
            for answer, result in zip(answers, results):
                answer["tokens"] = [round(x, 4) for x in result.token_scores]
        if request.alignments:
            found = await self._alone(lambda: self.aligner.links(pairs.src_ids, pairs.tgt_ids))
            for answer, links in zip(answers, found):
                answer["alignment"] = pharaoh(links)
        return {"model": service.name, "ms": round(1000 * (time.monotonic() - start), 1), "scores": answers}

    async def attention(self, request: AttentionRequest) -> dict:
        """The sentence's best translation and its cross-attention (target tokens × source tokens)."""
        start, service = time.monotonic(), self.service
        service.check_texts([request.text])
        layers = service.model.cross_attention_layers
        if request.layer is not None and not -layers <= request.layer < layers:
            raise RequestError(422, f"layer={request.layer}: the model has {layers} decoder layers")
        decoded = await service.decode([Steered(request.text.strip())], request)
        src_ids, hyps = decoded.results[0]
        tgt_ids = hyps[0].tokens if hyps else []

        def matrix() -> list[list[float]]:
            weights = attention_matrix(service.model, src_ids, tgt_ids, request.layer)
            return [[round(w, 4) for w in row] for row in weights.cpu().tolist()]

        weights = await self._alone(matrix)
        source_tokens, target_tokens = attention_tokens(service.tokenizer, src_ids, tgt_ids)
        return answer_head(service.name, decoded, start) | {
            "translation": service.tokenizer.decode_tgt([tgt_ids])[0],
            "source_tokens": source_tokens,
            "target_tokens": target_tokens,
            "weights": weights,
        }
