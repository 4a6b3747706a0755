"""Ensembles at decoding (transformer/decoding/ensemble.py): parity with single models, and the refusals."""

import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from tests.conftest import tiny_model
from tests.decoding.test_decoding import BOS, EOS, batch_src, hypotheses
from transformer.cli import CONFIG_PATH
from transformer.data.preparation import prepare
from transformer.decoding.ensemble import Ensemble
from transformer.fast_inference import inference_copy
from transformer.models.factory import build_model
from transformer.runs.checkpoint import load_checkpoint, save_checkpoint

BIN = Path(sys.executable).parent


def pair() -> Ensemble:
    return Ensemble([tiny_model(seed=1), tiny_model(seed=2)]).eval()


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_ensemble_of_a_model_with_itself_is_the_model(strategy):
    model, src = tiny_model(seed=4), batch_src(5)
    options = {"beam_size": 4, "n_best": 4} if strategy == "beam" else {}
    alone = hypotheses(model, src, 15, strategy, **options)
    assert hypotheses(Ensemble([model, model]), src, 15, strategy, **options) == alone


def test_ensemble_of_packed_copies_is_the_packed_model():
    model, src = tiny_model(seed=4), batch_src(5)
    assert hypotheses(inference_copy(Ensemble([model, model])), src, 15) == hypotheses(inference_copy(model), src, 15)


def test_ensemble_scores_are_the_renormalised_mean_of_log_probabilities():
    """One step's log-probabilities: log-softmax of the mean of the members' log-probabilities."""
    ensemble, src = pair(), batch_src(9)
    (hyp,) = hypotheses(ensemble, src[:1], 1, "greedy", eos_id=-1)[0]
    bos = torch.ones(1, 1, dtype=torch.long)
    with torch.no_grad():
        members = [torch.log_softmax(m(src[:1], bos)[0, -1], -1) for m in ensemble.members]
    mean = torch.log_softmax(torch.stack(members).mean(0), -1)
    assert hyp.token_scores[0] == pytest.approx(float(mean[hyp.tokens[0]]), abs=1e-5)


def test_ensemble_sampling_follows_its_seed_and_scores_by_the_members_mean():
    """Draws repeat with their seed, change with another, and each drawn token carries the renormalised mean of
    the members' log-probabilities after its prefix (computed here teacher-forced, member by member)."""
    ensemble, src = pair(), batch_src(10)

    def sampled(seed):
        return hypotheses(ensemble, src, 12, "sample", generator=torch.Generator().manual_seed(seed))

    first = sampled(0)
    assert sampled(0) == first and sampled(1) != first
    for i, (hyp,) in enumerate(first):
        drawn = hyp.tokens + [EOS] * (len(hyp.token_scores) - len(hyp.tokens))  # EOS where it was drawn
        tgt_in = torch.tensor([[BOS, *drawn[:-1]]])
        with torch.no_grad():
            members = torch.stack([m(src[i : i + 1], tgt_in)[0].log_softmax(-1) for m in ensemble.members])
        mean = members.mean(0).log_softmax(-1)  # (T, V)
        expected = mean.gather(1, torch.tensor(drawn)[:, None]).squeeze(1)
        torch.testing.assert_close(torch.tensor(hyp.token_scores), expected, atol=1e-5, rtol=0)


def _other_checkpoints(setup: dict[str, str]) -> tuple[Path, Path]:
    """The setup's checkpoint turned the other way round (en→fr), and one with another vocabulary."""
    tmp = Path(setup["tmp"])
    ckpt = load_checkpoint(str(tmp / "run"))
    reverse = ckpt.config.copy()
    reverse.data.src_lang, reverse.data.tgt_lang = "en", "fr"
    save_checkpoint(tmp / "reverse.safetensors", ckpt.model, ckpt.tokenizer, reverse, step=0)
    data = setup["data"].replace(str(tmp / "prepared"), str(tmp / "prepared50")) + " data.tokenizer.vocab_size=50"
    with initialize_config_dir(config_dir=CONFIG_PATH, version_base="1.3"):
        cfg = compose("train", overrides=[*shlex.split(data), "model=tiny"])
    prepared = prepare(cfg.data)
    save_checkpoint(tmp / "vocab50.safetensors", build_model(cfg.model, prepared.tokenizer), prepared.tokenizer, cfg)
    return tmp / "reverse.safetensors", tmp / "vocab50.safetensors"


@pytest.mark.slow
def test_ensembles_of_other_directions_or_vocabularies_are_refused(cli_setup):
    reverse, vocab50 = _other_checkpoints(cli_setup)
    first = Path(cli_setup["tmp"]) / "run"
    for other, words in ((reverse, "translates en→fr"), (vocab50, "different vocabularies")):
        result = subprocess.run(
            [str(BIN / "transformer-translate"), f"checkpoint=[{first},{other}]", "sentences=[un chien]"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 2 and "Traceback" not in result.stderr
        (line,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert words in line


@pytest.mark.slow
def test_translate_with_an_ensemble_of_a_checkpoint_with_itself(cli_setup):
    run = Path(cli_setup["tmp"]) / "run"

    def translate(checkpoint: str) -> subprocess.CompletedProcess:
        argv = [str(BIN / "transformer-translate"), checkpoint, "sentences=[un chien,le chat rouge]", "decoding=beam"]
        return subprocess.run(argv, capture_output=True, text=True, timeout=300)

    single, ensemble = translate(f"checkpoint={run}"), translate(f"checkpoint=[{run},{run}]")
    assert single.returncode == ensemble.returncode == 0, ensemble.stderr
    assert ensemble.stdout == single.stdout and len(single.stdout.splitlines()) == 2
