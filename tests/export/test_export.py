"""transformer-export: CTranslate2 and MarianMT exports translate exactly as our own engine does."""

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from safetensors.torch import save_file

from tests.conftest import write_corpus
from transformer.cli import CONFIG_PATH
from transformer.core import presets
from transformer.core.config import DecodingConfig, ModelConfig, TokenizerConfig
from transformer.core.errors import UserError
from transformer.core.special_ids import BOS_ID, EOS_ID, PAD_ID
from transformer.data.batching import collate, pad
from transformer.data.tokenizer import Tokenizer, train_sentencepiece
from transformer.decoding import SearchOptions
from transformer.decoding.scoring import score
from transformer.decoding.translator import Translator
from transformer.models.factory import build_model
from transformer.runs.checkpoint import load_checkpoint, save_checkpoint

ctranslate2 = pytest.importorskip("ctranslate2")
transformers = pytest.importorskip("transformers")

from transformer.cli.export import check_export, export  # noqa: E402
from transformer.decoding.ctranslate2_engine import CTranslate2Translator  # noqa: E402

BIN = Path(sys.executable).parent


def read(path: Path) -> list[str]:
    return path.read_text().splitlines()


def train_checkpoint(directory: Path, pre_norm: bool, joint: bool = True, steps: int = 40) -> Path:
    """A tiny model trained `steps` Adam steps of 50 sentence pairs on the toy corpus, saved as a checkpoint;
    `joint=False` gives it a source and a target vocabulary."""
    (src, tgt), (val_src, val_tgt) = write_corpus(directory, "train", 300, 1), write_corpus(directory, "val", 20, 2)
    overrides = ["data=files", f"data.train.src={src}", f"data.train.tgt={tgt}", f"data.val.src={val_src}"]
    overrides += [
        f"data.val.tgt={val_tgt}",
        "model=tiny",
        f"model.pre_norm={pre_norm}",
        f"data.tokenizer.joint={joint}",
    ]
    with initialize_config_dir(config_dir=CONFIG_PATH, version_base="1.3"):
        cfg = compose(config_name="train", overrides=overrides)
    src_lines, tgt_lines = read(src), read(tgt)
    if joint:
        spm = train_sentencepiece(iter(src_lines + tgt_lines), TokenizerConfig(vocab_size=60))
        tokenizer = Tokenizer(spm, spm)
    else:
        src_spm, tgt_spm = (
            train_sentencepiece(iter(lines), TokenizerConfig(vocab_size=45)) for lines in (src_lines, tgt_lines)
        )
        tokenizer = Tokenizer(src_spm, tgt_spm)
    torch.manual_seed(0)
    model = build_model(ModelConfig(**cfg.model), tokenizer)
    src_ids, tgt_ids = tokenizer.encode_src(src_lines), tokenizer.encode_tgt(tgt_lines)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for step in range(steps):
        rows = slice(step * 50 % 300, step * 50 % 300 + 50)
        batch = collate(src_ids[rows], tgt_ids[rows])
        logits = model(batch.src, batch.tgt_in)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=PAD_ID)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    path = directory / f"model_{'pre' if pre_norm else 'post'}_{'joint' if joint else 'separate'}.safetensors"
    save_checkpoint(path, model.eval(), tokenizer, cfg, step=steps)
    return path


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> dict:
    """Checkpoints of a pre-norm and a post-norm model, and test sentences (with a blank and a one-word line)."""
    directory = tmp_path_factory.mktemp("export")
    src, _ = write_corpus(directory, "test", 30, 3)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: more threads only wait for each other on a busy machine
    try:
        pre, post = train_checkpoint(directory, pre_norm=True), train_checkpoint(directory, pre_norm=False)
    finally:
        torch.set_num_threads(threads)
    return {"pre": pre, "post": post, "sentences": [*read(src), "", "chien"], "dir": directory}


@pytest.fixture(scope="module")
def ct2_exports(toy) -> dict[str, Path]:
    out = {}
    for name, quantization in (("pre", "none"), ("post", "none"), ("pre", "int8")):
        folder = toy["dir"] / f"ct2_{name}_{quantization}"
        export(load_checkpoint(str(toy[name])), "ctranslate2", folder, quantization)
        out[f"{name}_{quantization}"] = folder
    return out


def both(toy, ct2_exports, norm: str, cfg: DecodingConfig, quantization: str = "none"):
    ckpt = load_checkpoint(str(toy[norm]))
    ours = Translator(ckpt.model, ckpt.tokenizer, cfg).search(toy["sentences"])
    theirs = CTranslate2Translator(str(ct2_exports[f"{norm}_{quantization}"]), cfg).search(toy["sentences"])
    return ours, theirs


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_ctranslate2_float32_greedy_and_beam_give_our_ids_and_scores(toy, ct2_exports, norm):
    for cfg in (DecodingConfig(strategy="greedy"), DecodingConfig(strategy="beam", beam_size=4, n_best=4)):
        ours, theirs = both(toy, ct2_exports, norm, cfg)
        assert [src for src, _ in ours] == [src for src, _ in theirs]
        for (_, our_hyps), (_, their_hyps) in zip(ours, theirs):
            assert [h.tokens for h in their_hyps] == [h.tokens for h in our_hyps], cfg.strategy
            for mine, other in zip(our_hyps, their_hyps):
                assert other.score == pytest.approx(mine.score, abs=1e-3)
                assert other.logprob == pytest.approx(mine.logprob, abs=1e-3)
    assert sum(len(h) == 4 for _, h in ours) >= len(ours) - 1  # n-best lists were compared (blank: none)


def test_ctranslate2_native_beam_stops_earlier_but_never_scores_better(toy, ct2_exports):
    """CTranslate2's own stopping rule (exact=False) may miss a longer hypothesis that ours finds."""
    cfg = DecodingConfig(strategy="beam", beam_size=4)
    ckpt = load_checkpoint(str(toy["pre"]))
    ours = Translator(ckpt.model, ckpt.tokenizer, cfg).search(toy["sentences"])
    native = CTranslate2Translator(str(ct2_exports["pre_none"]), cfg, exact=False).search(toy["sentences"])
    for (_, mine), (_, other) in zip(ours, native):
        if mine:
            assert other[0].score <= mine[0].score + 1e-4


def test_ctranslate2_int8_scores_like_float32(toy, ct2_exports):
    """int8 (weights per row, activations per row) shifts each token's log-probability a little, never wholesale.

    Equal greedy outputs are no fair test: the toy's top tokens are close, and how often int8 flips them depends on
    the CPU's int8 kernels (an AVX2 Zen 3 without VNNI kept 26-37% of them equal; AVX-512 machines kept over 70%).
    """
    cfg = DecodingConfig(strategy="greedy")
    ours, int8 = both(toy, ct2_exports, "pre", cfg, quantization="int8")
    assert all(b[0].tokens for (_, a), (_, b) in zip(ours, int8) if a)
    tokenizer = load_checkpoint(str(toy["pre"])).tokenizer
    kept = [(text, hyps[0].tokens) for text, (_, hyps) in zip(toy["sentences"], ours) if hyps]
    sources = [tokenizer.src.encode(text, out_type=str) + ["</s>"] for text, _ in kept]
    targets = [tokenizer.tgt.id_to_piece(list(tokens)) for _, tokens in kept]
    float32, quantized = (
        ctranslate2.Translator(str(ct2_exports[name]), device="cpu", compute_type=kind).score_batch(sources, targets)
        for name, kind in (("pre_none", "float32"), ("pre_int8", "int8"))
    )
    shifts = [abs(a - b) for x, y in zip(float32, quantized) for a, b in zip(x.log_probs, y.log_probs)]
    assert sum(shifts) / len(shifts) < 0.15, f"int8 moves a token's log-probability by {sum(shifts) / len(shifts):.3f}"
    size = {q: (ct2_exports[f"pre_{q}"] / "model.bin").stat().st_size for q in ("none", "int8")}
    assert size["int8"] < 0.5 * size["none"]


def test_ctranslate2_sampling_and_limits_follow_the_settings(toy, ct2_exports):
    cfg = DecodingConfig(strategy="sample", top_k=5, seed=3, max_len_a=0.0, max_len_b=4)
    translator = CTranslate2Translator(str(ct2_exports["pre_none"]), cfg)
    first = translator.search(toy["sentences"])
    second = CTranslate2Translator(str(ct2_exports["pre_none"]), cfg).search(toy["sentences"])
    assert [[h.tokens for h in hyps] for _, hyps in first] == [[h.tokens for h in hyps] for _, hyps in second]
    assert all(len(hyps[0].tokens) <= 4 for _, hyps in first if hyps)
    assert translator.translate(["", "chien"])[0] == ""


def test_ctranslate2_never_generates_bos_or_pad_either(toy, tmp_path):
    """A model whose likeliest first token is <s>, as a weakly trained one's often is: ours never generates it, and
    through CTranslate2 it is suppressed too; greedy search still gives our ids and scores."""
    ckpt = load_checkpoint(str(toy["pre"]))
    with torch.no_grad():
        bos = ckpt.model.output.weight[BOS_ID]
        ckpt.model.decoder_norm.bias += 10 * bos / bos.norm()  # every step's logits lean towards <s>
    export(ckpt, "ctranslate2", tmp_path / "ct2")
    sentences = [s for s in toy["sentences"] if s]
    src_ids = ckpt.tokenizer.encode_src(sentences)
    with torch.no_grad():
        first = ckpt.model(pad([ids + [EOS_ID] for ids in src_ids]), torch.full((len(src_ids), 1), BOS_ID))[:, 0]
    assert (first.argmax(-1) == BOS_ID).all()
    pieces = [[ckpt.tokenizer.src.id_to_piece(i) for i in ids] for ids in src_ids[:3]]
    free = ctranslate2.Translator(str(tmp_path / "ct2")).translate_batch(pieces, beam_size=1, max_decoding_length=4)
    assert all(result.hypotheses[0] == ["<s>"] * 4 for result in free)  # what CTranslate2 alone makes of it
    cfg = DecodingConfig(strategy="greedy")
    ours = Translator(ckpt.model, ckpt.tokenizer, cfg).search(sentences)
    theirs = CTranslate2Translator(str(tmp_path / "ct2"), cfg).search(sentences)
    for (_, mine), (_, other) in zip(ours, theirs):
        assert other[0].tokens == mine[0].tokens
        assert other[0].logprob == pytest.approx(mine[0].logprob, abs=1e-3)
    beam = CTranslate2Translator(str(tmp_path / "ct2"), DecodingConfig(strategy="beam", beam_size=4, n_best=4))
    for _, hyps in beam.search(sentences):
        assert len(hyps) == 4 and not any({BOS_ID, PAD_ID} & set(h.tokens) for h in hyps)
        assert all(a.score >= b.score for a, b in zip(hyps, hyps[1:]))


def prefixes_of(toy, ckpt) -> list[str]:
    """A prefix per test sentence: the first words of its greedy translation, one changed, so that the search is
    pushed off its own path; a word boundary ends each (CTranslate2 forces a prefix's pieces as they are)."""
    found = Translator(ckpt.model, ckpt.tokenizer, DecodingConfig(strategy="greedy")).translate(toy["sentences"])
    words = [text.split()[:2] for text in found]
    return [" ".join([w[-1][::-1], *w[1:]]) if w else "" for w in words]


@pytest.mark.parametrize(
    "cfg",
    [
        DecodingConfig(strategy="greedy"),
        DecodingConfig(strategy="beam", beam_size=4, n_best=3),
        DecodingConfig(strategy="greedy", alternatives=3),
        DecodingConfig(strategy="beam", beam_size=4, alternatives=3, length_penalty=0.0),
        DecodingConfig(strategy="greedy", suppress=["the", "a dog"], ban_unk=True),
    ],
    ids=["greedy", "beam", "greedy-alternatives", "beam-alternatives", "suppress"],
)
def test_ctranslate2_steered_by_a_prefix_gives_our_ids_and_scores(toy, ct2_exports, cfg):
    """A prefix, alternatives and suppressed phrases through CTranslate2 give our ids and scores in fp32 (ours forcing
    a prefix as CTranslate2 does: its pieces as SentencePiece splits it). Alternatives: at length penalty 0, where
    CTranslate2 normalises a continuation by its own length, ours by the whole. Suppressed phrases: greedy, since
    CTranslate2's beam ranks by log-probabilities raised by the suppression (see ctranslate2_engine)."""
    ckpt = load_checkpoint(str(toy["pre"]))
    prefixes = prefixes_of(toy, ckpt)
    ours = Translator(ckpt.model, ckpt.tokenizer, cfg)
    ours.spells_words = False
    mine = ours.search(toy["sentences"], prefixes=prefixes)
    theirs = CTranslate2Translator(str(ct2_exports["pre_none"]), cfg).search(toy["sentences"], prefixes=prefixes)
    compared = 0
    for (_, our_hyps), (_, their_hyps), prefix in zip(mine, theirs, prefixes):
        assert [h.tokens for h in their_hyps] == [h.tokens for h in our_hyps], prefix
        for a, b in zip(our_hyps, their_hyps):
            assert (a.forced, b.score, b.logprob) == (
                b.forced,
                pytest.approx(a.score, abs=1e-3),
                pytest.approx(a.logprob, abs=1e-3),
            )
            compared += 1
    assert compared >= len(toy["sentences"]) - 1
    texts = [ours.detokenize(hyps, prefix) for (_, hyps), prefix in zip(mine, prefixes)]
    assert all(text.startswith(prefix) for found, prefix in zip(texts, prefixes) for text in found)


def test_forced_scores_equal_ctranslate2s_score_batch(toy, ct2_exports):
    """Scores of given pairs (`decoding.scoring`) equal CTranslate2's `score_batch` on the export, token by token."""
    ckpt = load_checkpoint(str(toy["pre"]))
    sentences = [s for s in toy["sentences"] if s]  # the test set's French, then "chien"
    src_ids = ckpt.tokenizer.encode_src(sentences)
    targets = ckpt.tokenizer.encode_tgt([*read(toy["dir"] / "test.en"), "dog"])
    src = pad([ids + [EOS_ID] for ids in src_ids])
    ours = score(ckpt.model, src, targets, SearchOptions.from_config(strategy="beam"))
    pieces = [[ckpt.tokenizer.src.id_to_piece(i) for i in ids] for ids in src_ids]
    target_pieces = [[ckpt.tokenizer.tgt.id_to_piece(i) for i in ids] for ids in targets]
    theirs = ctranslate2.Translator(str(ct2_exports["pre_none"])).score_batch(pieces, target_pieces)
    for mine, other in zip(ours, theirs):
        assert mine.token_scores == pytest.approx(other.log_probs, abs=1e-4)
    # the same through each engine's text front (transformer-score engine=pytorch | ctranslate2)
    cfg = DecodingConfig(strategy="beam", precision="fp32", length_penalty=0.6)
    texts = [*read(toy["dir"] / "test.en"), "dog"]
    by_engine = [
        Translator(ckpt.model, ckpt.tokenizer, cfg).score(sentences, texts),
        CTranslate2Translator(str(ct2_exports["pre_none"]), cfg).score(sentences, texts),
    ]
    for mine, other in zip(*by_engine, strict=True):
        assert (mine.score, mine.logprob) == pytest.approx((other.score, other.logprob), abs=1e-4)


@pytest.fixture(scope="module")
def marian(toy) -> Path:
    folder = toy["dir"] / "marian_post"
    export(load_checkpoint(str(toy["post"])), "marian", folder)
    return folder


def test_marian_logits_equal_ours_on_a_padded_batch(toy, marian):
    ckpt = load_checkpoint(str(toy["post"]))
    tokenizer = transformers.MarianTokenizer.from_pretrained(str(marian))
    model = transformers.MarianMTModel.from_pretrained(str(marian)).eval()
    sentences = [s for s in toy["sentences"] if s][:8]
    batch = tokenizer(sentences, return_tensors="pt", padding=True)
    src = pad([ids + [EOS_ID] for ids in ckpt.tokenizer.encode_src(sentences)])
    assert torch.equal(batch["input_ids"], src)
    tgt_in = pad([[BOS_ID] + ids for ids in ckpt.tokenizer.encode_tgt(sentences)])  # any prefixes do
    with torch.no_grad():
        ours = ckpt.model(src, tgt_in)
        theirs = model(**batch, decoder_input_ids=tgt_in, decoder_attention_mask=tgt_in != PAD_ID).logits
    real = tgt_in != PAD_ID
    assert (src == PAD_ID).any() and (~real).any()  # the batch has padding on both sides
    torch.testing.assert_close(theirs[real], ours[real], atol=1e-4, rtol=0)


def test_marian_greedy_generate_equals_ours(toy, marian):
    ckpt = load_checkpoint(str(toy["post"]))
    tokenizer = transformers.MarianTokenizer.from_pretrained(str(marian))
    model = transformers.MarianMTModel.from_pretrained(str(marian)).eval()
    cfg = DecodingConfig(strategy="greedy")
    translator = Translator(ckpt.model, ckpt.tokenizer, cfg)
    sentences = [s for s in toy["sentences"] if s]
    ours = translator.search(sentences)
    batch = tokenizer(sentences, return_tensors="pt", padding=True)
    limits = [int(cfg.max_len_a * (len(src) + 1) + cfg.max_len_b) for src, _ in ours]  # a·(tokens + EOS) + b
    generated = model.generate(**batch, do_sample=False, num_beams=1, max_new_tokens=max(limits))
    for (_, hyps), row, limit in zip(ours, generated.tolist(), limits):
        row = row[1 : limit + 1]  # after the decoder start (our BOS), up to our output limit
        row = row[: row.index(EOS_ID)] if EOS_ID in row else row
        assert row == hyps[0].tokens
        text = ckpt.tokenizer.decode_tgt([row])[0]
        assert tokenizer.decode(row, skip_special_tokens=True) == text.strip()  # MarianTokenizer strips its text


def test_refusals_name_the_problem_and_write_nothing(toy, tmp_path):
    ckpt = load_checkpoint(str(toy["pre"]))
    with pytest.raises(
        UserError, match=r"format=marian cannot hold this model: it is pre-norm \(model.pre_norm=true\)"
    ):
        export(ckpt, "marian", tmp_path / "marian")
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "keep.txt").write_text("mine")
    cases = {
        "exists and is not empty": dict(output=str(occupied)),
        "is not one of ctranslate2, marian": dict(format="onnx"),
        "export.quantization='int4' is not one of": dict(quantization="int4"),
        "export.quantization is for format=ctranslate2": dict(format="marian", quantization="int8"),
    }
    for message, change in cases.items():
        settings = dict(format="ctranslate2", output=str(tmp_path / "out"), quantization="none", force=False)
        settings |= change
        cfg = {"format": settings["format"], "output": settings["output"]}
        cfg["export"] = {"quantization": settings["quantization"], "force": settings["force"]}
        with pytest.raises(UserError, match=message.replace("(", r"\(")):
            check_export(OmegaConf.create(cfg))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["occupied"] and (occupied / "keep.txt").read_text() == "mine"
    save_file({"x": torch.zeros(2)}, str(tmp_path / "foreign.safetensors"), metadata={"format": "pt"})
    with pytest.raises(UserError, match="is not a checkpoint of this tool"):
        load_checkpoint(str(tmp_path / "foreign.safetensors"))
    with pytest.raises(UserError, match="is not a CTranslate2 export of this tool"):
        CTranslate2Translator(str(tmp_path / "occupied"), DecodingConfig())
    for model, message in (
        ({"family": "rnn"}, "model.family=rnn: CTranslate2 and MarianMT hold Transformers only"),
        ({"attention": {"encoder": "local", "decoder": "dot", "cross": "dot"}}, "model.attention.encoder=local: the"),
    ):
        with pytest.raises(UserError, match=message):
            export(SimpleNamespace(config=OmegaConf.create({"model": model})), "ctranslate2", tmp_path / "out")
    assert not (tmp_path / "out").exists()
    with pytest.raises(UserError, match="length_penalty_kind=gnmt is not available"):
        CTranslate2Translator(str(tmp_path), DecodingConfig(strategy="beam", length_penalty_kind="gnmt"))


def readme_translate(folder: Path):
    """The `translate` function of an export's README, run as its reader runs it: from the folder's parent."""
    code = (folder / "README.md").read_text().split("```python\n")[1].split("```")[0]
    namespace: dict = {}
    with contextlib.chdir(folder.parent), contextlib.redirect_stdout(io.StringIO()):
        exec(code, namespace)
    return namespace["translate"]


def test_the_readme_translates_as_transformer_translate(toy, ct2_exports):
    """The export's README, called as written, gives our greedy translations, where CTranslate2 left to its own
    output limit runs a weak model's repetitions further."""
    translate, ckpt = readme_translate(ct2_exports["post_none"]), load_checkpoint(str(toy["post"]))
    sentences = toy["sentences"]
    ours = Translator(ckpt.model, ckpt.tokenizer, presets.compose("decoding", "greedy")).translate(sentences)
    assert translate(sentences, beam_size=1) == ours
    unlimited = ctranslate2.Translator(str(ct2_exports["post_none"])).translate_batch(
        [ckpt.tokenizer.src.encode(s, out_type=str) for s in sentences], beam_size=1
    )
    assert max(len(r.hypotheses[0]) for r in unlimited) > max(len(ckpt.tokenizer.tgt.encode(s)) for s in ours)


def cli(tool: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / tool), *args], cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_export_and_translate_commands(toy, tmp_path):
    out = tmp_path / "ct2"
    result = cli("transformer-export", f"checkpoint={toy['pre']}", f"output={out}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert {"model.bin", "spm.model", "README.md", "transformer_config.yaml"} <= {p.name for p in out.iterdir()}
    again = cli("transformer-export", f"checkpoint={toy['pre']}", f"output={out}", cwd=tmp_path)
    assert again.returncode == 2 and again.stderr.strip().splitlines() == [
        f"error: output={out} exists and is not empty; choose another folder or set export.force=true"
    ]
    refused = cli("transformer-export", f"checkpoint={toy['pre']}", "format=marian", "output=hf", cwd=tmp_path)
    assert refused.returncode == 2 and refused.stderr.startswith("error: format=marian cannot hold this model")
    missing = cli("transformer-export", "checkpoint=nowhere", "output=x", cwd=tmp_path)
    assert missing.returncode == 2 and "checkpoint nowhere does not exist" in missing.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ct2"]
    sentences = "sentences=[" + ",".join(s for s in toy["sentences"][:5]) + "]"
    args = [sentences, "decoding=beam", "decoding.n_best=2", "decoding.precision=fp32"]  # ours exact: the same ids
    ours = cli("transformer-translate", f"checkpoint={toy['pre']}", *args, cwd=tmp_path)
    theirs = cli("transformer-translate", f"checkpoint={out}", "engine=ctranslate2", *args, cwd=tmp_path)
    assert ours.returncode == theirs.returncode == 0, theirs.stderr
    assert theirs.stdout == ours.stdout and len(ours.stdout.splitlines()) == 10


def test_separate_vocabularies_export_to_both_formats(toy, tmp_path):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        path = train_checkpoint(tmp_path, pre_norm=False, joint=False)
    finally:
        torch.set_num_threads(threads)
    ckpt = load_checkpoint(str(path))
    assert not ckpt.tokenizer.joint and ckpt.model.src_embed is not ckpt.model.tgt_embed
    export(ckpt, "ctranslate2", tmp_path / "ct2")
    export(ckpt, "marian", tmp_path / "marian")
    assert {"source_vocabulary.json", "target_vocabulary.json", "spm.src.model"} <= set(os.listdir(tmp_path / "ct2"))
    cfg = DecodingConfig(strategy="beam", beam_size=4)
    ours = Translator(ckpt.model, ckpt.tokenizer, cfg).search(toy["sentences"])
    theirs = CTranslate2Translator(str(tmp_path / "ct2"), cfg).search(toy["sentences"])
    assert [[h.tokens for h in hyps] for _, hyps in theirs] == [[h.tokens for h in hyps] for _, hyps in ours]
    tokenizer = transformers.MarianTokenizer.from_pretrained(str(tmp_path / "marian"))
    model = transformers.MarianMTModel.from_pretrained(str(tmp_path / "marian")).eval()
    sentences = [s for s in toy["sentences"] if s][:6]
    batch = tokenizer(sentences, return_tensors="pt", padding=True)
    assert torch.equal(batch["input_ids"], pad([ids + [EOS_ID] for ids in ckpt.tokenizer.encode_src(sentences)]))
    tgt_in = pad([[BOS_ID] + ids for ids in ckpt.tokenizer.encode_tgt(sentences)])
    with torch.no_grad():
        theirs = model(**batch, decoder_input_ids=tgt_in).logits
        ours = ckpt.model(batch["input_ids"], tgt_in)
    real = tgt_in != PAD_ID
    torch.testing.assert_close(theirs[real], ours[real], atol=1e-4, rtol=0)


def test_the_export_config_composes_with_its_defaults(tmp_path):
    with initialize_config_dir(config_dir=CONFIG_PATH, version_base="1.3"):
        cfg = compose(config_name="export", overrides=["checkpoint=run", f"output={tmp_path / 'out'}"])
    assert (cfg.format, cfg.export.quantization, cfg.export.force) == ("ctranslate2", "none", False)
    assert check_export(cfg) == tmp_path / "out"
