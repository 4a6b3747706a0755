"""Text-level translation: order, blank lines, unknown characters, over-long sentences, decoding limits."""

import torch

from tests.conftest import WORDS_EN, WORDS_FR, rebuilt, tiny_model
from transformer.config import DecodingConfig, TokenizerConfig
from transformer.tokenizer import Tokenizer, train_sentencepiece
from transformer.translator import Translator


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
    assert t.max_len(torch.tensor([4, 10])).tolist() == [4, 7]
    assert t.max_len(torch.tensor([100])).tolist() == [15]  # capped by max_positions - 1


def test_every_strategy_translates():
    for strategy in ("greedy", "beam", "sample"):
        assert len(translator(strategy, beam_size=3).translate(["un chien", "le parc"])) == 2


def test_weights_changed_in_place_between_calls_are_used():
    """As between two validations in training: fused Adam updates the weights in place."""
    t = translator()
    sentences = ["un chien rouge dort", "le chat"]
    t.search(sentences)
    optimizer = torch.optim.Adam(t.model.parameters(), lr=0.05, fused=True)
    ids = torch.randint(3, t.tokenizer.src_vocab_size, (2, 6))
    t.model.train()
    t.model(ids, ids).logsumexp(-1).mean().backward()
    optimizer.step()
    fresh = rebuilt(t.model, vocab=t.tokenizer.src_vocab_size, max_positions=16, joint_vocab=True)
    for (_, hyps), (_, fresh_hyps) in zip(t.search(sentences), Translator(fresh, t.tokenizer, t.cfg).search(sentences)):
        assert hyps[0].tokens == fresh_hyps[0].tokens
        assert abs(hyps[0].logprob - fresh_hyps[0].logprob) < 1e-5
