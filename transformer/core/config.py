"""Typed configuration schemas; the YAML files in `configs/` fill them in.

Every setting of every command lives here with its meaning. They are plain dataclasses: `transformer.cli`
registers them with Hydra, which validates the YAML groups and command-line overrides against them, so an
unknown key or a wrong type fails before any work starts; the library imports them without Hydra.
"""

from dataclasses import Field, dataclass, field, fields, make_dataclass
from typing import Any, Literal, get_args

from omegaconf import MISSING

from transformer.core.precision import FLOAT32_WEIGHTS, INFERENCE, QUANTIZATIONS, SCORED_IN, TRAINING, TRANSLATED_IN
from transformer.core.strategies import STRATEGIES, options

# The allowed values of each setting that is a choice, defined here once: `check_config`, the search, the service's
# request schema and the error messages read them through `choices`.
ModelType = Literal["bpe", "unigram"]
Family = Literal["transformer", "rnn"]
Cell = Literal["gru", "lstm"]
Scoring = Literal["additive", "dot"]
Schedule = Literal["inverse_sqrt", "linear"]
Precision = Literal[TRAINING]  # these three from `transformer.core.precision.PRECISIONS`
InferencePrecision = Literal[INFERENCE]
Strategy = Literal[tuple(STRATEGIES)]  # the names of `transformer.core.strategies.STRATEGIES`
Engine = Literal["pytorch", "ctranslate2"]
Markup = Literal["none", "xml"]
ExportFormat = Literal["ctranslate2", "marian"]
Quantization = Literal[QUANTIZATIONS]
TestScope = Literal["all", "chosen"]
RecipeMode = Literal["bt", "st"]

CHUNK_LINES = 2000  # lines that transformer-translate and transformer-backtranslate translate and write at a time


def choice(allowed: Any, default: str) -> Any:
    """A setting whose value is one of the `Literal` type `allowed`; stored as `str`, since OmegaConf's structured
    configs take no `Literal` (`check_config` checks the value)."""
    if default not in get_args(allowed):
        raise ValueError(f"default {default!r} is not one of {get_args(allowed)}")
    return field(default=default, metadata={"choices": allowed})


def bounded(default: float, **bounds: float) -> Any:
    """A number setting with bounds (`ge`, `gt`, `le`, `lt`, as pydantic names them), read by `check_config` and by
    the service's request schema."""
    return field(default=default, metadata={"bounds": bounds})


def bounds(schema: type, name: str) -> dict[str, float]:
    """The bounds of the setting `name` of the dataclass `schema` (made with `bounded`; {} otherwise)."""
    return next(f for f in fields(schema) if f.name == name).metadata.get("bounds", {})


def choices(allowed: Any) -> tuple[str, ...]:
    """The allowed values of a `Literal` type, in their order."""
    return get_args(allowed)


def choice_fields(schema: type) -> dict[str, tuple[str, ...]]:
    """Each setting of the dataclass `schema` made with `choice`, with its allowed values."""
    chosen: list[Field] = [f for f in fields(schema) if "choices" in f.metadata]
    return {f.name: choices(f.metadata["choices"]) for f in chosen}


@dataclass
class SourceConfig:
    """Where a parallel corpus's pairs come from (`data.sources` reads it): two aligned text files (`src`,
    `tgt`), or one `path`: a .tsv or .tmx file, or a Hugging Face dataset. Files may be compressed: .gz, .xz, .bz2,
    .zst. Without `format`, src/tgt mean text files, a path ending in .tsv or .tmx (plus compression) those, and
    any other path a dataset."""

    src: str | None = None  # one sentence per line; line n of tgt translates line n of src
    tgt: str | None = None
    path: str | None = None  # a .tsv or .tmx file; or a dataset: hub name, save_to_disk folder, .parquet/.jsonl file
    format: str = ""  # one of transformer.data.sources.SOURCES (text, tsv, tmx, datasets); "" = inferred as above
    # tsv: the source and target columns, 0-based (default [0, 1]); a line with too few columns is skipped.
    # datasets: two text columns by name (default: the `field` column's dicts)
    columns: list[Any] | None = None
    field: str = "translation"  # datasets: the column of {language code: text} dicts (data.src_lang/tgt_lang keys)
    name: str | None = None  # datasets: its configuration, e.g. fr-en
    split: str = "train"  # datasets: its split
    revision: str | None = None  # datasets on the hub: a branch, tag or commit
    streaming: bool = True  # datasets: read hub datasets and data files as a stream, not downloaded whole first


@dataclass
class TokenizerConfig:
    """SentencePiece settings; the model is trained on the training split only."""

    vocab_size: int = 8000  # joint: one vocabulary of this size; separate: one per side
    model_type: str = choice(ModelType, "bpe")
    joint: bool = True  # one vocabulary for both languages (enables tying all embeddings)
    character_coverage: float = 1.0
    input_sentence_size: int = 2_000_000  # sentences sampled to train SentencePiece


TAG_PATTERN = r"[A-Za-z0-9_-]+"  # a tag's name; its piece is <NAME>
RESERVED_TAGS = ("pad", "s", "unk")  # <pad>, <s> and <unk> are SentencePiece's own pieces


@dataclass
class CleanConfig:
    """Rules that drop training pairs (never val or test pairs) when the data is prepared; each is on by default.

    Pairs with an empty side, and pairs with a side over `data.max_len` tokens, are always dropped."""

    max_ratio: float = 3.0  # tokens of the longer side over those of the shorter (EOS included) above this; 0 = off
    duplicates: bool = True  # repeats of an exact (source, target) pair within a corpus; the first is kept
    equal_sides: bool = True  # pairs whose source equals their target
    eval_overlap: bool = True  # pairs whose source or target equals a sentence of the val or a test split


@dataclass
class ExtraCorpus(SourceConfig):
    """A training corpus added to the main one (`data.extra_train.NAME`): any source, or a folder with both
    languages' `train` files. A free-form mapping in the schema, so `+data.extra_train.NAME.KEY=...` can add it."""

    dir: str | None = None  # or a folder holding train.{lang} (plain or compressed) for data.src_lang and data.tgt_lang
    weight: float = 1.0  # as data.weight
    tag: str = ""  # as data.tag
    # Noised back-translation (Edunov et al. 2018; transformer/data/noise.py): each source word dropped with this
    # probability and the rest shuffled within 3 places, drawn once when the data is prepared. 0 = off.
    noise: float = bounded(0.0, ge=0.0, lt=1.0)


@dataclass
class DataConfig:
    """Which corpus, which direction, and where its prepared form is cached."""

    name: str = MISSING  # corpus name; part of the prepared-data directory name
    src_lang: str = "fr"
    tgt_lang: str = "en"
    # Builtin corpora (multi30k, tatoeba): files are `{dir}/{split}.{lang}.gz`.
    dir: str | None = None  # local copy; filled by `transformer-prepare`
    shared_dir: str = "../shared/data"  # the shared corpora's folder; builtin corpora's mirrors lie below it
    mirror: str | None = None  # directory to copy from when `dir` lacks files
    url: str | None = None  # download pattern with {split} and {lang}; last resort
    train_split: str = "train"
    val_split: str = "val"
    test_splits: list[str] = field(default_factory=list)
    # Explicit sources (data=files) override the builtin layout split by split.
    train: SourceConfig | None = None
    val: SourceConfig | None = None
    test: dict[str, dict[str, Any]] = field(default_factory=dict)  # NAME -> the keys of SourceConfig
    # More training corpora, e.g. another corpus or back-translations, added to the training split (and to
    # SentencePiece's input), each with its own weight and tag.
    extra_train: dict[str, dict[str, Any]] = field(default_factory=dict)  # NAME -> the keys of ExtraCorpus
    # The main corpus's weight: how often each of its pairs is seen per epoch. Above 1 upsamples (2 = twice); below 1
    # takes a fresh sample of that share each epoch, drawn from (trainer.seed, epoch) so a resumed run sees the same.
    weight: float = 1.0
    # Train on every training corpus the other way round too: one model of both directions (the source's language
    # says which to produce; the copies are untagged and unnoised). Val and translation keep src_lang -> tgt_lang.
    both_directions: bool = False
    # The main corpus's tag: the piece <TAG> starts each of its source sentences (a reserved piece, never split and
    # never produced by text); translate "as" this corpus with decoding.tag=TAG. "" = untagged.
    tag: str = ""
    clean: CleanConfig = field(default_factory=CleanConfig)
    prepared_dir: str = "data/prepared"  # tokenizers and tokenized Arrow datasets
    max_len: int = 128  # training pairs longer than this (in tokens with EOS, either side) are dropped when prepared
    # BPE-dropout (Provilkov et al. 2020) of training pairs: each batch is re-encoded from its text with
    # this probability of skipping a merge (model_type=bpe); 0 = off. max_len and batch_tokens apply to
    # the deterministic segmentation. Val, test and translation always use the deterministic one.
    subword_dropout: float = 0.0
    num_proc: int = 0  # SentencePiece's threads when tokenizing; 0 = one per core
    shard_pairs: int = 1_000_000  # pairs per shard of the training corpora: a killed preparation loses at most one
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    # word alignments of the training split for guided alignment (trainer.guided_alignment): "" = none; eflomal
    # (pip install '.[align]'), run on the pairs' lower-cased words in chunks of word_alignment_chunk pairs
    word_alignment: str = ""
    word_alignment_chunk: int = bounded(1_000_000, ge=1)


ATTENTION_USES = ("encoder", "decoder", "cross")  # where model.attention.{use}=NAME applies


@dataclass
class AttentionConfig:
    """Which attention variant each use gets (transformer/models/attention/) and the variants' knobs."""

    encoder: str = "dot"  # encoder self-attention: dot | additive | local | strided | lsh | linformer
    decoder: str = "dot"  # causal decoder self-attention: dot | additive | local | strided
    cross: str = "dot"  # encoder-decoder attention: dot | additive | linformer
    window: int = 16  # local, strided: keys within this distance (decoder: the previous `window`, itself included)
    stride: int = 8  # strided: every stride-th position is a summary key
    bucket_size: int = 32  # lsh: chunk length of the sorted buckets
    n_hashes: int = 2  # lsh: hashing rounds
    rank: int = 64  # linformer: rows the keys/values are projected to (along the sequence; up to max_positions)


@dataclass
class RNNConfig:
    """Bahdanau et al. (2014)'s RNN encoder-decoder (`model.family=rnn`, see transformer/models/rnn.py).

    It also uses model.dropout, model.tie_embeddings and model.max_positions (output limit only).
    """

    embedding_dim: int = 256  # source and target embeddings (and the deep output, so it can be tied)
    encoder_hidden: int = 256  # per direction of the bidirectional encoder
    decoder_hidden: int = 512
    attention_dim: int = 256  # additive attention's hidden size (dot scoring ignores it)
    encoder_layers: int = 1
    decoder_layers: int = 1
    cell: str = choice(Cell, "gru")  # encoder cell (the decoder is a GRU)
    attention: str = choice(Scoring, "additive")  # additive (Bahdanau) or dot (Luong's "general")


@dataclass
class ModelConfig:
    """Encoder-decoder Transformer dimensions (Vaswani et al. 2017), or `family: rnn` and its `rnn` settings."""

    family: str = choice(Family, "transformer")

    d_model: int = 256
    n_heads: int = 4
    n_encoder_layers: int = 3
    n_decoder_layers: int = 3
    d_ff: int = 1024
    dropout: float = 0.1  # on embeddings and on every sub-layer output (the paper's residual dropout)
    attention_dropout: float = 0.0  # on attention weights
    activation_dropout: float = 0.0  # inside the feed-forward, after ReLU (not in the paper)
    pre_norm: bool = True  # False = the paper's post-norm
    max_positions: int = 1024  # longest sequence the sinusoidal table covers
    tie_embeddings: bool = True  # tie target embedding and output projection (and source if joint)
    rnn: RNNConfig = field(default_factory=RNNConfig)
    attention: AttentionConfig = field(default_factory=AttentionConfig)


@dataclass
class OptimConfig:
    """Adam with a warmup and a learning-rate schedule."""

    lr: float = 1e-3  # peak learning rate, reached at the end of warmup
    warmup_steps: int = 400
    # inverse_sqrt: the paper's decay by 1/sqrt(step); linear: decay to 0 at the end of the budget
    # (trainer.max_steps or trainer.max_minutes, whichever comes first)
    schedule: str = choice(Schedule, "inverse_sqrt")
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-9
    weight_decay: float = 0.0
    clip_norm: float = 1.0  # gradient-norm clip; 0 disables
    label_smoothing: float = 0.1


@dataclass
class GuidedAlignmentConfig:
    """Guided alignment (Garg et al., 2019): one cross-attention head learns the training corpus's word alignments
    (data.word_alignment) through a cross-entropy term, `weight` times the translation loss's scale."""

    weight: float = bounded(0.0, ge=0.0)  # lambda; 0 = off (Garg et al. used 0.05)
    layer: int = -2  # the decoder layer whose head is trained (negative counts from the last)
    head: int = 0


@dataclass
class TrainerConfig:
    """How long to train, how to batch, how often to validate and save."""

    seed: int = 1234
    batch_tokens: int = 4096  # max tokens (padded, per side) in one batch, per process
    accumulate: int = 1  # batches per optimizer step (per process)
    max_steps: int = 100_000  # optimizer steps
    max_epochs: int = 1000
    max_minutes: float = 0.0  # wall-clock limit over all sessions of a run, validation included; 0 = none
    val_every: int = 500  # steps between validations (also at the end)
    val_max_sentences: int = 5000  # validate (loss and BLEU, the same sentences) on the first N val pairs; 0 = all
    log_every: int = 50  # steps between train scalars (TensorBoard; a log line too without a progress bar)
    attention_images: int = 2  # val sentences whose cross-attention goes to TensorBoard at each validation
    keep_last: int = 3  # step checkpoints kept, newest first
    keep_best: int = 3  # step checkpoints kept, best val BLEU first
    patience: int = 0  # stop after this many validations without a better BLEU; 0 = never
    max_nonfinite: int = 20  # stop after this many consecutive skipped steps with a non-finite gradient (fp16 too)
    resume: str = ""  # "true": continue this run directory's last checkpoint; or a run dir / checkpoint path
    # A run dir (its best checkpoint) or checkpoint to fine-tune: its weights and SentencePiece model(s), with a fresh
    # optimizer, schedule, step count and best BLEU. The run folder's first launch only; later launches resume it.
    init_from: str = ""
    precision: str = choice(Precision, "fp32")  # bf16: autocast; fp16: autocast + gradient scaler;
    # auto: bf16 where it is faster (a CUDA GPU with bf16; a CPU whose native bf16 products take under
    # compute.auto.BF16_PAYS_BELOW of fp32's time, measured at start-up), else fp32
    compile: bool = False  # torch.compile the model and its loss for training
    device: str = "auto"  # auto | cpu | cuda
    num_threads: int = 0  # torch intra-op threads; 0 = torch's default
    collective_timeout_minutes: float = 60.0  # torchrun: how long a process waits in a collective (or to join)
    progress: bool = True  # show a progress bar
    guided_alignment: GuidedAlignmentConfig = field(default_factory=GuidedAlignmentConfig)


@dataclass
class DecodingBase:
    """The settings every decoding strategy shares; `DecodingConfig` adds each strategy's own."""

    strategy: str = "greedy"  # one of transformer.core.strategies.STRATEGIES (checked there)
    max_len_a: float = bounded(1.2, ge=0)  # output limit per sentence = a * source length + b (tokens, EOS included)
    max_len_b: int = bounded(10, ge=1)
    min_len: int = bounded(0, ge=0)  # fewest tokens before EOS
    no_repeat_ngram_size: int = bounded(0, ge=0)  # forbid repeating any n-gram of this size; 0 = off
    batch_size: int = bounded(64, ge=1)  # sentences per decoding batch
    tag: str = ""  # translate "as" the training corpus with this tag (data.tag, data.extra_train.NAME.tag); "" = none
    # Steering (core.strategies.CONTROLS; which strategies honour each, there). Words as the target text spells them:
    suppress: list[str] = field(default_factory=list)  # target words or phrases never generated
    ban_unk: bool = False  # never generate the unknown piece
    alternatives: int = bounded(0, ge=0)  # k > 0: the k likeliest next pieces after each prefix, each completed
    glossary: str | None = None  # TSV "SOURCE TERM<TAB>TARGET TERM": a term found in a sentence constrains its output
    # Our engine's linear maps on CPU: fp32 (exact), bf16 (where the CPU has bf16 products, else fp32 with a warning),
    # int8 (weights with one scale per output row, activations per row; else fp32 with a warning) or auto (int8 where
    # it runs, else fp32, silently: what translate/serve/backtranslate use, `user_decoding`); layer norm and softmax
    # stay fp32 (docs/speed.md#precision). engine=ctranslate2 ignores it (it has its compute type).
    precision: str = choice(InferencePrecision, SCORED_IN)
    # Our engine on CPU: run the decoder step as native code compiled ahead of time (built once per model, torch and
    # CPU, kept in ~/.cache/transformer/compiled; fp32 Transformers with dot attention; elsewhere the eager step).
    compiled: bool = False


# `DecodingBase` and every option of every strategy (their defaults, bounds and meaning in
# `transformer.core.strategies`, checked there).
DecodingConfig = make_dataclass(
    "DecodingConfig",
    [(name, type(o.default), field(default=o.default)) for name, o in options().items()],
    bases=(DecodingBase,),
    namespace={"__module__": __name__, "__doc__": "Search settings, shared by validation, evaluation and translation."},
)


def user_decoding() -> DecodingConfig:
    """The decoding defaults of the commands that translate for a user (translate, serve, backtranslate): in
    `precision.TRANSLATED_IN`; the search comes from their `decoding` group."""
    return DecodingConfig(precision=TRANSLATED_IN)


@dataclass
class PrepareConfig:
    data: DataConfig = MISSING


@dataclass
class TrainConfig:
    data: DataConfig = MISSING
    model: ModelConfig = MISSING
    optim: OptimConfig = MISSING
    trainer: TrainerConfig = MISSING
    decoding: DecodingConfig = MISSING


@dataclass
class EvaluateConfig:
    checkpoint: Any = MISSING  # run directory or checkpoint file, or a list of them: [A,B] decodes their ensemble
    split: str = "test_2016_flickr"  # a split of the checkpoint's corpus
    src_file: str | None = None  # or explicit files instead of a split
    ref_file: str | None = None
    source: SourceConfig = field(default_factory=SourceConfig)  # or any corpus source (source.path=test.tsv ...)
    output: str | None = None  # hypotheses file; default: beside the checkpoint
    device: str = "auto"
    engine: str = choice(Engine, "pytorch")  # ctranslate2: checkpoint= a transformer-export format=ctranslate2 folder
    decoding: DecodingConfig = MISSING


@dataclass
class AlignmentConfig:
    """Which cross-attention word alignments are read from (transformer.decoding.alignment)."""

    layer: int | None = None  # decoder layer, negative from the last; None: a guided model's, else the second-to-last
    head: int | None = None  # None: a guided model's trained head (on its layer), else the mean over the heads


@dataclass
class TranslateConfig:
    checkpoint: Any = MISSING  # run directory or checkpoint file, or a list of them: [A,B] decodes their ensemble
    input: str | None = None  # file to translate; default: stdin
    sentences: list[str] = field(default_factory=list)  # or sentences given inline
    plot_attention: str | None = None  # directory for one cross-attention heatmap PNG per sentence
    plot_layer: int | None = None  # decoder layer to plot (0-based, -1 = last); None = mean of all
    alignments: bool = False  # TRANSLATION<TAB>ALIGNMENT: Pharaoh i-j (source word i, target word j, 0-based)
    alignment: AlignmentConfig = field(default_factory=AlignmentConfig)
    markup: str = choice(Markup, "none")  # xml: inline tags and {placeholders} carried across (decoding.markup)
    split_sentences: bool = False  # split each line into sentences, translate them, join them back on one line
    # Each translation starts with a prefix (an unfinished last word is completed): prefix=true reads input lines as
    # SOURCE<TAB>PREFIX (a line without a tab has none); prefix_file=FILE holds one prefix per input line
    prefix: bool = False
    prefix_file: str | None = None
    # Target phrases each translation must hold (decoding=beam): input lines are SOURCE[<TAB>PREFIX]<TAB>PHRASE...
    constraints: bool = False
    # file to write (default: stdout); built chunk by chunk in .NAME.chunks beside it, where a killed run continues
    output: str | None = None
    chunk_lines: int = CHUNK_LINES  # lines read, translated and written at a time (batched by length within one)
    progress: bool | None = None  # lines/s bar on stderr; None: when stderr is a terminal
    device: str = "auto"
    engine: str = choice(Engine, "pytorch")  # ctranslate2: checkpoint= a transformer-export format=ctranslate2 folder
    decoding: DecodingConfig = field(default_factory=user_decoding)


@dataclass
class ScoreConfig:
    checkpoint: Any = MISSING  # run directory or checkpoint file, or a list of them: [A,B] scores with their ensemble
    source: SourceConfig = field(default_factory=SourceConfig)  # the pairs (source.src/tgt, source.path); or stdin
    tokens: bool = False  # each token's log-probability too, EOS last
    alignments: bool = False  # each pair's word alignment too: Pharaoh i-j (source word i, target word j, 0-based)
    alignment: AlignmentConfig = field(default_factory=AlignmentConfig)
    output: str | None = None
    chunk_lines: int = CHUNK_LINES  # pairs read, scored and written at a time
    progress: bool | None = None  # pairs/s bar on stderr; None: when stderr is a terminal
    device: str = "auto"
    engine: str = choice(Engine, "pytorch")  # ctranslate2: checkpoint= a transformer-export format=ctranslate2 folder
    decoding: DecodingConfig = field(default_factory=user_decoding)  # precision, batch_size, the length penalty


@dataclass
class ServeSettings:
    """The HTTP service's address, dynamic batching and request limits."""

    host: str = "127.0.0.1"  # loopback only by default; 0.0.0.0 serves every interface
    port: int = 8000
    batching: bool = True  # False: every request is decoded alone (for comparison)
    max_batch_tokens: int = 2048  # source tokens (EOS included) of the requests decoded together
    # How long the first request of a batch waits for others. Clients answered together come back over
    # tens of ms (the event loop answers them one by one): a shorter wait splits them into smaller batches.
    max_wait_ms: float = 50.0
    max_chars: int = 5000  # per text
    max_texts: int = 64  # per request
    max_sentences: int = 256  # per request, after splitting the texts
    max_waiting: int = 128  # requests waiting in the batcher; more get a 503 with Retry-After
    timeout_s: float = 30.0  # a request not answered by then gets a 503
    workers: int = 1  # decoding loops: the main thread, plus workers - 1 threads
    num_threads: int = 0  # torch intra-op threads; 0 = torch's default
    collective_timeout_minutes: float = 60.0  # torchrun: how long a process waits in a collective (or to join)


@dataclass
class ServeConfig:
    checkpoint: Any = MISSING  # run directory or checkpoint file, or a list of them: [A,B] decodes their ensemble
    device: str = "auto"
    serve: ServeSettings = field(default_factory=ServeSettings)
    decoding: DecodingConfig = field(default_factory=user_decoding)  # the defaults that a request's settings override
    alignment: AlignmentConfig = field(default_factory=AlignmentConfig)  # what /translate and /score align with


@dataclass
class ExportOptions:
    quantization: str = choice(Quantization, FLOAT32_WEIGHTS)  # ctranslate2 weights; none = float32
    force: bool = False  # replace a non-empty output folder


@dataclass
class ExportConfig:
    checkpoint: str = MISSING  # run directory or checkpoint file
    format: str = choice(ExportFormat, "ctranslate2")  # marian: Hugging Face MarianMT
    output: str = MISSING  # folder to create
    export: ExportOptions = field(default_factory=ExportOptions)


@dataclass
class AverageConfig:
    checkpoints: list[str] = MISSING  # run folders (their step checkpoints) and/or .safetensors files
    last: int = 0  # average the N newest (by step); 0 = not chosen this way
    best: int = 0  # or the N best by val BLEU; with neither, all of them
    output: str | None = None  # default: RUN_DIR/checkpoints/avg_last{N}.safetensors of the first run folder


@dataclass
class ResultsConfig:
    # run folders (their best checkpoint) and/or .safetensors files; a list among them is an ensemble, one row:
    # checkpoints=[A,B,[A,B]]
    checkpoints: list[Any] = MISSING
    output: str = "results.md"  # the Markdown report
    # configs/decoding presets, each with optional overrides: "beam:beam_size=8,length_penalty=0.6"
    decodings: list[str] = field(default_factory=lambda: ["greedy", "beam"])
    extra_dir: str | None = None  # where Tatoeba test and newstest2014 lie; default: the checkpoint's data.shared_dir
    val: bool = False  # also score the val split (after the test sets); the report names the model val chooses
    tests: str = choice(TestScope, "all")  # all: every model on the test sets; chosen (with val): val's choice only
    samples: int = 12  # sample translations: half the best, half the worst by sentence BLEU
    device: str = "auto"


@dataclass
class BacktranslateConfig:
    checkpoint: Any = MISSING  # the reverse model (run directory or checkpoint file), or a list of them (ensemble)
    input: Any = None  # monolingual text in the model's source language: a file or a list (plain or compressed)
    # or that language's side of a corpus source (source.path=mono.tsv: a TSV column, a TMX language ...)
    source: SourceConfig = field(default_factory=SourceConfig)
    output: str = MISSING  # folder of the synthetic corpus, ready for data.extra_train.NAME.dir
    chunk_lines: int = CHUNK_LINES  # sentences translated and written at a time: a restarted run resumes at a chunk
    progress: bool | None = None  # lines/s bar on stderr; None: when stderr is a terminal
    device: str = "auto"
    decoding: DecodingConfig = field(default_factory=user_decoding)


@dataclass
class RecipeConfig:
    """`transformer-recipe`: the back-translation (bt, fr->en) or self-training (st, en->fr) recipe, its stages in
    PARENT (transformer/recipe/). A setting left None takes its mode's value (`recipe.plan.MODES`)."""

    mode: str = choice(RecipeMode, "bt")  # bt: back-translation for fr->en; st: self-training for en->fr
    parent: str | None = None  # the stages' folder; None: outputs/train_MODE
    enfr_minutes: float = 35  # the en->fr model's budget (reverse/ or teacher/)
    final_minutes: float | None = None  # the final training's budget, shared by its models
    finals: str | None = None  # final models trained one after another and ensembled: a number, or auto
    finetune_minutes: float = 0  # fine-tune final/ on Multi30k alone for this long; 0 = no (chosen on val)
    synthetic_decoding: str | None = None  # the configs/decoding preset the synthetic side is decoded with
    warm_start: bool = False  # the finals start from the en->fr stage's weights (trainer.init_from); bt: both ways
    tag: str = ""  # a tag for the synthetic corpus, e.g. bt (default: none, chosen on val)
    weight: float = 0.25  # the synthetic corpus's data.extra_train weight
    noise: float = 0.0  # noised BT: drop each synthetic source word with this probability, shuffle the rest locally
    tatoeba: float = 0.0  # Tatoeba's train split (SHARED_DIR/tatoeba/) joins the final runs at this weight; 0 = no
    average: int = 0  # average the last N checkpoints of each last run; 0 = no (chosen on val)
    test_models: str = choice(TestScope, "chosen")  # the models the test sets score: val's choice, or all
    shared_dir: str = DataConfig.shared_dir  # where multi30k_task2/ and tatoeba/ are looked for
    data_dir: str = "data/multi30k_task2"  # where the Task 2 files are put
    mono: list[str] | None = None  # monolingual English files instead of the Multi30k Task 2 captions
    overrides: list[str] = field(default_factory=list)  # Hydra overrides for every training stage
    dry_run: bool = False  # print the stages' commands and run nothing
