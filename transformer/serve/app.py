"""The HTTP routes: /translate, /score, /attention, /health, /info, /metrics and the page at /."""

import contextlib
import logging
import time
from importlib import resources

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from starlette.exceptions import HTTPException as StarletteHTTPException

from transformer.serve import openapi
from transformer.serve.errors import RequestError
from transformer.serve.schemas import AttentionRequest, ScoreRequest, TranslateRequest
from transformer.serve.service import Service

log = logging.getLogger(__name__)
STATIC = resources.files("transformer.serve") / "static"


class Metrics:
    """Request counts, latencies and batch sizes in one registry per app."""

    def __init__(self):
        self.registry = CollectorRegistry()
        self.requests = Counter("serve_requests", "HTTP requests", ["path", "status"], registry=self.registry)
        self.latency = Histogram("serve_request_seconds", "request latency", ["path"], registry=self.registry)
        buckets = (1, 2, 4, 8, 16, 32, 64, 128, 256)
        self.batch = Histogram(
            "serve_batch_sentences", "sentences in the batch a request joined", buckets=buckets, registry=self.registry
        )


def _validation_message(err: RequestValidationError) -> tuple[int, str]:
    """400 for a body that is not JSON, else 422, with the problems in one line."""
    errors = err.errors()
    if any(e.get("type") == "json_invalid" for e in errors):
        return 400, "the body is not valid JSON: " + "; ".join(str(e.get("ctx", {}).get("error", "")) for e in errors)
    parts = [f"{'.'.join(str(p) for p in e['loc'][1:]) or 'body'}: {e['msg']}" for e in errors]
    return 422, "; ".join(parts)


def _install_handlers(app: FastAPI, service: Service, metrics: Metrics) -> None:
    max_body = service.settings.max_texts * service.settings.max_chars * 4 + 65536

    @app.exception_handler(RequestError)
    async def refused(request: Request, err: RequestError) -> JSONResponse:
        return JSONResponse({"error": err.message}, status_code=err.status, headers=err.headers)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, err: StarletteHTTPException) -> JSONResponse:
        parse = err.status_code == 400 and "parsing the body" in str(err.detail)
        message = "the body is not JSON text in UTF-8" if parse else str(err.detail)
        return JSONResponse({"error": message}, status_code=err.status_code, headers=err.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, err: RequestValidationError) -> JSONResponse:
        status, message = _validation_message(err)
        return JSONResponse({"error": message}, status_code=status)

    @app.exception_handler(Exception)
    async def failed(request: Request, err: Exception) -> JSONResponse:
        log.error("%s %s failed: %r", request.method, request.url.path, err)
        return JSONResponse({"error": f"internal error: {type(err).__name__}"}, status_code=500)

    app.add_middleware(LogAndCount, metrics=metrics, max_body=max_body)


class LogAndCount:
    """ASGI middleware: refuses a body over `max_body` bytes with a 413 (one declared larger before reading it, a
    chunked one as soon as it grows past), then counts, times and logs each request.

    Plain ASGI rather than `@app.middleware("http")`, which adds a task and body streams to every request.
    """

    def __init__(self, app, metrics: Metrics, max_body: int):
        self.app, self.metrics, self.max_body = app, metrics, max_body
        self.paths: set[str] | None = None  # the app's routes, known once the first request comes

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start, status, received = time.monotonic(), 500, 0

        async def send_status(message: dict) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        async def receive_bounded() -> dict:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.max_body:
                raise StarletteHTTPException(413, f"the body is over {self.max_body} bytes")
            return message

        declared = dict(scope["headers"]).get(b"content-length", b"0")
        if declared.isdigit() and int(declared) > self.max_body:
            answer = JSONResponse({"error": f"the body is over {self.max_body} bytes"}, status_code=413)
            await answer(scope, receive, send_status)
        else:
            await self.app(scope, receive_bounded, send_status)
        self._record(scope, status, time.monotonic() - start)

    def _record(self, scope, status: int, seconds: float) -> None:
        if self.paths is None:
            self.paths = {route.path for route in scope["app"].routes}
        path = scope["path"] if scope["path"] in self.paths else "other"
        self.metrics.requests.labels(path, str(status)).inc()
        self.metrics.latency.labels(path).observe(seconds)
        note = scope.get("state", {}).get("note", "")
        log.info("%s %s %d %s%.1f ms", scope["method"], scope["path"], status, note, 1000 * seconds)


def _note(request: Request, answer: dict, metrics: Metrics, chars: int, sentences: int) -> None:
    batch = answer["batch"]
    metrics.batch.observe(batch["sentences"])
    request.state.note = (
        f"{chars} chars, {sentences} sentences, batch {batch['id']} "
        f"({batch['requests']} requests, {batch['sentences']} sentences) "
    )


def create_app(service: Service, decoding_threads: bool = True) -> FastAPI:
    """The FastAPI app; its lifespan starts the decoding threads (or leaves decoding to a `batcher.run()` of the
    caller's) and stops them."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        if decoding_threads:
            service.batcher.start()
        try:
            yield
        finally:
            service.batcher.stop()

    app = FastAPI(title="transformer-serve", summary="French-English translation", lifespan=lifespan)
    metrics = Metrics()
    _install_handlers(app, service, metrics)

    @app.post("/translate", responses=openapi.error_answers(400, 413, 422, 503))
    async def translate(body: TranslateRequest, request: Request) -> dict:
        """Translate `text` or `texts` (split into sentences and joined back) with optional decoding settings."""
        answer = await service.translate(body)
        sentences = sum(len(t["sentences"]) for t in answer["translations"])
        _note(request, answer, metrics, sum(map(len, body.all_texts())), sentences)
        return answer

    @app.post("/score", responses=openapi.error_answers(400, 413, 422, 503))
    async def score(body: ScoreRequest, request: Request) -> dict:
        """Given translations scored as the model's beam scores its own, with token scores and word alignments."""
        answer = await service.score(body)
        request.state.note = f"{sum(len(p.source) + len(p.target) for p in body.pairs)} chars, {len(body.pairs)} pairs"
        return answer

    @app.post("/attention", responses=openapi.error_answers(400, 413, 422, 503))
    async def attention(body: AttentionRequest, request: Request) -> dict:
        """One sentence's translation and its cross-attention weights (target tokens × source tokens)."""
        answer = await service.attention(body)
        _note(request, answer, metrics, len(body.text), 1)
        return answer

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok", "waiting": service.batcher.waiting()}

    @app.get("/info")
    async def info() -> dict:
        return service.info()

    @app.get("/metrics", response_class=Response, responses=openapi.PLAIN_TEXT)
    async def prometheus() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(str(STATIC / "index.html"))

    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")
    openapi.install(app, service.settings, service.tokenizer.tags, service.model.cross_attention_layers)
    return app
