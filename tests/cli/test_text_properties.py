"""Arbitrary text (control characters, NUL, combining marks, RTL, emoji, 10k-character lines, blank lines, bytes
that are not UTF-8) through the tokenizer, `Translator`, `transformer-translate`, back-translation and the service:
no crash, one output line per input line in order, valid UTF-8 out, and a sentence alone translated as inside a
batch."""

import functools
import subprocess
import sys
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="the property tests need the test extra: pip install '.[test]'")
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.serve.serving import write_checkpoint  # noqa: E402
from transformer.cli.translate import BadLines, decode_lines, format_results  # noqa: E402
from transformer.core.config import DecodingConfig  # noqa: E402
from transformer.data.corpus import text_source  # noqa: E402
from transformer.data.sources import read_lines  # noqa: E402
from transformer.decoding.chunks import translate_in_chunks  # noqa: E402
from transformer.decoding.translator import Translator  # noqa: E402
from transformer.recipe import backtranslation  # noqa: E402
from transformer.runs.checkpoint import load_checkpoint  # noqa: E402

QUICK, SLOW = 15, 150  # examples per property: in the quick loop, under the slow marker
DEFAULTS = DecodingConfig(strategy="greedy", max_len_b=6)
SPECIAL = [
    "\x00",
    " \t \u3000 ",
    "\u202eabc\u202c",
    "\u05e9\u05dc\u05d5\u05dd",
    "👩\u200d👩\u200d👧",
    "e\u0301\u0327",
    "\x1b[31mrouge",
    "\u2028\x85\x0b\x0c\x1c",
    "un chien " * 1200,
]  # the last: a 10,800-character line
# Any character but the surrogates (no text holds a lone one) and the line feed (it ends a line).
CHAR = st.characters(blacklist_categories=("Cs",), blacklist_characters="\n")
LINE = st.one_of(st.text(CHAR, max_size=40), st.sampled_from(SPECIAL))
LINES = st.lists(LINE, min_size=1, max_size=6)
NOT_UTF8 = st.sampled_from([b"\xed\xa0\x80 lone surrogate", b"\xff\xfe", b"caf\xe9", b"\xc3"])


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    return write_checkpoint(tmp_path_factory.mktemp("props") / "tiny.safetensors")


@pytest.fixture(scope="module")
def translator(checkpoint) -> Translator:
    ckpt = load_checkpoint(str(checkpoint))
    return Translator(ckpt.model, ckpt.tokenizer, DEFAULTS)


def one_line_of_utf8(text: str) -> bool:
    return "\n" not in text and text.encode("utf-8").decode("utf-8") == text


def check_tokenizer(translator: Translator, lines: list[str]) -> None:
    tokenizer = translator.tokenizer
    ids = tokenizer.encode_src(lines)
    assert len(ids) == len(lines)
    assert all(0 <= i < tokenizer.src_vocab_size for row in ids for i in row)
    assert all(one_line_of_utf8(text) for text in tokenizer.decode_tgt(ids))


def check_translator(translator: Translator, lines: list[str]) -> None:
    together = translator.translate(lines)
    assert len(together) == len(lines) and all(one_line_of_utf8(t) for t in together)
    assert together == [translator.translate([line])[0] for line in lines]


def examples(n: int) -> settings:
    return settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck))


@examples(QUICK)
@given(lines=LINES)
def test_tokenizer_and_translator_take_any_text(translator, lines):
    check_tokenizer(translator, lines)
    check_translator(translator, lines)


@pytest.mark.slow
@examples(SLOW)
@given(lines=LINES)
def test_tokenizer_and_translator_take_any_text_many_examples(translator, lines):
    check_tokenizer(translator, lines)
    check_translator(translator, lines)


def expected_output(translator: Translator, raw: list[bytes]) -> list[str]:
    """What `transformer-translate` prints for input lines `raw`: each line alone, '' for one not UTF-8."""
    out = []
    for line in raw:
        try:
            out.append(translator.translate([line.decode("utf-8")])[0])
        except UnicodeDecodeError:
            out.append("")
    return out


RAW_LINES = st.lists(st.one_of(LINE.map(str.encode), NOT_UTF8), min_size=1, max_size=6)


@examples(QUICK)
@given(raw=RAW_LINES)
def test_the_translate_command_path_keeps_one_line_per_input_line(translator, raw):
    bad = BadLines()
    lines = list(decode_lines([line + b"\n" for line in raw], "input", bad))
    printed = format_results(translator, translator.search(lines), 1)
    assert printed.split("\n")[:-1] == expected_output(translator, raw)
    assert bad.first == [i + 1 for i, line in enumerate(raw) if not valid_utf8(line)] and bad.count == len(bad.first)


def valid_utf8(line: bytes) -> bool:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@pytest.mark.slow
@examples(3)
@given(raw=RAW_LINES)
def test_transformer_translate_on_stdin_and_input_file(checkpoint, translator, raw, tmp_path_factory):
    data = b"".join(line + b"\n" for line in raw)
    source = tmp_path_factory.mktemp("input") / "in.txt"
    source.write_bytes(data)
    script = Path(sys.executable).parent / "transformer-translate"
    # the translator's precision (fp32), not the command's own default (`auto`: int8 where it runs)
    decoding = [f"decoding.max_len_b={DEFAULTS.max_len_b}", f"decoding.precision={DEFAULTS.precision}"]
    args = [str(script), f"checkpoint={checkpoint}", "decoding=greedy", *decoding]
    wanted = expected_output(translator, raw)
    for extra, stdin in (([], data), ([f"input={source}"], None)):
        result = subprocess.run([*args, *extra], input=stdin, capture_output=True, timeout=300)
        assert result.returncode == (0 if all(map(valid_utf8, raw)) else 2), result.stderr[-2000:]
        assert result.stdout.decode("utf-8").split("\n")[:-1] == wanted


def check_backtranslation(translator: Translator, lines: list[str], folder: Path) -> None:
    """Back-translation's steps on `lines` (3 sentences per chunk): one synthetic line per kept sentence, in order,
    each as the sentence translated alone, and a corpus that reads back as exactly those pairs."""
    counts: dict[str, int] = {}
    sentences = list(backtranslation.select_sentences(lines, exclude=set(), counts=counts))
    langs = ("y", "x")
    backtranslation.start(folder, {"src_lang": "y", "tgt_lang": "x"})
    translate = functools.partial(backtranslation.translate_chunk, translator)
    done = translate_in_chunks(iter(sentences), translate, backtranslation.chunk_folder(folder, langs), 3)
    backtranslation.finish(
        folder, {"src_lang": "y", "tgt_lang": "x"}, langs, done.chunks, {**counts, "kept": done.lines}
    )
    check_synthetic_corpus(translator, sentences, folder, langs)


def check_synthetic_corpus(translator: Translator, sentences: list[str], folder: Path, langs: tuple[str, str]) -> None:
    """`folder`'s corpus (source side `langs[0]`, the translations; target side `langs[1]`, the sentences): the
    sentences in order, each beside its translation alone, and it reads back as exactly those pairs, stripped."""
    synthetic_file, original_file = (folder / f"train.{lang}" for lang in langs)
    originals, synthetic = list(read_lines(original_file)), list(read_lines(synthetic_file))
    assert originals == sentences and len(synthetic) == len(sentences)
    assert synthetic == [translator.translate([s])[0] for s in sentences]
    pairs = list(text_source(synthetic_file, original_file, *langs, "the synthetic corpus").pairs())
    assert pairs == [(y.strip(), x.strip()) for y, x in zip(synthetic, originals) if y.strip() and x.strip()]


@examples(QUICK)
@given(lines=LINES)
@example(lines=["0\r0"])  # found by this property: the joined corpus split a carriage return into two lines
def test_backtranslation_takes_any_text(translator, lines, tmp_path_factory):
    check_backtranslation(translator, lines, tmp_path_factory.mktemp("bt") / "out")


@pytest.mark.slow
@examples(3)
@given(lines=LINES)
def test_transformer_backtranslate_takes_any_text(cli_setup, lines, tmp_path_factory):
    """The console script on arbitrary lines, against the model's own corpus (data=files: languages src, tgt)."""
    tmp, folder = Path(cli_setup["tmp"]), tmp_path_factory.mktemp("bt_cli")
    (folder / "mono.src").write_bytes("".join(line + "\n" for line in lines).encode("utf-8"))
    script = Path(sys.executable).parent / "transformer-backtranslate"
    # fp32: each synthetic line is then its sentence translated alone (int8's kernel depends on the batch)
    decoding = ["decoding=greedy", f"decoding.max_len_b={DEFAULTS.max_len_b}", "decoding.precision=fp32"]
    command = [str(script), cli_setup["ckpt"], f"input={folder / 'mono.src'}", f"output={folder / 'out'}", *decoding]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-2000:]
    source_side = lambda *names: {line.strip() for name in names for line in read_lines(tmp / name)}  # noqa: E731
    sentences = list(
        backtranslation.select_sentences(lines, source_side("val.fr", "test.fr"), source_side("train.fr.gz"))
    )
    ckpt = load_checkpoint(str(tmp / "run" / "checkpoints" / "best.safetensors"))
    translator = Translator(ckpt.model, ckpt.tokenizer, DEFAULTS)
    check_synthetic_corpus(translator, sentences, folder / "out", ("tgt", "src"))


@pytest.fixture(scope="module")
def server(checkpoint):
    pytest.importorskip("fastapi", reason="transformer-serve needs the serve extra: pip install -e '.[dev,serve]'")
    from tests.serve.serving import running_server

    with running_server(checkpoint, DEFAULTS, max_wait_ms=0.0, max_chars=50_000, max_sentences=64) as (url, _):
        yield url


def check_service(url: str, texts: list[str], split: bool) -> None:
    import httpx

    post = lambda texts: httpx.post(f"{url}/translate", json={"texts": texts, "split": split}, timeout=120)  # noqa: E731
    together = post(texts)
    assert together.status_code in (200, 422), together.text  # 422: a blank text, or a sentence over 63 tokens
    if together.status_code != 200:
        return
    answers = [t["text"] for t in together.json()["translations"]]
    assert len(answers) == len(texts)
    assert [a.count("\n") for a in answers] == [t.count("\n") for t in texts]  # line for line
    assert answers == [post([text]).json()["translations"][0]["text"] for text in texts]


TEXT = st.lists(LINE, min_size=1, max_size=3).map("\n".join)


@examples(QUICK)
@given(texts=st.lists(TEXT, min_size=1, max_size=3), split=st.booleans())
def test_the_service_takes_any_text(server, texts, split):
    check_service(server, texts, split)


@pytest.mark.slow
@examples(SLOW)
@given(texts=st.lists(TEXT, min_size=1, max_size=3), split=st.booleans())
def test_the_service_takes_any_text_many_examples(server, texts, split):
    check_service(server, texts, split)
