"""Text-level translation: order, blank lines, unknown characters, over-long sentences, decoding limits."""

import threading

import pytest
import torch

from tests.conftest import WORDS_EN, WORDS_FR, rebuilt, tiny_model
from transformer.core.config import DecodingConfig, TokenizerConfig, TrainerConfig
from transformer.core.special_ids import EOS_ID
from transformer.data.tokenizer import POOL_FROM, Tokenizer, train_sentencepiece
from transformer.decoding import SearchOptions, search
from transformer.decoding.translator import Translator
from transformer.training.validation import Validator


def translator(strategy: str = "greedy", **kwargs) -> Translator:
    sentences = [" ".join(WORDS_FR[i:] + WORDS_EN[:i]) for i in range(len(WORDS_FR))] * 5
    model_proto = train_sentencepiece(iter(sentences), TokenizerConfig(vocab_size=60))
    tokenizer = Tokenizer(model_proto, model_proto)
    model = tiny_model(vocab=tokenizer.src_vocab_size, max_positions=16, joint_vocab=True)
    return Translator(model, tokenizer, DecodingConfig(strategy=strategy, batch_size=2, **kwargs))


def test_order_blank_lines_and_unknown_characters_are_handled():
    t = translator()
    inputs = ["un chien rouge", "", "le chat dort dans le parc", "   ", "un homme ☃ 🐕"]
    out = t.translate(inputs)
    assert len(out) == 5 and out[1] == "" and out[3] == ""
    # each sentence translates the same alone as in the batch
    assert [t.translate([s])[0] for s in inputs] == out


def test_over_long_sentence_is_left_untranslated_with_an_error(caplog):
    t = translator()
    long = " ".join(["chien"] * 40)  # far beyond max_positions=16
    with caplog.at_level("ERROR"):
        out = t.translate(["un chat", long])
    assert out[1] == "" and "sentence 2 has" in caplog.text and "left untranslated" in caplog.text


def test_output_limit_is_a_times_source_plus_b():
    t = translator(max_len_a=0.5, max_len_b=2)
    assert t.options.output_limits(torch.tensor([4, 10]), t.model.max_positions).tolist() == [4, 7]
    assert t.options.output_limits(torch.tensor([100]), t.model.max_positions).tolist() == [15]  # max_positions - 1
    src_lengths = [len(x) + 1 for x in t.tokenizer.encode_src(["un chien rouge dort dans le parc"])]  # EOS included
    ((_, hyps),) = t.search(["un chien rouge dort dans le parc"])
    assert len(hyps[0].token_scores) <= int(0.5 * src_lengths[0] + 2)


@pytest.mark.parametrize("strategy", ["greedy", "beam", "sample"])
def test_every_strategy_translates_to_its_searched_ids_detokenized(strategy):
    """Each text is what `search` gives its ids alone, on the model itself, seeded as the translator seeds."""
    t, sentences = translator(strategy, beam_size=3), ["un chien", "le parc", "une femme mange dans le parc"]
    expected = []
    for ids in t.tokenizer.encode_src(sentences):
        src = torch.tensor([ids + [EOS_ID]])
        ((best, *_),) = search(t.model, src, t.options, generator=torch.Generator().manual_seed(t.cfg.seed))
        expected.append(t.tokenizer.decode_tgt([best.tokens])[0])
    assert any(expected)  # the untrained model says something
    assert [t.translate([s])[0] for s in sentences] == expected


def test_lists_below_and_above_the_pool_size_tokenize_alike():
    tokenizer = translator().tokenizer
    sentences = [f"{w} {v} chien" for w in WORDS_FR for v in WORDS_FR] * (POOL_FROM // len(WORDS_FR) ** 2 + 1)
    assert len(sentences) >= POOL_FROM  # SentencePiece's thread pool
    ids = tokenizer.encode_src(sentences)
    assert ids[:50] == tokenizer.encode_src(sentences[:50]) == [tokenizer.src.encode(s) for s in sentences[:50]]
    assert tokenizer.decode_tgt(ids)[:50] == tokenizer.decode_tgt(ids[:50]) == tokenizer.tgt.decode(ids[:50])


def test_weights_changed_in_place_between_validations_are_used():
    """Fused Adam updates the weights in place between two validations; each validation searches a new copy."""
    t = translator()
    sentences = ["un chien rouge dort", "le chat"]
    src_ids = t.tokenizer.encode_src(sentences)
    val = {"src": sentences, "tgt": sentences, "src_ids": src_ids, "tgt_ids": src_ids}
    trainer = TrainerConfig(batch_tokens=64, precision="fp32", attention_images=0, progress=False, val_max_sentences=2)
    validator = Validator(t.model, t.tokenizer, val, trainer, t.cfg)
    validator.translator().search(sentences)
    optimizer = torch.optim.Adam(t.model.parameters(), lr=0.05, fused=True)
    ids = torch.randint(3, t.tokenizer.src_vocab_size, (2, 6))
    t.model.train()
    t.model(ids, ids).logsumexp(-1).mean().backward()
    optimizer.step()
    fresh = rebuilt(t.model, vocab=t.tokenizer.src_vocab_size, max_positions=16, joint_vocab=True)
    searched = validator.translator().search(sentences)
    for (_, hyps), (_, fresh_hyps) in zip(searched, Translator(fresh, t.tokenizer, t.cfg).search(sentences)):
        assert hyps[0].tokens == fresh_hyps[0].tokens
        assert abs(hyps[0].logprob - fresh_hyps[0].logprob) < 1e-5


def in_two_threads(work) -> list:
    """`work(i)` for i = 0, 1, run at the same time in two threads."""
    results: list = [None, None]
    barrier = threading.Barrier(2)

    def run(i):
        barrier.wait()
        results[i] = work(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


SENTENCES = [
    ["un chien rouge dort dans le parc", "le chat", "une femme mange"],
    ["un homme court", "le chien bleu"] * 3,
]


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_two_threads_translating_at_once_get_what_each_gets_alone(strategy):
    t = translator(strategy, beam_size=3, n_best=2 if strategy == "beam" else 1)
    alone = [t.translate_nbest(sentences) for sentences in SENTENCES]
    for _ in range(3):
        assert in_two_threads(lambda i: t.translate_nbest(SENTENCES[i])) == alone


def test_per_call_options_and_generators():
    t = translator("greedy")
    sample = SearchOptions.from_config(t.cfg, strategy="sample", temperature=2.0)

    def draw(seed):
        return t.translate(SENTENCES[1] * 3, options=sample, generator=torch.Generator().manual_seed(seed))

    first = draw(1)
    assert draw(1) == first and any(draw(seed) != first for seed in (2, 3, 4))  # seeded, and really random
    assert in_two_threads(lambda i: draw(1)) == [first, first]
    assert t.translate(SENTENCES[1]) == translator("greedy").translate(SENTENCES[1])  # the default options remain
    beam = SearchOptions.from_config(t.cfg, strategy="beam", beam_size=4, n_best=3)
    assert all(len(hyps) == 3 for _, hyps in t.search(SENTENCES[0], options=beam))
    assert t.translate(
        SENTENCES[0], options=SearchOptions.from_config(strategy="beam", beam_size=1, length_penalty=0)
    ) == t.translate(SENTENCES[0])  # beam 1 is greedy


def test_sampling_reuses_no_state_between_calls():
    t = translator("sample", temperature=2.0, seed=7)
    first = t.translate(SENTENCES[1])
    assert t.translate(SENTENCES[1]) == first  # each call seeds its own generator: cfg.seed's
    assert t.translate(SENTENCES[1], generator=torch.Generator().manual_seed(7)) == first
    assert t.translate(SENTENCES[1], generator=torch.Generator().manual_seed(8)) != first


def test_impossible_settings_are_refused_up_front():
    for bad in (
        dict(strategy="nucleus"),
        dict(temperature=0.0),
        dict(top_p=1.5),
        dict(strategy="beam", beam_size=2, n_best=3),
    ):
        with pytest.raises(ValueError):
            translator(**bad)
