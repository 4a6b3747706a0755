"""transformer-score: the scores of given pairs, as beam search scores its own output; bad pairs noted one by one."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from transformer.bench.tiny import write_checkpoint
from transformer.core.config import DecodingConfig
from transformer.decoding.alignment import parse_pharaoh
from transformer.runs.loading import load

BIN = Path(sys.executable).parent
FP32 = ("decoding.precision=fp32", "device=cpu")


def run(tool: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / tool), *args], input=stdin, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    return write_checkpoint(tmp_path_factory.mktemp("score") / "tiny.safetensors")


@pytest.mark.parametrize("alpha, kind", [(1.0, "power"), (0.6, "gnmt")])
def test_the_score_of_a_translation_s_text_is_the_score_the_beam_reported(checkpoint, alpha, kind):
    loaded = load(str(checkpoint), device="cpu")
    with torch.no_grad():  # lean towards EOS a little, so that beam hypotheses end with it
        eos = loaded.model.output.weight[2]
        loaded.model.decoder_norm.bias += 3.5 * eos / eos.norm()
    settings = dict(beam_size=3, n_best=3, length_penalty=alpha, length_penalty_kind=kind, precision="fp32")
    translator = loaded.translator(DecodingConfig(strategy="beam", **settings))
    sources = ["un chien rouge", "le chat noir dort", "deux hommes", "une femme"]
    compared = 0
    for source, (_, hyps) in zip(sources, translator.search(sources)):
        texts = translator.detokenize(hyps)
        ended = [(h, t) for h, t in zip(hyps, texts) if t and len(h.token_scores) == len(h.tokens) + 1]
        for hyp, got in zip([h for h, _ in ended], translator.score([source] * len(ended), [t for _, t in ended])):
            if translator.tokenizer.encode_tgt([translator.detokenize([hyp])[0]])[0] == hyp.tokens:
                assert (got.score, got.logprob) == pytest.approx((hyp.score, hyp.logprob), abs=1e-5)
                compared += 1
    assert compared >= 3


@pytest.mark.slow
def test_the_command_writes_the_scores_the_api_gives(checkpoint):
    pairs = [("un chien rouge", "a red dog"), ("le chat", "the cat sleeps"), ("deux", "two")]
    result = run(
        "transformer-score",
        f"checkpoint={checkpoint}",
        *FP32,
        "tokens=true",
        stdin="".join(f"{s}\t{t}\n" for s, t in pairs),
    )
    assert result.returncode == 0, result.stderr[-2000:]
    translator = load(str(checkpoint), device="cpu").translator(DecodingConfig(strategy="beam", precision="fp32"))
    expected = translator.score([s for s, _ in pairs], [t for _, t in pairs])
    for line, want in zip(result.stdout.splitlines(), expected, strict=True):
        score, logprob, tokens = line.split("\t")
        assert (float(score), float(logprob)) == pytest.approx((want.score, want.logprob), abs=1e-4)
        assert [float(x) for x in tokens.split()] == pytest.approx(want.token_scores, abs=1e-4)


@pytest.mark.slow
def test_each_bad_pair_is_noted_and_left_empty_while_the_others_are_scored(checkpoint):
    long = " ".join(["chien"] * 1500)  # more tokens than the model's max_positions
    pairs = ["un chien\ta dog", "\ta cat", "le chat\t", "trois\tchamps\tde trop", f"{long}\ta dog", "le chat\t狗", ""]
    result = run("transformer-score", f"checkpoint={checkpoint}", *FP32, stdin="\n".join(pairs) + "\n")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-2000:]
    lines = result.stdout.split("\n")[:-1]
    assert len(lines) == len(pairs) and lines[0] and not any(lines[1:])
    for number, why in [
        (2, "the source is empty"),
        (3, "the target is empty"),
        (4, "3 tab-separated fields, not 2 (SOURCE<TAB>TARGET)"),
        (5, "the source has 7500 tokens, more than the model's limit of 63"),
        (6, "the target holds characters the model's vocabulary cannot spell (狗)"),
        (7, "the source is empty"),
    ]:
        assert f"line {number}: {why}" in result.stderr


@pytest.mark.slow
def test_pairs_from_two_files_with_alignments_into_an_output_file(checkpoint, tmp_path):
    (tmp_path / "in.fr").write_text("un chien rouge\nle chat\n")
    (tmp_path / "in.en").write_text("a red dog\nthe cat sleeps\n")
    sides = [f"source.src={tmp_path / 'in.fr'}", f"source.tgt={tmp_path / 'in.en'}"]
    out = tmp_path / "scores.tsv"
    result = run("transformer-score", f"checkpoint={checkpoint}", *FP32, *sides, "alignments=true", f"output={out}")
    assert result.returncode == 0, result.stderr[-2000:]
    piped = run("transformer-score", f"checkpoint={checkpoint}", *FP32, stdin="un chien rouge\ta red dog\n")
    rows = [line.split("\t") for line in out.read_text().splitlines()]
    assert len(rows) == 2 and rows[0][:2] == piped.stdout.split()
    for (_, _, links), (src, tgt) in zip(rows, [("un chien rouge", "a red dog"), ("le chat", "the cat sleeps")]):
        found = parse_pharaoh(links)
        assert {j for _, j in found} == set(range(len(tgt.split())))
        assert all(i < len(src.split()) for i, _ in found)
