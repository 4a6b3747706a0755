"""The decoding engine behind `transformer-translate` and `transformer-evaluate`: ours or CTranslate2.

Both give a translator with the same `search`/`translate`/`translate_nbest`
and the same decoding settings, so `engine=ctranslate2` compares the two with one flag.
"""

from transformer.checkpoint import Checkpoint, load_checkpoint
from transformer.config import DecodingConfig, Engine, choices
from transformer.errors import UserError
from transformer.runtime import pick_device
from transformer.translator import Translator


def load_engine(checkpoint: str, engine: Engine, decoding: DecodingConfig, device: str = "auto"):
    """(checkpoint or export, translator): `pytorch` loads a checkpoint, `ctranslate2` a transformer-export folder.

    The first item has the training `config`, a `path` and `meta`, as a `Checkpoint`.
    """
    if engine == "pytorch":
        ckpt: Checkpoint = load_checkpoint(checkpoint, pick_device(device))
        ckpt.tokenizer.tag_prefix(decoding.tag)  # refuses a tag the model lacks before any translation
        return ckpt, Translator(ckpt.model, ckpt.tokenizer, decoding)
    if engine != "ctranslate2":
        raise UserError(f"engine={engine!r} is not one of {', '.join(choices(Engine))}")
    try:
        from transformer.export.engine import CTranslate2Translator
    except ImportError as err:
        hint = "pip install -e '.[export]'"
        raise UserError(f"engine=ctranslate2 needs the ctranslate2 package ({err}): {hint}") from err
    translator = CTranslate2Translator(checkpoint, decoding, device=device)
    translator.tokenizer.tag_prefix(decoding.tag)
    return translator.export, translator
