"""Export to CTranslate2 through its own spec API (`TransformerSpec` filled by a `Converter`).

CTranslate2's Transformer is ours layer for layer: scaled embeddings plus a
position table (ours is exported as it is: CTranslate2's built-in sinusoids
lay sin and cos out in halves), pre- or post-norm sub-layers, ReLU
feed-forward. Self-attention takes one fused (3D, D) query/key/value
projection, cross-attention a query and a fused (2D, D) key/value projection;
our keys have no bias, so theirs is zero. Tied embeddings stay tied: the
converter stores equal tensors once.
"""

from pathlib import Path

import torch
from ctranslate2.converters import Converter
from ctranslate2.specs import common_spec, transformer_spec
from omegaconf import OmegaConf

from transformer.core import presets
from transformer.core.precision import FLOAT32_WEIGHTS
from transformer.core.special_ids import BOS_ID, EOS_ID, UNK_ID
from transformer.core.strategies import STRATEGIES
from transformer.decoding.ctranslate2_engine import CONFIG_FILE
from transformer.export.weights import named_weights
from transformer.runs.checkpoint import Checkpoint

LAYER_NORM_EPS = 1e-5  # torch.nn.LayerNorm's default, which the model uses
# The README's beam patience: 2 came within 0.1 BLEU of ours on `make train`'s model (1: 0.13 below), docs/export.md
README_PATIENCE = 2.0

README = """# {name}: a CTranslate2 export of a transformer-nmt checkpoint

Exported from `{source}` (step {step}) with `transformer-export format=ctranslate2`, weights {quantization}.
SentencePiece model(s): {spm}. The encoder input is the source pieces; CTranslate2 appends `</s>` itself.

`translate` gives what `transformer-translate` gives (beam {beam_size}; `beam_size=1`: greedy). Each output is at most
{a} × (source pieces + 1) + {b} pieces: CTranslate2 takes one limit per call (its default, 256, lets a weak model
repeat a piece that far), so each batch of similar lengths runs to its largest limit and each output is cut to its own.
`patience={patience:g}` lets a beam go on after its first {beam_size} finished hypotheses, as ours goes on while a live
one can still win (CTranslate2's default, 1, stops earlier and costs about 0.1 BLEU).

```python
import ctranslate2
import sentencepiece as spm

translator = ctranslate2.Translator("{name}", device="cpu")
src = spm.SentencePieceProcessor(model_file="{name}/{src_spm}")
tgt = spm.SentencePieceProcessor(model_file="{name}/{tgt_spm}")


def translate(sentences, beam_size={beam_size}, batch_size=32):
    pieces = src.encode(sentences, out_type=str)
    limits = [min(int({a} * (len(p) + 1) + {b}), {cap}) for p in pieces]
    order = sorted(range(len(pieces)), key=lambda i: len(pieces[i]))
    out = [""] * len(pieces)
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        results = translator.translate_batch(
            [pieces[i] for i in batch],
            beam_size=beam_size,
            length_penalty={length_penalty},
            patience={patience:g},
            max_decoding_length=max(limits[i] for i in batch),
        )
        for i, result in zip(batch, results):
            out[i] = tgt.decode(result.hypotheses[0][: limits[i]])
    return out


print(translate(["Un chien court dans le parc."]))
```

Or with this project: `transformer-translate checkpoint={name} engine=ctranslate2 sentences='[...]'`.
"""


def _linear(spec: common_spec.LinearSpec, w: dict[str, torch.Tensor], *names: str, bias: bool = True) -> None:
    """Fill `spec` with the named linear layers stacked along the output axis (a missing bias is zero)."""
    spec.weight = torch.cat([w[f"{n}.weight"] for n in names]).numpy()
    if bias:
        zeros = [torch.zeros(w[f"{n}.weight"].size(0)) for n in names]
        spec.bias = torch.cat([w.get(f"{n}.bias", z) for n, z in zip(names, zeros)]).numpy()


def _norm(spec: common_spec.LayerNormSpec, w: dict[str, torch.Tensor], name: str) -> None:
    spec.gamma, spec.beta = w[f"{name}.weight"].numpy(), w[f"{name}.bias"].numpy()


def _ffn(spec, w: dict[str, torch.Tensor], layer: str) -> None:
    _norm(spec.layer_norm, w, f"{layer}.ff_block.norm")
    _linear(spec.linear_0, w, f"{layer}.ff.fc1")
    _linear(spec.linear_1, w, f"{layer}.ff.fc2")


def _self_attention(spec, w: dict[str, torch.Tensor], attn: str, norm: str) -> None:
    _norm(spec.layer_norm, w, norm)
    _linear(spec.linear[0], w, f"{attn}.q_proj", f"{attn}.k_proj", f"{attn}.v_proj")
    _linear(spec.linear[1], w, f"{attn}.out_proj")


def _cross_attention(spec, w: dict[str, torch.Tensor], attn: str, norm: str) -> None:
    _norm(spec.layer_norm, w, norm)
    _linear(spec.linear[0], w, f"{attn}.q_proj")
    _linear(spec.linear[1], w, f"{attn}.k_proj", f"{attn}.v_proj")
    _linear(spec.linear[2], w, f"{attn}.out_proj")


def _pieces(processor) -> list[str]:
    return [processor.id_to_piece(i) for i in range(processor.get_piece_size())]


class CheckpointConverter(Converter):
    """CTranslate2 converter for a loaded checkpoint of this project."""

    def __init__(self, ckpt: Checkpoint):
        self.ckpt = ckpt

    def _load(self) -> transformer_spec.TransformerSpec:
        m, tokenizer = self.ckpt.config.model, self.ckpt.tokenizer
        spec = transformer_spec.TransformerSpec.from_config(
            (m.n_encoder_layers, m.n_decoder_layers), m.n_heads, pre_norm=m.pre_norm
        )
        w = named_weights(self.ckpt.model)
        for spec_part, embed in ((spec.encoder, "src_embed"), (spec.decoder, "tgt_embed")):
            embeddings = spec_part.embeddings[0] if isinstance(spec_part.embeddings, list) else spec_part.embeddings
            embeddings.weight = w[f"{embed}.weight"].numpy()
            spec_part.position_encodings.encodings = w["positions"].numpy()
        if m.pre_norm:
            _norm(spec.encoder.layer_norm, w, "encoder_norm")
            _norm(spec.decoder.layer_norm, w, "decoder_norm")
        for i, layer in enumerate(spec.encoder.layer):
            _self_attention(layer.self_attention, w, f"encoder.{i}.self_attn", f"encoder.{i}.attn_block.norm")
            _ffn(layer.ffn, w, f"encoder.{i}")
        for i, layer in enumerate(spec.decoder.layer):
            _self_attention(layer.self_attention, w, f"decoder.{i}.self_attn", f"decoder.{i}.self_block.norm")
            _cross_attention(layer.attention, w, f"decoder.{i}.cross_attn", f"decoder.{i}.cross_block.norm")
            _ffn(layer.ffn, w, f"decoder.{i}")
        _linear(spec.decoder.projection, w, "output", bias=False)
        tgt = tokenizer.tgt
        spec.config.bos_token, spec.config.eos_token = tgt.id_to_piece(BOS_ID), tgt.id_to_piece(EOS_ID)
        spec.config.unk_token, spec.config.decoder_start_token = tgt.id_to_piece(UNK_ID), tgt.id_to_piece(BOS_ID)
        spec.config.add_source_eos = True  # our encoder reads the source ids then EOS
        spec.config.layer_norm_epsilon = LAYER_NORM_EPS
        spec.register_source_vocabulary(_pieces(tokenizer.src))
        spec.register_target_vocabulary(_pieces(tgt))
        return spec


def export_ctranslate2(ckpt: Checkpoint, directory: Path, name: str, quantization: str = FLOAT32_WEIGHTS) -> None:
    """Write a CTranslate2 model folder (model.bin, vocabularies, config), the SentencePiece model(s), the
    training config and a README that calls the folder `name`."""
    CheckpointConverter(ckpt).convert(
        str(directory), quantization=None if quantization == FLOAT32_WEIGHTS else quantization, force=True
    )
    ckpt.tokenizer.save(directory)
    (directory / CONFIG_FILE).write_text(OmegaConf.to_yaml(ckpt.config), encoding="utf-8")
    spm = ["spm.model"] * 2 if ckpt.tokenizer.joint else ["spm.src.model", "spm.tgt.model"]
    (directory / "README.md").write_text(
        README.format(
            name=name,
            source=ckpt.path,
            step=ckpt.meta.get("step", "?"),
            quantization="float32" if quantization == FLOAT32_WEIGHTS else quantization,
            spm=", ".join(sorted(set(spm))),
            src_spm=spm[0],
            tgt_spm=spm[1],
            **readme_settings(int(ckpt.config.model.max_positions)),
        ),
        encoding="utf-8",
    )


def readme_settings(max_positions: int) -> dict:
    """The README's `translate` settings: `transformer-translate`'s search (the beam preset), its output limit
    a·(pieces + 1) + b capped at `cap`, and `README_PATIENCE`."""
    beam = presets.compose("decoding", "beam")
    arguments = STRATEGIES["beam"].ctranslate2(beam, 0)
    a, b, cap = beam.max_len_a, beam.max_len_b, max_positions - 1  # as `SearchOptions.output_limits`
    settings = dict(beam_size=arguments["beam_size"], length_penalty=arguments["length_penalty"])
    return settings | dict(patience=README_PATIENCE, a=a, b=b, cap=cap)
