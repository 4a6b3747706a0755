"""docs/attention.md cannot drift: its numbers are recomputed here with the functions that wrote them."""

import json
import math
from pathlib import Path

import pytest

from tests import ROOT
from tests.conftest import WORDS_EN, WORDS_FR, tiny_model
from transformer.core.config import TokenizerConfig
from transformer.data.tokenizer import Tokenizer, train_sentencepiece
from transformer.walkthrough import sections as walk
from transformer.walkthrough.page import render

DOCS = ROOT / "docs"
UNTESTED = {"ms_cache", "ms_no_cache", "load_average", "timing_rounds"}  # timings: machine and load dependent


@pytest.fixture(scope="module")
def page_data() -> dict:
    return json.loads((DOCS / "attention_walkthrough.json").read_text())


def assert_same(fresh, stored, where: str = "") -> None:
    """Equal structure; numbers within 1e-5 (absolute) or 1e-4 (relative); timings skipped."""
    if isinstance(fresh, dict):
        assert fresh.keys() == stored.keys(), where
        for key in fresh.keys() - UNTESTED:
            assert_same(fresh[key], stored[key], f"{where}.{key}")
    elif isinstance(fresh, (list, tuple)):
        assert len(fresh) == len(stored), where
        for i, (a, b) in enumerate(zip(fresh, stored)):
            assert_same(a, b, f"{where}[{i}]")
    elif isinstance(fresh, float):
        assert math.isclose(fresh, stored, rel_tol=1e-4, abs_tol=1e-5), f"{where}: {fresh} != {stored}"
    else:
        assert fresh == stored, f"{where}: {fresh!r} != {stored!r}"


SECTIONS = ["five_token", "three_keys", "scaling", "masks", "multi_head", "additive_vs_dot", "patterns"]


@pytest.mark.parametrize("section", SECTIONS)
def test_section_numbers_are_what_the_code_computes(page_data, section):
    assert_same(getattr(walk, section)(), page_data[section], section)


def test_kv_cache_counts_and_ids_are_recomputed(page_data):
    stored = page_data["kv_cache"]
    fresh = walk.kv_cache(steps=8, timing_rounds=0)  # each step's work depends only on its position
    assert fresh["ids_equal"] and stored["ids_equal"]
    assert fresh["ids"] == stored["ids"][:8]
    for key in ("madds_cache", "madds_no_cache"):
        assert fresh[key] == stored[key][:8]
    assert fresh["madds_setup_cache"] == stored["madds_setup_cache"] > stored["madds_setup_no_cache"]
    # with the cache each step adds the same attention work (one more key); without, it redoes the prefix
    cached, uncached = stored["madds_cache"], stored["madds_no_cache"]
    assert len({b - a for a, b in zip(cached, cached[1:])}) == 1 and cached[1] > cached[0]
    assert all(u > 0.9 * c * (i + 1) for i, (c, u) in enumerate(zip(cached, uncached)))


def test_the_page_is_what_the_json_renders_to(page_data):
    assert (DOCS / "attention.md").read_text() == render(page_data)


def test_what_the_page_claims_of_the_numbers(page_data):
    keys, scaling, masks = page_data["three_keys"], page_data["scaling"], page_data["masks"]
    assert keys["query"] == [1, 0, 2] and keys["scores"] == [2, 4, 4]  # the seed's query and scores, reproduced
    assert abs(keys["unscaled"]["weights"][0] - keys["seed_weights"][0]) > 0.05  # "rounded so far ..."
    assert scaling["scaled"] == scaling["seed_scaled"]
    assert max(abs(a - b) for a, b in zip(scaling["weights"], scaling["seed_weights"])) > 0.05  # "not the softmax"
    points = scaling["random"]
    assert all(a["max_unscaled"] < b["max_unscaled"] for a, b in zip(points, points[1:]))
    assert points[-1]["grad_unscaled"] < points[-1]["grad_scaled"] / 2
    assert all(0.8 < p["scaled_std"] < 1.25 for p in points)
    assert masks["change_before"] < 1e-6 < 1e-3 < masks["change_after"]
    assert masks["alone_vs_batched"] < 1e-5 and masks["weight_on_pads"] == 0.0


def test_figures_exist_and_stay_small(page_data):
    names = ["five_token.png", "scaling.png", "kv_cache.png", "additive_vs_dot.png", "patterns.png"]
    names += [Path(item["figure"]).name for item in (page_data.get("cross") or {}).get("sentences", [])]
    sizes = [(DOCS / walk.FIGURES / name).stat().st_size for name in names]
    assert all(0 < size < 200_000 for size in sizes) and sum(sizes) < 1_000_000
    for name in names:
        assert f"({walk.FIGURES}/{name})" in (DOCS / "attention.md").read_text()


def test_cross_attention_section_from_a_model(page_data, tmp_path):
    """The trained-model section has the structure the page shows; here on a tiny random model."""
    sentences = [" ".join(WORDS_FR[i:] + WORDS_EN[:i]) for i in range(len(WORDS_FR))] * 5
    proto = train_sentencepiece(iter(sentences), TokenizerConfig(vocab_size=60))
    tokenizer = Tokenizer(proto, proto)
    model = tiny_model(vocab=tokenizer.src_vocab_size, joint_vocab=True)
    pairs = [("le chat dort dans le parc", "the cat sleeps in the park"), ("un chien rouge", "a red dog")]
    items = walk.translations(model, tokenizer, pairs, figures=tmp_path)
    stored = page_data.get("cross") or {"sentences": []}  # absent until the script has run with --checkpoint
    if stored["sentences"]:
        assert [s["source"] for s in stored["sentences"]] == [s for s, _ in walk.SENTENCES]
        assert stored["step"] > 0 and stored["checkpoint"]
    for item in items + stored["sentences"]:
        assert item.keys() == items[0].keys()
        assert item["cache_equal"] is True
        assert item["peaks"][-1][0] == "</s>" and all(0 < w <= 1 for _, _, w in item["peaks"])
        assert {t for _, t in item["alignment"]} == set(item["translation"].split())  # every output word linked
        assert all(s in item["source"].split() for s, _ in item["alignment"])
    for number, item in enumerate(items, start=1):
        src_pieces = [tokenizer.src.id_to_piece(i) for i in tokenizer.encode_src([item["source"]])[0]] + ["</s>"]
        assert all(piece in src_pieces for _, piece, _ in item["peaks"])
        assert (tmp_path / f"cross_{number}.png").stat().st_size > 0


def test_what_the_page_claims_of_additive_and_dot(page_data):
    a = page_data["additive_vs_dot"]
    for name in ("additive", "dot"):
        weights = a[f"{name}_weights"]
        assert all(math.isclose(sum(r), 1.0, abs_tol=1e-5) for r in weights)
        mixed = [[sum(w * v[c] for w, v in zip(r, a["values"])) for c in range(2)] for r in weights]
        assert_same(mixed, a[f"{name}_output"], f"{name}_output")
    assert (
        max(abs(s) for r in a["additive_scores"] for s in r)
        <= a["score_bound"]
        == pytest.approx(sum(abs(v) for v in a["score_v"]), abs=1e-5)
    )
    assert a["additive_weights"] != a["dot_weights"]
    up = a["scaled_up"]
    assert min(up["dot_max"]) > 0.99 and max(up["additive_max"]) < 0.9  # "hardens" vs "stays bounded"
    assert all(max(r) / min(r) <= a["largest_ratio_possible"] for r in a["additive_weights"])


def test_what_the_page_claims_of_the_patterns(page_data):
    p = page_data["patterns"]
    n, w, s = p["length"], p["knobs"]["window"], p["knobs"]["stride"]
    masks = {name: [[int(c) for c in row] for row in m] for name, m in p["masks"].items()}
    assert masks["band"] == [[int(abs(i - j) < w) for j in range(n)] for i in range(n)]
    assert masks["strided"] == [[int(abs(i - j) < w or j % s == s - 1) for j in range(n)] for i in range(n)]
    rounds = p["buckets"]  # the probed LSH mask is "same bucket in some round", symmetric, with the diagonal
    assert masks["hashed"] == [[int(any(r[i] == r[j] for r in rounds)) for j in range(n)] for i in range(n)]
    assert {name: sum(map(sum, m)) for name, m in masks.items()} == {k: v for k, v in p["pairs"].items() if k in masks}
    assert all(p["pairs"][name] < n * n for name in p["pairs"])
    assert p["band_fast_vs_masked"] < 1e-5 and p["strided_fast_vs_masked"] < 1e-5
    assert len(p["low_rank_e"]) == p["knobs"]["rank"] == p["low_rank_weights_shape"][1]
