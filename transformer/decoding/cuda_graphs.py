"""Search with static shapes: on a GPU one CUDA graph per decoding step (a step launches once instead of ~25 kernels
per layer), on the CPU a decoder step compiled ahead of time (`decoding.compiled`, `fast_inference.compiled`).

The eager search (`transformer.decoding`) drops finished rows and attends over the prefix decoded so far, so its
shapes change every step. Here every shape is static: every row stays until the search ends, the self-attention
keys/values live in a buffer of the search's whole length, masked past the current position, and the position and
the fed tokens are tensors updated in place. The decoder step (`fast_inference.static_step.DecoderStep`, or its
compiled package) is then recorded once per batch and replayed: greedy records the choice of the token too and looks
at the GPU only every `CHECK_EVERY` steps; beam search keeps its bookkeeping (`transformer.decoding.beam`) eager and
moves hypotheses between fixed slots. On the CPU without a package (the tests) the same steps run eagerly, which
checks their logic against the eager search where no GPU is present.
"""

import threading
from collections.abc import Callable
from dataclasses import replace

import torch
from torch import Tensor

from transformer.decoding.search_state import NEG_INF, SearchOptions, SearchState, never_generated, next_log_probs
from transformer.fast_inference.static_step import DecoderStep
from transformer.models.attention.dot import DotAttention

CHECK_EVERY = 8  # greedy: steps between two looks at whether every row has finished (each look waits for the GPU)
_RECORDING = threading.Lock()  # held while a step is recorded
STATIC_DEVICES = {"cuda"}  # where searches run with static shapes; tests add "cpu" to check them eagerly


def applies(model, src: Tensor, options: SearchOptions) -> bool:
    """Whether a search over `model` runs with static shapes: a `Transformer` with `dot` self-attention on a device
    of `STATIC_DEVICES` or with a compiled step (`decoding.compiled`), cached search, no n-gram blocking (it reads
    the prefix on the host)."""
    decoder = getattr(model, "decoder", None)
    return (
        (src.device.type in STATIC_DEVICES or compiled_of(model) is not None)
        and src.size(0) > 0
        and options.cuda_graphs
        and options.use_cache
        and options.no_repeat_ngram_size == 0
        and hasattr(model, "tgt_embed")
        and decoder is not None
        and all(isinstance(layer.self_attn, DotAttention) for layer in decoder)
    )


def compiled_of(model):
    """The compiled decoder step a `Translator` gave `model` (`decoding.compiled`), or None."""
    return getattr(model, "compiled_step", None)


def recorded(step: Callable[[], Tensor], device: torch.device) -> Callable[[], Tensor]:
    """`step` as a CUDA graph's replay (returning the same output tensor, refilled), after one warm-up run on a side
    stream as CUDA graphs need; `step` itself on other devices. The caller resets what the warm-up and the
    recording changed."""
    if device.type != "cuda":
        return step
    with _RECORDING:  # the service decodes in several threads: one records at a time, the others may replay
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            out = step()

    def replay() -> Tensor:
        graph.replay()
        return out

    return replay


class StaticStep:
    """One decoder step over N = B·G fixed rows (G per source sentence, sentence-major) and a self-attention cache
    of fixed length L: every call feeds `tokens` at `position`, advances it, and gives log-probabilities (N, V).
    `compiled` (`fast_inference.compiled.CompiledStep`) runs the step instead of the model's own modules."""

    def __init__(
        self, model, memory: Tensor, src_mask: Tensor, group: int, length: int, options: SearchOptions, compiled=None
    ):
        self.model, self.options = model, options
        device = memory.device
        cross_kv = [t for layer in model.decoder for t in layer.cross_attn.project_kv(memory)]  # each (B, H, S, Dh)
        self.group, self.per_row = group, compiled is not None and group > 1  # a package takes one row a source:
        if self.per_row:  # each hypothesis gets its own copy
            cross_kv, src_mask = [t.repeat_interleave(group, 0) for t in cross_kv], src_mask.repeat_interleave(group, 0)
        keys = cross_kv[0]
        rows = memory.size(0) * group
        self.self_kv = keys.new_zeros(len(model.decoder), 2, rows, keys.size(1), length, keys.size(3))
        self.cross_kv, self.src_mask, self.run = cross_kv, src_mask, compiled or DecoderStep(model)  # called alike
        self.inputs = [*self.self_kv.flatten(0, 1), *cross_kv]  # DecoderStep's `kv`
        self.banned = never_generated(options, model, device)
        self.position = torch.zeros((), dtype=torch.long, device=device)  # the fed token's position (BOS: 0)
        self.tokens = torch.empty(rows, 1, dtype=torch.long, device=device)  # the fed token of each row
        self.reset()

    def reset(self) -> None:
        """Back to the first step: position 0, BOS in every row."""
        self.position.zero_()
        self.tokens.fill_(self.options.bos_id)

    def __call__(self) -> Tensor:
        logits = self.run(self.tokens, self.position, self.src_mask, *self.inputs)  # (N, V)
        logp = next_log_probs(logits, self.banned)
        eos_id = self.options.eos_id
        if 0 <= eos_id < logp.size(1) and self.options.min_len > 0:
            logp[:, eos_id] = torch.where(self.position < self.options.min_len, NEG_INF, logp[:, eos_id])
        self.position += 1
        return logp

    def keep(self, sentences: Tensor) -> None:
        """Keep only the rows of `sentences` (B',), in that order: the others' work ends (not in a CUDA graph)."""
        rows = (sentences[:, None] * self.group + torch.arange(self.group, device=sentences.device)).flatten()
        per_source = rows if self.per_row else sentences
        self.self_kv = self.self_kv.index_select(2, rows)
        self.cross_kv = [t.index_select(0, per_source) for t in self.cross_kv]
        self.src_mask, self.tokens = self.src_mask.index_select(0, per_source), self.tokens.index_select(0, rows)
        self.inputs = [*self.self_kv.flatten(0, 1), *self.cross_kv]

    def move(self, targets: Tensor, sources: Tensor, filled: int) -> None:
        """Make the cached rows `targets` copies of the rows `sources` (both (M,), into the N rows) over the first
        `filled` positions, copying only the rows that change."""
        moved = (targets != sources).nonzero().squeeze(1)
        if moved.numel():
            held = self.self_kv[:, :, :, :, :filled]  # (layers, k|v, N, H, filled, Dh)
            held.index_copy_(2, targets[moved], held.index_select(2, sources[moved]))


class StaticGreedy:
    """One greedy search with static shapes: the step and the choice of each row's token; `run()` decodes."""

    def __init__(self, model, src: Tensor, options: SearchOptions, limit: Tensor):
        self.model, self.options, self.limit = model, options, limit
        self.length = int(limit.max())
        memory, src_mask = model.encode(src)  # (N, S, D), (N, 1, 1, S)
        self.step = StaticStep(model, memory, src_mask, 1, self.length, options, compiled_of(model))
        n, device = src.size(0), src.device
        self.finished = torch.empty(n, dtype=torch.bool, device=device)
        self.out = torch.empty(n, self.length, dtype=torch.long, device=device)  # generated ids, pad after EOS
        self.scores = torch.empty(n, self.length, device=device)  # their log-probabilities, 0 after EOS
        self.reset()

    def reset(self) -> None:
        self.step.reset()
        self.finished.zero_()
        self.out.fill_(self.model.pad_id)
        self.scores.zero_()

    def choose(self) -> Tensor:
        """One step: every row's best token, recorded (pad and 0 for finished rows); gives the finished flags."""
        at = self.step.position.clone().view(1)  # the position fed (the step advances it): the tokens. column
        logp = self.step()
        tokens = logp.argmax(dim=-1)  # (N,)
        chosen = logp.gather(1, tokens[:, None]).squeeze(1).masked_fill(self.finished, 0.0)
        tokens = tokens.masked_fill(self.finished, self.model.pad_id)
        self.out.index_copy_(1, at, tokens[:, None])
        self.scores.index_copy_(1, at, chosen[:, None])
        self.finished |= (tokens == self.options.eos_id) | (self.limit <= at + 1)
        self.step.tokens.copy_(tokens[:, None])
        return self.finished

    def run(self) -> tuple[Tensor, Tensor]:
        """Decode every row to EOS or its limit; ids (N, steps) without BOS, EOS included, pad after, and their
        log-probabilities."""
        choose = recorded(self.choose, self.out.device)
        every = CHECK_EVERY if self.out.device.type == "cuda" else 1  # a look at the CPU's flags costs nothing
        self.reset()
        for t in range(self.length):
            finished = choose()
            if (t + 1) % every == 0 and bool(finished.all()):
                break
        steps = int((self.out != self.model.pad_id).any(0).sum())  # every row writes pad once it has finished
        return self.out[:, :steps], self.scores[:, :steps]


class StaticSearchState(SearchState):
    """`SearchState` for beam search over a `StaticStep` of K slots per sentence: `select` copies cached rows between
    slots; in a CUDA graph sentences keep their slots when others leave the batch, elsewhere the step drops theirs."""

    def __init__(self, model, src: Tensor, options: SearchOptions, max_len: int):
        super().__init__(model, src, replace(options, use_cache=False), max_len)  # the prefix, on the host's terms
        self.k = options.beam_size
        self.decoder = StaticStep(model, self.memory, self.src_mask, self.k, max_len, options, compiled_of(model))
        self.replay = recorded(self.decoder, src.device)
        self.decoder.reset()
        self.slots = torch.arange(src.size(0), device=src.device)  # the slot of each current sentence
        self.width = 1  # current rows per sentence: one (the empty hypothesis) until the first `select`

    def step(self) -> Tensor:
        """Log-probabilities (rows, V) of the current rows, in the current order."""
        logp = self.replay()  # (B·K, V) over every slot
        per_slot = logp.view(-1, self.k, logp.size(1))  # (B, K, V)
        if self.width == self.k and self.slots.numel() == per_slot.size(0):  # every slot, in order
            return logp
        return per_slot[self.slots, : self.width].reshape(-1, logp.size(1))

    def select(self, rows: Tensor, sentences: Tensor | None = None) -> None:
        """Keep `rows` (K per kept sentence, indices into the current rows) and, when the batch shrinks, `sentences`."""
        slots = self.slots if sentences is None else self.slots[sentences]
        width = rows.numel() // slots.numel()  # K, or fewer where the vocabulary is smaller
        hyps = torch.arange(width, device=rows.device).repeat(slots.numel())  # (B'·width,): 0..width-1 per sentence
        targets = slots.repeat_interleave(width) * self.k + hyps
        filled = int(self.decoder.position)  # the positions written so far
        self.decoder.move(targets, self.slots[rows // self.width] * self.k + rows % self.width, filled)
        if sentences is not None and self.replay is self.decoder:  # not a CUDA graph: finished sentences leave it
            self.decoder.keep(slots)
            slots = torch.arange(slots.numel(), device=slots.device)
        self.prefix = self.prefix.index_select(0, rows)
        self.logprobs = self.logprobs.index_select(0, rows)
        self.slots, self.width = slots, width

    def append(self, tokens: Tensor, logprobs: Tensor) -> None:
        super().append(tokens, logprobs)
        self.decoder.tokens.view(-1, self.k)[self.slots, : self.width] = tokens.view(-1, self.width)
