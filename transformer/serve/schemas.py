"""The request bodies: strict types, no unknown keys, bounded decoding settings (each strategy's options that a
request may set, with their bounds plus the service's own, from `transformer.core.strategies.STRATEGIES`)."""

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator, model_validator

from transformer.core.config import TAG_PATTERN
from transformer.core.strategies import CONTROLS, STRATEGIES, Option, options

MAX_PHRASES, MAX_PHRASE_CHARS = 32, 200  # what a request may suppress; each phrase, a constraint too
MAX_CONSTRAINTS = 8  # a request's constraint phrases


def whole(value: object) -> object:
    """3.0 as 3: JSON (and its schema's "integer") does not tell them apart; 3.5 stays a float and is refused."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


class _Settings(BaseModel):
    """What every request's decoding settings share: strict types, no unknown keys, `given`."""

    model_config = ConfigDict(extra="forbid", strict=True)

    def given(self) -> dict:
        """The settings the request gave, seed excepted."""
        return self.model_dump(include=set(DecodingOptions.model_fields) - {"seed"}, exclude_none=True)


def _field(strategy: str, option: Option) -> tuple[Any, Any]:
    """A request's field for a strategy's option: its type or allowed values, its bounds and the service's own."""
    kind = Literal[option.choices] if option.choices else type(option.default)
    bounded = Field(None, **option.bounds, **(option.request or {}), description=f"{strategy}: {option.help}")
    return kind | None, bounded


_OWNER = {name: entry.name for entry in STRATEGIES.values() for name in entry.options}
_OFFERED = {name: option for name, option in options().items() if option.request is not None}
_FLAGS = {entry.flag: entry for entry in STRATEGIES.values() if entry.flag}
DecodingOptions = create_model(
    "DecodingOptions",
    __base__=_Settings,
    __doc__="Per-request decoding settings; each left out (null) takes the server's default.",
    __validators__={
        "_whole": field_validator(
            "alternatives", *(n for n, o in _OFFERED.items() if type(o.default) is int), mode="before"
        )(whole)
    },
    strategy=(Literal[tuple(STRATEGIES)] | None, Field(None, description="the decoding strategy")),
    **{name: _field(_OWNER[name], option) for name, option in _OFFERED.items()},
    **{flag: (bool | None, Field(None, description=f"{entry.name}: {entry.help}")) for flag, entry in _FLAGS.items()},
    tag=(
        str | None,
        Field(
            None,
            pattern=f"^({TAG_PATTERN})?$",
            description='translate "as" the training corpus with this tag; "" = none',
        ),
    ),
    suppress=(
        list[Annotated[str, Field(min_length=1, max_length=MAX_PHRASE_CHARS)]] | None,
        Field(None, max_length=MAX_PHRASES, description=CONTROLS["suppress"]),
    ),
    ban_unk=(bool | None, Field(None, description="never generate the unknown piece")),
    alternatives=(int | None, Field(None, ge=0, le=16, description=CONTROLS["alternatives"])),
)


ONE_OF_TEXT_OR_TEXTS = [
    {"required": ["text"], "properties": {"text": {"type": "string"}}},
    {"required": ["texts"], "properties": {"texts": {"type": "array"}}},
]


class TranslateRequest(DecodingOptions):
    """`text` (one text) or `texts` (several); each is split into sentences unless `split` is false."""

    model_config = ConfigDict(json_schema_extra={"oneOf": ONE_OF_TEXT_OR_TEXTS})

    text: str | None = Field(None, description="a text; each line is a paragraph")
    texts: list[str] | None = Field(None, description="several texts, translated in one request")
    split: bool = Field(True, description="split each line into sentences and join the translations back")
    target_prefix: str | None = Field(None, description=f"with text, one sentence (not split): {CONTROLS['prefix']}")
    alignments: bool = Field(False, description="each sentence's word alignment too (Pharaoh i-j, 0-based)")
    markup: Literal["none", "xml"] = Field(
        "none", description="xml: inline tags and {placeholders} carried across; each line is one sentence"
    )
    constraints: list[Annotated[str, Field(min_length=1, max_length=MAX_PHRASE_CHARS)]] | None = Field(
        None, max_length=MAX_CONSTRAINTS, description=f"with text, one sentence (not split): {CONTROLS['constraints']}"
    )

    @model_validator(mode="after")
    def one_of_text_or_texts(self) -> "TranslateRequest":
        if (self.text is None) == (self.texts is None):
            raise ValueError("give either text or texts")
        if (self.target_prefix is not None or self.constraints is not None) and self.text is None:
            raise ValueError("target_prefix and constraints go with text (one sentence), not texts")
        if self.markup != "none" and (self.target_prefix is not None or self.constraints is not None):
            raise ValueError("markup goes without target_prefix and constraints")
        return self

    def all_texts(self) -> list[str]:
        return [self.text] if self.text is not None else list(self.texts or [])


class AttentionRequest(DecodingOptions):
    """One sentence to translate and show the cross-attention of."""

    text: str = Field(description="one sentence")
    layer: int | None = Field(None, ge=-64, lt=64, description="decoder layer (0-based, -1 = last); null = mean")

    _whole_layer = field_validator("layer", mode="before")(whole)


class Pair(BaseModel):
    """A source sentence and a given translation of it."""

    model_config = ConfigDict(extra="forbid", strict=True)

    source: str = Field(description="one source sentence")
    target: str = Field(description="a translation of it, to score")


class ScoreRequest(_Settings):
    """Given translations to score as the model's beam scores its own (one teacher-forced pass)."""

    pairs: list[Pair] = Field(min_length=1, description="the pairs to score, at most serve.max_texts")
    tokens: bool = Field(False, description="each token's log-probability too, EOS last")
    alignments: bool = Field(False, description="each pair's word alignment too (Pharaoh i-j, 0-based)")
    length_penalty: float | None = DecodingOptions.model_fields["length_penalty"]
    tag: str | None = DecodingOptions.model_fields["tag"]

    def given(self) -> dict:
        """The decoding settings the request gave."""
        return self.model_dump(include={"length_penalty", "tag"}, exclude_none=True)
