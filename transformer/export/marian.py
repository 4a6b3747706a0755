"""Export to a Hugging Face MarianMT folder that `MarianMTModel` and `MarianTokenizer` load as they are.

MarianMT is our post-norm Transformer: scaled embeddings plus a sinusoidal
table, post-norm sub-layers, no final norms, ReLU when asked. What differs is
mapped exactly:
- its sinusoids put sin in the first half of the dimensions and cos in the
  second, ours alternate them; permuting the model dimension (our 2i -> i,
  2i+1 -> D/2+i) in every weight that reads or writes the residual stream turns
  its built-in table into ours, and LayerNorm does not mind the order;
- our keys have no bias: theirs is zero;
- decoding starts from our BOS (`decoder_start_token_id`), and pad and BOS are
  suppressed after the softmax, as ours does.
A pre-norm model has no MarianMT counterpart (it has no pre-norm switch) and is refused.
"""

import json
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf
from transformers import GenerationConfig, MarianConfig, MarianMTModel

from transformer.core.errors import UserError
from transformer.core.special_ids import BOS_ID, EOS_ID, PAD_ID
from transformer.core.strategies import STRATEGIES
from transformer.export.weights import named_weights
from transformer.runs.checkpoint import Checkpoint

# Our module names -> MarianMT's, inside a layer.
ENCODER_LAYER = {
    "self_attn": "self_attn",
    "attn_block.norm": "self_attn_layer_norm",
    "ff_block.norm": "final_layer_norm",
}
DECODER_LAYER = {
    "self_attn": "self_attn",
    "cross_attn": "encoder_attn",
    "self_block.norm": "self_attn_layer_norm",
    "cross_block.norm": "encoder_attn_layer_norm",
    "ff_block.norm": "final_layer_norm",
}
ATTENTION = [f"{proj}.{leaf}" for proj in ("q_proj", "k_proj", "v_proj", "out_proj") for leaf in ("weight", "bias")]
READS = ("q_proj.weight", "k_proj.weight", "v_proj.weight", "fc1.weight", "embed_tokens.weight", "lm_head.weight")
WRITES = ("out_proj.weight", "fc2.weight")
README = """# {name}: a Hugging Face MarianMT export of a transformer-nmt checkpoint

Exported from `{source}` (step {step}) with `transformer-export format=marian`.

```python
from transformers import MarianMTModel, MarianTokenizer

tokenizer = MarianTokenizer.from_pretrained("{name}")
model = MarianMTModel.from_pretrained("{name}")
batch = tokenizer(["Un chien court dans le parc."], return_tensors="pt", padding=True)
print(tokenizer.batch_decode(model.generate(**batch, num_beams=5), skip_special_tokens=True))
```
"""


def check_marian(model_cfg: DictConfig) -> None:
    """Refuse what MarianMT cannot hold, naming the setting."""
    if model_cfg.pre_norm:
        raise UserError(
            "format=marian cannot hold this model: it is pre-norm (model.pre_norm=true) and Hugging Face's MarianMT "
            "is post-norm only; export it with format=ctranslate2, or train with model.pre_norm=false"
        )


def marian_config(ckpt: Checkpoint) -> MarianConfig:
    """The MarianConfig of the checkpoint's model and vocabularies."""
    m, tok = ckpt.config.model, ckpt.tokenizer
    return MarianConfig(
        vocab_size=tok.src_vocab_size,
        decoder_vocab_size=tok.tgt_vocab_size,
        share_encoder_decoder_embeddings=bool(m.tie_embeddings and tok.joint),
        tie_word_embeddings=bool(m.tie_embeddings),
        d_model=m.d_model,
        encoder_layers=m.n_encoder_layers,
        decoder_layers=m.n_decoder_layers,
        encoder_attention_heads=m.n_heads,
        decoder_attention_heads=m.n_heads,
        encoder_ffn_dim=m.d_ff,
        decoder_ffn_dim=m.d_ff,
        activation_function="relu",
        max_position_embeddings=m.max_positions,
        scale_embedding=True,
        dropout=m.dropout,
        attention_dropout=m.attention_dropout,
        activation_dropout=m.activation_dropout,
        pad_token_id=PAD_ID,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
        decoder_start_token_id=BOS_ID,
        forced_eos_token_id=None,  # ours ends a hypothesis at its length limit as it stands
    )


def _marian_names(n_encoder: int, n_decoder: int) -> dict[str, str]:
    """Our weight name -> MarianMT's (the source embedding's second name, `model.shared`, aside)."""
    names = {
        "src_embed.weight": "model.encoder.embed_tokens.weight",
        "tgt_embed.weight": "model.decoder.embed_tokens.weight",
        "output.weight": "lm_head.weight",
    }
    for side, count, layer_map in (("encoder", n_encoder, ENCODER_LAYER), ("decoder", n_decoder, DECODER_LAYER)):
        for i in range(count):
            for ours, theirs in {**layer_map, "ff.fc1": "fc1", "ff.fc2": "fc2"}.items():
                leaves = ATTENTION if ours.endswith("attn") else ("weight", "bias")
                for leaf in leaves:
                    names[f"{side}.{i}.{ours}.{leaf}"] = f"model.{side}.layers.{i}.{theirs}.{leaf}"
    return names


def marian_state(ckpt: Checkpoint) -> dict[str, torch.Tensor]:
    """MarianMT's state dict holding our weights, model dimension permuted so its sinusoids are ours."""
    m = ckpt.config.model
    weights = named_weights(ckpt.model)
    perm = torch.cat([torch.arange(0, m.d_model, 2), torch.arange(1, m.d_model, 2)])  # Marian dim j <- our perm[j]
    state = {}
    for ours, theirs in _marian_names(m.n_encoder_layers, m.n_decoder_layers).items():
        if ours not in weights:  # the key projections' bias: ours has none
            state[theirs] = torch.zeros(weights[ours.replace("bias", "weight")].size(0))
            continue
        tensor = weights[ours]
        if theirs.endswith(READS):
            tensor = tensor[:, perm]
        elif theirs.endswith(WRITES) or theirs.endswith(("out_proj.bias", "fc2.bias", "norm.weight", "norm.bias")):
            tensor = tensor[perm]
        state[theirs] = tensor.contiguous()
    if m.tie_embeddings and ckpt.tokenizer.joint:
        state["model.shared.weight"] = state["model.encoder.embed_tokens.weight"]
    return state


def _write_tokenizer(ckpt: Checkpoint, directory: Path) -> None:
    """source.spm, target.spm, vocab.json (and target_vocab.json) and tokenizer_config.json for MarianTokenizer."""
    tok, data = ckpt.tokenizer, ckpt.config.data
    (directory / "source.spm").write_bytes(tok.src_model)
    (directory / "target.spm").write_bytes(tok.tgt_model)
    for name, processor in (("vocab.json", tok.src), ("target_vocab.json", None if tok.joint else tok.tgt)):
        if processor is not None:
            vocab = {processor.id_to_piece(i): i for i in range(processor.get_piece_size())}
            (directory / name).write_text(json.dumps(vocab, ensure_ascii=False, indent=1), encoding="utf-8")
    config = dict(
        tokenizer_class="MarianTokenizer",
        source_lang=data.src_lang,
        target_lang=data.tgt_lang,
        separate_vocabs=not tok.joint,
        bos_token=tok.tgt.id_to_piece(BOS_ID),
        eos_token=tok.tgt.id_to_piece(EOS_ID),
        pad_token=tok.tgt.id_to_piece(PAD_ID),
        unk_token="<unk>",
        model_max_length=int(ckpt.config.model.max_positions) - 1,
    )
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")


def export_marian(ckpt: Checkpoint, directory: Path, name: str) -> None:
    """Write a folder that MarianMTModel/MarianTokenizer.from_pretrained load; the README calls it `name`."""
    check_marian(ckpt.config.model)
    model = MarianMTModel(marian_config(ckpt)).eval()
    missing, unexpected = model.load_state_dict(marian_state(ckpt), strict=False)
    left = [k for k in missing if not k.endswith("embed_positions.weight") and k != "final_logits_bias"]
    if left or unexpected:
        raise RuntimeError(f"MarianMT weights not filled: {left}, unexpected: {unexpected}")
    d = ckpt.config.decoding
    model.generation_config = GenerationConfig(
        decoder_start_token_id=BOS_ID,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
        pad_token_id=PAD_ID,
        suppress_tokens=[PAD_ID, BOS_ID],
        num_beams=int(d.beam_size) if "beam_size" in STRATEGIES[d.strategy].reads() else 1,
        length_penalty=float(d.length_penalty),
        max_length=int(ckpt.config.model.max_positions) - 1,
    )
    model.save_pretrained(directory)
    _write_tokenizer(ckpt, directory)
    (directory / "transformer_config.yaml").write_text(OmegaConf.to_yaml(ckpt.config), encoding="utf-8")
    (directory / "README.md").write_text(
        README.format(name=name, source=ckpt.path, step=ckpt.meta.get("step", "?")), encoding="utf-8"
    )
