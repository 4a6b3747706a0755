"""The request bodies: strict types, no unknown keys, bounded decoding settings (the bounds of `DecodingConfig`,
plus the service's own upper limits)."""

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from transformer.config import TAG_PATTERN, DecodingConfig, bounds


def whole(value: object) -> object:
    """3.0 as 3: JSON (and its schema's "integer") does not tell them apart; 3.5 stays a float and is refused."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


class DecodingOptions(BaseModel):
    """Per-request decoding settings; each left out (null) takes the server's default."""

    model_config = ConfigDict(extra="forbid", strict=True)

    beam_size: int | None = Field(
        None, **bounds(DecodingConfig, "beam_size"), le=16, description="beam search with this beam"
    )
    n_best: int | None = Field(
        None, **bounds(DecodingConfig, "n_best"), le=16, description="hypotheses per sentence (beam search)"
    )
    length_penalty: float | None = Field(None, ge=0.0, le=5.0, description="alpha of the length penalty")
    sampling: bool | None = Field(None, description="sample instead of searching")
    temperature: float | None = Field(
        None, **bounds(DecodingConfig, "temperature"), le=10.0, description="sampling temperature"
    )
    top_k: int | None = Field(
        None, **bounds(DecodingConfig, "top_k"), le=1000, description="sampling: keep the k likeliest tokens; 0 = all"
    )
    top_p: float | None = Field(None, **bounds(DecodingConfig, "top_p"), description="sampling: nucleus mass")
    seed: int | None = Field(None, ge=0, lt=2**63, description="sampling seed; random when left out")
    tag: str | None = Field(
        None, pattern=f"^({TAG_PATTERN})?$", description='translate "as" the training corpus with this tag; "" = none'
    )

    _whole = field_validator("beam_size", "n_best", "top_k", "seed", mode="before")(whole)

    def given(self) -> dict:
        """The settings the request gave, seed excepted."""
        return self.model_dump(include=set(DecodingOptions.model_fields) - {"seed"}, exclude_none=True)


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

    @model_validator(mode="after")
    def one_of_text_or_texts(self) -> "TranslateRequest":
        if (self.text is None) == (self.texts is None):
            raise ValueError("give either text or texts")
        return self

    def all_texts(self) -> list[str]:
        return [self.text] if self.text is not None else list(self.texts or [])


class AttentionRequest(DecodingOptions):
    """One sentence to translate and show the cross-attention of."""

    text: str = Field(description="one sentence")
    layer: int | None = Field(None, ge=-64, lt=64, description="decoder layer (0-based, -1 = last); null = mean")

    _whole_layer = field_validator("layer", mode="before")(whole)
