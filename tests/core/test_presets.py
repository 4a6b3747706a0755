"""`core.presets`: a preset of configs/ composed through Hydra into its typed config, as a command reads it."""

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from transformer.core import presets
from transformer.core.config import DecodingConfig, ModelConfig
from transformer.core.errors import UserError


@pytest.mark.parametrize("group", ["model", "decoding"])
def test_every_preset_composes_as_the_training_command_reads_it(group):
    assert presets.names(group)
    for name in presets.names(group):
        with initialize_config_dir(config_dir=presets.CONFIG_DIR, version_base="1.3"):
            expected = compose("train", overrides=[f"{group}={name}"])[group]
        assert OmegaConf.structured(presets.compose(group, name)) == expected, name


def test_a_preset_is_its_schemas_dataclass_with_the_overrides_applied():
    beam = presets.compose("decoding", "beam", ["beam_size=3", "length_penalty=0.6"])
    assert isinstance(beam, DecodingConfig) and (beam.strategy, beam.beam_size, beam.length_penalty) == ("beam", 3, 0.6)
    rnn = presets.compose("model", "rnn")
    assert isinstance(rnn, ModelConfig) and rnn.family == "rnn" and rnn.rnn.cell == "gru"


@pytest.mark.parametrize(
    ("name", "overrides", "message"),
    [
        ("nope", [], "names no preset in configs/decoding"),
        ("beam", ["beam_sise=3"], "beam_sise"),
        ("beam", ["beam_size=many"], "beam_size"),
    ],
)
def test_a_wrong_preset_or_setting_is_a_user_error(name, overrides, message):
    with pytest.raises(UserError, match=message):
        presets.compose("decoding", name, overrides)
