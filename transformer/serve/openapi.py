"""The OpenAPI schema says what the service checks: its error answers, and this server's limits and model."""

from fastapi import FastAPI
from pydantic import BaseModel

from transformer.core.config import ServeSettings

NOT_BLANK = r"\S"  # what `str.strip()` leaves something of
PLAIN_TEXT = {200: {"content": {"text/plain": {"schema": {"type": "string"}}}}}  # /metrics (Prometheus)


class ErrorAnswer(BaseModel):
    """Every error answer: one line saying what was wrong."""

    error: str


def error_answers(*statuses: int) -> dict:
    """The `responses` of a route that can answer with these error statuses."""
    return {status: {"model": ErrorAnswer} for status in statuses}


def _value(prop: dict) -> dict:
    """The non-null branch of an optional property's schema."""
    return next((s for s in prop.get("anyOf", []) if s.get("type") != "null"), prop)


def _bound_text(prop: dict, limits: ServeSettings) -> None:
    _value(prop).update(maxLength=limits.max_chars, pattern=NOT_BLANK)


def with_limits(schema: dict, limits: ServeSettings, tags: tuple[str, ...], layers: int) -> dict:
    """`schema` (FastAPI's) with the texts' length and count, the model's tags and its decoder layers."""
    models = schema["components"]["schemas"]
    translate, attention = models["TranslateRequest"]["properties"], models["AttentionRequest"]["properties"]
    _bound_text(translate["text"], limits)
    _value(translate["texts"]).update(minItems=1, maxItems=limits.max_texts)
    _bound_text(_value(translate["texts"])["items"], limits)
    _bound_text(attention["text"], limits)
    _value(attention["layer"]).update(minimum=-layers, maximum=layers - 1)
    for props in (translate, attention):
        _value(props["tag"])["enum"] = ["", *tags]
    return schema


def install(app: FastAPI, limits: ServeSettings, tags: tuple[str, ...], layers: int) -> None:
    """Serve `with_limits` of the app's schema at /openapi.json (made once, on the first request)."""
    made = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            app.openapi_schema = with_limits(made(), limits, tags, layers)
        return app.openapi_schema

    app.openapi = openapi
