"""Start-up checks of a composed config: every range and combination a user can get wrong, one line each.

Types and unknown keys are Hydra's job (the dataclasses in `config.py`); these catch the values a type cannot: a
negative dropout, an attention kind that cannot serve its use (a decoding strategy's options: its entry in
`transformer.core.strategies.STRATEGIES`). `check_config` collects every problem and raises one `UserError`.
"""

import re
from dataclasses import asdict

from transformer.core.config import (
    ATTENTION_USES,
    RESERVED_TAGS,
    TAG_PATTERN,
    DataConfig,
    DecodingConfig,
    ExtraCorpus,
    ModelConfig,
    OptimConfig,
    ResultsConfig,
    RNNConfig,
    TokenizerConfig,
    TrainerConfig,
    TranslateConfig,
    bounds,
    choice_fields,
)
from transformer.core.errors import UserError
from transformer.core.strategies import bound_problem, control_problems
from transformer.core.strategies import problems as strategy_problems
from transformer.data.corpus import check_sources, extra_corpus


def _choice(problems: list[str], key: str, value, choices: tuple) -> None:
    if value not in choices:
        problems.append(f"{key}={value!r} is not one of {', '.join(map(str, choices))}")


def _choices(problems: list[str], prefix: str, node, schema: type) -> None:
    """Every setting of `schema` made with `config.choice` that `node` holds, against its allowed values."""
    for name, allowed in choice_fields(schema).items():
        if name in node:
            _choice(problems, f"{prefix}{name}", node[name], allowed)


def _bounded(problems: list[str], prefix: str, node, schema: type) -> None:
    """Every setting of `schema` made with `config.bounded` against its bounds."""
    for name in schema.__dataclass_fields__:
        if b := bounds(schema, name):
            problems += filter(None, [bound_problem(f"{prefix}{name}", node[name], b)])


def _at_least(problems: list[str], key: str, value, low) -> None:
    if value < low:
        problems.append(f"{key}={value} must be at least {low}")


def _in_range(problems: list[str], key: str, value, low, high) -> None:
    if not low <= value < high:
        problems.append(f"{key}={value} must be in [{low}, {high})")


def _positive(problems: list[str], key: str, value) -> None:
    if not value > 0:
        problems.append(f"{key}={value} must be greater than 0")


def _device(problems: list[str], key: str, name: str) -> None:
    from transformer.compute.runtime import device_problem  # torch is imported only when a device is checked

    problem = device_problem(name)
    if problem:
        problems.append(f"{key}={name}: {problem}")


def _check_model(problems: list[str], m) -> None:
    for key in ("d_model", "n_heads", "n_encoder_layers", "n_decoder_layers", "d_ff", "max_positions"):
        _at_least(problems, f"model.{key}", m[key], 1)
    if m.n_heads >= 1 and m.d_model % m.n_heads:
        problems.append(f"model.d_model={m.d_model} is not divisible by model.n_heads={m.n_heads}")
    if m.d_model % 2:
        problems.append(f"model.d_model={m.d_model} must be even (the position table pairs sin/cos dimensions)")
    for key in ("dropout", "attention_dropout", "activation_dropout"):
        _in_range(problems, f"model.{key}", m[key], 0, 1)
    _choices(problems, "model.", m, ModelConfig)
    if m.get("family") == "rnn":
        for key in ("embedding_dim", "encoder_hidden", "decoder_hidden", "attention_dim", "encoder_layers"):
            _at_least(problems, f"model.rnn.{key}", m.rnn[key], 1)
        _at_least(problems, "model.rnn.decoder_layers", m.rnn.decoder_layers, 1)
        _choices(problems, "model.rnn.", m.rnn, RNNConfig)
    if "attention" in m:
        _check_attention(problems, m.attention)


def _check_attention(problems: list[str], a) -> None:
    from transformer.models.attention import VARIANTS, usable  # torch is imported only when a model is checked

    for use in ATTENTION_USES:
        name = a[use]
        if name not in VARIANTS:
            problems.append(f"model.attention.{use}={name!r} is not one of {', '.join(VARIANTS)}")
        elif not usable(name, use):
            valid = ", ".join(n for n in VARIANTS if usable(n, use))
            problems.append(f"model.attention.{use}={name} cannot serve {use} attention; valid: {valid}")
    for key in ("window", "stride", "bucket_size", "n_hashes", "rank"):
        _at_least(problems, f"model.attention.{key}", a[key], 1)


def _tag(problems: list[str], key: str, tag) -> None:
    if tag and (not re.fullmatch(TAG_PATTERN, str(tag)) or tag in RESERVED_TAGS):
        problems.append(
            f"{key}={tag!r} is not a tag name: letters, digits, _ and - (its piece is <NAME>), not "
            + ", ".join(RESERVED_TAGS)
        )


def _check_corpus(problems: list[str], key: str, weight, tag) -> None:
    """A training corpus's weight and tag (`key`: data or data.extra_train.NAME)."""
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not weight > 0:
        problems.append(f"{key}.weight={weight!r} must be a number greater than 0")
    _tag(problems, f"{key}.tag", tag)


def _check_data(problems: list[str], d) -> None:
    _check_corpus(problems, "data", d.weight, d.tag)
    problems += check_sources(d)
    for name, entry in d.extra_train.items():
        try:
            extra = extra_corpus(name, entry)
        except UserError:
            continue  # check_sources named it
        _check_corpus(problems, f"data.extra_train.{name}", extra.weight, extra.tag)
        _bounded(problems, f"data.extra_train.{name}.", asdict(extra), ExtraCorpus)
    if not (d.clean.max_ratio == 0 or d.clean.max_ratio >= 1):
        problems.append(f"data.clean.max_ratio={d.clean.max_ratio} must be 0 (off) or at least 1")
    _at_least(problems, "data.max_len", d.max_len, 1)
    _at_least(problems, "data.num_proc", d.num_proc, 0)
    _at_least(problems, "data.shard_pairs", d.shard_pairs, 1)
    _choices(problems, "data.", d, DataConfig)
    _choices(problems, "data.tokenizer.", d.tokenizer, TokenizerConfig)
    _at_least(problems, "data.tokenizer.vocab_size", d.tokenizer.vocab_size, 8)
    _at_least(problems, "data.tokenizer.input_sentence_size", d.tokenizer.input_sentence_size, 1)
    if not 0 < d.tokenizer.character_coverage <= 1:
        problems.append(f"data.tokenizer.character_coverage={d.tokenizer.character_coverage} must be in (0, 1]")
    _in_range(problems, "data.subword_dropout", d.subword_dropout, 0, 1)
    if d.both_directions and not d.tokenizer.joint:
        problems.append("data.both_directions needs data.tokenizer.joint=true: each side holds both languages")
    if d.subword_dropout > 0 and d.tokenizer.model_type != "bpe":
        problems.append("data.subword_dropout is BPE-dropout: it needs data.tokenizer.model_type=bpe")


def _check_optim(problems: list[str], o) -> None:
    _choices(problems, "optim.", o, OptimConfig)
    _positive(problems, "optim.lr", o.lr)
    _positive(problems, "optim.eps", o.eps)
    for key in ("warmup_steps", "weight_decay", "clip_norm"):
        _at_least(problems, f"optim.{key}", o[key], 0)
    for i, beta in enumerate(o.betas):
        _in_range(problems, f"optim.betas[{i}]", beta, 0, 1)
    _in_range(problems, "optim.label_smoothing", o.label_smoothing, 0, 1)


def _check_trainer(problems: list[str], t) -> None:
    _choices(problems, "trainer.", t, TrainerConfig)
    for key in ("batch_tokens", "accumulate", "max_steps", "max_epochs", "val_every", "log_every", "max_nonfinite"):
        _at_least(problems, f"trainer.{key}", t[key], 1)
    for key in ("max_minutes", "val_max_sentences", "attention_images", "keep_last", "keep_best", "patience"):
        _at_least(problems, f"trainer.{key}", t[key], 0)
    _at_least(problems, "trainer.num_threads", t.num_threads, 0)
    _positive(problems, "trainer.collective_timeout_minutes", t.collective_timeout_minutes)
    _device(problems, "trainer.device", t.device)
    if t.resume and t.init_from:
        problems.append(
            "trainer.resume and trainer.init_from exclude each other: resume continues a run exactly (its weights, "
            "optimizer, learning-rate schedule, step count and place in the data), init_from starts a new run from "
            "a trained model's weights and vocabulary (fresh optimizer, schedule and step count); give one of them"
        )


def _check_guided(problems: list[str], cfg) -> None:
    """Guided alignment trains a dot-product cross-attention head of a Transformer towards the training corpus's
    word alignments, read off its deterministic segmentation."""
    g, m = cfg.trainer.guided_alignment, cfg.model
    _at_least(problems, "trainer.guided_alignment.weight", g.weight, 0)
    if g.weight <= 0:
        return
    if not cfg.data.word_alignment:
        problems.append(
            "trainer.guided_alignment.weight > 0 trains towards the training corpus's word alignments: set "
            "data.word_alignment=eflomal (pip install '.[align]')"
        )
    if m.family != "transformer" or m.attention.cross != "dot":
        problems.append("guided alignment needs model.family=transformer with model.attention.cross=dot")
    if cfg.data.subword_dropout > 0:
        problems.append("guided alignment needs data.subword_dropout=0 (its links are between the fixed pieces)")
    if not -m.n_decoder_layers <= g.layer < m.n_decoder_layers:
        problems.append(f"trainer.guided_alignment.layer={g.layer}: the model has {m.n_decoder_layers} decoder layers")
    if not 0 <= g.head < m.n_heads:
        problems.append(f"trainer.guided_alignment.head={g.head}: the model has {m.n_heads} heads")


def _check_serve(problems: list[str], s) -> None:
    for key in ("max_batch_tokens", "max_chars", "max_texts", "max_sentences", "max_waiting", "workers"):
        _at_least(problems, f"serve.{key}", s[key], 1)
    _in_range(problems, "serve.port", s.port, 0, 65536)
    _positive(problems, "serve.timeout_s", s.timeout_s)
    _at_least(problems, "serve.max_wait_ms", s.max_wait_ms, 0)


def _check_validation_tag(problems: list[str], cfg) -> None:
    """A training run from scratch validates "as" a tag only one of its corpora has (fine-tuning: the checkpoint's
    vocabulary decides, see transformer.training.start)."""
    tag = cfg.decoding.tag
    if not tag or cfg.trainer.init_from:
        return
    extras = [entry.get("tag", "") for entry in cfg.data.extra_train.values()]
    if tag not in (cfg.data.tag, *extras):
        problems.append(
            f"decoding.tag={tag}: validation would translate as a corpus tagged {tag}, but no training corpus is "
            "(data.tag, data.extra_train.NAME.tag)"
        )


def _check_decoding(problems: list[str], d) -> None:
    _choices(problems, "decoding.", d, DecodingConfig)
    _bounded(problems, "decoding.", d, DecodingConfig)
    problems += strategy_problems(d, "decoding.", settings=True)  # the strategy, its options and their combinations
    _tag(problems, "decoding.tag", d.tag)
    problems += [f"decoding.suppress[{i}] is empty: give a word or phrase" for i, p in enumerate(d.suppress) if not p]


def _check_controls(problems: list[str], cfg) -> None:
    """The controls a command asks for (a prefix, alternatives, suppressed phrases), against its strategy and
    engine (`core.strategies.CONTROLS`)."""
    prefixed = bool(cfg.get("prefix") or cfg.get("prefix_file"))
    problems += control_problems(cfg.decoding, prefixed, bool(cfg.get("constraints")), cfg.get("engine", "pytorch"))
    if (prefixed or cfg.get("constraints")) and cfg.get("split_sentences"):
        problems.append("split_sentences=true splits a line into sentences: a prefix or constraints belong to one")
    if cfg.get("prefix") and cfg.get("prefix_file"):
        problems.append("give the prefixes either in the input (prefix=true) or in prefix_file=FILE, not both")


def check_config(cfg) -> None:
    """Reject impossible settings and combinations before any work starts (types are Hydra's job)."""
    problems: list[str] = []
    for section, check in (
        ("model", _check_model),
        ("data", _check_data),
        ("optim", _check_optim),
        ("trainer", _check_trainer),
        ("decoding", _check_decoding),
        ("serve", _check_serve),
    ):
        if section in cfg:
            check(problems, cfg[section])
    if "trainer" in cfg and "data" in cfg and "decoding" in cfg:
        _check_validation_tag(problems, cfg)
    if "trainer" in cfg and "model" in cfg:
        _check_guided(problems, cfg)
    if "decoding" in cfg and not problems:
        _check_controls(problems, cfg)
    if "model" in cfg and "data" in cfg and cfg.model.max_positions <= cfg.data.max_len + 1:
        problems.append(
            f"model.max_positions={cfg.model.max_positions} must exceed data.max_len+1={cfg.data.max_len + 1} "
            "(a training sentence plus its BOS/EOS token)"
        )
    if "device" in cfg:
        _device(problems, "device", cfg.device)
    if "chunk_lines" in cfg:
        _at_least(problems, "chunk_lines", cfg.chunk_lines, 1)
    if "engine" in cfg:
        _choices(problems, "", cfg, TranslateConfig)  # engine, as evaluate's
        if cfg.engine == "ctranslate2" and cfg.get("plot_attention"):
            problems.append("plot_attention needs engine=pytorch (CTranslate2 does not return our attention)")
    if "tests" in cfg:
        _choices(problems, "", cfg, ResultsConfig)
        if cfg.tests == "chosen" and not cfg.val:
            problems.append("tests=chosen needs val=true (val chooses the model the test sets score)")
    if problems:
        raise UserError("invalid settings: " + "; ".join(problems))
