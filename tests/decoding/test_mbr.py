"""Minimum Bayes risk decoding: the expected utility it maximises, one candidate, a tiny model end to end through
`search`, `Translator`, `transformer-translate` and the service."""

import subprocess
import sys
from pathlib import Path

import pytest
import sacrebleu
import torch
from hydra import compose, initialize_config_dir

from tests.conftest import tiny_model
from tests.serve.serving import offline, running_server, write_checkpoint
from transformer.cli import CONFIG_PATH
from transformer.cli.checks import check_config
from transformer.core.config import DecodingConfig
from transformer.core.errors import UserError
from transformer.decoding import SearchOptions, search
from transformer.decoding.mbr import _ranked, expected_utilities, utility
from transformer.decoding.search_state import Hypothesis
from transformer.decoding.translator import Translator
from transformer.runs.checkpoint import load_checkpoint

BIN = Path(sys.executable).parent
SENTENCES = ["un chien rouge dort", "le chat mange dans le parc"]


def length_agreement(hypothesis: str, reference: str) -> float:
    return -abs(len(hypothesis) - len(reference))


def test_the_candidate_with_the_highest_expected_utility_wins():
    # by hand: "aaa" -(1+1)/2 = -1; "aa" -(1+2)/2 = -1.5; "aaaa" -(1+2)/2 = -1.5
    assert expected_utilities(["aa", "aaaa", "aaa"], length_agreement) == [-1.5, -1.5, -1.0]
    # exact match: a text drawn twice is its own best support; each counts the others only
    assert expected_utilities(["a", "b", "a", "c"], lambda h, r: float(h == r)) == [1 / 3, 0.0, 1 / 3, 0.0]
    hyps = [Hypothesis([i], -float(i), -float(i), []) for i in (1, 2, 1, 3)]
    best = _ranked(hyps, [1 / 3, 0.0, 1 / 3, 0.0], n=3)
    assert [h.tokens for h in best] == [[1], [2], [3]] and best[0].score == pytest.approx(1 / 3)  # distinct, ranked


def test_chrf_and_bleu_are_sacrebleus_sentence_scores():
    chrf, bleu = utility("chrf"), utility("bleu")
    pair = ("le chat dort dans le parc", "le chat dort dans un parc")
    assert chrf(*pair) == sacrebleu.sentence_chrf(pair[0], [pair[1]]).score
    assert bleu(*pair) == sacrebleu.sentence_bleu(pair[0], [pair[1]]).score < 100
    close, far = "le chat dort dans le parc", "un chien rouge"
    texts = ["le chat dort dans le parc", "le chat dort dans un parc", close, far]
    expected = expected_utilities(texts, chrf)
    assert max(range(4), key=expected.__getitem__) in (0, 2) and expected[3] == min(expected)


@pytest.mark.parametrize("source", ["beam", "sample"])
def test_one_candidate_is_the_answer(source):
    model, src = tiny_model(), torch.randint(3, 40, (3, 7))
    alone = SearchOptions.from_config(strategy="mbr", candidates=1, candidates_from=source)
    plain = SearchOptions.from_config(strategy=source, beam_size=1)
    mbr = search(model, src, alone, torch.Generator().manual_seed(4), max_len=10)
    ours = search(model, src, plain, torch.Generator().manual_seed(4), max_len=10)
    assert [[h.tokens for h in hyps] for hyps in mbr] == [[h.tokens for h in hyps] for hyps in ours]


def test_search_chooses_among_the_beams_n_best_by_expected_utility():
    model, src = tiny_model(seed=3), torch.randint(3, 40, (4, 8))
    options = SearchOptions.from_config(strategy="mbr", candidates=4, candidates_from="beam", utility="bleu", n_best=2)
    chosen = search(model, src, options, max_len=9)
    beams = search(model, src, SearchOptions.from_config(strategy="beam", beam_size=4, n_best=4), max_len=9)
    for picked, candidates in zip(chosen, beams):
        texts = [" ".join(map(str, h.tokens)) for h in candidates]  # without a tokenizer, ids compare as words
        expected = expected_utilities(texts, utility("bleu"))
        assert len(picked) == 2 and picked[0].score == pytest.approx(max(expected))
        assert picked[0].tokens == candidates[expected.index(max(expected))].tokens
        assert picked[0].score >= picked[1].score


def test_sampled_candidates_are_one_batched_search_and_follow_the_seed():
    model, src, k = tiny_model(), torch.randint(3, 40, (3, 7)), 5
    options = SearchOptions.from_config(strategy="mbr", candidates=k, temperature=1.5)
    chosen = search(model, src, options, torch.Generator().manual_seed(1), max_len=10)
    assert chosen == search(model, src, options, torch.Generator().manual_seed(1), max_len=10)
    sampling = SearchOptions.from_config(strategy="sample", temperature=1.5)
    drawn = search(model, src.repeat_interleave(k, 0), sampling, torch.Generator().manual_seed(1), max_len=10)
    for i, (best,) in enumerate(chosen):  # the candidates: sentence i's k rows of one sampling search
        texts = [" ".join(map(str, hyps[0].tokens)) for hyps in drawn[i * k : (i + 1) * k]]
        expected = expected_utilities(texts, utility("chrf"))
        assert " ".join(map(str, best.tokens)) == texts[expected.index(max(expected))]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    return write_checkpoint(tmp_path_factory.mktemp("mbr") / "tiny.safetensors")


def translator(checkpoint: Path, cfg: DecodingConfig) -> Translator:
    ckpt = load_checkpoint(str(checkpoint))
    return Translator(ckpt.model, ckpt.tokenizer, cfg)


def preset(*overrides: str) -> DecodingConfig:
    with initialize_config_dir(config_dir=CONFIG_PATH, version_base="1.3"):
        cfg = compose(config_name="translate", overrides=["checkpoint=x", "decoding=mbr", *overrides])
    check_config(cfg)
    return DecodingConfig(**cfg.decoding)


def test_the_preset_translates_text_and_ctranslate2_has_no_mbr(checkpoint):
    cfg = preset("decoding.candidates=4", "decoding.precision=fp32")
    assert cfg.strategy == "mbr" and cfg.candidates == 4
    ours = translator(checkpoint, cfg)
    results = ours.search(SENTENCES)  # a call's generator is seeded by decoding.seed: the same draws again
    best = ours.tokenizer.decode_tgt([hyps[0].tokens for _, hyps in results])
    assert ours.translate(SENTENCES) == best and all(0 < hyps[0].score <= 100 for _, hyps in results)
    pytest.importorskip("ctranslate2")
    from transformer.decoding.ctranslate2_engine import CTranslate2Translator

    with pytest.raises(UserError, match="decoding=mbr has no CTranslate2 equivalent"):
        CTranslate2Translator(str(checkpoint.parent), cfg)


@pytest.mark.slow
def test_transformer_translate_decodes_with_mbr(checkpoint, tmp_path):
    settings = ["decoding.candidates=4", "decoding.candidates_from=beam", "decoding.precision=fp32"]  # no draws
    args = [f"checkpoint={checkpoint}", "decoding=mbr", *settings]
    run = subprocess.run(
        [str(BIN / "transformer-translate"), *args], input="\n".join(SENTENCES) + "\n", capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == translator(checkpoint, preset(*settings)).translate(SENTENCES)


def test_a_request_chooses_mbr(checkpoint):
    pytest.importorskip("fastapi", reason="transformer-serve needs the serve extra: pip install -e '.[dev,serve]'")
    import httpx

    with running_server(checkpoint) as (url, service):
        body = {"text": SENTENCES[1], "strategy": "mbr", "candidates": 4, "utility": "bleu", "seed": 7}
        answer = httpx.post(f"{url}/translate", json=body, timeout=60).json()
        settings = answer["settings"]
        assert settings["strategy"] == "mbr" and settings["candidates"] == 4 and settings["seed"] == 7
        expected = offline(service, SENTENCES[1:], strategy="mbr", candidates=4, utility="bleu", seed=7)
        assert answer["translations"][0]["text"] == expected[0]
        refused = httpx.post(f"{url}/translate", json={**body, "n_best": 5}, timeout=60)
        assert refused.status_code == 422 and "n_best=5 must be at most candidates=4" in refused.text
