"""The decoding strategies' settings: `STRATEGIES` is the one name → entry table, and every setting reads it.

An entry owns its options (default, bounds, allowed values, help, the service's upper limit), their checks, how a
service request asks for it, its labels and its CTranslate2 arguments (or that it has none). `config.DecodingConfig`
and `SearchOptions` get their fields from the options, `check_config` and `SearchOptions` their checks from
`problems`, the service its request schema and the strategy a request asks for. This module imports no torch and no
search (the config and every `--help` import it): the search of each entry is the line of the same name in
`transformer.decoding.searching.SEARCHES`, read where searching happens.
"""

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, get_args

from transformer.core.errors import UserError

LengthPenalty = Literal["power", "gnmt", "none"]

# Bounds of a number setting, as pydantic names them: ge, gt, le, lt.
Bounds = dict[str, float]


@dataclass(frozen=True)
class Option:
    """One setting of a strategy: its default and meaning, bounds (`ge`, `gt`, `le`, `lt`) or allowed values, and
    whether a service request may set it (`request`: the service's own extra bounds; None: it may not)."""

    default: Any
    help: str
    bounds: Bounds = field(default_factory=dict)
    choices: tuple[str, ...] = ()
    request: Bounds | None = None


def bound_problem(key: str, value: float, bounds: Bounds) -> str | None:
    """What is wrong with `value` under `bounds` (`ge`, `gt`, `le`, `lt`, at most one of each side), or None."""
    ok = {"ge": value >= bounds.get("ge", value), "gt": "gt" not in bounds or value > bounds["gt"]}
    ok |= {"le": value <= bounds.get("le", value), "lt": "lt" not in bounds or value < bounds["lt"]}
    if all(ok.values()):
        return None
    low = next(((name, bounds[name]) for name in ("ge", "gt") if name in bounds), None)
    high = next(((name, bounds[name]) for name in ("le", "lt") if name in bounds), None)
    if low and high:
        opening, closing = "[" if low[0] == "ge" else "(", "]" if high[0] == "le" else ")"
        return f"{key}={value} must be in {opening}{low[1]}, {high[1]}{closing}"
    if low:
        return f"{key}={value} must be {'at least' if low[0] == 'ge' else 'greater than'} {low[1]}"
    return f"{key}={value} must be {'at most' if high[0] == 'le' else 'less than'} {high[1]}"


class Strategy:
    """An entry of `STRATEGIES`: the options it introduces (`options`), those of other entries it reads too
    (`borrows`), and what a search, the checks, the service and CTranslate2 need from it."""

    name: ClassVar[str]
    help: ClassVar[str]
    options: ClassVar[dict[str, Option]] = {}
    borrows: ClassVar[tuple[str, ...]] = ()
    controls: ClassVar[frozenset[str]] = frozenset()  # the entries of `CONTROLS` its search honours
    flag: ClassVar[str | None] = None  # a request's true/false switch for this strategy (sampling=true)
    flag_off: ClassVar[str] = ""  # what a request gets that sets `flag` false on a server with this default

    def reads(self) -> tuple[str, ...]:
        """Every option this strategy reads: its own and those it borrows."""
        return (*self.options, *self.borrows)

    def problems(self, cfg, prefix: str) -> list[str]:
        """What is wrong with the combination of settings in `cfg`, each key named `prefix` + name; [] if nothing."""
        return []

    def draws(self, cfg) -> bool:
        """Whether a search with `cfg` draws from a random generator (a request of its own in the service)."""
        return False

    def asked(self, request: dict) -> bool:
        """Whether a request's settings (those it gave) ask for this strategy without naming it."""
        return self.flag is not None and request.get(self.flag) is True

    def label(self, cfg) -> str:
        """The strategy in a file name, with what tells two of its decodings apart (greedy, beam5)."""
        return self.name

    def title(self, cfg) -> str:
        """The strategy as a results table names it."""
        return self.name

    def ctranslate2(self, cfg, vocab_size: int) -> dict:
        """CTranslate2's `translate_batch` arguments for `cfg`; raises `UserError` where it has none."""
        raise UserError(f"decoding={self.name} has no CTranslate2 equivalent: use engine=pytorch")


class Greedy(Strategy):
    name, help = "greedy", "the likeliest token at each step"
    controls = frozenset({"prefix", "alternatives", "suppress"})

    def ctranslate2(self, cfg, vocab_size: int) -> dict:
        return dict(beam_size=1, length_penalty=0.0)  # scores are the raw log-probability


class Beam(Strategy):
    name, help = "beam", "beam search: the best `n_best` hypotheses under a length penalty"
    controls = frozenset({"prefix", "alternatives", "suppress", "constraints"})
    options = {
        "beam_size": Option(5, "hypotheses kept at each step", {"ge": 1}, request={"le": 16}),
        "n_best": Option(
            1, "hypotheses returned per sentence; translate prints them all", {"ge": 1}, request={"le": 16}
        ),
        "length_penalty": Option(1.0, "alpha; 0 = raw log-probability (neutral)", request={"ge": 0.0, "le": 5.0}),
        "length_penalty_kind": Option(
            "power",
            "power: len^alpha | gnmt: ((5+len)/6)^alpha (Wu et al. 2016) | none",
            choices=get_args(LengthPenalty),
        ),
    }

    def problems(self, cfg, prefix: str) -> list[str]:
        if cfg.n_best > cfg.beam_size:
            return [f"{prefix}n_best={cfg.n_best} must be at most {prefix}beam_size={cfg.beam_size}"]
        return []

    def asked(self, request: dict) -> bool:
        return "beam_size" in request or request.get("n_best", 1) > 1

    def label(self, cfg) -> str:
        label, default = f"beam{cfg.beam_size}", self.options
        if cfg.length_penalty != default["length_penalty"].default:
            label += f"-lp{cfg.length_penalty:g}"
        if cfg.length_penalty_kind != default["length_penalty_kind"].default:
            label += f"-lpkind{cfg.length_penalty_kind}"
        return label

    def title(self, cfg) -> str:
        return f"beam {cfg.beam_size}, {cfg.length_penalty_kind} α={cfg.length_penalty}"

    def ctranslate2(self, cfg, vocab_size: int) -> dict:
        if cfg.length_penalty_kind == "gnmt":
            raise UserError("decoding.length_penalty_kind=gnmt is not available with engine=ctranslate2: use power")
        alpha = 0.0 if cfg.length_penalty_kind == "none" else cfg.length_penalty
        return dict(beam_size=cfg.beam_size, num_hypotheses=cfg.n_best, length_penalty=alpha)


class Sample(Strategy):
    name, help = "sample", "random sampling: temperature, then top-k and/or nucleus (top-p)"
    options = {
        "top_k": Option(0, "keep the k likeliest tokens; 0 = all", {"ge": 0}, request={"le": 1000}),
        "top_p": Option(1.0, "nucleus: keep the likeliest tokens holding this mass", {"gt": 0, "le": 1}, request={}),
        "temperature": Option(1.0, "divides the log-probabilities", {"gt": 0}, request={"le": 10.0}),
        "seed": Option(
            0, "seeds the generator; a request without one draws a random seed", request={"ge": 0, "lt": 2**63}
        ),
    }
    controls = frozenset({"prefix", "suppress"})
    flag, flag_off = "sampling", "beam"

    def draws(self, cfg) -> bool:
        return True

    def label(self, cfg) -> str:
        return f"sample-t{cfg.temperature:g}-k{cfg.top_k}-p{cfg.top_p:g}-seed{cfg.seed}"

    def ctranslate2(self, cfg, vocab_size: int) -> dict:
        top_k = min(cfg.top_k, vocab_size)  # 0 = all, as ours
        sampling = dict(sampling_topk=top_k, sampling_topp=cfg.top_p, sampling_temperature=cfg.temperature)
        return dict(beam_size=1, length_penalty=0.0) | sampling


class MBR(Strategy):
    name, help = "mbr", "minimum Bayes risk: the candidate with the highest expected chrF or BLEU against the others"
    options = {
        "candidates": Option(
            16, "candidates per sentence, each also a pseudo-reference", {"ge": 1}, request={"le": 64}
        ),
        "candidates_from": Option(
            "sample",
            "sample (the sampling options) or beam (the best of a beam that wide)",
            choices=("sample", "beam"),
            request={},
        ),
        "utility": Option("chrf", "sacreBLEU's sentence-level chrf or bleu", choices=("chrf", "bleu"), request={}),
    }
    borrows = ("n_best", "length_penalty", "length_penalty_kind", "top_k", "top_p", "temperature", "seed")
    controls = frozenset({"prefix", "suppress"})

    def problems(self, cfg, prefix: str) -> list[str]:
        if cfg.n_best > cfg.candidates:
            return [f"{prefix}n_best={cfg.n_best} must be at most {prefix}candidates={cfg.candidates}"]
        return []

    def draws(self, cfg) -> bool:
        return cfg.candidates_from == "sample"

    def label(self, cfg) -> str:
        source = STRATEGIES[cfg.candidates_from].label(cfg)  # sample-t1-k0-p1-seed0, or beam5-lp0.6 (its width: ours)
        settings = source.removeprefix(cfg.candidates_from).lstrip("0123456789")
        return f"mbr{cfg.candidates}-{cfg.utility}-{cfg.candidates_from}{settings}"

    def title(self, cfg) -> str:
        return f"mbr, {cfg.utility} over {cfg.candidates} from {cfg.candidates_from}"


STRATEGIES: dict[str, Strategy] = {entry.name: entry for entry in (Greedy(), Beam(), Sample(), MBR())}

# What steers a search besides its settings (`transformer.decoding.steering`), by name; `Strategy.controls` says
# which strategies honour each, `CTRANSLATE2_CONTROLS` which engine=ctranslate2 has.
CONTROLS = {
    "prefix": "target text the translation starts with; an unfinished last word is completed",
    "alternatives": "the k likeliest next pieces after the prefix, each completed to a whole translation",
    "suppress": "target words or phrases never generated (ban_unk: the unknown piece)",
    "constraints": "target phrases each translation must hold, in any order (per sentence, or from a glossary)",
}
CTRANSLATE2_CONTROLS = frozenset({"prefix", "alternatives", "suppress"})


def control_problems(
    cfg, prefixed: bool, constrained: bool, engine: str = "pytorch", key: str = "decoding"
) -> list[str]:
    """What is wrong with the controls a search with decoding settings `cfg` asks for (`prefixed`, `constrained`:
    sentences come with a prefix, with constraint phrases; `cfg`'s alternatives, suppressed phrases and glossary)
    on `engine`, against `CONTROLS`; the strategy is named as `key`=NAME and settings `key`.NAME."""
    on = {"prefix": prefixed, "alternatives": cfg.alternatives > 0, "suppress": bool(cfg.suppress or cfg.ban_unk)}
    on["constraints"] = constrained or bool(cfg.glossary)
    asked = [name for name, wanted in on.items() if wanted]
    found = []
    if "alternatives" in asked and "constraints" in asked:
        found.append("alternatives and constraints do not go together: the first piece of an alternative is free")
    if cfg.alternatives and cfg.n_best > 1:
        found.append(f"{key}.alternatives={cfg.alternatives} gives that many translations: leave {key}.n_best at 1")
    for name in asked:
        honour = [other for other, entry in STRATEGIES.items() if name in entry.controls]
        if cfg.strategy in STRATEGIES and name not in STRATEGIES[cfg.strategy].controls:
            found.append(f"{key}={cfg.strategy} does not take {name}: use {key}={' or '.join(honour)}")
        elif engine == "ctranslate2" and name not in CTRANSLATE2_CONTROLS:
            found.append(f"engine=ctranslate2 has no {name}: use engine=pytorch")
    return found


def options() -> dict[str, Option]:
    """Every strategy's own options, by name (the fields `DecodingConfig` and `SearchOptions` get from the table)."""
    return {name: option for entry in STRATEGIES.values() for name, option in entry.options.items()}


def problems(cfg, prefix: str = "", bounds: bool = True, settings: bool = False) -> list[str]:
    """What is wrong with the strategy and its options in `cfg` (a config node, `DecodingConfig` or `SearchOptions`):
    an unknown strategy; with `bounds` an option outside its bounds or choices; the entry's own checks (n_best
    within the beam); with `settings` (a user's), n_best > 1 where the strategy gives one hypothesis. Keys are
    reported as `prefix` + name."""
    if cfg.strategy not in STRATEGIES:
        return [f"{prefix}strategy={cfg.strategy!r} is not one of {', '.join(STRATEGIES)}"]
    found = []
    for name, option in options().items() if bounds else ():
        value = getattr(cfg, name)
        if option.choices and value not in option.choices:
            found.append(f"{prefix}{name}={value!r} is not one of {', '.join(option.choices)}")
        elif option.bounds and (problem := bound_problem(prefix + name, value, option.bounds)):
            found.append(problem)
    entry = STRATEGIES[cfg.strategy]
    if found:
        return found
    if settings and cfg.n_best > 1 and "n_best" not in entry.reads():
        readers = " or ".join(name for name, other in STRATEGIES.items() if "n_best" in other.reads())
        return [f"{prefix}n_best={cfg.n_best} needs decoding={readers} ({cfg.strategy} gives one hypothesis)"]
    return entry.problems(cfg, prefix)


def requested(default: str, request: dict) -> str:
    """The strategy a service request asks for: the one it names (`strategy`), else one whose flag it sets true
    (`sampling`), else the server's `default` unless the request sets its flag false (then its `flag_off`) or asks
    for another by settings the default does not read (beam_size or n_best > 1 ask greedy's server for beam)."""
    if request.get("strategy"):
        return request["strategy"]
    entry = STRATEGIES[default]
    flagged = [name for name, other in STRATEGIES.items() if other.flag and other.asked(request)]
    if flagged:
        return flagged[0]
    if entry.flag:
        return default if request.get(entry.flag) is not False else entry.flag_off
    asked = [name for name, other in STRATEGIES.items() if other.asked(request)]
    if not asked or any(name in request for name in entry.reads()):
        return default
    return asked[0]
