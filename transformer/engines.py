"""The decoding engine behind `transformer-translate` and `transformer-evaluate`: ours or CTranslate2.

Both give a translator with the same `search`/`translate`/`translate_nbest`
and the same decoding settings, so `engine=ctranslate2` compares the two with one flag.
"""

from transformer.checkpoint import Checkpoint
from transformer.config import DecodingConfig, Engine, choices
from transformer.ensemble import checkpoint_paths, load_models
from transformer.errors import UserError
from transformer.runtime import pick_device
from transformer.translator import Translator


def load_engine(checkpoint, engine: Engine, decoding: DecodingConfig, device: str = "auto"):
    """(checkpoint or export, translator): `pytorch` loads a checkpoint, or several as an ensemble
    (`transformer.ensemble`), `ctranslate2` a transformer-export folder.

    The first item has the training `config`, a `path` and `meta`, as a `Checkpoint` (an ensemble's first).
    """
    if engine == "pytorch":
        ckpt: Checkpoint
        ckpt, model = load_models(checkpoint, pick_device(device))
        ckpt.tokenizer.tag_prefix(decoding.tag)  # refuses a tag the model lacks before any translation
        return ckpt, Translator(model, ckpt.tokenizer, decoding)
    if engine != "ctranslate2":
        raise UserError(f"engine={engine!r} is not one of {', '.join(choices(Engine))}")
    paths = checkpoint_paths(checkpoint)
    if len(paths) > 1:
        raise UserError("engine=ctranslate2 decodes one export; give one checkpoint=FOLDER (ensembles: engine=pytorch)")
    checkpoint = paths[0]
    try:
        from transformer.export.engine import CTranslate2Translator
    except ImportError as err:
        hint = "pip install -e '.[export]'"
        raise UserError(f"engine=ctranslate2 needs the ctranslate2 package ({err}): {hint}") from err
    translator = CTranslate2Translator(checkpoint, decoding, device=device)
    translator.tokenizer.tag_prefix(decoding.tag)
    return translator.export, translator
