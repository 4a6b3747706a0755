"""The strategies' table is the one place a decoding strategy is spelled: the config, its checks, the presets, the
service's requests, the labels and CTranslate2's arguments all come from `STRATEGIES`; its searches are the lines of
`decoding.searching.SEARCHES` of the same names."""

from pathlib import Path

import pytest
import yaml

from transformer.cli import CONFIG_PATH
from transformer.core.config import DecodingBase, DecodingConfig, Strategy, choices
from transformer.core.errors import UserError
from transformer.core.strategies import CONTROLS, STRATEGIES, options, problems, requested
from transformer.decoding.searching import SEARCHES
from transformer.serve.decode import decoding_settings
from transformer.serve.schemas import DecodingOptions

PRESETS = sorted((Path(CONFIG_PATH) / "decoding").glob("*.yaml"))
SHARED = set(DecodingBase.__dataclass_fields__)


def test_the_config_and_the_request_schema_come_from_the_table():
    assert choices(Strategy) == tuple(STRATEGIES)
    assert set(DecodingConfig.__dataclass_fields__) == SHARED | set(options())
    offered = {name for name, option in options().items() if option.request is not None}
    flags = {entry.flag for entry in STRATEGIES.values() if entry.flag}
    controls = {"suppress", "ban_unk", "alternatives"}  # a request's controls besides its sentence's own
    assert set(DecodingOptions.model_fields) == offered | flags | {"strategy", "tag"} | controls
    assert all(
        DecodingOptions.model_fields[name].description == CONTROLS[name] for name in ("suppress", "alternatives")
    )
    for name in offered:
        assert DecodingOptions.model_fields[name].description.startswith(
            next(n for n, e in STRATEGIES.items() if name in e.options)
        )


@pytest.mark.parametrize("preset", PRESETS, ids=[p.stem for p in PRESETS])
def test_each_preset_sets_only_what_its_strategy_reads_and_passes_its_checks(preset):
    values = yaml.safe_load(preset.read_text())
    entry = STRATEGIES[values["strategy"]]
    assert set(values) <= SHARED | set(entry.reads()), f"{preset.name} sets options {entry.name} does not read"
    assert problems(DecodingConfig(**values), settings=True) == []


def test_every_strategy_has_a_preset_and_a_label_of_its_own():
    assert {p.stem for p in PRESETS} == set(STRATEGIES)
    labels = [entry.label(DecodingConfig(strategy=name)) for name, entry in STRATEGIES.items()]
    assert len(set(labels)) == len(labels)


def test_every_strategy_has_a_search_and_every_search_a_strategy():
    assert list(SEARCHES) == list(STRATEGIES)
    assert all(callable(search) for search in SEARCHES.values())


def test_n_best_is_checked_once_by_the_entry_that_reads_it():
    assert problems(DecodingConfig(strategy="beam", beam_size=3, n_best=4), "decoding.") == [
        "decoding.n_best=4 must be at most decoding.beam_size=3"
    ]
    assert problems(DecodingConfig(strategy="greedy", n_best=2), settings=True)[0].startswith(
        "n_best=2 needs decoding=beam"
    )
    assert problems(DecodingConfig(strategy="greedy", n_best=2)) == []  # a search just gives its one hypothesis
    assert problems(DecodingConfig(strategy="sample", top_p=0.0)) == ["top_p=0.0 must be in (0, 1]"]
    assert problems(DecodingConfig(strategy="topk")) == ["strategy='topk' is not one of " + ", ".join(STRATEGIES)]


@pytest.mark.parametrize(
    "default, request_, strategy",
    [
        ("greedy", {}, "greedy"),
        ("greedy", {"beam_size": 4}, "beam"),
        ("greedy", {"n_best": 2}, "beam"),
        ("greedy", {"n_best": 1, "top_k": 5}, "greedy"),
        ("greedy", {"sampling": True, "beam_size": 4}, "sample"),
        ("beam", {"sampling": True}, "sample"),
        ("beam", {"sampling": False}, "beam"),
        ("sample", {"beam_size": 4}, "sample"),
        ("sample", {"sampling": False}, "beam"),
        ("sample", {"strategy": "greedy"}, "greedy"),
    ],
)
def test_a_request_asks_for_a_strategy_as_before(default, request_, strategy):
    assert requested(default, request_) == strategy
    cfg = decoding_settings(DecodingConfig(strategy=default, n_best=1), **request_)
    assert cfg.strategy == strategy and (cfg.n_best == 1 or "n_best" in STRATEGIES[strategy].reads())


def test_ctranslate2_arguments_come_from_the_entry():
    beam = DecodingConfig(strategy="beam", beam_size=4, n_best=2, length_penalty=0.6)
    assert STRATEGIES["beam"].ctranslate2(beam, 100) == dict(beam_size=4, num_hypotheses=2, length_penalty=0.6)
    sample = STRATEGIES["sample"].ctranslate2(DecodingConfig(strategy="sample", top_k=500), 100)
    assert sample["sampling_topk"] == 100 and sample["beam_size"] == 1
    with pytest.raises(UserError, match="gnmt"):
        STRATEGIES["beam"].ctranslate2(DecodingConfig(strategy="beam", length_penalty_kind="gnmt"), 100)
