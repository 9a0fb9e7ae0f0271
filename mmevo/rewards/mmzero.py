"""MM-Zero rewards (MM-Zero, Section 2.4, Eqs. 4-10): proposer feedback gated by rendering, coder and solver rewards.

    r = 1/N · sum_j e_j · [min(s_j, 0.5) + min(c_j, 1 - c_j)] + sum_k a_k

e_j: render attempt j executed (rendered, and sampled by the frozen solver); s_j: the solver's easy-question accuracy on
that render; c_j: the modal share of its answered samples on the hard question; a_k: the easy-hard penalty, the type
penalty and the diversity adjustment. A failed render adds 0 but stays in the denominator (averaging only successes
would hide coder failures); an invalid proposal format scores -1 whatever else holds.

The two seed functions (``diversity_adjustment``, ``proposal_rewards``) are pure tensor functions with the seed's
exact contracts; the pieces the seed calls "supplied upstream" (easy accuracy, consistency, the penalties, cluster
shares) are the small functions below, as in MM-Zero's released code (see DESIGN.md).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Hashable, Sequence

import numpy as np
import torch
from torch import Tensor

from mmevo.rewards.answers import answers_equivalent, refuse_text_for_list
from mmevo.validation import is_real_number

# the proposer's content types (its prompts' hints; logged as type_share/<type> every step)
CONTENT_TYPES = ("data_chart", "diagram", "geometry", "timeline", "map", "table", "other")
DIVERSITY_WEIGHTS = (0.45, 0.20, 0.35)  # caption / easy question / hard question cluster shares
_TIE_TOL = 1e-9  # float rounding at a threshold; shares of solver samples are k/m with m far below 1e9


def _float_or_inf(x) -> float:
    """A real number as a float; an integer past float64's range (10**400) as +-inf, where float() and math.isfinite
    raise OverflowError: the range checks below then name the argument instead."""
    try:
        return float(x)
    except OverflowError:
        return math.inf if x > 0 else -math.inf


def _scalar(x):
    """A one-element, non-bool torch tensor or numpy array as its Python number; anything else unchanged (the range
    checks then name it). A bool stays a bool, which those checks refuse."""
    if torch.is_tensor(x) and x.numel() == 1 and x.dtype != torch.bool:
        return x.item()
    if isinstance(x, np.ndarray) and x.size == 1 and x.dtype != np.bool_:
        return x.item()
    return x


def diversity_adjustment(shares: Tensor, valid_count: int, strength: float = .5) -> Tensor:
    """Float [B,3] caption/easy/hard cluster shares, valid_count>=1, strength>=0.
    Return detached [B]: -clip(dot(shares-1/M,[.45,.20,.35])*M*strength,
    -strength,+strength). M=valid_count is supplied, not necessarily B."""
    if not torch.is_tensor(shares) or not shares.is_floating_point() or shares.dim() != 2 or shares.shape[1] != 3:
        raise ValueError(f"shares must be a float [B, 3] tensor, got {getattr(shares, 'shape', type(shares))}")
    # a one-element tensor / array is its number, for the count and the strength alike: a tensor strength of 0.5 was
    # refused as "must be finite and >= 0", while a tensor count was taken
    valid_count, strength = _scalar(valid_count), _scalar(strength)
    # NaN, inf and None used to escape as "cannot convert float NaN to integer" / OverflowError / TypeError from int()
    if not is_real_number(valid_count) or not math.isfinite(_float_or_inf(valid_count)) \
            or int(valid_count) != valid_count or valid_count < 1:
        raise ValueError(f"valid_count must be an integer >= 1 (within float64 range), got {valid_count!r}")
    if not is_real_number(strength) or not 0 <= _float_or_inf(strength) < math.inf:  # inf: a balanced row gives 0 * inf = NaN (seed: finite inputs)
        raise ValueError(f"strength must be finite and >= 0, got {strength!r}")
    M, strength = float(valid_count), float(strength)
    s = shares.detach().to(torch.float64)  # evaluated in float64, rounded once to the shares' dtype at the end
    # seed: finite inputs. A NaN share used to come out as a NaN adjustment (clamp keeps NaN), silently; the range is
    # not checked (the seed does not bound a row, and any finite row gives a finite, clipped adjustment)
    if not bool(torch.isfinite(s).all()):
        raise ValueError(f"shares must be finite, got {s[~torch.isfinite(s)][0].item()}")
    w = torch.tensor(DIVERSITY_WEIGHTS, dtype=s.dtype, device=s.device)  # [3]
    crowding = ((s - 1.0 / M) * w).sum(dim=1) * M  # [B]: > 0 for crowded clusters
    # -clip(x * strength, -strength, strength) written as -strength * clip(x, -1, 1): the same number for every finite
    # x * strength, and no NaN where x overflows to inf with strength 0 (inf * 0; the seed's value is 0 there)
    return (-(crowding.clamp(-1.0, 1.0) * strength)).to(shares.dtype)


def proposal_rewards(executed: Tensor, easy_accuracy: Tensor, consistency: Tensor, adjustments: Tensor,
                     valid: Tensor) -> Tensor:
    """bool executed [B,N], float easy_accuracy/consistency [B,N] in [0,1],
    float adjustments [B,3] = easy-hard penalty, type penalty, diversity adjustment,
    bool format valid [B]. B,N>=1. Return detached same-dtype [B].
    Mean over ALL N render attempts of executed*(min(easy,.5)+min(c,1-c)),
    then add all three adjustments. Failed renders contribute zero but remain
    in the denominator. Invalid format overrides the ENTIRE result with -1."""
    # each argument checked on its own and named: a list used to fail with "'list' object has no attribute 'shape'",
    # and a wrong valid length was reported as "adjustments must be float [B, 3] and valid bool [B]"
    for name, x in (("executed", executed), ("easy_accuracy", easy_accuracy), ("consistency", consistency),
                    ("adjustments", adjustments), ("valid", valid)):
        if not torch.is_tensor(x):
            raise ValueError(f"{name} must be a tensor, got {type(x).__name__}")
    if executed.dim() != 2 or executed.dtype != torch.bool:
        raise ValueError(f"executed must be a bool [B, N] tensor, got {executed.dtype} {tuple(executed.shape)}")
    B, N = executed.shape
    if B < 1 or N < 1:
        raise ValueError(f"executed must be [B, N] with B, N >= 1, got {tuple(executed.shape)}")
    for name, x, shape, source in (("easy_accuracy", easy_accuracy, (B, N), "B, N"),
                                   ("consistency", consistency, (B, N), "B, N"), ("adjustments", adjustments, (B, 3), "B")):
        if tuple(x.shape) != shape:
            raise ValueError(f"{name} must be [{', '.join(map(str, shape))}] ({source} from executed), "
                             f"got {tuple(x.shape)}")
    if tuple(valid.shape) != (B,) or valid.dtype != torch.bool:
        raise ValueError(f"valid must be a bool [{B}] tensor (B from executed), got {valid.dtype} {tuple(valid.shape)}")
    dtype = easy_accuracy.dtype
    # seed: float easy_accuracy / consistency / adjustments. A bool or integer consistency / adjustments tensor used
    # to be cast and scored (adjustments [[1, 0, 0]] added +1, a bool consistency read as c = 1)
    for name, x in (("easy_accuracy", easy_accuracy), ("consistency", consistency), ("adjustments", adjustments)):
        if not x.dtype.is_floating_point:
            raise ValueError(f"{name} must be floating point, got {x.dtype}")
    work = torch.float64  # evaluated in float64, rounded once to ``dtype`` at the end (not an ulp off per step)
    s = easy_accuracy.detach().to(work)
    c = consistency.detach().to(dtype).to(work)
    a = adjustments.detach().to(dtype).to(work)
    # seed: s, c in [0, 1] and finite inputs. Checked where they are used (executed attempts of valid rows): a c of
    # 1.5 used to score min(c, 1 - c) = -0.5 and a NaN to give a NaN reward, silently. Failed attempts and invalid
    # rows may hold any placeholder (they score 0 / -1 whatever it is).
    used = executed & valid[:, None]  # [B, N]
    for name, x in (("easy_accuracy", s), ("consistency", c)):
        bad = used & ~((x >= 0) & (x <= 1))  # NaN fails both comparisons
        if bad.any():
            i, j = (int(k) for k in bad.nonzero()[0])
            raise ValueError(f"{name}[{i}, {j}] must lie in [0, 1], got {x[i, j].item()}")
    bad_adj = valid[:, None] & ~torch.isfinite(a)  # [B, 3]
    if bad_adj.any():
        i, j = (int(k) for k in bad_adj.nonzero()[0])
        raise ValueError(f"adjustments[{i}, {j}] must be finite, got {a[i, j].item()}")
    # a failed attempt contributes exactly 0 (selected, not multiplied): its s / c are undefined, and a NaN or inf
    # placeholder there would turn 0 * NaN into a NaN reward
    per_attempt = torch.where(executed, s.clamp(max=0.5) + torch.minimum(c, 1.0 - c), s.new_zeros(()))
    reward = per_attempt.sum(dim=1) / N + a.sum(dim=1)  # [B]
    out = torch.where(valid, reward, torch.full_like(reward, -1.0)).to(dtype)
    # finite adjustments whose sum passes the dtype's range (1e308 + 1e308 in float64, 3e38 + 3e38 rounded to float32)
    # used to come out as an inf reward, silently: GRPO's advantages of that group were then NaN
    over = valid & ~torch.isfinite(out)
    if over.any():
        i = int(over.nonzero()[0])
        raise ValueError(f"proposal_rewards: row {i}'s reward overflows {dtype} (adjustments[{i}] = "
                         f"{a[i].tolist()} sum past its range)")
    return out


# -- pieces supplied upstream (MM-Zero's released code) ------------------------------------------------------------
def _share(name: str, x) -> float:
    """``x`` as a float in [0, 1] (a solver share), else a ValueError naming it: a NaN used to fall through every
    comparison and score as no penalty, a 1.5 to score min(c, 1 - c) = -0.5, a True to read as 1."""
    if not is_real_number(x) or not 0.0 <= _float_or_inf(x) <= 1.0:  # NaN fails too
        raise ValueError(f"{name} must be a number in [0, 1], got {x!r}")
    return float(x)


def _finite(name: str, x, lowest: float = -math.inf) -> float:
    """``x`` as a finite float >= ``lowest``, else a ValueError naming it (a NaN weight made every reward NaN)."""
    if not is_real_number(x) or not (math.isfinite(_float_or_inf(x)) and x >= lowest):
        raise ValueError(f"{name} must be a finite number{f' >= {lowest:g}' if lowest > -math.inf else ''}, got {x!r}")
    return float(x)


def easy_accuracy(answers: Sequence[str | None], easy_answer: str) -> float:
    """Share of the frozen solver's extracted answers equivalent to the proposal's easy answer (``answers_equivalent``:
    7 / 7.0 / \\frac{14}{2} all match "7"); None never matches but counts in the denominator. 0.0 without answers.
    A match in either direction counts, as in MM-Zero's released proposer reward (its grader is not symmetric: gold
    "(1,2)" accepts "\\{2,1\\}" but gold "\\{2,1\\}" refuses "(1,2)").
    One text as ``answers`` (its characters were scored as answers: "77" against "7" gave 1.0), None for either
    argument (0.0, silently) is a ValueError naming it."""
    if answers is None:
        raise ValueError("answers must be a list of the solver's answers (None entries for unanswered), got None")
    refuse_text_for_list("answers", answers)
    if easy_answer is None:
        raise ValueError("easy_answer must be the proposal's easy answer, got None")
    if not answers:
        return 0.0
    return sum(answers_equivalent(a, easy_answer) or answers_equivalent(easy_answer, a)
               for a in answers if a is not None) / len(answers)


def modal_share(answers: Sequence[Hashable | None], answered_only: bool = False) -> tuple[Hashable | None, float]:
    """(modal answer, its share) over canonical answer keys; None (no answer) never forms the mode. Ties go to the
    answer seen first; (None, 0.0) when nobody answered.

    The denominator is every sample by default (Prism's p(q): an unanswered sample is a disagreement), the answered
    samples with ``answered_only`` (MM-Zero's consistency c, as in its released code: runs cut at max_tokens must not
    make a hard question look balanced). One text as ``answers`` is a ValueError ("aab" was three one-letter
    answers, c = 2/3)."""
    if answers is None:
        raise ValueError("answers must be a list of answer keys (None entries for unanswered), got None")
    refuse_text_for_list("answers", answers)
    counts = Counter(a for a in answers if a is not None)
    if not counts:
        return None, 0.0
    best = max(counts.values())
    mode = next(a for a in answers if a is not None and counts[a] == best)
    return mode, best / (sum(counts.values()) if answered_only else len(answers))


def easy_hard_penalty(consistencies: Sequence[float], threshold: float = 0.15, penalty: float = 0.3) -> float:
    """-penalty when the proposal's hard question is too easy or too hard for the solver: mean min(c, 1 - c) over
    its executed renders below ``threshold`` (no executed render: no penalty, the render gate already scores 0).
    Each consistency must be a share in [0, 1]: a NaN one used to give no penalty, silently, and a 1.5 one -0.3."""
    threshold, penalty = _finite("threshold", threshold), _finite("penalty", penalty, 0.0)
    cs = [_share(f"consistencies[{j}]", c) for j, c in enumerate(consistencies)]
    if not cs:
        return 0.0
    balance = sum(min(c, 1.0 - c) for c in cs) / len(cs)
    # c is a share of a few solver samples, so the mean often sits exactly on the threshold, where float rounding
    # (1 - 0.8 = 0.19999999999999996) leaves it a few ulps under: that is the threshold itself, not below it
    return -penalty if balance < threshold - _TIE_TOL else 0.0


def type_penalties(types: Sequence[str], weight: float = 0.15, population: Sequence[str] | None = None) -> list[float]:
    """Per proposal: -weight · max(0, f_type - 0.5) / 0.5, f_type = share of its content type among the step's valid
    proposals ``population`` (default: ``types`` themselves; with data parallelism, those of every rank); 0 for every
    proposal when only one type is present in the population. Each of ``types`` must be in the population (a type
    outside it used to read as a share of 0: no penalty, silently)."""
    weight = _finite("weight", weight, 0.0)
    refuse_text_for_list("types", types)  # "aab" read as three proposals of types "a", "a", "b"
    refuse_text_for_list("population", population)
    pop = list(types) if population is None else list(population)
    missing = [t for t in types if t not in set(pop)]
    if missing:
        raise ValueError(f"types: {missing[0]!r} is not in the population of {len(pop)} valid proposals")
    if len(set(pop)) <= 1:
        return [0.0] * len(types)
    counts = Counter(pop)
    return [-weight * max(0.0, counts[t] / len(pop) - 0.5) / 0.5 for t in types]


def proposal_penalties(aux: Sequence[dict], threshold: float = 0.15, penalty: float = 0.3,
                       type_weight: float = 0.15, population_types: Sequence[str] | None = None
                       ) -> list[tuple[float, float]]:
    """(easy-hard penalty, type penalty) of each proposer sample from its ``aux``; (0, 0) for invalid ones. Type
    shares are over ``population_types`` (the step's valid proposals on every rank), default the valid ones given."""
    valid = [a for a in aux if a.get("valid")]
    types = iter(type_penalties([a["content_type"] for a in valid], type_weight, population_types))
    out = []
    for a in aux:
        if not a.get("valid"):
            out.append((0.0, 0.0))
            continue
        if len(a["consistency"]) != len(a["executed"]):  # zip dropped the extra attempts silently
            raise ValueError(f"proposer sample {len(out)}: executed / consistency give {len(a['executed'])} / "
                             f"{len(a['consistency'])} render attempts")
        ok_c = [c for c, e in zip(a["consistency"], a["executed"]) if e]
        out.append((easy_hard_penalty(ok_c, threshold, penalty), next(types)))
    return out


def cluster_shares(labels: Sequence[int]) -> list[float]:
    """Share of the population in each item's cluster (labels from ``mmevo.models.embedder.cluster``)."""
    refuse_text_for_list("labels", labels)
    counts = Counter(labels)
    return [counts[label] / len(labels) for label in labels]


def coder_reward(rendered: bool, easy: float, consistency: float, penalties: float) -> float:
    """A rendered sample: 1 + s + min(c, 1 - c) + the proposal's penalties (easy-hard, type); a failed one: 0.
    s and c must be shares in [0, 1] and the penalties finite where they are used (a NaN s or penalty used to give a
    NaN reward, a c of 1.5 a reward of 1.0); ``rendered`` must be a bool (the string "no" read as rendered)."""
    if not isinstance(rendered, (bool, np.bool_)):
        raise ValueError(f"rendered must be True or False, got {rendered!r}")
    if not rendered:
        return 0.0
    c = _share("consistency", consistency)
    return 1.0 + _share("easy", easy) + min(c, 1.0 - c) + _finite("penalties", penalties)


# -- reward heads (registered as mmzero_proposer / mmzero_coder; they read the strategies' per-sample aux) -----------
_POPULATION_KEYS = ("caption", "easy_question", "hard_question", "content_type")


def gather_population(local: list) -> tuple[list, int]:
    """The step's population from every data-parallel rank, in rank order, and where this rank's items start in it.
    Each rank holds a contiguous share of the step's prompts, so rank order is the order one process would see.
    Every rank must call it (a collective) when a process group is up; without one it is ``local`` itself."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return list(local), 0
    parts: list = [None] * dist.get_world_size()
    dist.all_gather_object(parts, list(local))
    return [x for part in parts for x in part], sum(len(part) for part in parts[:dist.get_rank()])


def _is_valid_flag(aux: dict, row: int) -> bool:
    """A proposer sample's ``aux["valid"]`` (absent: invalid); anything but a bool is a ValueError naming the sample:
    the text "no" read as a valid proposal and 1 / 0 passed as flags."""
    v = aux.get("valid", False)
    if not isinstance(v, (bool, np.bool_)):
        raise ValueError(f"proposer sample {row}: aux['valid'] must be True or False, got {v!r}")
    return bool(v)


def _check_proposal_aux(aux: dict, row: int) -> None:
    """A valid proposal's texts and per-attempt lists, each named on error: executed [2] / [1.0] read as a rendered
    attempt and easy [True] as 1.0, silently; a None easy, a bool ``executed`` or a None caption failed with a
    TypeError (or the tokenizer's message) naming neither sample nor field."""
    for key in _POPULATION_KEYS:
        if not isinstance(aux.get(key), str):
            raise ValueError(f"proposer sample {row}: aux[{key!r}] must be a text, got {aux.get(key)!r:.80}")
    for key in ("executed", "easy", "consistency"):
        if not isinstance(aux.get(key), (list, tuple)):
            raise ValueError(f"proposer sample {row}: aux[{key!r}] must be a list (one entry per render attempt), "
                             f"got {aux.get(key)!r:.80}")
    for j, e in enumerate(aux["executed"]):
        if not isinstance(e, (bool, np.bool_)):
            raise ValueError(f"proposer sample {row}: aux['executed'][{j}] must be True or False, got {e!r}")
    for key in ("easy", "consistency"):
        for j, x in enumerate(aux[key]):
            if not is_real_number(x) or isinstance(x, np.bool_):
                raise ValueError(f"proposer sample {row}: aux[{key!r}][{j}] must be a number, got {x!r}")


def _attempts(aux: dict, row: int) -> int:
    """A valid proposal's number of render attempts (its executed / easy / consistency lists must agree); one failed
    attempt when it had none, as the released code counts a proposal that got no code."""
    _check_proposal_aux(aux, row)
    n = len(aux["executed"])
    if len(aux["easy"]) != n or len(aux["consistency"]) != n:
        raise ValueError(f"proposer sample {row}: executed / easy / consistency give {n} / {len(aux['easy'])} / "
                         f"{len(aux['consistency'])} render attempts")
    return max(n, 1)


class ProposerHead:
    """Proposal reward of every proposer sample from its ``aux`` (valid, texts, executed / easy / consistency per
    render attempt): penalties, cluster shares over the step's M valid proposals, ``proposal_rewards``.

    The population (M, cluster shares, type shares) is the step's valid proposals on every data-parallel rank, as one
    process would see them (seed: "M is the supplied valid proposal population"), so the head makes one collective
    call per step. The penalties it applies are recorded in each valid sample's ``aux["penalties"]`` (easy-hard,
    type), for the coder phase."""

    name = "mmzero_proposer"
    collective = True  # gathers the population: the trainer calls score([]) on a rank without samples

    def __init__(self, strength: float = 0.5, threshold: float = 0.15, penalty: float = 0.3, type_weight: float = 0.15,
                 embedder: str = "", cluster_threshold: float = 0.8):
        self.strength, self.threshold, self.penalty, self.type_weight = strength, threshold, penalty, type_weight
        # a NaN threshold failed every similarity test, so each proposal led its own cluster: every diversity
        # adjustment 0, silently (the others are checked where they are used, by the reward functions)
        self.embedder_name, self.cluster_threshold = embedder, _finite("cluster_threshold", cluster_threshold)

    def score(self, samples):
        from mmevo.models.embedder import cluster, get_embedder

        B = len(samples)
        aux = [s.aux for s in samples]
        valid_idx = [i for i, a in enumerate(aux) if _is_valid_flag(a, i)]
        population, start = gather_population([tuple(aux[i][k] for k in _POPULATION_KEYS) for i in valid_idx])
        M = len(population)
        if B == 0:  # a rank without samples: it took part in the gather, nothing to score
            return torch.zeros(0), {"valid": 0, "population": M}
        # each proposal's own number of render attempts (the released code divides by the codes each one got):
        # padding a shorter proposal to the longest would count attempts it never had as failures
        mine = set(valid_idx)
        n_of = [_attempts(a, i) if i in mine else 1 for i, a in enumerate(aux)]
        N = max(n_of)
        executed = torch.zeros(B, N, dtype=torch.bool)
        easy = torch.zeros(B, N, dtype=torch.float64)
        cons = torch.zeros(B, N, dtype=torch.float64)
        adjustments = torch.zeros(B, 3, dtype=torch.float64)
        shares = torch.zeros(B, 3, dtype=torch.float64)
        metrics: dict = {"valid": len(valid_idx), "population": M}
        if valid_idx:
            penalties = proposal_penalties(aux, self.threshold, self.penalty, self.type_weight,
                                           [p[3] for p in population])
            emb = get_embedder(self.embedder_name)
            mine = slice(start, start + len(valid_idx))
            for col, key in enumerate(_POPULATION_KEYS[:3]):
                labels = cluster(emb.embed([p[col] for p in population]), self.cluster_threshold)
                shares[valid_idx, col] = torch.tensor(cluster_shares(labels)[mine], dtype=torch.float64)
                metrics[f"clusters_{key}"] = len(set(labels))
            for i in valid_idx:
                a = aux[i]
                n = len(a["executed"])
                executed[i, :n] = torch.tensor(a["executed"], dtype=torch.bool)
                easy[i, :n] = torch.tensor(a["easy"], dtype=torch.float64)
                cons[i, :n] = torch.tensor(a["consistency"], dtype=torch.float64)
                adjustments[i, :2] = torch.tensor(penalties[i], dtype=torch.float64)
                a["penalties"] = penalties[i]
            adjustments[valid_idx, 2] = diversity_adjustment(shares[valid_idx], M, self.strength)
            metrics["diversity_adjustment"] = float(adjustments[valid_idx, 2].mean())
            metrics["easy_hard_penalized"] = float((adjustments[valid_idx, 0] < 0).double().mean())
            # every type, 0 where a step has none of it: logged only when present, a phase's mean was over the steps
            # that had the type (a type in one of two steps at 1/3 read 1/3, not 1/6; the means summed to 1.42)
            for t in sorted(set(CONTENT_TYPES) | {p[3] for p in population}):
                metrics[f"type_share/{t}"] = sum(p[3] == t for p in population) / M
        valid = torch.tensor([bool(a.get("valid")) for a in aux], dtype=torch.bool)
        reward = torch.empty(B, dtype=torch.float64)
        for n in sorted(set(n_of)):  # one call per attempt count, each over its proposals' own N
            rows = [i for i, k in enumerate(n_of) if k == n]
            reward[rows] = proposal_rewards(executed[rows, :n], easy[rows, :n], cons[rows, :n], adjustments[rows],
                                            valid[rows])
        return reward.float(), metrics


class CoderHead:
    """``coder_reward`` of each coder sample from its ``aux`` (rendered, easy, consistency, the proposal's penalties)."""

    name = "mmzero_coder"

    def score(self, samples):
        r = [coder_reward(s.aux["rendered"], s.aux["easy"], s.aux["consistency"], s.aux.get("penalties", 0.0))
             for s in samples]
        if not samples:  # an empty batch: no rewards, and a render share of nothing is undefined
            return torch.zeros(0), {}
        return torch.tensor(r, dtype=torch.float32), {"rendered": sum(s.aux["rendered"] for s in samples) / len(samples)}
