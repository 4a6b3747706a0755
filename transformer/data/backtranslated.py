"""A back-translated corpus folder (`transformer-backtranslate`'s output): its manifest, which records the direction
and whether the job finished, and the check that refuses such a folder for another direction or while unfinished."""

import json
from pathlib import Path

from transformer.core.errors import UserError

MANIFEST = "backtranslation.json"


def read_manifest(folder: Path) -> dict | None:
    """The manifest of a back-translation folder, or None when the folder holds none."""
    path = folder / MANIFEST
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise UserError(
            f"{path} cannot be read ({err}); run transformer-backtranslate again into a new folder"
        ) from None


def check_corpus_folder(folder: Path, src_lang: str, tgt_lang: str, key: str) -> None:
    """Refuse a back-translation folder for another direction than src_lang→tgt_lang, or one not finished."""
    manifest = read_manifest(folder)
    if manifest is None:
        return
    made = f"{manifest['src_lang']}→{manifest['tgt_lang']}"
    if made != f"{src_lang}→{tgt_lang}":
        raise UserError(
            f"{key}={folder} is a back-translated {made} corpus but this run trains {src_lang}→{tgt_lang}; "
            f"back-translate {tgt_lang} text with a {tgt_lang}→{src_lang} model instead"
        )
    if not manifest["complete"]:
        raise UserError(f"{key}={folder} is an unfinished back-translation; run transformer-backtranslate again")
