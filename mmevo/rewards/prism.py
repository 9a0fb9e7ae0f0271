"""Prism semantic coverage reward (Prism, "How It Works"): a questioner is rewarded for questions at the edge of the
solver's ability that fall in rarely visited regions of a fixed K-cluster partition of question space.

    r(q) = zpd(p(q)) · (1 + λ · exp(-n_c(q) / n̄))              quality × (1 + diversity bonus)
    zpd(p) = max(0, 1 - |p - 0.75| / 0.4)  for 0.5 <= p <= 0.9, else 0
    n_k <- γ · n_k + (1 - γ) · 1[k visited]                     once per step, after the rewards are computed

p(q): the solver's majority-vote agreement on q; c(q): the nearest centroid to embed(q); n_k: the EMA visit count of
cluster k (every cluster starts at 1); n̄: the mean of n over all K clusters. Seed defaults: λ = 5.0, γ = 0.99, K = 128.

The math is four pure functions (``zpd``, ``coverage_rewards``, ``ema_counts``, ``diversity_stats``); the head
``PrismCoverageHead`` (registered as ``prism_coverage``) reads each questioner sample's ``aux`` and keeps the counts as
its checkpointed state. Shapes: B samples in the batch, K clusters, M visits (cluster ids, duplicates allowed).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from mmevo.validation import is_blank_text, is_bool, is_integer_number, is_real_number

ZPD_LOW, ZPD_HIGH = 0.5, 0.9  # the band where zpd is non-zero (seed: p(q) in [0.5, 0.9])
ZPD_CENTER, ZPD_WIDTH = 0.75, 0.4  # peak of zpd and the distance at which it would reach 0
EMA_MODES = ("indicator", "per_question")

__all__ = ["EMA_MODES", "PrismCoverageHead", "coverage_rewards", "diversity_stats", "ema_counts",
           "load_init_counts", "zpd"]


def _holds_bool(x) -> bool:
    """A bool anywhere in ``x`` that is no tensor (Python's or numpy's, a bool array, one inside a list / tuple):
    torch and numpy read True / False as 1 / 0, so [True, False] of p or counts scored silently as numbers."""
    if torch.is_tensor(x):
        return False
    if isinstance(x, np.ndarray) and x.dtype == object:
        return any(_holds_bool(v) for v in x.flat)
    if isinstance(x, (list, tuple)):
        return any(is_bool(v) or _holds_bool(v) for v in x)
    return is_bool(x)  # Python's, numpy's, a bool array


def _as_float(x, name: str) -> Tensor:
    """Tensors as they are; a list, tuple, numpy array or Python number (valid inputs too) as a tensor: a float numpy
    array keeps its dtype, anything else becomes float64 (torch's float32 default would round 0.9 to 0.8999...).
    A bool (Python's, numpy's, in a list) or anything that is no number (None, text) is a ValueError naming ``name``
    (torch's "too many dimensions 'str'" / "must be real number, not NoneType" named nothing)."""
    if torch.is_tensor(x):
        return x
    if _holds_bool(x):
        raise ValueError(f"{name} must be a floating-point tensor of numbers, got bools (True / False): {x!r:.200}")
    if isinstance(x, np.ndarray) and x.dtype.kind == "f":
        return torch.from_numpy(x)
    try:
        return torch.as_tensor(x, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(f"{name} must be a floating-point tensor of numbers, got {x!r:.200}") from None


def _is_flag(x) -> bool:
    """A bool of any kind: Python's, numpy's (np.False_ is not False) or a one-element bool tensor / array."""
    if isinstance(x, (bool, np.bool_)):
        return True
    if torch.is_tensor(x):
        return x.dtype == torch.bool and x.numel() == 1
    return isinstance(x, np.ndarray) and x.dtype == np.bool_ and x.size == 1


def _as_ids(x, name: str) -> Tensor:
    """Cluster ids as a tensor (lists, tuples, numpy arrays too); an empty input has no dtype to check: long.
    Anything torch cannot read as numbers (a generator, None, text) is a ValueError naming ``name``: torch's "Could not
    infer dtype of generator" / "too many dimensions 'str'" named no argument."""
    if torch.is_tensor(x):
        t = x
    else:
        try:
            t = torch.as_tensor(x)
        except (TypeError, ValueError, RuntimeError):
            raise ValueError(f"{name} must be integer cluster ids (a tensor, list, tuple or array), "
                             f"got {x!r:.200}") from None
    return t.long() if t.numel() == 0 else t


def zpd(p: Tensor) -> Tensor:
    """Zone of proximal development (Prism): float p [B] -> [B] of p's dtype,
    max(0, 1 - |p - 0.75| / 0.4) for 0.5 <= p <= 0.9, else 0 (+-inf too). Detached.
    Edges: zpd(0.5) = 0.375, zpd(0.75) = 1, zpd(0.9) = 0.625; just outside the band it drops to 0.
    A NaN p (an agreement of no samples, 0 / 0) is a ValueError naming its index: it used to score 0, silently."""
    p = _as_float(p, "p")  # None, text, bools: a ValueError naming p
    if not p.is_floating_point():
        raise ValueError(f"p must be a floating-point tensor, got {p.dtype}")
    nan = torch.isnan(p.detach())
    if nan.any():
        raise ValueError(f"p[{int(nan.reshape(-1).nonzero()[0])}] is NaN; an agreement is a number in [0, 1]")
    out_dtype = p.dtype
    p = p.detach().to(torch.float64)  # evaluated in float64 and rounded once (bf16 / fp16 / float32 were an ulp off)
    score = (1.0 - (p - ZPD_CENTER).abs() / ZPD_WIDTH).clamp(min=0.0)  # [B]
    band = (p >= ZPD_LOW) & (p <= ZPD_HIGH)  # [B] bool
    return torch.where(band, score, torch.zeros_like(score)).to(out_dtype)


def coverage_rewards(p: Tensor, clusters: Tensor, counts: Tensor, lam: float = 5.0,
                     valid: Tensor | None = None) -> Tensor:
    """Prism reward: float p [B], long clusters [B] in [0, K), float counts [K] (>= 0), bool valid [B] or None.
    Return detached [B] of p's dtype: zpd(p) · (1 + lam · exp(-counts[clusters] / counts.mean())), and -1.0 where
    valid is False (there the cluster may be anything, e.g. -1). All counts 0 (possible with gamma = 0) make every
    cluster rare: zpd(p) · (1 + lam). ``counts`` are read as given (the state before this batch's update); no input
    is mutated."""
    p, clusters, counts = _as_float(p, "p"), _as_ids(clusters, "clusters"), _as_float(counts, "counts")
    if counts.dtype == torch.bool:  # a visit mask is no count: True read as 1
        raise ValueError("counts must be a float [K] tensor of EMA visit counts, got a bool tensor")
    if valid is not None and not torch.is_tensor(valid):  # a list of 0 / 1 (or 2) was cast to bool, silently
        arr = np.asarray(valid)
        valid = torch.zeros(0, dtype=torch.bool) if arr.size == 0 else torch.as_tensor(arr)
    if not p.is_floating_point() or p.dim() != 1:
        raise ValueError(f"p must be a float [B] tensor, got {p.dtype} {tuple(p.shape)}")
    B = p.shape[0]
    if clusters.shape != (B,) or clusters.is_floating_point() or clusters.dtype == torch.bool:  # bool: not an id
        raise ValueError(f"clusters must be an integer [{B}] tensor, got {clusters.dtype} {tuple(clusters.shape)}")
    if counts.dim() != 1 or counts.numel() < 1:
        raise ValueError(f"counts must be a [K] tensor with K >= 1, got {tuple(counts.shape)}")
    ok = torch.ones(B, dtype=torch.bool, device=p.device) if valid is None else valid
    if ok.dtype != torch.bool or ok.shape != (B,):
        raise ValueError(f"valid must be a bool [{B}] tensor or None, got {ok.dtype} {tuple(ok.shape)}")
    # as PrismCoverageHead checks: a NaN lam used to turn every reward NaN and an infinite one inf / NaN, silently
    if not is_real_number(lam) or not 0 <= lam < math.inf:
        raise ValueError(f"lam must be finite and >= 0 (seed: 5.0), got {lam}")
    lam = float(lam)  # a Fraction passed the check and failed at Fraction * Tensor (TypeError)
    K = counts.shape[0]
    idx = torch.where(ok, clusters.long(), torch.zeros_like(clusters, dtype=torch.long))  # [B]; invalid rows: 0
    bad = (idx < 0) | (idx >= K)
    if bad.any():
        raise ValueError(f"cluster id {int(idx[bad][0])} of a valid sample is outside [0, {K})")
    # p is the solver's majority-vote agreement, a share: a NaN or 1.5 used to score 0 (outside the band), silently.
    # Invalid rows may hold any placeholder (they score -1 whatever it is)
    bad_p = ok.to(p.device) & ~((p.detach() >= 0) & (p.detach() <= 1))  # NaN fails both comparisons
    if bad_p.any():
        i = int(bad_p.nonzero()[0])
        raise ValueError(f"p[{i}] of a valid sample must lie in [0, 1] (a solver agreement), got {p[i].item()}")
    # evaluated in float64 and rounded once to p's dtype, as zpd is: a float32 / bf16 / fp16 evaluation rounded after
    # every operation and missed the correctly rounded reward by an ulp or more (float32 p 0.5733: 0.80796272 for
    # 0.80796278)
    work = torch.float64
    n = counts.detach().to(device=p.device, dtype=work)  # [K]
    if not bool(((n >= 0) & torch.isfinite(n)).all()):  # NaN fails n >= 0
        raise ValueError(f"counts must be finite and >= 0, got min {float(n.min())} max {float(n.max())}")
    top = n.max()
    # all counts 0 (gamma = 0 after a step that visited nothing): no cluster is more common than another, so each
    # gets the rarity of an unvisited cluster, exp(0) = 1, instead of exp(-0 / 0). n_c / n̄ does not depend on the
    # counts' scale: dividing by the largest first keeps the mean of huge counts from overflowing to inf and that of
    # subnormal ones from rounding to 0 (either made every rarity 1)
    rel = n / top if bool(top > 0) else n  # [K] in [0, 1]
    rarity = torch.exp(-rel[idx] / rel.mean()) if bool(top > 0) else torch.ones_like(n[idx])  # [B]: exp(-n_c / n̄)
    pw = p.detach().to(work)
    pw = torch.where(ok.to(pw.device), pw, torch.zeros_like(pw))  # an invalid row's placeholder (maybe NaN) unused
    reward = zpd(pw) * (1.0 + lam * rarity)  # [B]
    reward = torch.where(ok, reward, torch.full_like(reward, -1.0))
    return reward.to(p.dtype)


def ema_counts(counts: Tensor, visited: Tensor, gamma: float = 0.99, mode: str = "indicator") -> Tensor:
    """EMA cluster counts (Prism): float counts [K], integer visited [M] (cluster ids of this step's questions,
    duplicates allowed, M may be 0) -> new counts [K] of counts' dtype; the input is not mutated.
    indicator (seed):  n_k <- gamma · n_k + (1 - gamma) · 1[k in visited]   (k visited several times adds once)
    per_question:      n_k <- gamma · n_k + (1 - gamma) · #{visits of k}     (every question adds)"""
    if mode not in EMA_MODES:
        raise ValueError(f"ema mode {mode!r} not in {list(EMA_MODES)}")
    counts = _as_float(counts, "counts")
    if not counts.is_floating_point() or counts.dim() != 1:
        raise ValueError(f"counts must be a float [K] tensor, got {counts.dtype} {tuple(counts.shape)}")
    if not is_real_number(gamma) or not 0.0 <= gamma <= 1.0:  # True read as 1: the counts never moved
        raise ValueError(f"gamma must be in [0, 1], got {gamma!r}")
    gamma = float(gamma)  # a Fraction passed the check and failed at Fraction * Tensor (TypeError)
    if not bool((torch.isfinite(counts) & (counts >= 0)).all()):  # would poison every later reward
        raise ValueError(f"counts must be finite and >= 0, got min {float(counts.min())} max {float(counts.max())}")
    K = counts.shape[0]
    v = _as_ids(visited, "visited").reshape(-1)  # no visits ([], np.array([])): M = 0, every count decays
    if v.is_floating_point() or v.dtype == torch.bool:
        raise ValueError(f"visited must hold integer cluster ids, got {v.dtype}")
    v = v.long().to(counts.device)
    if v.numel() and (int(v.min()) < 0 or int(v.max()) >= K):
        raise ValueError(f"visited cluster ids must be in [0, {K}), got min {int(v.min())} max {int(v.max())}")
    hits = torch.bincount(v, minlength=K)  # [K] visits per cluster
    add = (hits > 0) if mode == "indicator" else hits
    # float64, rounded once to counts' dtype: in float32 / bf16 / fp16 gamma itself and each product were rounded, so
    # the new count missed the correctly rounded one by an ulp (fp16 3.25 -> 1.2539 for 1.2549 at gamma 0.113)
    new = gamma * counts.detach().to(torch.float64) + (1.0 - gamma) * add.to(torch.float64)
    return new.to(counts.dtype)


def diversity_stats(clusters: Sequence[int] | Tensor, k: int) -> dict:
    """The seed's curriculum-diversity table for one set of questions: cluster ids [N] in [0, k) -> plain numbers
    active_clusters: clusters holding >= 1 question;  normalized_entropy: -sum_j p_j log p_j / log k over all k
    (0 when N = 0 or k = 1);  gini: sum_i sum_j |x_i - x_j| / (2 k sum x) over all k counts x (0 when N = 0);
    top10_share: share of the questions in the ceil(k / 10) largest clusters;  questions: N."""
    # an int (numpy ints too), not a float: 4.0 passed as a cluster count; NaN / inf / text named no k in int()
    if not is_integer_number(k) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    k = int(k)
    c = _as_ids(clusters if torch.is_tensor(clusters) else list(clusters), "clusters").reshape(-1)
    if c.is_floating_point() or c.dtype == torch.bool:  # a cast to long would truncate 1.7 to cluster 1
        raise ValueError(f"cluster ids must be integers, got {c.dtype}")
    c = c.long()
    if c.numel() and (int(c.min()) < 0 or int(c.max()) >= k):
        raise ValueError(f"cluster ids must be in [0, {k}), got min {int(c.min())} max {int(c.max())}")
    x = torch.bincount(c, minlength=k).double()  # [k] questions per cluster
    total = float(x.sum())
    if total == 0:
        return {"questions": 0, "active_clusters": 0, "normalized_entropy": 0.0, "gini": 0.0, "top10_share": 0.0}
    share = x / total  # [k]
    nz = share[share > 0]
    entropy = float(-(nz * nz.log()).sum()) + 0.0  # + 0.0: one active cluster gave -0.0 ("-0.0" in diversity.json)
    # sum_i sum_j |x_i - x_j| = 2 sum_i (2i - k - 1) x_(i) over x sorted ascending (i = 1..k): O(k log k), where the
    # [k, k] matrix of differences took seconds and gigabytes for k in the thousands (this runs every step)
    rank = torch.arange(1, k + 1, dtype=torch.float64)  # [k]
    gini = float(((2.0 * rank - k - 1.0) * x.sort().values).sum() / (k * total))
    top = math.ceil(k / 10)
    return {"questions": int(total), "active_clusters": int((x > 0).sum()),
            "normalized_entropy": entropy / math.log(k) if k > 1 else 0.0, "gini": gini,
            "top10_share": float(x.sort(descending=True).values[:top].sum() / total)}


def load_init_counts(path: str, k: int) -> Tensor:
    """Warm-start EMA counts [K] float64 from ``path`` (the seed's ``init_cluster_counts_path``): a ``.npy`` array of K
    numbers, or a ``.json`` list of them / an object with ``"counts"`` (the head's ``state_dict``, as a Prism
    summary's ``head_state`` holds it). Every count finite and >= 0, K of them; errors name the file."""
    import json
    from pathlib import Path

    f = Path(path)
    if not f.is_file():
        raise ValueError(f"prism.init_counts: {path} is not a file (a .npy / .json of {k} cluster counts)")
    try:
        if f.suffix == ".npy":
            raw = np.load(f, allow_pickle=False)
            if raw.dtype.kind not in "iuf":  # a bool mask or text was read as counts (True = 1, "2" = 2), silently
                raise ValueError(f"prism.init_counts: {path} holds a {raw.dtype} array, not numbers")
        elif f.suffix == ".json":
            raw = json.loads(f.read_text())
            raw = raw.get("counts") if isinstance(raw, dict) else raw
            if not isinstance(raw, list):
                raise ValueError(f"prism.init_counts: {path} holds no list of {k} counts (nor {{\"counts\": [...]}})")
            i = next((j for j, v in enumerate(raw) if not is_real_number(v)), None)
            if i is not None:  # true / "2" were read as counts 1 / 2, silently; null as NaN
                raise ValueError(f"prism.init_counts: {path}: count {i} is {raw[i]!r}, not a number")
        else:
            raise ValueError(f"prism.init_counts: {path} must be a .npy or .json file")
        arr = np.asarray(raw, dtype=np.float64)
    except ValueError as e:
        if str(e).startswith("prism.init_counts"):
            raise
        raise ValueError(f"prism.init_counts: {path} holds no array of numbers ({e})") from None
    except (OSError, UnicodeDecodeError, TypeError) as e:
        raise ValueError(f"prism.init_counts: {path} cannot be read ({e})") from None
    if arr.ndim != 1 or arr.shape[0] != k:
        raise ValueError(f"prism.init_counts: {path} holds an array of shape {tuple(arr.shape)}, not the {k} counts "
                         f"of this partition's clusters")
    bad = ~(np.isfinite(arr) & (arr >= 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"prism.init_counts: {path}: count {i} is {float(arr[i])!r}; every count must be finite and "
                         ">= 0")
    return torch.from_numpy(arr.copy())


def _sample_agreement(i: int, v) -> float:
    """A questioner sample's ``aux["p"]`` as a float in [0, 1]: a real number or a 0-dim numeric tensor / array; None
    (the solver never answered) is 0. Anything else is a ValueError naming sample ``i``: float() read the text "0.75"
    and a one-element array as agreements, silently, and "abc", 1j or [0.75] failed with float()'s own message."""
    if (torch.is_tensor(v) or isinstance(v, np.ndarray)) and v.ndim == 0 and not _is_flag(v):
        v = v.item()  # a 0-dim tensor / array: its number
    if v is not None and (_is_flag(v) or not is_real_number(v)):  # a flag is no agreement: True read as p = 1
        raise ValueError(f"prism_coverage: sample {i}: aux['p']={v!r:.100} is not a number (the solver's agreement, "
                         "a share in [0, 1], or None when it never answered)")
    pi = 0.0 if v is None else float(v)
    if not 0.0 <= pi <= 1.0:
        raise ValueError(f"prism_coverage: sample {i}: aux['p']={v!r} is not in [0, 1]")
    return pi


# -- reward head --------------------------------------------------------------------------------------------------
def _all_reduce_sum(t: Tensor) -> Tensor:
    """Sum over data-parallel ranks when a process group is up (every rank must call it); else ``t`` itself."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return t
    dev = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else t.device
    out = t.to(dev).clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM)
    return out.to(t.device)


class PrismCoverageHead:
    """Prism coverage reward of each questioner sample from its ``aux``:

    - ``aux["question"]``: the parsed question text; None / "" when the questioner's output was empty or
      unparseable (reward -1, not counted). ``aux["valid"] = False`` marks a sample invalid too.
    - ``aux["p"]``: the solver's majority-vote agreement on it, in [0, 1] (None or 0 when the solver never answered).
    - ``aux["cluster"]`` (optional): its precomputed cluster id; otherwise the question is embedded with ``embedder``
      and assigned to the nearest of the centroids in ``centroids`` (built by ``mmevo prism build-clusters``).

    Rewards use the counts as they were before this batch; then the clusters visited by valid maternal samples
    (``visit="band"``, the default as in the ``prism`` config: only those with p in [0.5, 0.9]; ``"valid"``: all)
    update the counts with ``ema_counts``. Under data parallelism the per-cluster visits are summed over ranks first
    (one all-reduce of K numbers per step, so every rank must score every step), hence every rank holds the same
    counts. The counts are the head's state: checkpointed with the run, and handed to the next iteration's head
    through ``state_dict`` / ``load_state_dict``.

    ``k``: the number of clusters without a centroids file (``centroids=""``; every sample must then carry
    ``aux["cluster"]``); with a file it must match the file's K or be 0.
    """

    name = "prism_coverage"
    collective = True  # one all-reduce per step: the trainer calls score([]) on a rank without samples

    def __init__(self, centroids: str | None = None, embedder: str = "", lam: float = 5.0, gamma: float = 0.99,
                 ema_mode: str = "indicator", init_count: float = 1.0, k: int = 0, visit: str = "band",
                 init_counts: str = ""):
        from mmevo.prism.clusters import DEFAULT_CENTROIDS, embedder_id, load_centroids

        if ema_mode not in EMA_MODES:
            raise ValueError(f"prism_coverage: ema_mode {ema_mode!r} not in {list(EMA_MODES)}")
        if visit not in ("valid", "band"):
            raise ValueError(f"prism_coverage: visit {visit!r} not in ['valid', 'band']")
        for name, v in (("gamma", gamma), ("lam", lam), ("init_count", init_count)):
            if not is_real_number(v):  # a YAML yes (True) passed the range checks below as 1: gamma 1 froze the counts
                raise ValueError(f"prism_coverage: {name} must be a number, got {v!r}")
        # NaN fails every comparison; an infinite lam or init_count made every reward or count non-finite at step 1
        if not 0.0 <= gamma <= 1.0 or not 0 <= lam < math.inf or not 0 < init_count < math.inf:
            raise ValueError(f"prism_coverage: need 0 <= gamma <= 1, finite lam >= 0, finite init_count > 0; got "
                             f"gamma={gamma}, lam={lam}, init_count={init_count}")
        if not is_integer_number(k) or k < 0:  # int() read 4.5 as 4 clusters and True as 1
            raise ValueError(f"prism_coverage: k must be an integer >= 0 (0: the centroids file's), got {k!r}")
        self.lam, self.gamma, self.ema_mode, self.visit = float(lam), float(gamma), ema_mode, visit
        self.embedder_name = embedder
        self.centroids_path = DEFAULT_CENTROIDS if centroids is None else str(centroids)
        self.centroids: Tensor | None = None
        if self.centroids_path:
            self.centroids, _ = load_centroids(self.centroids_path, embedder_id(embedder))
            if k and k != self.centroids.shape[0]:
                raise ValueError(f"prism_coverage: k={k} but {self.centroids_path} holds {self.centroids.shape[0]} "
                                 "centroids (give k=0 to take the file's)")
            k = self.centroids.shape[0]
        elif not k or k < 1:
            raise ValueError("prism_coverage: give a centroids file (mmevo prism build-clusters CONFIG) or, when every "
                             "sample carries aux['cluster'], the number of clusters k")
        self.k = int(k)
        self.counts = torch.full((self.k,), float(init_count), dtype=torch.float64)  # [K] n_k, start at init_count
        self.init_counts = str(init_counts or "")
        if self.init_counts:  # the seed's init_cluster_counts_path: warm-start counts, e.g. a previous run's
            self.counts = load_init_counts(self.init_counts, self.k)
        self.steps = 0
        self._embedder = None

    # -- clusters of questions without a precomputed one --
    def _assign(self, texts: list[str], samples: list[int]) -> list[int]:
        from mmevo.prism.clusters import assign_texts, get_sentence_embedder

        if self.centroids is None:
            raise ValueError("prism_coverage: a sample has no aux['cluster'] and the head has no centroids file "
                             "(give centroids=PATH, built by `mmevo prism build-clusters CONFIG`)")
        if self._embedder is None:
            emb = get_sentence_embedder(self.embedder_name)
            if emb.dim != self.centroids.shape[1]:
                raise ValueError(f"prism_coverage: embedder {self.embedder_name or 'all-MiniLM-L6-v2'!r} has dimension "
                                 f"{emb.dim}, the centroids in {self.centroids_path} {self.centroids.shape[1]}")
            self._embedder = emb
        return assign_texts(self._embedder, texts, self.centroids, [f"sample {i}" for i in samples])

    def score(self, samples):
        B = len(samples)
        aux = [s.aux or {} for s in samples]
        questions = [a.get("question") for a in aux]
        # aux["valid"] = np.False_ / tensor(False) marks a sample invalid too (``is not False`` let it through); a
        # flag that is no bool (0, "no") is named: only False marked a sample invalid, so valid=0 scored it as valid
        for i, a in enumerate(aux):
            if a.get("valid") is not None and not _is_flag(a["valid"]):
                raise ValueError(f"prism_coverage: sample {i}: aux['valid']={a['valid']!r:.80} is not True / False")
        valid = [not (_is_flag(a.get("valid")) and not bool(a["valid"])) and isinstance(q, str) and not is_blank_text(q)
                 for a, q in zip(aux, questions)]
        p = torch.zeros(B, dtype=torch.float64)
        clusters = torch.full((B,), -1, dtype=torch.long)
        todo = []
        for i, a in enumerate(aux):
            if not valid[i]:
                continue
            if "p" not in a:
                raise ValueError(f"prism_coverage: sample {i} has a question but no aux['p'] (solver agreement)")
            p[i] = _sample_agreement(i, a["p"])
            if a.get("cluster") is not None:
                c = a["cluster"]
                if (torch.is_tensor(c) or isinstance(c, np.ndarray)) and c.ndim == 0 and not _is_flag(c):
                    c = c.item()  # a 0-dim tensor / array id: its number (a float one still fails the check below)
                if not is_integer_number(c):  # int(1.7) would read as cluster 1
                    raise ValueError(f"prism_coverage: sample {i}: aux['cluster']={c!r} is not an integer cluster id")
                c = int(c)
                if not 0 <= c < self.k:
                    raise ValueError(f"prism_coverage: sample {i}: aux['cluster']={c} is outside [0, {self.k})")
                clusters[i] = c
            else:
                todo.append(i)
        if todo:
            clusters[todo] = torch.tensor(self._assign([questions[i].strip() for i in todo], todo), dtype=torch.long)
        ok = torch.tensor(valid, dtype=torch.bool)
        before = self.counts
        rewards = coverage_rewards(p, clusters, before, self.lam, ok)  # [B], counts before this batch's update

        z = zpd(p)
        maternal = torch.tensor([getattr(s, "role", "maternal") == "maternal" for s in samples], dtype=torch.bool)
        visit = ok & maternal & ((z > 0) if self.visit == "band" else torch.ones_like(ok))
        hits = _all_reduce_sum(torch.bincount(clusters[visit], minlength=self.k))  # [K], summed over ranks
        visited = torch.repeat_interleave(torch.arange(self.k), hits.long())  # [M] ids with their multiplicity
        self.counts = ema_counts(before, visited, self.gamma, self.ema_mode)
        self.steps += 1

        n_valid = int(ok.sum())
        metrics = {"valid_frac": n_valid / B if B else 0.0,
                   "p_mean": float(p[ok].mean()) if n_valid else 0.0,
                   "zpd_mean": float(z[ok].mean()) if n_valid else 0.0,
                   "in_band_frac": float((z[ok] > 0).double().mean()) if n_valid else 0.0,
                   "unanswered_frac": float((p[ok] == 0).double().mean()) if n_valid else 0.0,
                   "distinct_clusters": int(clusters[ok].unique().numel()),
                   "visited_clusters": int((hits > 0).sum()),
                   # all counts 0 (gamma = 0, nothing visited) are all equal: max / mean = 1, not 0 / 0; as a ratio
                   # to the max, the mean of huge counts does not overflow
                   "counts_max_over_mean": float(1.0 / (self.counts / self.counts.max()).mean())
                   if self.counts.any() else 1.0,
                   "counts_min": float(self.counts.min()), "counts_max": float(self.counts.max())}
        if n_valid:
            stats = diversity_stats(clusters[ok], self.k)
            metrics["batch_normalized_entropy"] = stats["normalized_entropy"]
        return rewards.float(), metrics

    def state_dict(self) -> dict:
        return {"counts": self.counts.tolist(), "steps": self.steps, "k": self.k}

    def load_state_dict(self, state: dict) -> None:
        if not state:
            return
        if "counts" not in state:
            raise ValueError(f"prism_coverage: the saved state has no 'counts' (keys: {sorted(state)})")
        raw = state["counts"]
        # a NaN, negative or bool count was taken as it was: NaN / negative failed at the next step's reward with a
        # message naming no saved state, a bool counted as 1
        if _holds_bool(raw) or torch.is_tensor(raw) and raw.dtype == torch.bool:
            raise ValueError(f"prism_coverage: the saved counts hold bools, not numbers: {raw!r:.200}")
        try:
            counts = torch.as_tensor(raw, dtype=torch.float64).reshape(-1)
        except (TypeError, ValueError, RuntimeError):
            raise ValueError(f"prism_coverage: the saved counts are not numbers: {raw!r:.200}") from None
        if counts.numel() != self.k:
            raise ValueError(f"prism_coverage: the saved counts have {counts.numel()} clusters, this head {self.k} "
                             f"(centroids {self.centroids_path or 'none'})")
        bad = ~(torch.isfinite(counts) & (counts >= 0))
        if bad.any():
            i = int(bad.nonzero()[0])
            raise ValueError(f"prism_coverage: saved count {i} is {float(counts[i])!r}; every count must be finite "
                             "and >= 0")
        self.counts = counts.clone()
        self.steps = int(state.get("steps", 0))
