"""A TMX 1.4 translation memory, parsed as a stream."""

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree

from transformer.core.config import SourceConfig
from transformer.core.errors import UserError
from transformer.data.sources.base import Source, same_language
from transformer.data.sources.streams import READ_ERRORS, open_text, plain_suffix, read_error

XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
NATIVE_CODE = {"bpt", "ept", "ph", "it", "ut"}  # TMX inline elements that hold the original format's code, not text


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _segment_text(element: ElementTree.Element) -> str:
    """A <seg>'s text: the text of <hi> and <sub> kept, the native code of <bpt>, <ept>, <ph>, <it>, <ut> dropped."""
    parts = [element.text or ""]
    for child in element:
        if _local(child.tag) not in NATIVE_CODE:
            parts.append(_segment_text(child))
        parts.append(child.tail or "")
    return " ".join("".join(parts).split())


class TmxFile(Source):
    """A TMX 1.4 file, parsed as a stream: each <tu> with a <tuv> of both languages (`xml:lang` or `lang`, any
    region: fr-FR is fr) is a pair; a unit without both is counted as skipped["missing language"]."""

    given_as = "{key}.path=FILE.tmx"

    @classmethod
    def claims(cls, cfg: SourceConfig) -> bool:
        return bool(cfg.path) and plain_suffix(cfg.path) == ".tmx"

    def _units(self, seen: set[str]) -> Iterator[dict[str, str]]:
        """Each <tu>'s segments by language code; every code met goes to `seen`. Parsed units are cleared."""
        path = Path(self.cfg.path)
        with open_text(path) as f:
            body = None
            try:
                for event, element in ElementTree.iterparse(f, events=("start", "end")):
                    tag = _local(element.tag)
                    if event == "start":
                        body = element if tag == "body" else body
                    elif tag == "tu":
                        unit = {}
                        for tuv in (child for child in element if _local(child.tag) == "tuv"):
                            code = tuv.get(XML_LANG) or tuv.get("lang") or ""
                            seg = next((child for child in tuv if _local(child.tag) == "seg"), None)
                            seen.add(code)
                            if seg is not None:
                                unit.setdefault(code, _segment_text(seg))
                        yield unit
                        if body is not None:
                            body.clear()  # the parsed units: a file of any size holds one unit in memory at a time
            except ElementTree.ParseError as err:
                raise UserError(f"{self.key}: {path}:{err.position[0]}: not well-formed XML ({err})") from None
            except READ_ERRORS as err:
                raise read_error(path, err) from None

    def _check_languages(self, seen: set[str], langs: tuple[str, ...]) -> None:
        for lang in langs:
            if not any(same_language(code, lang) for code in seen):
                held = ", ".join(sorted(seen - {""})) or "none"
                raise self.error(
                    f"no unit holds language {lang!r} (its languages: {held}); set data.src_lang and data.tgt_lang "
                    "to two of them"
                )

    def _text(self, unit: dict[str, str], lang: str) -> str | None:
        return next((text for code, text in unit.items() if same_language(code, lang)), None)

    def rows(self, skipped: Counter) -> Iterator[tuple[str, str]]:
        seen: set[str] = set()
        for unit in self._units(seen):
            src, tgt = (self._text(unit, lang) for lang in self.langs)
            if src is None or tgt is None:
                skipped["missing language"] += 1
                continue
            yield src, tgt
        self._check_languages(seen, self.langs)

    def side(self, lang: str) -> Iterator[str]:
        self.side_index(lang)
        seen: set[str] = set()
        for unit in self._units(seen):
            text = self._text(unit, lang)
            if text is not None:
                yield text
        self._check_languages(seen, (lang,))
