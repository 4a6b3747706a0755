import pytest
import torch

from tests.conftest import tiny_model
from transformer.models.transformer import Transformer


def test_output_shapes_and_dtype():
    model = Transformer(50, 60, d_model=32, n_heads=4, n_encoder_layers=1, n_decoder_layers=2, d_ff=64)
    logits = model(torch.randint(3, 50, (3, 7)), torch.randint(3, 60, (3, 5)))
    assert logits.shape == (3, 5, 60) and logits.dtype == torch.float32


def test_embeddings_are_tied_when_joint():
    model = tiny_model(joint_vocab=True)
    assert model.output.weight is model.tgt_embed.weight is model.src_embed.weight
    separate = tiny_model(joint_vocab=False)
    assert separate.output.weight is separate.tgt_embed.weight
    assert separate.src_embed.weight is not separate.tgt_embed.weight


def test_post_norm_variant_runs_and_differs():
    pre, post = tiny_model(pre_norm=True), tiny_model(pre_norm=False)
    src, tgt = torch.randint(3, 40, (2, 5)), torch.randint(3, 40, (2, 4))
    assert post(src, tgt).shape == pre(src, tgt).shape
    assert not torch.allclose(post(src, tgt), pre(src, tgt))


def test_keyword_fields_equal_a_model_config():
    from transformer.core.config import ModelConfig

    fields = dict(d_model=32, n_heads=4, n_encoder_layers=1, n_decoder_layers=2, d_ff=64, dropout=0.0, pre_norm=False)
    by_keywords = Transformer(src_vocab_size=50, tgt_vocab_size=60, pad_id=0, **fields)
    by_config = Transformer(50, 60, ModelConfig(**fields))
    assert by_keywords.config == by_config.config == ModelConfig(**fields)
    shapes = {name: t.shape for name, t in by_config.state_dict().items()}
    assert {name: t.shape for name, t in by_keywords.state_dict().items()} == shapes
    assert len(by_keywords.decoder) == 2 and by_keywords.encoder_norm.__class__.__name__ == "Identity"
    with pytest.raises(TypeError):
        Transformer(50, 60, attn_dropout=0.1)  # not a ModelConfig field


def test_attention_is_plain_linear_layers_without_a_key_bias():
    model = tiny_model()
    names = set(model.state_dict())
    assert {"encoder.0.self_attn.q_proj.weight", "decoder.1.cross_attn.k_proj.weight"} <= names
    assert "decoder.1.cross_attn.k_proj.bias" not in names and "encoder.0.self_attn.v_proj.bias" in names
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert all(type(m) is torch.nn.Linear for m in linears) and len(linears) == 2 * (4 + 2) + 2 * (8 + 2) + 1


def test_model_yaml_files_build_what_they_say():
    from transformer.core import presets
    from transformer.core.config import ModelConfig

    def size(name):
        return Transformer(8000, 8000, presets.compose("model", name), joint_vocab=True)

    small, base = size("small"), size("base")
    assert small.config == ModelConfig()  # small is the defaults
    assert round(sum(p.numel() for p in small.parameters()) / 1e6, 1) == 7.6  # small.yaml's comment
    assert base.config.d_model == 512 and not base.config.pre_norm and len(base.encoder) == 6


def fused_like_old_checkpoints(state: dict) -> dict:
    """`state` as written before q/k/v were separate: one (3D, D) `in_proj`, `q_bias`, `v_bias`."""
    old = {}
    for name, tensor in state.items():
        module, _, leaf = name.rpartition(".")
        if module.endswith("q_proj"):
            attn = module.removesuffix(".q_proj")
            if leaf == "weight":
                parts = [state[f"{attn}.{p}_proj.weight"] for p in "qkv"]
                old[f"{attn}.in_proj"] = torch.cat(parts)
            else:
                old[f"{attn}.q_bias"], old[f"{attn}.v_bias"] = tensor, state[f"{attn}.v_proj.bias"]
        elif not module.endswith(("k_proj", "v_proj")):
            old[name] = tensor
    return old


def test_old_fused_checkpoints_are_converted_on_load():
    from transformer.runs.checkpoint import convert_legacy_weights

    trained, fresh = tiny_model(seed=1), tiny_model(seed=2)
    old = fused_like_old_checkpoints(trained.state_dict())
    assert "decoder.0.cross_attn.in_proj" in old and not any("k_proj" in name for name in old)
    fresh.load_state_dict(convert_legacy_weights(old))
    src, tgt = torch.randint(3, 40, (2, 6)), torch.randint(3, 40, (2, 5))
    torch.testing.assert_close(fresh(src, tgt), trained(src, tgt))
