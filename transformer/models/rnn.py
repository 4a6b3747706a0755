"""Bahdanau et al. (2014)'s RNN encoder-decoder with additive attention, the second model family (`model=rnn`).

Encoder: embeddings -> bidirectional GRU (or LSTM) over packed sequences, so padding never changes a
result; its states (B, S, 2·He) are the attention's values, and their projection (made once per source)
its keys. Decoder: a GRU whose previous state s_{t-1} is the attention query; the context c_t is fed
into the recurrent step with the previous target embedding, and into the output layer ("deep output":
tanh(W[s_t; y_{t-1}; c_t]) -> vocabulary; the paper's maxout is replaced by tanh). s_0 = tanh(W ←h_1),
as in the paper. Scoring: additive v·tanh(Wq s + Uk h) (default) or dot (s·Uk h, Luong's "general").
Dropout (as in JoeyNMT/OpenNMT-py): on embeddings, between stacked recurrent layers, before the output.

Training still steps through the target one position at a time: each step's context feeds the next
recurrent input, which is how Bahdanau's decoder works. Each step is one call of torch's `nn.GRU`
(no hand-written gates); the encoder is one `nn.GRU`/`nn.LSTM` call over the packed batch.
Shapes: B sentences, N = B·G decoded rows, S source length, T target length, A attention size.
"""

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from transformer.core.config import ModelConfig
from transformer.core.special_ids import PAD_ID
from transformer.models.dropout import Dropout

NEG_INF = float("-inf")


class RNNCache:
    """The decoder's recurrent state per row and the projected source keys per sentence (rows = sentences × group)."""

    def __init__(self, hidden: Tensor, keys: Tensor, group: int):
        self.hidden = hidden  # (L, N, Hd)
        self.keys = keys  # (B, S, A)
        self.group = group
        self.length = 0  # target positions consumed so far

    def advance(self, steps: int = 1) -> None:
        self.length += steps

    def reorder(self, rows: Tensor, sentences: Tensor | None = None) -> None:
        """Keep the rows `rows` in that order; `sentences` shrinks the keys when finished sentences leave."""
        self.hidden = self.hidden.index_select(1, rows)
        if sentences is not None:
            self.keys = self.keys.index_select(0, sentences)


class Attention(nn.Module):
    """Additive (Bahdanau) or dot ("Luong general") scores of a query against keys projected once per source."""

    def __init__(self, query_size: int, value_size: int, size: int, scoring: str):
        super().__init__()
        self.scoring = scoring
        self.key_proj = nn.Linear(value_size, size if scoring == "additive" else query_size, bias=False)
        if scoring == "additive":
            self.query_proj = nn.Linear(query_size, size, bias=False)
            self.energy = nn.Linear(size, 1, bias=False)

    def forward(self, query: Tensor, keys: Tensor, values: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """query (B, G, Hd), keys (B, S, A), values (B, S, Dv), mask (B, S) -> context (B, G, Dv), weights (B, G, S)."""
        if self.scoring == "additive":
            hidden = torch.tanh(self.query_proj(query)[:, :, None, :] + keys[:, None, :, :])  # (B, G, S, A)
            scores = self.energy(hidden).squeeze(-1)
        else:
            scores = query @ keys.transpose(1, 2)  # (B, G, S)
        weights = torch.softmax(scores.masked_fill(~mask[:, None, :], NEG_INF), dim=-1)
        return weights @ values, weights


class RNNModel(nn.Module):
    """Bahdanau encoder-decoder; the same `encode`/`init_cache`/`decode`/`forward` interface as the Transformer."""

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        config: ModelConfig,
        *,
        pad_id: int = PAD_ID,
        joint_vocab: bool = False,
    ):
        super().__init__()
        self.config, cfg = config, config.rnn
        self.pad_id, self.max_positions = pad_id, config.max_positions
        e, he, hd = cfg.embedding_dim, cfg.encoder_hidden, cfg.decoder_hidden
        self.tgt_embed = nn.Embedding(tgt_vocab_size, e, padding_idx=pad_id)
        share_src = joint_vocab and config.tie_embeddings and src_vocab_size == tgt_vocab_size
        self.src_embed = self.tgt_embed if share_src else nn.Embedding(src_vocab_size, e, padding_idx=pad_id)
        self.dropout = Dropout(config.dropout)
        rnn = nn.LSTM if cfg.cell == "lstm" else nn.GRU
        self.encoder = rnn(
            e,
            he,
            cfg.encoder_layers,
            batch_first=True,
            bidirectional=True,
            dropout=config.dropout if cfg.encoder_layers > 1 else 0.0,
        )
        self.bridge = nn.Linear(he, cfg.decoder_layers * hd)  # s_0 = tanh(W ←h_1), one slice per decoder layer
        self.attention = Attention(hd, 2 * he, cfg.attention_dim, cfg.attention)
        self.decoder = nn.GRU(
            e + 2 * he,
            hd,
            cfg.decoder_layers,
            batch_first=True,
            dropout=config.dropout if cfg.decoder_layers > 1 else 0.0,
        )
        self.pre_output = nn.Linear(hd + e + 2 * he, e)
        self.output = nn.Linear(e, tgt_vocab_size, bias=False)
        if config.tie_embeddings:
            self.output.weight = self.tgt_embed.weight

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """Source ids (B, S) -> encoder states (B, S, 2·He), zero at padding, and the mask (B, S) of real tokens."""
        mask = src != self.pad_id
        lengths = mask.sum(1).clamp(min=1).cpu()
        packed = pack_padded_sequence(
            self.dropout(self.src_embed(src)), lengths, batch_first=True, enforce_sorted=False
        )
        states, _ = self.encoder(packed)
        memory, _ = pad_packed_sequence(states, batch_first=True, total_length=src.size(1))
        return memory, mask

    def initial_state(self, memory: Tensor, group: int) -> Tensor:
        """s_0 (L, B·G, Hd) from the backward encoder state at the first source token."""
        backward = memory[:, 0, memory.size(-1) // 2 :]  # (B, He)
        layers = self.decoder.num_layers
        state = torch.tanh(self.bridge(backward)).view(-1, layers, self.decoder.hidden_size)  # (B, L, Hd)
        return state.repeat_interleave(group, dim=0).transpose(0, 1).contiguous()

    def init_cache(self, memory: Tensor, group: int, max_len: int) -> RNNCache:
        """The recurrent state s_0 for `group` hypotheses per sentence, and the keys projected once."""
        return RNNCache(self.initial_state(memory, group), self.attention.key_proj(memory), group)

    def _steps(self, tgt_in: Tensor, memory: Tensor, mask: Tensor, keys: Tensor, hidden: Tensor):
        """Run the decoder over `tgt_in` (N, T) from `hidden`: logits (N, T, V), weights (N, T, S), last state."""
        b, s = memory.size(0), memory.size(1)
        group = tgt_in.size(0) // b
        embedded = self.dropout(self.tgt_embed(tgt_in))  # (N, T, E)
        outputs, attention = [], []
        for t in range(tgt_in.size(1)):
            query = hidden[-1].view(b, group, -1)  # the previous top-layer state
            context, weights = self.attention(query, keys, memory, mask)  # (B, G, 2He), (B, G, S)
            context = context.reshape(b * group, 1, -1)
            step_in = torch.cat([embedded[:, t : t + 1], context], dim=-1)  # (N, 1, E + 2He)
            out, hidden = self.decoder(step_in, hidden)  # out (N, 1, Hd)
            outputs.append(torch.cat([out, embedded[:, t : t + 1], context], dim=-1))
            attention.append(weights.reshape(b * group, 1, s))
        deep = torch.tanh(self.pre_output(torch.cat(outputs, dim=1)))  # (N, T, E)
        return self.output(self.dropout(deep)), torch.cat(attention, dim=1), hidden

    def decode(self, tgt_in: Tensor, memory: Tensor, src_mask: Tensor, cache: RNNCache | None = None) -> Tensor:
        """Target ids (N, T) -> next-token logits (N, T, V): with a cache only the newest positions, else the prefix."""
        if cache is None:
            group = tgt_in.size(0) // memory.size(0)
            hidden, keys = self.initial_state(memory, group), self.attention.key_proj(memory)
            return self._steps(tgt_in, memory, src_mask, keys, hidden)[0]
        logits, _, cache.hidden = self._steps(tgt_in, memory, src_mask, cache.keys, cache.hidden)
        cache.advance(tgt_in.size(1))
        return logits

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced logits (B, T, V) for source (B, S) and shifted target (B, T)."""
        memory, mask = self.encode(src)
        return self.decode(tgt_in, memory, mask)

    @property
    def cross_attention_layers(self) -> int:
        """How many layers `cross_attention` gives weights for: the one attention between decoder and encoder."""
        return 1

    @torch.inference_mode()
    def cross_attention(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced attention weights (layers=1, B, heads=1, T, S), as the Transformer's plots expect."""
        self.eval()
        memory, mask = self.encode(src)
        hidden, keys = self.initial_state(memory, 1), self.attention.key_proj(memory)
        weights = self._steps(tgt_in, memory, mask, keys, hidden)[1]
        return weights[None, :, None]
