"""Noised back-translation: word drops and a local shuffle on a synthetic corpus's sources, drawn once and the same
every time; the main corpus, the targets and the evaluation splits stay as written."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import training_pairs
from tests.core.test_config import make
from tests.data.test_mixture import tagged_setup
from transformer.cli.checks import check_config
from transformer.core.errors import UserError
from transformer.data.noise import MAX_SHIFT, noised_words
from transformer.data.preparation import prepare

WORDS = st.lists(st.text("abcdef", min_size=1, max_size=3), min_size=1, max_size=40)


@given(WORDS, st.integers(0, 2**32 - 1))
def test_without_drops_the_shuffle_moves_no_word_more_than_the_limit(words, seed):
    tagged = [f"{w}#{i}" for i, w in enumerate(words)]  # each word knows where it stood
    out = noised_words(tagged, 0.0, np.random.default_rng(seed))
    assert sorted(out) == sorted(tagged)
    assert all(abs(int(w.split("#")[1]) - i) <= MAX_SHIFT for i, w in enumerate(out))


@given(WORDS, st.floats(0.0, 0.99), st.integers(0, 2**32 - 1))
def test_drops_keep_a_subset_of_the_words_and_never_none(words, drop, seed):
    tagged = [f"{w}#{i}" for i, w in enumerate(words)]
    out = noised_words(tagged, drop, np.random.default_rng(seed))
    assert 1 <= len(out) <= len(tagged) and set(out) <= set(tagged) and len(set(out)) == len(out)


def test_the_drop_rate_is_the_probability_asked_for():
    rng = np.random.default_rng(0)
    words = [str(i) for i in range(100)]
    kept = sum(len(noised_words(words, 0.1, rng)) for _ in range(200))
    assert kept / 20_000 == pytest.approx(0.9, abs=0.01)


def test_prepare_noises_only_the_noised_corpus_s_sources_and_the_same_way_twice(corpus, tmp_path):
    clean_cfg, (src, tgt) = tagged_setup(corpus, tmp_path, tag="")
    clean = prepare(clean_cfg)
    noisy_cfg, _ = tagged_setup(corpus, tmp_path, tag="")
    noisy_cfg.extra_train["synthetic"]["noise"] = 0.3
    noisy = prepare(noisy_cfg)
    assert noisy.dir != clean.dir and noisy.tokenizer.same_models(clean.tokenizer)
    before, after = clean.split("train"), noisy.split("train")
    assert before.select(range(300))[:] == after.select(range(300))[:]
    assert before["tgt_ids"] == after["tgt_ids"] and clean.split("val")[:] == noisy.split("val")[:]
    sources = [src for src, _ in training_pairs(noisy)[300:]]
    changed = [a != b for a, b in zip(before["src_ids"][300:], after["src_ids"][300:])]
    assert sum(changed) > 30  # 60 sentences of 2-7 words, 30% of words dropped
    for written, made in zip(src.read_text().splitlines(), sources):
        assert set(made.split()) <= set(written.split())
    assert after["src_ids"][300:] == noisy.tokenizer.encode_src(sources)
    noisy_cfg.prepared_dir = str(tmp_path / "again")
    assert prepare(noisy_cfg).split("train")["src_ids"] == after["src_ids"]


def test_a_noise_outside_zero_to_one_is_refused():
    cfg = make("train", ["+data.extra_train.bt.dir=bt", "+data.extra_train.bt.noise=1"])
    with pytest.raises(UserError, match=r"data.extra_train.bt.noise=1 must be in \[0.0, 1.0\)"):
        check_config(cfg)
