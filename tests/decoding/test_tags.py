"""Translating "as" a tagged corpus (`decoding.tag`): the loaded model's translator, evaluate's file names, the
service's requests."""

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from tests.serve.serving import offline, running_server, write_checkpoint
from transformer.cli.evaluate import decoding_label
from transformer.core.config import DecodingConfig
from transformer.core.errors import UserError
from transformer.runs.loading import load

SENTENCES = ["un chien rouge dort", "le chat mange dans le parc"]


@pytest.fixture(scope="module")
def tagged(tmp_path_factory) -> Path:
    return write_checkpoint(tmp_path_factory.mktemp("tags") / "tagged.safetensors", tags=("bt", "news"))


def test_a_tag_starts_every_source_and_nothing_else_changes(tagged):
    model = load(str(tagged), device="cpu")
    plain, as_bt = (model.translator(DecodingConfig(strategy="greedy", tag=tag)) for tag in ("", "bt"))
    (bt,) = plain.tokenizer.tag_prefix("bt")
    for (ids, _), (tagged_ids, hyps) in zip(plain.search(SENTENCES), as_bt.search(SENTENCES)):
        assert tagged_ids == [bt, *ids] and hyps
    blank = as_bt.search(["  "])[0]
    assert blank == ([], [])  # a blank line stays untranslated, tag or not


def test_a_tag_the_model_lacks_is_refused_before_translating(tagged, tmp_path):
    with pytest.raises(UserError, match=r"tag 'web' is not in this model's vocabulary \(its tags: bt, news\)"):
        load(str(tagged), device="cpu").translator(DecodingConfig(tag="web"))
    untagged = write_checkpoint(tmp_path / "plain.safetensors")
    with pytest.raises(UserError, match="it has no tags"):
        load(str(untagged), device="cpu").translator(DecodingConfig(tag="bt"))


def test_evaluate_names_the_tag_in_the_hypotheses_file():
    beam = OmegaConf.structured(DecodingConfig(strategy="beam"))
    assert decoding_label(beam) == "beam5"
    assert decoding_label(OmegaConf.merge(beam, {"tag": "bt"})) == "beam5-tagbt"


def test_the_service_translates_as_a_tagged_corpus_on_request(tagged):
    pytest.importorskip("fastapi", reason="transformer-serve needs the serve extra: pip install -e '.[dev,serve]'")
    import httpx

    with running_server(tagged) as (url, service):
        post = lambda **body: httpx.post(f"{url}/translate", json={"text": SENTENCES[0], **body}, timeout=60)  # noqa: E731
        answer = post(tag="bt").json()
        assert answer["settings"]["tag"] == "bt"
        assert answer["translations"][0]["text"] == offline(service, SENTENCES[:1], tag="bt")[0]
        assert "tag" not in post().json()["settings"]
        refused = post(tag="web")
        assert refused.status_code == 422 and "not one of this model's tags" in refused.text
        assert httpx.get(f"{url}/info").json()["vocabulary"]["tags"] == ["bt", "news"]
