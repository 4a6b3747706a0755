"""The one constructor of a model from its settings, for either family: `build_model`."""

from torch import nn

from transformer.core.config import AttentionConfig, ModelConfig, RNNConfig
from transformer.models.interface import Vocabularies
from transformer.models.rnn import RNNModel
from transformer.models.transformer import Transformer

FAMILIES: dict[str, type[nn.Module]] = {"transformer": Transformer, "rnn": RNNModel}  # config.Family -> its class


def model_config(cfg) -> ModelConfig:
    """A ModelConfig from itself or a mapping of its fields (a checkpoint's; old ones may lack its nested parts)."""
    if isinstance(cfg, ModelConfig):
        return cfg
    fields = dict(cfg)
    fields["rnn"] = RNNConfig(**fields.get("rnn", {}))
    fields["attention"] = AttentionConfig(**fields.get("attention", {}))
    return ModelConfig(**fields)


def build_model(cfg: ModelConfig, tokenizer: Vocabularies) -> nn.Module:
    """The model (Transformer or, for `family: rnn`, RNNModel) that `cfg` describes, sized for `tokenizer`."""
    config = model_config(cfg)
    if config.family not in FAMILIES:
        raise ValueError(f"unknown model family {config.family!r}")
    family = FAMILIES[config.family]
    return family(tokenizer.src_vocab_size, tokenizer.tgt_vocab_size, config, joint_vocab=tokenizer.joint)
