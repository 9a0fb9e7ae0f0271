"""One dataclass tree for every run; YAML files plus dotted command-line overrides (``trainer.lr=1e-6``).

Defaults are the papers' (EasyR1 / MM-UPT / CSRS Table 6) where a paper gives one; the tiny CPU configs in
``configs/`` override sizes only.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import numbers
import os
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import yaml

from mmevo.honest.tasks import MAX_DIFFICULTY, MIN_DIFFICULTY

# The EasyR1 / MM-UPT reasoning instruction appended to each problem.
R1V_SUFFIX = (
    " You FIRST think about the reasoning process as an internal monologue and then provide the final answer. "
    "The reasoning process MUST BE enclosed within <think> </think> tags. The final answer MUST BE put in \\boxed{}."
)
PROMPT_SUFFIXES = {"r1v": R1V_SUFFIX, "none": ""}
# Qwen's chat and vision control tokens: in data, a template or a system prompt the tokenizer reads them as those
# tokens (a fake chat turn, or an image placeholder with no pixels)
CONTROL_TOKEN = re.compile(r"<\|(?:im_start|im_end|endoftext|vision_start|vision_end|vision_pad|image_pad|video_pad"
                           r"|object_ref_start|object_ref_end|box_start|box_end|quad_start|quad_end"
                           r"|fim_prefix|fim_middle|fim_suffix|fim_pad|repo_name|file_sep)\|>")


def render_prompt(template: str, problem: str) -> str:
    """The user text for ``problem``: a named suffix (r1v | none) or a custom template containing ``{problem}``."""
    if template in PROMPT_SUFFIXES:
        return problem + PROMPT_SUFFIXES[template]
    if "<image>" in template:  # mmevo.data.schema.IMAGE_PLACEHOLDER (not imported: config stays free of PIL)
        # chat_messages reads every <image> of the rendered text as an image's place: one more than the images makes
        # the count wrong, so all images go first and every <image> (the problem's own included) is dropped
        raise ConfigError(f"prompt template {template!r} contains '<image>': mmevo places each image itself, where "
                          "the problem's own <image> marks it (else before the text), and a template's <image> would "
                          "count as one more image placeholder (the images would all move to the front). Remove "
                          "'<image>' from the template; an image's place belongs in the data's problem text")
    if m := CONTROL_TOKEN.search(template):
        raise ConfigError(f"prompt template {template!r} holds the chat / vision control token {m.group()!r}: the "
                          "tokenizer reads it as that token (a fake chat turn, or an image placeholder without "
                          "pixels); remove it (the chat template adds the turns, mmevo the images)")
    if "{problem}" in template:
        return template.replace("{problem}", problem)
    raise ConfigError(f"prompt template {template!r} is neither one of {sorted(PROMPT_SUFFIXES)} "
                      "nor a string containing {problem}")


LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")  # the LM's linears


@dataclass
class LoRAConfig:
    rank: int = 0  # LoRA rank r (0 = full fine-tuning); adapters are merged for vLLM sync and export
    alpha: float = 16.0  # LoRA scaling alpha (effective scale alpha / rank)
    dropout: float = 0.0  # dropout on the LoRA input
    target_modules: list = field(default_factory=lambda: list(LORA_TARGETS))  # LM linears with adapters: names or dotted suffixes (layers.0.self_attn.q_proj: layer 0's)


# model.path values that name an embedded model, built once into model.cache_dir/<dir> (mmevo.models.tiny.build_tiny)
TINY_ALIASES = {"tiny": "tiny-qwen2.5-vl", "tiny-wide": "tiny-wide-qwen2.5-vl", "tiny-text": "tiny-qwen2"}


@dataclass
class ModelConfig:
    path: str = "tiny"  # local checkpoint dir or hub id; "tiny" builds the embedded tiny Qwen2.5-VL in cache_dir
    cache_dir: str = ".cache/mmevo"  # where embedded tiny models are built once and reused
    dtype: str = "float32"  # parameter dtype: float32 | bfloat16 | float16
    device: str = "cpu"  # torch device for the single-process path
    gradient_checkpointing: bool = False  # recompute activations in backward, RL and SFT (exact; 7B configs: true)
    ref_offload: bool = False  # keep the reference model in CPU memory, on the GPU only for its log-prob pass
    freeze_vision_tower: bool = False  # the vision encoder (ViT and its merger) stays fixed in RL and SFT
    lora: LoRAConfig = field(default_factory=LoRAConfig)  # LoRA adapters instead of full fine-tuning (RL and SFT)
    trainable: list = field(default_factory=list)  # RL: train only parameters matching one of these regexes (SFT: all)
    cpu_linear: str = "auto"  # RL/SFT float32 CPU linears over >= 256 rows and HF sampling's: onednn | torch (F.linear) | auto (onednn if available, F.linear on Intel CPUs)
    cpu_malloc: str = "auto"  # RL/SFT on CPU: keep (freed memory stays in the heap: no page faults, RSS stays near peak) | system | auto (keep on glibc)


@dataclass
class DataConfig:
    train: str = "synthetic"  # "synthetic" (geometry), "figures" (values only in the image) or a Geometry3K-schema file/dir (DIR@SPLIT: a split)
    heldout: str = "synthetic"  # held-out set for evaluation, same forms; "" disables evaluation
    format: str = "geometry3k"  # layout of data files: geometry3k | intergps | geoqa | mathvision | mathvista | generic
    fields: dict = field(default_factory=dict)  # generic format: {id, image, problem, answer, choices} -> column names
    n_train: int = 2000  # synthetic train problems
    n_heldout: int = 200  # synthetic held-out problems
    seed: int = 0  # synthetic data seed (train and held-out derive disjoint streams from it)
    image_size: int = 56  # synthetic diagram side in pixels
    mc_fraction: float = 0.5  # share of synthetic problems that are multiple choice
    prompt_template: str = "r1v"  # r1v (EasyR1 <think> + \boxed{} instruction) | none | text with {problem}, no <image>
    system_prompt: str = ""  # optional system message ("" keeps the chat template's default)
    max_prompt_length: int = 1024  # prompts longer than this are skipped and counted (CSRS Table 6: 1024)
    max_pixels: int = 4194304  # images above this many pixels are scaled down, aspect kept (EasyR1: 4194304); 0 = off
    min_pixels: int = 0  # images below this many pixels are scaled up (EasyR1: 262144); 0 = off
    prompt_cache_mb: float = 2048  # encoded prompts (processed pixels) kept in memory; least recently used dropped
    skip_bad_rows: bool = False  # skip (and count) malformed rows instead of failing with the file/row/field
    hide_labels: bool = False  # drop gold answers before training (label-free runs); eval still uses them


@dataclass
class RolloutConfig:
    engine: str = "hf"  # hf | vllm
    n: int = 8  # samples per prompt (GRPO group size G)
    temperature: float = 1.0  # sampling temperature (EasyR1 default 1.0)
    top_p: float = 1.0  # nucleus sampling
    max_tokens: int = 1536  # max response length (CSRS Table 6: 1536)
    max_batch_seqs: int = 64  # HF engine: most sequences decoded together (a prompt's n beyond it: another batch)
    eval_temperature: float = 0.0  # evaluation decoding (0 = greedy)
    gpu_memory_utilization: float = 0.6  # vLLM: share of GPU memory for weights + KV cache
    tensor_parallel_size: int = 1  # vLLM: GPUs per engine (1: in-process engine, weights streamed directly)
    vllm_kv_cache_gb: int = 1  # vLLM on CPU: KV cache size in GiB
    max_images_per_prompt: int = 1  # vLLM: images one prompt may hold (it reserves memory for this many)
    enable_sleep_mode: bool = False  # vLLM on GPU: offload weights / drop the KV cache while training (no-op on CPU)
    sleep_level: int = 2  # vLLM sleep level: 2 drops weights too (they are re-synced before every rollout); 1 keeps a copy
    enforce_eager: bool = False  # vLLM on GPU: true disables CUDA graphs (always eager on CPU)


@dataclass
class RewardConfig:
    heads: dict = field(default_factory=lambda: {"accuracy": 1.0})  # reward head (name or pkg.module:Class) -> weight
    head_args: dict = field(default_factory=dict)  # head -> keyword arguments, e.g. {sfr: {gamma: 0.2}}
    # registered heads: accuracy (needs gold), format, majority (MM-UPT, label-free), sfr (CSRS, label-free)


@dataclass
class AlgoConfig:
    adv_scale: str = "group"  # group | batch | none (group_advantages)
    adv_eps: float = 1e-6  # added to the std in advantage normalisation
    kl_coef: float = 0.01  # KL-loss coefficient beta (0 skips the reference model entirely)
    kl_type: str = "low_var_kl"  # k1 | k2 | k3 | low_var_kl (verl: kl = k1, mse = k2, abs, and k3+ etc.: k2's gradient)
    clip_low: float = 0.2  # PPO clip below 1 (ratio >= 1 - clip_low)
    clip_high: float = 0.2  # PPO clip above 1; > clip_low is DAPO's clip-higher
    clip_ratio_c: Optional[float] = 3.0  # dual-clip bound c > 1 for negative advantages (verl: 3.0); null = off
    loss_agg: str = "token-mean"  # token-mean | seq-mean-token-mean | seq-mean-token-sum | seq-mean-token-sum-norm
    entropy_coef: float = 0.0  # entropy bonus (CSRS Table 6: 0)
    ppo_epochs: int = 1  # passes over each rollout batch


@dataclass
class TrainerConfig:
    steps: int = 100  # GRPO steps (one rollout batch each)
    threads: int = 0  # CPU cores the demo may use (fewer on the machine: it says so and uses those); 0 = all
    prompts_per_step: int = 256  # prompts sampled per step (train batch size; CSRS: 256)
    mini_batch_prompts: int = 64  # prompts per optimizer update (PPO mini batch; CSRS: 64)
    micro_batch_seqs: int = 8  # sequences per forward/backward (gradient accumulation inside a mini batch)
    max_tokens_per_micro_batch: int = 0  # also cap micro-batches at this many prompt+response tokens (real where packed, else padded; 0 = no cap)
    logits_chunk_tokens: int = 1024  # log-probs / entropy over this many positions at a time (0 = all at once)
    padding_free: bool = True  # training forwards run over real tokens only, in one row (a group's shared prompt once)
    lr: float = 1e-6  # AdamW learning rate (CSRS / EasyR1: 1e-6)
    weight_decay: float = 0.01  # AdamW weight decay
    betas: tuple = (0.9, 0.999)  # AdamW betas
    warmup_steps: int = 0  # linear warm-up optimizer steps
    lr_schedule: str = "constant"  # constant | cosine (after warm-up)
    max_grad_norm: float = 1.0  # gradient clipping
    seed: int = 1  # seeds data order, sampling, init and dropout (GRPO and SFT)
    output_dir: str = "runs/grpo"  # metrics, checkpoints, plots, final model
    save_every: int = 20  # checkpoint period in steps (CSRS: 20); 0 = no resumable checkpoints (final/ still exported)
    keep_checkpoints: int = 2  # newest checkpoints kept; 0 = keep all
    eval_every: int = 0  # held-out evaluation period in steps; 0 = only before and after
    eval_max_tokens: int = 0  # max tokens at evaluation (0 = rollout.max_tokens)
    resume: bool = True  # continue from the newest checkpoint in output_dir; false: start afresh, removing them
    wandb_mode: str = "offline"  # offline | online | disabled
    wandb_project: str = "mmevo"  # wandb project name
    progress: bool = True  # show a progress bar
    deepspeed: str = ""  # DeepSpeed JSON config (configs/deepspeed/zero2.json, zero3.json); "" = plain PyTorch


@dataclass
class SFTConfig:
    epochs: float = 3.0  # passes over the SFT data (fractions allowed)
    batch_size: int = 16  # sequences per optimizer step
    lr: float = 1e-3  # learning rate (tiny models from scratch need a large one)
    weight_decay: float = 0.0  # AdamW weight decay
    warmup_steps: int = 20  # linear warm-up optimizer steps (then cosine decay)
    max_grad_norm: float = 1.0  # gradient clipping
    output_dir: str = "runs/sft"  # final HF model goes to output_dir/model
    save_every: int = 50  # steps between resumable states (output_dir/sft_state.pt); 0 = never (a rerun restarts)
    teacher_noise: float = 0.0  # synthetic data only: share of SFT solutions from a weak teacher using a wrong rule


@dataclass
class CSRSConfig:
    enabled: bool = False  # sample with CSRS: n maternal responses + m re-inferences per maternal anchor
    m: int = 5  # re-inferences per maternal response (paper: 5)
    omega: float = 0.7  # retracing rate in (0, 1) (Eq. 6): anchor floor(omega * own length) per maternal response (paper: 0.7)
    random_anchor: bool = False  # Appendix A.5 variant: omega ~ U(0, 1) drawn per maternal response
    retrace: bool = True  # RRM: re-infer from the anchor; false = re-infer from scratch (anchor 0)
    perturb: bool = True  # VSP: re-inferences see a Gaussian-noised image (one per maternal response)
    sigma: float = 20.0  # VSP noise std in 0-255 pixel units (the paper gives no value; see csrs/perturb.py)
    gamma: float = 0.2  # SFR softening strength in [0, 1] (Eq. 8; paper optimum 0.2)
    beta: float = 5.0  # SFR tanh slope (Eq. 8; paper optimum 5.0)


@dataclass
class EvalConfig:
    benchmark: str = ""  # mathvista_testmini | mathvision_testmini | mathvision_test | geometry3k_test; "" = data.heldout
    data: str = ""  # local file or directory of the benchmark ("" = its hub dataset)
    format: str = ""  # adapter override: mathvision | mathvista | intergps | geometry3k | geoqa | generic
    split: str = ""  # split override ("" = the benchmark's)
    image_root: str = ""  # directory holding the images when they are not beside the data file
    fields: dict = field(default_factory=dict)  # generic format: {id, image, problem, answer, choices} -> column names
    out_dir: str = ""  # responses.jsonl, scores.json, report.md, report.png ("" = runs/eval/<benchmark>)
    limit: int = 0  # evaluate only the first N items (0 = all)
    batch_size: int = 16  # prompts per generation call (results are written after each batch)
    max_tokens: int = 0  # response budget (0 = trainer.eval_max_tokens, else rollout.max_tokens)
    max_prompt_length: int = 8192  # longer prompts (image tokens included) are scored wrong and counted
    overwrite: bool = False  # discard responses in out_dir instead of resuming (needed when model or prompt differ)


@dataclass
class MMZeroConfig:
    iterations: int = 3  # co-evolution iterations, each: proposer phase -> coder phase -> solver phase
    output_dir: str = "runs/mmzero"  # iter_<t>/<role>/ (checkpoints, records, images, final/), gallery.html, curves
    shared_model: bool = False  # one model plays all roles (each phase starts from the latest export of any role)
    roles: dict = field(default_factory=dict)  # role -> {dotted config key: value} over this config (proposer/coder/solver)
    phase_steps: int = 10  # GRPO steps per role per iteration
    proposer_prompts: int = 32  # distinct proposer instructions (content-type hints x seeds)
    code_samples: int = 4  # N: frozen-coder programs rendered per proposal (proposer reward)
    solver_samples: int = 4  # m: frozen-solver answers per question (easy accuracy, hard consistency)
    code_language: str = "svg"  # language the coder is asked for: svg | python (either fence is accepted)
    render_workers: int = 2  # sandboxed render workers (one render.RenderPool per run)
    render_timeout_s: float = 10.0  # per render job
    coder_success_range: list = field(default_factory=lambda: [0.25, 0.75])  # proposals kept for the coder phase
    solver_consistency_range: list = field(default_factory=lambda: [0.25, 0.75])  # (image, hard q) kept for the solver
    diversity_strength: float = 0.5  # bound of the diversity adjustment
    easy_hard_threshold: float = 0.15  # mean min(c, 1 - c) below this -> easy-hard penalty
    easy_hard_penalty: float = 0.3  # size of that penalty
    type_penalty: float = 0.15  # weight of the content-type imbalance penalty
    embedder: str = ""  # text embedder for cluster shares: "" = packaged all-MiniLM-L6-v2, or a model directory
    cluster_threshold: float = 0.8  # cosine similarity that joins a cluster
    warmup_demos: int = 0  # > 0: SFT each role on this many embedded demonstrations before iteration 0 (tiny models)


@dataclass
class PrismConfig:
    embedder: str = ""  # "" = packaged all-MiniLM-L6-v2, or a sentence-transformers dir (seed: Qwen3-Embedding-0.6B)
    embed_device: str = "cpu"  # torch device the embedder runs on
    embed_batch: int = 64  # texts per embedder forward pass
    k: int = 128  # K: clusters of the fixed semantic partition (seed: 128)
    lam: float = 5.0  # lambda: weight of the rarity bonus exp(-n_c / mean n) (seed: 5.0)
    gamma: float = 0.99  # EMA decay of the cluster visit counts (seed: 0.99)
    ema_mode: str = "indicator"  # indicator (seed: a visited cluster adds once a step) | per_question (once a question)
    init_count: float = 1.0  # starting EMA count of every cluster (seed: smoothing_alpha 1.0)
    init_counts: str = ""  # warm-start counts, a .npy / .json of K (seed: init_cluster_counts_path; "" = init_count)
    centroids: str = "runs/prism/clusters/centroids.npy"  # from `mmevo prism build-clusters`; centroids.json beside it
    corpus: str = "default"  # default (generated text math questions) | MATH / GSM8K file or dir (data.format=generic)
    corpus_size: int = 4000  # questions generated for the default corpus
    corpus_limit: int = 0  # read at most this many rows of a corpus file (0 = all)
    kmeans_n_init: int = 4  # K-means restarts (k-means++ init; the lowest inertia is kept)
    seed: int = 0  # seeds K-means and the default corpus
    questioner_steps: int = 6  # loop: questioner GRPO steps per iteration (seed: 6)
    solver_samples: int = 8  # loop: solver answers per question; p(q) = majority-vote share (seed: 8)
    max_per_cluster: int = 100  # loop: most questions kept per cluster in the solver's question pool (seed: 100)
    visit: str = "band"  # loop: clusters counted as visited: band (p in [0.5, 0.9], the seed's diagram) | valid (any)
    iterations: int = 2  # loop: questioner -> pool -> solver iterations
    output_dir: str = "runs/prism"  # loop: iter_<t>/{questioner,pool,solver}, diversity.json/png, report.md
    questioner_prompts: int = 64  # loop: instruction prompts the questioner cycles over (trainer.prompts_per_step a step)
    pool_prompts: int = 256  # loop: instruction prompts for the pool; rollout.n questions each
    pool_band: tuple = (0.5, 0.9)  # loop: p(q) range of the questions kept for the solver (seed: [0.5, 0.9])
    solver_steps: int = 50  # loop: solver GRPO steps per iteration (seed: 50)
    warmup_questions: int = 0  # loop: > 0: SFT a tiny model on this many embedded questions/answers first
    roles: dict = field(default_factory=dict)  # loop: per-role dotted overrides, e.g. {solver: {reward.heads: {sfr: 1.0}}}


# data.system_prompt=honest (or "" with an honest_* head or honest_tasks data) becomes the protocol prompt of
# hindsight_mode; honest_* heads take their arguments from here (mmevo.honest.resolve_honest_config)
@dataclass
class HonestConfig:
    hindsight_mode: str = "legacy"  # legacy (<hindsight>, -k(r-y)^2) | refined (CASR: <critique>, <refined_confidence>)
    k: float = 0.3  # HCR weight k of -k(r-y)^2 (seed: 0.3)
    hindsight_prob: float = 0.3  # legacy HCR: share of GRPO steps offering the <hindsight> slot (seed --hindsight-prob 0.3)
    casr_alpha: float = 1.0  # CASR weight of the Brier improvement (c-y)^2 - (r-y)^2 (seed: 1.0)
    casr_beta: float = 0.05  # CASR bonus for a critique of >= 16 characters (seed: 0.05)
    casr_gamma: float = 0.05  # CASR anti-copy penalty when |r - c| < copy_tol (seed: 0.05)
    casr_delta: float = 0.05  # CASR penalty for exactly one of critique / refined_confidence (seed: 0.05)
    casr_clip: float = 0.30  # CASR reward clipped to +-casr_clip (seed: 0.30)
    copy_tol: float = 0.02  # CASR: |r - c| below this is a copied confidence (seed: 0.02)
    malformed_penalty: float = -1.0  # honest_brier / honest_format reward of a rejected response or invalid confidence
    abstain_reward: float = -0.25  # honest_brier reward of an abstain (Brier of c = 0.5: never beats honest answering)
    domains: list = field(default_factory=lambda: ["arithmetic", "modular", "logic"])  # data=honest_tasks domains
    min_difficulty: int = 1  # easiest honest_tasks difficulty (1-5)
    max_difficulty: int = 5  # hardest honest_tasks difficulty (1-5)
    seed: int = 0  # honest_tasks seed (data.n_train / data.n_heldout tasks from disjoint streams)
    # CPR: calibration-prioritized replay (mmevo.honest.replay; seed 3 / 7 defaults)
    replay_enabled: bool = False  # mix replayed prompts into each batch (seed flag --replay-priority, off by default)
    replay_capacity: int = 4096  # ring buffer entries (seed: --replay-buffer-size 4096)
    replay_share: float = 0.3  # after warm-up, each prompt is a replay with this probability (seed: --replay-mix 0.3)
    replay_warmup_steps: int = 100  # steps with fresh prompts only (seed: --replay-warmup 100)
    replay_alpha: float = 0.6  # priority exponent: p_i ~ (|c - y| + eps)^alpha (seed: --replay-alpha 0.6)
    replay_eps: float = 1e-3  # priority floor of a perfectly calibrated prompt (seed: eps=1e-3)
    # SMC: self-mutating curriculum (mmevo.honest.curriculum; seed 4 / 9 defaults; retries: health_mutation_retries)
    smc_enabled: bool = False  # draw prompts from the curriculum (seed flag --self-mutate, off by default)
    smc_window: int = 20  # episodes in the rolling accuracy window per domain and difficulty (>= smc_min_episodes)
    smc_promote: float = 0.75  # raise a domain's ceiling at rolling accuracy > this (strictly) (seed: promote_threshold 0.75)
    smc_min_episodes: int = 20  # episodes at the ceiling before it may change (seed: min_episodes_at_max 20)
    smc_demote: float = 0.20  # lower the ceiling at rolling accuracy < this (seed: demote_threshold 0.20)
    smc_cap: int = 8  # hard cap on the ceiling; above 5 tasks are mutator chains (seed: MAX_DIFFICULTY_HARD 8)
    smc_cooldown: int = 10  # domain episodes between two ceiling changes (seed: cool-down 10 episodes)
    smc_ceiling_share: float = 0.5  # share of a domain's draws at its ceiling, the rest below (the seed gives none)
    smc_mutators: list = field(default_factory=lambda: ["numeric", "compositional", "distractor"])  # seed 4.2
    # calibration SFT / health (mmevo.honest.sft: data.train=honest_sft; mmevo.honest.health)
    sft_tier: str = "tiny"  # seed 2.6 tier tiny | small | medium, or preset qwen0.5b | llama1b | qwen1.5b | qwen3b | ...
    sft_n: int = 0  # calibration SFT examples (0 = the tier's sft_n: tiny 1500)
    sft_max_difficulty: int = 0  # hardest SFT task difficulty (0 = the tier's max_d: tiny 2)
    sft_hindsight_frac: float = -1.0  # share of SFT targets with the hindsight slot (-1 = the tier's: tiny 0.5)
    sft_perturbed_frac: float = 0.5  # share of SFT targets with a deliberately wrong answer (the seed gives none)
    health_reward_std_min: float = 1e-4  # reward collapse below this reward std (seed: reward_std < 1e-4)
    health_collapse_window: int = 1  # consecutive steps under it before reward collapse fires (seed: that step)
    health_replay_cooldown: int = 50  # steps the replay mix stays off after low priority entropy (seed: 50)
    health_min_distinct_share: float = 0.1  # generator collapse below this distinct-problem share (seed: 0.1)
    health_mutation_retries: int = 3  # retries of an unverifiable mutation before it is dropped (seed: 3)
    # GSS / loop (mmevo.honest.selfplay, mmevo.honest.loop: `mmevo evolve honest CONFIG`; CPR / SMC: the flags above)
    hcr_enabled: bool = False  # HCR: the solver is rewarded by honest_hindsight (weight 1; k is honest.k) too (seed §7: off)
    format_weight: float = 0.0  # weight of the honest_format head in the solver's reward (0 = not used)
    gss_mode: str = "off"  # GSS generator: off | stub (v1: task generator + mutators) | trainable (v2: a GRPO policy)
    gss_blocks: int = 2  # solver / generator blocks; the solver trains gss_blocks * gss_block_steps steps in all
    gss_block_steps: int = 10  # solver GRPO steps per block (and generator steps, unless gss_generator_steps)
    gss_generator_steps: int = 0  # generator GRPO steps per block (0 = gss_block_steps; trainable mode only)
    gss_share: float = 0.3  # share of the solver's prompts drawn from the generator (the seed gives none)
    gss_generator_samples: int = 0  # generator samples per instruction prompt (0 = rollout.n)
    gss_solver_samples: int = 4  # frozen-solver samples per generated problem: the mean |c - y| is over these
    gss_pool_size: int = 512  # accepted generated problems kept for the solver (the latest; trainable mode)
    gss_stub_mutate_share: float = 1.0  # stub generator: share of its tasks passed through one SMC mutator (seed: all)
    gss_warmup_problems: int = 200  # trainable + warm-up: instruction -> <expression> SFT targets for the generator
    warmup_sft: bool = False  # calibration SFT (data honest_sft, the sft section) before the first block
    eval_calibration: bool = True  # calibration report before / after on data.n_heldout held-out tasks (0: none)
    output_dir: str = "runs/honest"  # the loop's outputs: warmup/, solver/, generator/, eval_*/, summary.json
    roles: dict = field(default_factory=dict)  # dotted overrides per role: {solver: {...}, generator: {...}}


@dataclass
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    csrs: CSRSConfig = field(default_factory=CSRSConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    mmzero: MMZeroConfig = field(default_factory=MMZeroConfig)
    prism: PrismConfig = field(default_factory=PrismConfig)
    honest: HonestConfig = field(default_factory=HonestConfig)


class ConfigError(ValueError):
    pass


def _fmt(value: Any) -> str:
    """A value as the user would write it in YAML (true / null rather than Python's True / None)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def _is_bool(value: Any) -> bool:
    """A Python, numpy or torch boolean (numpy's and torch's are no ``bool`` instances, and int() makes them 0 / 1)."""
    return isinstance(value, bool) or str(getattr(value, "dtype", "")) in ("bool", "torch.bool")


def _underflows(text: str) -> bool:
    """A number written with a non-zero digit that float() reads as 0 (``1e-400``)."""
    try:
        zero = float(text.replace("_", "")) == 0
    except ValueError:
        return False
    return zero and any(c in "123456789" for c in text.lower().split("e")[0])


def _coerce(value: Any, typ: Any, where: str) -> Any:
    """Convert a YAML / CLI value to the field's declared type, with an error naming the field."""
    origin = typing.get_origin(typ)
    if typ is Any or typ is dict or origin is dict:
        if isinstance(value, str):
            value = _yaml_value(value, where)
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, e.g. '{{key: value}}', got {_fmt(value)}")
        return _plain(value)
    if typ in (tuple, list) or origin in (tuple, list):
        if isinstance(value, str):  # a YAML-quoted '[a, b]'; a bare word stays a string and is refused below
            value = _yaml_value(value, where)
        if not isinstance(value, (list, tuple)):  # tuple('abc') / list('abc') would split a word into letters
            raise ConfigError(f"{where}: expected a list, e.g. '[a, b]', got {_fmt(value)}")
        value = _plain(value)
        return tuple(value) if (typ is tuple or origin is tuple) else list(value)
    if origin in (typing.Union, types.UnionType):  # Optional[X]: None (null) or an X
        if value is None or (isinstance(value, str) and value.lower() in ("null", "none", "~")):
            return None
        inner = [a for a in typing.get_args(typ) if a is not type(None)]
        return _coerce(value, inner[0], where) if len(inner) == 1 else value
    if value is None and typ in (bool, int, float, str):  # else null would become False / "None" unseen
        hint = " (write '' for an empty value)" if typ is str else ""
        raise ConfigError(f"{where}: expected {typ.__name__}, got null{hint}")
    text = value.text if isinstance(value, _FloatText) else value if isinstance(value, str) else None
    if typ in (bool, int, float) and text is not None and _underflows(text):  # 1e-400 read as 0: kl_coef=0 drops
        # the reference model, a switch reads false
        raise ConfigError(f"{where}: {text!r} is too small for a float (it reads as 0); write 0 if you mean zero")
    if typ is bool:
        if isinstance(value, str):
            low = value.lower()
            if low in ("true", "1", "yes", "on"):
                return True
            if low in ("false", "0", "no", "off"):
                return False
        elif isinstance(value, bool) or (isinstance(value, (int, float)) and value in (0, 1)):
            return bool(value)
        raise ConfigError(f"{where}: expected true/false, got {_fmt(value)}")
    if _is_bool(value) and typ in (int, float):  # YAML reads yes/no/on/off/true/false as booleans
        raise ConfigError(f"{where}: expected {typ.__name__}, got boolean {_fmt(value)}")
    if typ in (int, float) and getattr(value, "ndim", 0):  # int(np.array([3])) is 3: a list where a number goes
        raise ConfigError(f"{where}: expected {typ.__name__}, got {_fmt(value)}")
    if typ is str and isinstance(value, bool) and _BOOL_WORD[value] in CHOICES.get(where, ()):
        return _BOOL_WORD[value]  # YAML 1.1 read the documented `off` (`gss_mode: off`) as false
    if typ is str and (_is_bool(value) or not isinstance(value, (str, numbers.Number))):  # !!binary, !!set:
        # str() would make the path / name "b'hi'" or "{'a'}" unseen
        hint = " (YAML reads unquoted yes/no/on/off/true/false as booleans: quote the text)" \
            if isinstance(value, bool) else ""
        raise ConfigError(f"{where}: expected a string, got {_fmt(value)}{hint}")
    if typ in (int, float) and isinstance(value, (_IntText, _FloatText)):
        _refuse_yaml11_number(value.text, where)
    try:
        if typ is float:
            out = float(value)
        if typ is int:
            num = value
            if isinstance(num, str):  # "1e3" is 1000; "1.5" is no int (it was truncated to 1)
                num = float(num) if any(c in num.lower() for c in ".e") else int(num)
            out = int(num)
            if out != num:  # 2.5 as a numpy float32, Decimal, Fraction or tensor was truncated to 2
                raise ValueError
            return out
        if typ is str:  # a number as written: 010 / 1_000 / 1.10 are the text, not str(8) / '1000' / '1.1'
            return value.text if isinstance(value, (_IntText, _FloatText)) else str(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"{where}: expected {typ.__name__}, got {_fmt(value)}") from None
    if typ is not float:
        return value
    if not math.isfinite(out):  # nan / inf pass every range check below unseen
        raise ConfigError(f"{where}: expected a finite number, got {_fmt(value)}")
    return out


# top-level keys of other tools' config files that include / inherit another file: this loader has no such thing
_INCLUDE_KEYS = ("defaults", "include", "includes", "base", "_base_", "extends", "inherit", "import", "imports")


def _unknown_key(where: str, key: str, names: set[str]) -> ConfigError:
    import difflib

    close = difflib.get_close_matches(str(key), sorted(names), n=1, cutoff=0.6)
    msg = f"unknown config key {where!r}"
    if close:
        msg += f"; did you mean {where.rpartition('.')[0] + '.' if '.' in where else ''}{close[0]}?"
    if "." not in where and str(key).lower() in _INCLUDE_KEYS:
        msg += "; a config file cannot include or extend another one: copy the keys you need, or pass them as " \
               "section.key=value overrides"
    return ConfigError(f"{msg} (valid keys here: {', '.join(sorted(names))})")


def _apply(obj: Any, data: dict, prefix: str, from_file: bool = False) -> None:
    hints = typing.get_type_hints(type(obj))
    names = {f.name for f in dataclasses.fields(obj)}
    for key, value in data.items():
        where = f"{prefix}{key}"
        if key not in names:
            raise _unknown_key(where, key, names)
        current = getattr(obj, key)
        if dataclasses.is_dataclass(current):
            if value is None and from_file:  # a section whose keys are all commented out sets nothing
                continue
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: expected a mapping of fields (a section), got {_fmt(value)}")
            _apply(current, value, where + ".", from_file)
        else:
            setattr(obj, key, _coerce(value, hints[key], where))


# the word a switch whose choices include it means where YAML 1.1 read an unquoted on / off as a boolean
_BOOL_WORD = {False: "off", True: "on"}


# mappings of names to single values whose names may hold dots (a head's import path): an override's key below one
# is one name, not nested keys
_NAME_KEYED_MAPPINGS = frozenset({"reward.heads"})
# mappings of those names to keyword arguments: below one, the head's name comes first, then the argument's path
_HEAD_KEYED_MAPPINGS = frozenset({"reward.head_args"})


def _head_name_parts(cfg: Config, rest: list[str]) -> int:
    """How many of ``rest`` (an override's key below ``reward.head_args``) spell the head's name: the longest run that
    names a head of ``reward.heads`` / ``reward.head_args``, else one ending at an import path's ``:``, else one part.
    An import path ``pkg.mod:Class`` split on its dots read as head ``pkg`` with nested arguments before."""
    known = set(cfg.reward.heads) | set(cfg.reward.head_args)
    for n in range(len(rest), 0, -1):
        if ".".join(rest[:n]) in known:
            return n
    return next((n + 1 for n, q in enumerate(rest) if ":" in q), 1)


def set_dotted(cfg: Config, dotted: str, value: Any) -> None:
    """Set ``a.b.c`` to value (type-coerced).

    A key below a mapping field sets that entry and keeps the others: ``reward.heads.format=0.1`` adds a head
    (``reward.heads='{format: 0.1}'`` replaces them all); below ``reward.heads`` the rest of the key is the head's
    name, so ``reward.heads.mypkg.heads:Coverage=0.5`` adds the head ``mypkg.heads:Coverage``.
    """
    parts = dotted.split(".")
    obj: Any = cfg
    for i, p in enumerate(parts[:-1]):
        if not dataclasses.is_dataclass(obj):
            break
        names = {f.name for f in dataclasses.fields(obj)}
        if p not in names:
            raise _unknown_key(".".join(parts[:i + 1]), p, names)
        nxt = getattr(obj, p)
        if not dataclasses.is_dataclass(nxt):  # a leaf: a mapping takes the rest as nested keys, else an error
            where = ".".join(parts[:i + 1])
            if not isinstance(nxt, dict):
                raise ConfigError(f"{dotted}: {where} is a single value ({_fmt(nxt)}), not a section or mapping")
            merged = copy.deepcopy(nxt)
            if where in _NAME_KEYED_MAPPINGS:  # the rest of the key is one entry's name, dots and all
                merged[".".join(parts[i + 1:])] = value
                _apply(obj, {p: merged}, ".".join(parts[:i]) + "." if i else "")
                return
            rest = parts[i + 1:]
            if where in _HEAD_KEYED_MAPPINGS:  # reward.head_args.<head name, dots and all>.<argument>
                n = _head_name_parts(cfg, rest)
                rest = [".".join(rest[:n]), *rest[n:]]
            cur = merged
            for q in rest[:-1]:
                if not isinstance(cur.get(q), dict):
                    cur[q] = {}
                cur = cur[q]
            cur[rest[-1]] = value
            _apply(obj, {p: merged}, ".".join(parts[:i]) + "." if i else "")
            return
        obj = nxt
    nested: dict = {}
    cur = nested
    for p in parts[:-1]:
        cur = cur.setdefault(p, {})
    cur[parts[-1]] = value
    _apply(cfg, nested, "")


class _StrictLoader(yaml.SafeLoader):
    """Safe YAML that refuses a key given twice in one mapping (PyYAML keeps the last one, silently), naming its dotted
    path from the top (``trainer.steps``: a bare ``steps`` left the section to find)."""

    def construct_document(self, node):
        _refuse_duplicate_keys(self, node, "", set())
        return super().construct_document(node)


def _refuse_duplicate_keys(loader: yaml.SafeLoader, node: yaml.Node, prefix: str, seen_nodes: set) -> None:
    """ConstructorError at the second of two equal keys in any mapping below ``node``, naming ``prefix.key``."""
    if id(node) in seen_nodes:  # an alias of a node already walked (or a recursive anchor)
        return
    seen_nodes.add(id(node))
    if isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _refuse_duplicate_keys(loader, item, f"{prefix}[{i}]", seen_nodes)
        return
    if not isinstance(node, yaml.MappingNode):
        return
    seen: dict = {}
    for key_node, value_node in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            continue  # the base class reports an unhashable key
        path = f"{prefix}.{key}" if prefix else str(key)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {path!r} (first on line {seen[key] + 1}; the later one would "
                "silently win)", key_node.start_mark)
        seen[key] = key_node.start_mark.line
        _refuse_duplicate_keys(loader, value_node, path, seen_nodes)


class _IntText(int):
    """A YAML int that keeps the text it was written as (``.text``): a string field takes that text."""


class _FloatText(float):
    """A YAML float that keeps the text it was written as (``.text``)."""


def _with_text(cls, construct):
    def run(loader, node):
        value = cls(construct(loader, node))
        value.text = node.value
        return value
    return run


# YAML 1.1 reads 010 as 8, 0x1F as 31, 1_000 as 1000, 12:30 as 750 and 1.10 as 1.1: a path or name written that way
# (trainer.output_dir: 0755) became another string unseen
_StrictLoader.add_constructor("tag:yaml.org,2002:int", _with_text(_IntText, yaml.SafeLoader.construct_yaml_int))
_StrictLoader.add_constructor("tag:yaml.org,2002:float", _with_text(_FloatText, yaml.SafeLoader.construct_yaml_float))
# YAML 1.1 (PyYAML) reads 1e-3 and 1.0e5 as strings (it wants a dot and a signed exponent), YAML 1.2 and JSON as
# numbers: a head weight or head argument written so reached the reward as text (refused, or a TypeError once the
# model was loaded); typed fields converted the text already
_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9][0-9_]*)[eE][-+]?[0-9]+$"), list("-+0123456789."))
# no field is a date: a text that looks like one (2024-01-01T10:00:00Z) stays that text, not str(datetime)'s
# '2024-01-01 10:00:00+00:00'
_StrictLoader.add_constructor("tag:yaml.org,2002:timestamp", yaml.SafeLoader.construct_yaml_str)

# what yaml.load raises besides YAMLError: an int of more than 4300 digits (ValueError), nesting too deep to construct
_YAML_LIMITS = (ValueError, RecursionError)


def _refuse_yaml11_number(text: str, where: str) -> None:
    """YAML 1.1 reads ``010`` as octal 8 and ``1:30`` as base-60 90; YAML 1.2 and every other tool read 10 and a
    string, so a number field given either form would silently hold a value its author did not mean."""
    body = text.strip().lstrip("+-").replace("_", "")
    if ":" in body:
        raise ConfigError(f"{where}: {text!r} is a base-60 number in YAML 1.1 ({_fmt(_plain_number(text))}); "
                          "write the plain decimal value")
    if len(body) > 1 and body[0] == "0" and body.isdigit():
        sign = "-" if text.strip().startswith("-") else ""
        raise ConfigError(f"{where}: {text!r} has a leading zero, which YAML 1.1 reads as octal "
                          f"({_fmt(_plain_number(text))}); write {sign}{int(body)} if you mean the decimal number")


def _plain_number(text: str) -> Any:
    return yaml.load(text, Loader=yaml.SafeLoader)


def _plain(value: Any) -> Any:
    """``value`` with plain ints / floats again (the kept text is for string fields only)."""
    if isinstance(value, _IntText):
        return int(value)
    if isinstance(value, _FloatText):
        return float(value)
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    return value


def _yaml_value(text: str, where: str) -> Any:
    try:
        return yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as e:
        raise ConfigError(f"{where}: not a YAML value ({' '.join(str(e).split())})") from None
    except _YAML_LIMITS as e:
        raise ConfigError(f"{where}: not a usable YAML value ({type(e).__name__}: {e})") from None


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """Defaults <- YAML file <- ``key=value`` overrides."""
    cfg = Config()
    if path:
        p = Path(path)
        if not p.exists():
            hint = ""
            if p.suffix.lower() not in (".yaml", ".yml", ".json"):
                hint = " (an override needs the form section.key=value)"
            raise ConfigError(f"config file {p} not found{hint}")
        if p.is_dir():
            raise ConfigError(f"config file {p} is a directory, not a YAML file")
        try:
            with p.open() as f:  # a stream with a name: YAML errors say 'in "<path>", line N'
                data = yaml.load(f, Loader=_StrictLoader)
        except yaml.YAMLError as e:
            raise ConfigError(f"{p}: invalid YAML: {e}") from None
        except _YAML_LIMITS as e:
            raise ConfigError(f"{p}: unusable YAML ({type(e).__name__}: {e})") from None
        except UnicodeDecodeError as e:
            raise ConfigError(f"{p}: not a UTF-8 text file ({e})") from None
        except OSError as e:  # unreadable (permissions, a special file): an error, not a traceback
            raise ConfigError(f"config file {p} cannot be read ({e.strerror or e})") from None
        data = {} if data is None else data
        if not isinstance(data, dict):
            raise ConfigError(f"{p}: top level must be a mapping of sections (model:, trainer:, ...), "
                              f"got a {type(data).__name__}")
        try:
            _apply(cfg, data, "", from_file=True)
        except ConfigError as e:
            raise ConfigError(f"{p}: {e}") from None
    for item in overrides or []:
        if "=" not in item:
            hint = ""
            if item.lower().endswith((".yaml", ".yml")):
                hint = (" (only one config file is read: the arguments after it are overrides)" if path else
                        " (the config file comes before the overrides: mmevo <command> CONFIG.yaml section.key=value)")
            raise ConfigError(f"override {item!r} must look like section.key=value{hint}")
        key, value = item.split("=", 1)
        try:
            parsed = yaml.load(value, Loader=_StrictLoader) if value.strip() else ""
        except yaml.YAMLError as e:
            first = str(e).splitlines()[0]
            hint = "" if first.startswith("duplicate key") else "; quote it, e.g. key='\"text: with colon\"'"
            raise ConfigError(f"override {item!r}: not a YAML value ({first}){hint}") from None
        except _YAML_LIMITS as e:
            raise ConfigError(f"override {key.strip()!r}: not a usable YAML value ({type(e).__name__}: {e})") from None
        set_dotted(cfg, key.strip(), parsed)
    from mmevo.honest import resolve_honest_config

    check_fields(cfg)  # before the honest section is read: its checks span several keys
    resolve_honest_config(cfg)  # the honest section's system prompt and head arguments
    validate(cfg)
    return cfg


# values accepted by the string-valued switches (the code that reads them raises too, but only once the model is
# loaded or the first step runs)
CHOICES = {
    "model.dtype": ("float32", "bfloat16", "float16"),
    "model.cpu_linear": ("auto", "onednn", "torch"),
    "model.cpu_malloc": ("auto", "keep", "system"),
    "rollout.engine": ("hf", "vllm"),
    "rollout.sleep_level": (1, 2),
    "algo.adv_scale": ("group", "batch", "none"),
    "algo.kl_type": ("k1", "k2", "k3", "low_var_kl", "kl", "mse", "abs", "k1+", "k3+", "low_var_kl+", "kl+", "abs+"),
    "algo.loss_agg": ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"),
    "trainer.lr_schedule": ("constant", "cosine"),
    "trainer.wandb_mode": ("offline", "online", "disabled"),
    "mmzero.code_language": ("svg", "python"),
    "prism.ema_mode": ("indicator", "per_question"),
    "prism.visit": ("band", "valid"),
    "honest.gss_mode": ("off", "stub", "trainable"),
}

# numeric bounds: key -> (low, high, low inclusive, high inclusive); None = unbounded
BOUNDS = {
    "trainer.steps": (0, None, True, True),
    "trainer.threads": (0, None, True, True),
    "trainer.prompts_per_step": (1, None, True, True),
    "trainer.mini_batch_prompts": (1, None, True, True),
    "trainer.micro_batch_seqs": (1, None, True, True),
    "trainer.max_tokens_per_micro_batch": (0, None, True, True),
    "trainer.logits_chunk_tokens": (0, None, True, True),
    "trainer.lr": (0, None, True, True),
    "trainer.weight_decay": (0, None, True, True),
    "trainer.warmup_steps": (0, None, True, True),
    "trainer.max_grad_norm": (0, None, False, True),  # 0 would zero every gradient (clip_grad_norm_)
    "trainer.save_every": (0, None, True, True),
    "trainer.keep_checkpoints": (0, None, True, True),
    "trainer.eval_every": (0, None, True, True),
    "trainer.eval_max_tokens": (0, None, True, True),
    # seeds go to numpy (EpochSampler: non-negative only) and torch.manual_seed (< 2**64); a bad one failed only after
    # the model and the reference were loaded, naming no key
    "trainer.seed": (0, 2**64 - 1, True, True),
    "rollout.n": (1, None, True, True),
    "rollout.temperature": (0, None, True, True),
    "rollout.top_p": (0, 1, False, True),  # 0 keeps no token (transformers and vLLM refuse it); greedy is temperature 0
    "rollout.max_tokens": (1, None, True, True),
    "rollout.max_batch_seqs": (1, None, True, True),
    "rollout.eval_temperature": (0, None, True, True),
    "rollout.gpu_memory_utilization": (0, 1, False, True),
    "rollout.tensor_parallel_size": (1, None, True, True),
    "rollout.vllm_kv_cache_gb": (1, None, True, True),
    "rollout.max_images_per_prompt": (1, None, True, True),
    "data.n_train": (0, None, True, True),
    "data.n_heldout": (0, None, True, True),
    "data.image_size": (1, None, True, True),
    "data.mc_fraction": (0, 1, True, True),
    "data.max_prompt_length": (1, None, True, True),
    "data.max_pixels": (0, None, True, True),
    "data.min_pixels": (0, None, True, True),
    "data.prompt_cache_mb": (0, None, True, True),
    "algo.adv_eps": (0, None, True, True),
    "algo.kl_coef": (0, None, True, True),
    "algo.ppo_epochs": (1, None, True, True),
    "model.lora.rank": (0, None, True, True),
    "model.lora.dropout": (0, 1, True, False),
    "sft.epochs": (0, None, False, True),
    "sft.batch_size": (1, None, True, True),
    "sft.lr": (0, None, True, True),
    "sft.weight_decay": (0, None, True, True),
    "sft.warmup_steps": (0, None, True, True),
    "sft.max_grad_norm": (0, None, False, True),
    "sft.save_every": (0, None, True, True),
    "sft.teacher_noise": (0, 1, True, True),
    "eval.limit": (0, None, True, True),
    "eval.batch_size": (1, None, True, True),
    "eval.max_tokens": (0, None, True, True),
    "eval.max_prompt_length": (1, None, True, True),
    # loop settings their code reads only mid-run (after a model is loaded) or not at all (-1 ran nothing, exit 0)
    "mmzero.iterations": (1, None, True, True),  # 0 ran no phase, only a summary of nothing (as prism's)
    "mmzero.phase_steps": (0, None, True, True),
    "mmzero.proposer_prompts": (1, None, True, True),
    "mmzero.warmup_demos": (0, None, True, True),
    "prism.corpus_size": (1, None, True, True),
    "prism.corpus_limit": (0, None, True, True),
    "prism.seed": (0, 2**32 - 1, True, True),  # scikit-learn's KMeans random_state (refused after the corpus is embedded)
    "prism.solver_steps": (0, None, True, True),
    "prism.warmup_questions": (0, None, True, True),
    "honest.health_reward_std_min": (0, None, True, True),
    "honest.health_collapse_window": (1, None, True, True),
    "honest.health_replay_cooldown": (0, None, True, True),
    "honest.health_min_distinct_share": (0, 1, True, True),
    # settings only one loop, reward or SFT reads: their own checks (prism.clusters.check_prism_config, the loops'
    # check_loop_config, mmevo.honest.sft) ran only in that command, some after a model was loaded, and some named
    # no field ("honest: k, casr_clip and copy_tol must be >= 0"); a negative count there was read silently (a
    # prism.k of -1 in plain training, an sft_max_difficulty of -1 as min_difficulty)
    "model.lora.alpha": (0, None, False, True),  # the LoRA scale alpha / rank: 0 trains nothing, < 0 flips it
    "algo.entropy_coef": (0, None, True, True),  # a bonus: negative would push entropy down
    "mmzero.easy_hard_threshold": (0, 1, True, True),  # compared with a mean of min(c, 1 - c)
    "prism.embed_batch": (1, None, True, True),
    "prism.k": (2, None, True, True),
    "prism.lam": (0, None, True, True),
    "prism.gamma": (0, 1, True, True),
    "prism.init_count": (0, None, False, True),
    "prism.kmeans_n_init": (1, None, True, True),
    "prism.questioner_steps": (1, None, True, True),
    "prism.solver_samples": (1, None, True, True),
    "prism.max_per_cluster": (1, None, True, True),
    "prism.iterations": (1, None, True, True),
    "prism.questioner_prompts": (1, None, True, True),
    "prism.pool_prompts": (1, None, True, True),
    "honest.k": (0, None, True, True),
    "honest.hindsight_prob": (0, 1, True, True),
    "honest.casr_alpha": (0, None, True, True),
    "honest.casr_beta": (0, None, True, True),
    "honest.casr_gamma": (0, None, True, True),
    "honest.casr_delta": (0, None, True, True),
    "honest.casr_clip": (0, None, True, True),
    "honest.copy_tol": (0, None, True, True),
    "honest.min_difficulty": (MIN_DIFFICULTY, MAX_DIFFICULTY, True, True),  # the task generators' range
    "honest.max_difficulty": (MIN_DIFFICULTY, MAX_DIFFICULTY, True, True),
    "honest.replay_capacity": (1, None, True, True),
    "honest.replay_share": (0, 1, True, True),
    "honest.replay_warmup_steps": (0, None, True, True),
    "honest.replay_alpha": (0, None, True, True),
    "honest.replay_eps": (0, None, True, True),
    "honest.smc_window": (1, None, True, True),
    "honest.smc_promote": (0, 1, True, True),
    "honest.smc_min_episodes": (1, None, True, True),
    "honest.smc_demote": (0, 1, True, True),
    "honest.smc_cap": (1, None, True, True),
    "honest.smc_cooldown": (0, None, True, True),
    "honest.smc_ceiling_share": (0, 1, True, True),
    "honest.sft_n": (0, None, True, True),  # 0 = the tier's
    "honest.sft_max_difficulty": (0, MAX_DIFFICULTY, True, True),  # 0 = the tier's
    "honest.sft_hindsight_frac": (None, 1, True, True),  # negative = the tier's
    "honest.sft_perturbed_frac": (0, 1, True, True),
    "honest.health_mutation_retries": (0, None, True, True),
    "honest.format_weight": (0, None, True, True),
    "honest.gss_blocks": (1, None, True, True),
    "honest.gss_block_steps": (1, None, True, True),
    "honest.gss_generator_steps": (0, None, True, True),
    "honest.gss_share": (0, 1, True, True),
    "honest.gss_generator_samples": (0, None, True, True),
    "honest.gss_solver_samples": (1, None, True, True),
    "honest.gss_pool_size": (1, None, True, True),
    "honest.gss_stub_mutate_share": (0, 1, True, True),
    "honest.gss_warmup_problems": (0, None, True, True),
}

# settings that name a file or directory (or a hub id / a word such as "synthetic" in the same place): a NUL byte or
# a name longer than the file system takes failed at the first open, as "embedded null byte" / "[Errno 36] File name
# too long", naming no key
PATH_KEYS = ("model.path", "model.cache_dir", "data.train", "data.heldout", "trainer.output_dir", "trainer.deepspeed",
             "sft.output_dir", "eval.data", "eval.image_root", "eval.out_dir", "mmzero.output_dir", "mmzero.embedder",
             "prism.embedder", "prism.init_counts", "prism.centroids", "prism.corpus", "prism.output_dir",
             "honest.output_dir")
NAME_MAX_BYTES = 255  # longest file or directory name (Linux ext4 / xfs / btrfs, macOS APFS)
PATH_MAX_BYTES = 4095  # longest path Linux opens (PATH_MAX 4096, its NUL included)

FIELD_NAMES = ("id", "image", "problem", "answer", "choices")  # data.fields / eval.fields (mmevo.data.benchmarks)
MAX_RENDER_TIMEOUT_S = 86400.0  # render.pool.MAX_TIMEOUT_S (the sandbox's bound on one render job)
MIN_SAMPLING_TEMPERATURE = 1e-5  # vLLM's greedy threshold; a positive temperature below it is refused
# SFR (Eq. 8) scales R_base by 1 + gamma tanh(..): above 1 that factor turns negative, so an answer the re-inferences
# drop scores below a response with no answer (0)
SFR_GAMMA_ABOVE_ONE = "above 1 an answer the re-inferences drop scores below no answer at all"

# the self-evolution loops' roles (mmevo.evolve.mmzero.ROLES, mmevo.evolve.prism.role_config, mmevo.honest.loop.ROLES)
LOOP_ROLES = {"mmzero": ("proposer", "coder", "solver"), "prism": ("questioner", "solver"),
              "honest": ("solver", "generator")}


# keys every phase's config gets from the loop after the role's overrides (role_config of each loop), with what to set
_PHASE_KEYS = {"model.path": "each phase starts from the latest export; the first from model.path",
               "trainer.output_dir": "phases write below the loop's output_dir"}
LOOP_SET_KEYS = {"mmzero": {**_PHASE_KEYS, "trainer.steps": "set mmzero.phase_steps"}, "prism": _PHASE_KEYS,
                 "honest": _PHASE_KEYS}


def _get(cfg: Config, dotted: str) -> Any:
    obj: Any = cfg
    for p in dotted.split("."):
        obj = getattr(obj, p)
    return obj


def _range_text(lo, hi, lo_in, hi_in) -> str:
    if hi is None:
        return f"{'>=' if lo_in else '>'} {lo}"
    if lo is None:
        return f"{'<=' if hi_in else '<'} {hi}"
    return f"in {'[' if lo_in else '('}{lo}, {hi}{']' if hi_in else ')'}"


def _in_bounds(value, lo, hi, lo_in, hi_in) -> bool:
    above = lo is None or (value >= lo if lo_in else value > lo)
    return above and (hi is None or (value <= hi if hi_in else value < hi))


def check_fields(cfg: Config) -> None:
    """Each switch's value among its ``CHOICES`` and each number within its ``BOUNDS``, the error naming the key; run
    before any cross-field check, whose message may name several keys at once."""
    for key, allowed in CHOICES.items():
        value = _get(cfg, key)
        if value not in allowed or isinstance(value, bool):
            raise ConfigError(f"{key}={_fmt(value)} not in {list(allowed)}")
    for key, (lo, hi, lo_in, hi_in) in BOUNDS.items():
        value = _get(cfg, key)
        if not _in_bounds(value, lo, hi, lo_in, hi_in):
            raise ConfigError(f"{key}={_fmt(value)} must be {_range_text(lo, hi, lo_in, hi_in)}")
    for key in PATH_KEYS:
        why = path_problem(_get(cfg, key))
        if why:
            raise ConfigError(f"{key}={_fmt(_short(_get(cfg, key)))}: {why}")


def path_problem(text: str) -> str:
    """Why no file system opens the path ``text`` (a NUL byte, a name or the whole path too long), else ""."""
    if "\0" in text:
        return "a path cannot hold a NUL byte (\\0)"
    try:
        size = len(os.fsencode(text))
    except UnicodeEncodeError:  # a lone surrogate (a YAML "\ud800" escape) has no bytes on disk
        return "a path cannot hold a lone surrogate code point"
    if size > PATH_MAX_BYTES:
        return f"the path is {size} bytes long; a file system takes at most {PATH_MAX_BYTES}"
    longest = max((len(os.fsencode(part)) for part in re.split(r"[/\\]", text)), default=0)
    if longest > NAME_MAX_BYTES:
        return f"a file or directory name in it is {longest} bytes long; a file system takes at most {NAME_MAX_BYTES}"
    return ""


def _short(text: str, keep: int = 60) -> str:
    """``text`` cut to its first ``keep`` characters for a message (a 5000-character value would fill the screen)."""
    return text if len(text) <= keep else f"{text[:keep]}... ({len(text)} characters)"


def _check_roles(cfg: Config) -> None:
    """``<loop>.roles``: known role names, each a mapping of dotted keys that exist and take the value given (else the
    loop would drop a misspelt role silently, or fail on a bad key only when that role's phase starts)."""
    for loop, roles in LOOP_ROLES.items():
        given = getattr(cfg, loop).roles
        for role, overrides in given.items():
            if role not in roles:
                raise ConfigError(f"{loop}.roles: unknown role {role!r}; roles: {list(roles)}")
            if overrides is None:
                continue
            if not isinstance(overrides, dict):
                raise ConfigError(f"{loop}.roles.{role} must be a mapping of dotted keys, e.g. "
                                  f"{{rollout.max_tokens: 256}}, got {_fmt(overrides)}")
            trial = copy.deepcopy(cfg)
            unset = object()
            for key in LOOP_SET_KEYS[loop]:  # marked, to see whether an override sets them (even to the same value)
                section, _, name = key.rpartition(".")
                setattr(_get(trial, section), name, unset)
            ranged = copy.deepcopy(cfg)  # without the markers, for the choices / ranges / paths of the role's values
            for key, value in overrides.items():
                try:
                    set_dotted(trial, str(key), value)
                    set_dotted(ranged, str(key), value)
                except ConfigError as e:
                    raise ConfigError(f"{loop}.roles.{role}: {e}") from None
            try:  # else a role's trainer.steps=-1 was refused only by the CLI's phase check, or not by a direct call
                check_fields(ranged)
            except ConfigError as e:
                raise ConfigError(f"{loop}.roles.{role}: {e}") from None
            if isinstance(trial.data.prompt_template, str):  # else only when the role's phase starts
                try:
                    render_prompt(trial.data.prompt_template, "")
                except ConfigError as e:
                    raise ConfigError(f"{loop}.roles.{role}: data.prompt_template: {e}") from None
            for key, instead in LOOP_SET_KEYS[loop].items():  # the loop's role_config overwrites these afterwards
                if _get(trial, key) is not unset:
                    raise ConfigError(f"{loop}.roles.{role} sets {key}, which the loop sets for every phase (it would "
                                      f"be ignored): {instead}")


def validate(cfg: Config) -> None:
    """Cross-field checks with messages that say what to change."""
    check_fields(cfg)
    t, r = cfg.trainer, cfg.rollout
    if t.prompts_per_step % t.mini_batch_prompts:
        raise ConfigError(f"trainer.prompts_per_step={t.prompts_per_step} must be a multiple of "
                          f"trainer.mini_batch_prompts={t.mini_batch_prompts}")
    if (len(t.betas) != 2 or not all(isinstance(b, (int, float)) and not isinstance(b, bool) for b in t.betas)
            or not all(0.0 <= b < 1.0 for b in t.betas)):
        raise ConfigError(f"trainer.betas={list(t.betas)!r} must be [beta1, beta2] with 0 <= beta < 1")
    for key in ("rollout.temperature", "rollout.eval_temperature"):
        # vLLM decodes greedily below 1e-5 while the trainer would score at T (logits / 1e-6): the engines and the
        # loss would disagree, so such a temperature is refused rather than silently meaning two things
        if 0 < _get(cfg, key) < MIN_SAMPLING_TEMPERATURE:
            raise ConfigError(f"{key}={_fmt(_get(cfg, key))} is below {MIN_SAMPLING_TEMPERATURE}, where vLLM decodes "
                              "greedily: use 0 for greedy decoding")
    if cfg.data.min_pixels and cfg.data.max_pixels and cfg.data.min_pixels > cfg.data.max_pixels:
        raise ConfigError(f"data.min_pixels={cfg.data.min_pixels} is above data.max_pixels={cfg.data.max_pixels}")
    if cfg.model.lora.rank and not cfg.model.lora.alpha > 0:
        raise ConfigError(f"model.lora.alpha={cfg.model.lora.alpha} must be > 0 with model.lora.rank > 0")
    if cfg.model.lora.rank and cfg.model.trainable:  # the trainer refuses this only once the model is loaded
        raise ConfigError(f"model.trainable={cfg.model.trainable!r} and model.lora.rank={cfg.model.lora.rank} both "
                          "choose what trains: set one of them")
    _check_model_names(cfg)
    if r.engine == "hf" and r.tensor_parallel_size != 1:  # the HF engine decodes on one device: it would be ignored
        raise ConfigError(f"rollout.tensor_parallel_size={r.tensor_parallel_size} needs rollout.engine=vllm "
                          "(the hf engine has no tensor parallelism)")
    if cfg.algo.clip_low < 0 or cfg.algo.clip_high < 0:
        raise ConfigError(f"algo.clip_low={cfg.algo.clip_low} / algo.clip_high={cfg.algo.clip_high} must be >= 0")
    if cfg.algo.clip_ratio_c is not None and not cfg.algo.clip_ratio_c > 1.0:
        raise ConfigError(f"algo.clip_ratio_c={cfg.algo.clip_ratio_c} must be > 1 (or null to turn dual-clip off)")
    stray = [h for h in cfg.reward.head_args if h not in cfg.reward.heads]
    if stray:
        raise ConfigError(f"reward.head_args names {stray}, which are not in reward.heads {sorted(cfg.reward.heads)}")
    bad = [h for h, kw in cfg.reward.head_args.items() if kw is not None and not isinstance(kw, dict)]
    if bad:
        raise ConfigError(f"reward.head_args[{bad[0]!r}] must be a mapping of keyword arguments, "
                          f"got {cfg.reward.head_args[bad[0]]!r}")
    if not cfg.reward.heads:
        raise ConfigError("reward.heads is empty: give at least one head, e.g. {accuracy: 1.0}")
    for head, w in cfg.reward.heads.items():
        if not isinstance(head, str) or not head:  # resolve_head took it apart as text: a TypeError traceback
            raise ConfigError(f"reward.heads: a head's name is text (accuracy, format, pkg.module:Class), "
                              f"got {_fmt(head)}")
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w):
            raise ConfigError(f"reward.heads.{head}={_fmt(w)}: a head's weight must be a finite number")
    c = cfg.csrs
    # checked whether or not csrs.enabled: a run may switch CSRS on later (the demo's CSRS run, a loop role), past
    # this check; gamma / beta < 0 would fail only at the first SFR reward (mmevo.rewards.sfr)
    for key, ok, need in (("m", c.m >= 1, ">= 1"), ("omega", 0.0 <= c.omega <= 1.0, "in (0, 1)"),
                          ("sigma", c.sigma >= 0, ">= 0"), ("gamma", 0 <= c.gamma <= 1, "in [0, 1]"),
                          ("beta", c.beta >= 0, ">= 0")):
        if not ok:
            raise ConfigError(f"csrs.{key}={_fmt(getattr(c, key))} must be {need}"
                              + (f" ({SFR_GAMMA_ABOVE_ONE})" if key == "gamma" and c.gamma > 1 else ""))
    if c.omega == 1:  # Eq. 6 takes omega in (0, 1): an anchor at the end continues a finished response
        raise ConfigError(f"csrs.omega={_fmt(c.omega)} must be in (0, 1) (Eq. 6): an anchor at the end keeps the whole response, "
                          "answer included, so a re-inference only continues a finished response")
    if c.omega == 0:  # Eq. 6 takes omega in (0, 1): an anchor at 0 is the ablation switch's, under a second name
        raise ConfigError("csrs.omega=0 must be in (0, 1): an anchor at 0 re-infers from scratch, which is "
                          "csrs.retrace=false (Table 5's runs without RRM); set that instead")
    if c.enabled:
        if r.n < 2:
            raise ConfigError(f"csrs.enabled needs rollout.n >= 2 maternal responses per prompt, got rollout.n={r.n} "
                              "(a group of one has zero advantage: nothing would be learned)")
    if "sfr" in cfg.reward.heads and not c.enabled:
        raise ConfigError("reward head 'sfr' needs csrs.enabled=true (it scores maternal answers by re-inferences)")
    formats = ("geometry3k", "intergps", "geoqa", "mathvision", "mathvista", "generic")
    for key, value in (("data.format", cfg.data.format), ("eval.format", cfg.eval.format)):
        if (value or key == "data.format") and value not in formats:  # "" is eval.format's "the benchmark's"
            raise ConfigError(f"{key}={value!r} not in {list(formats)}")
    for key, mapping in (("data.fields", cfg.data.fields), ("eval.fields", cfg.eval.fields)):
        for name, column in mapping.items():  # a misspelt name was ignored: the default column was read instead
            if name not in FIELD_NAMES:
                raise _unknown_key(f"{key}.{name}", name, set(FIELD_NAMES))
            if not isinstance(column, str) or not column:
                raise ConfigError(f"{key}.{name}={_fmt(column)}: give the column name as a non-empty string")
    try:
        render_prompt(cfg.data.prompt_template, "")
    except ConfigError as e:
        raise ConfigError(f"data.prompt_template: {e}") from None
    if isinstance(cfg.data.system_prompt, str) and (m := CONTROL_TOKEN.search(cfg.data.system_prompt)):
        raise ConfigError(f"data.system_prompt holds the chat / vision control token {m.group()!r}: the tokenizer "
                          "reads it as that token (a fake chat turn, or an image placeholder without pixels); the "
                          "chat template adds the turns, so remove it")
    validate_mmzero(cfg.mmzero)
    band = cfg.prism.pool_band  # the loop compares these with floats: a word crashed it with a TypeError
    if (len(band) != 2 or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in band)
            or not 0.0 <= band[0] <= band[1] <= 1.0):
        raise ConfigError(f"prism.pool_band={list(band)!r} must be [low, high] with 0 <= low <= high <= 1")
    for key in ("trainer.output_dir", "sft.output_dir", "mmzero.output_dir", "prism.output_dir", "honest.output_dir"):
        if not _get(cfg, key).strip():  # Path("") is the current directory: checkpoints and the lock would land there
            raise ConfigError(f"{key} is empty: give the run's output directory")
    # Path("") is the current directory: tiny models were built wherever it ran (only they read the cache dir: a
    # checkpoint or hub id with an empty one, as a saved run_config.json may hold, still loads and resumes)
    if cfg.model.path.strip() in TINY_ALIASES and not cfg.model.cache_dir.strip():
        raise ConfigError(f"model.cache_dir is empty: give the directory the embedded model "
                          f"{cfg.model.path.strip()!r} is built in")
    if not cfg.model.path.strip():  # Path("") is the current directory: "model path . exists but has no config.json"
        raise ConfigError("model.path is empty: give a checkpoint directory, a hub id or 'tiny' / 'tiny-wide' / "
                          "'tiny-text'")
    bad = [m for m in cfg.honest.smc_mutators if not isinstance(m, str)]
    if bad:  # a nested list is no dict key: check_plugin_config would raise a TypeError
        raise ConfigError(f"honest.smc_mutators={list(cfg.honest.smc_mutators)!r}: each entry is a mutator's name, "
                          f"got {_fmt(bad[0])}")
    from mmevo.honest.plugins import check_plugin_config

    check_plugin_config(cfg.honest)  # CPR / SMC settings: the HONEST loop reads them only after its first evaluation
    _check_roles(cfg)


# the CSRS knobs a run reads only where their part of CSRS runs (mmevo.csrs.strategy, the sfr head)
CSRS_KNOBS = ("m", "omega", "random_anchor", "retrace", "perturb", "sigma", "gamma", "beta")


def csrs_settings_without_effect(cfg: Config) -> dict[str, str]:
    """``csrs.*`` keys that ``cfg``, as one training run, sets away from their default and never reads, each with
    why: ``{key: reason}``. ``validate`` cannot refuse them, as the demo and the loops switch CSRS and the reward head
    per run from one base config (``mmevo.cli`` checks each run, and refuses a key only where every run ignores it)."""
    c, default = cfg.csrs, CSRSConfig()
    changed = {k for k in CSRS_KNOBS if getattr(c, k) != getattr(default, k)}
    reasons: dict[str, str] = {}

    def unused(keys: tuple, why: str) -> None:
        for k in keys:
            if k in changed:
                reasons.setdefault(f"csrs.{k}", why)

    if not c.enabled:
        unused(CSRS_KNOBS, "csrs.enabled=false samples plain groups, without anchors, perturbed images or SFR")
        return reasons
    if not (c.retrace or c.perturb):
        unused(("m", "omega", "random_anchor", "sigma"), "with csrs.retrace=false and csrs.perturb=false no "
               "re-inference is sampled (Table 5's rows without RRM and VSP)")
    if not c.retrace:
        unused(("omega", "random_anchor"), "csrs.retrace=false re-infers from scratch: no anchor is cut")
    elif c.random_anchor:
        unused(("omega",), "csrs.random_anchor=true draws each maternal response's rate from U(0, 1)")
    if not c.perturb:
        unused(("sigma",), "csrs.perturb=false shows the re-inferences the clean image")
    elif c.sigma == 0:  # the clean image, at the cost of a prefill per anchor (no KV reuse)
        reasons.setdefault("csrs.sigma", "noise of std 0 leaves the image as it is: set csrs.perturb=false for the "
                                         "clean image")
    if "sfr" not in cfg.reward.heads:
        unused(("gamma", "beta"), f"only the sfr reward head reads it, and reward.heads={_fmt(cfg.reward.heads)} "
               "has none")
        return reasons
    sfr_args = cfg.reward.head_args.get("sfr") or {}
    for k in ("gamma", "beta"):
        if k in sfr_args and k in changed and sfr_args[k] != getattr(c, k):
            reasons.setdefault(f"csrs.{k}", f"reward.head_args.sfr.{k}={_fmt(sfr_args[k])} is the value the sfr "
                                            "head takes")
    gamma, beta = sfr_args.get("gamma", c.gamma), sfr_args.get("beta", c.beta)
    if gamma == 0 and "beta" not in sfr_args:
        unused(("beta",), "with gamma=0 SFR is R_base whatever the tanh slope (Eq. 8)")
    if beta == 0 and "gamma" not in sfr_args:
        unused(("gamma",), "with beta=0 the tanh of Eq. 8 is 0: SFR is R_base whatever gamma")
    return reasons


def algo_settings_without_effect(cfg: Config) -> dict[str, str]:
    """``algo.*`` keys that ``cfg``, as one training run, sets away from their default and never reads, as
    ``csrs_settings_without_effect`` (key -> why)."""
    a, default = cfg.algo, AlgoConfig()
    reasons = {}
    if a.kl_coef == 0 and a.kl_type != default.kl_type:  # the trainer builds no reference model, computes no KL
        reasons["algo.kl_type"] = "algo.kl_coef=0 adds no KL term (no reference model is loaded)"
    if a.adv_scale == "none" and a.adv_eps != default.adv_eps:  # eps is added to the std the advantages divide by
        reasons["algo.adv_eps"] = "algo.adv_scale=none divides the advantages by no std"
    return reasons


def settings_without_effect(cfg: Config) -> dict[str, str]:
    """The ``csrs.*`` and ``algo.*`` keys ``cfg`` sets and, as one training run, never reads (key -> why).
    ``honest.gss_*`` under ``honest.gss_mode=off`` is not among them: the shipped HONEST configs set those keys, and
    ``honest.gss_mode=off`` on them is the paper's without-GSS ablation, which must run as given."""
    return {**csrs_settings_without_effect(cfg), **algo_settings_without_effect(cfg)}


def _check_model_names(cfg: Config) -> None:
    """Devices, ``model.trainable`` regexes and LoRA target names: each would fail only once the model is loaded, some
    with a raw traceback (re.error, TypeError, torch's RuntimeError)."""
    import re

    import torch

    for key in ("model.device", "prism.embed_device"):
        try:
            torch.device(_get(cfg, key))
        except (RuntimeError, TypeError):
            raise ConfigError(f"{key}={_fmt(_get(cfg, key))} is not a torch device (cpu, cuda, cuda:1, mps, "
                              "...)") from None
    for key in ("model.trainable", "model.lora.target_modules"):
        bad = [v for v in _get(cfg, key) if not isinstance(v, str) or not v]
        if bad:
            raise ConfigError(f"{key}={list(_get(cfg, key))!r}: each entry must be a non-empty string, "
                              f"got {_fmt(bad[0])}")
    for pattern in cfg.model.trainable:
        try:
            re.compile(pattern)
        except re.error as e:
            raise ConfigError(f"model.trainable: {pattern!r} is not a regular expression ({e})") from None
    if cfg.model.lora.rank and not cfg.model.lora.target_modules:
        raise ConfigError(f"model.lora.target_modules is empty with model.lora.rank={cfg.model.lora.rank}: name the "
                          f"linear layers that get adapters, e.g. {list(LORA_TARGETS[:4])}")


def validate_mmzero(m: MMZeroConfig) -> None:
    """``mmzero.*`` bounds: a bad value would otherwise fail deep in a reward or silently keep no data."""
    for key in ("code_samples", "solver_samples"):
        if getattr(m, key) < 1:
            raise ConfigError(f"mmzero.{key}={getattr(m, key)} must be >= 1")
    for key in ("coder_success_range", "solver_consistency_range"):
        v = getattr(m, key)
        if (not isinstance(v, (list, tuple)) or len(v) != 2
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)
                or not 0.0 <= v[0] <= v[1] <= 1.0):
            raise ConfigError(f"mmzero.{key}={v!r} must be [lo, hi] with 0 <= lo <= hi <= 1")
    for key in ("diversity_strength", "easy_hard_penalty", "type_penalty"):
        if not getattr(m, key) >= 0:
            raise ConfigError(f"mmzero.{key}={getattr(m, key)} must be >= 0")
    if not 0.0 <= m.cluster_threshold <= 1.0:
        raise ConfigError(f"mmzero.cluster_threshold={m.cluster_threshold} must be in [0, 1]")
    # the render pool refuses these only when it starts (after warm-up) or at the first render (mid-phase)
    if m.render_workers < 1:
        raise ConfigError(f"mmzero.render_workers={m.render_workers} must be >= 1")
    if not 0 < m.render_timeout_s <= MAX_RENDER_TIMEOUT_S:
        raise ConfigError(f"mmzero.render_timeout_s={m.render_timeout_s} must be in (0, {MAX_RENDER_TIMEOUT_S:g}] "
                          "seconds")


def to_dict(cfg: Config) -> dict:
    return json.loads(json.dumps(dataclasses.asdict(cfg), default=list))


def built_in_defaults() -> dict:
    """Every config key's built-in default as ``flat_dict`` names it (``section.key``)."""
    return flat_dict(to_dict(Config()))


def added_since_at_default(key: str, was: dict, now: dict, defaults: dict) -> bool:
    """``key`` (flat) is a setting added to mmevo after the config ``was`` was recorded, and ``now`` leaves it at its
    built-in default (``defaults``): a new setting's default keeps the behaviour from before it existed, so it is the
    value the recorded run ran with. Counted as a change, every run recorded by an earlier build (a checkpoint, a
    loop's run_config.json, a demo's summary without prism.init_counts) was refused on a rerun with its own settings."""
    return key not in was and key in now and key in defaults and now[key] == defaults[key]


def recorded_config_changes(recorded: dict, cfg: "Config") -> list[str]:
    """Dotted keys in which the config ``recorded`` by a run (``to_dict``, as its summary or state holds it) differs
    from ``cfg``, both read through JSON; a setting added since the run and left at its default is no change
    (``added_since_at_default``). Sorted."""
    was = flat_dict(json.loads(json.dumps(recorded, default=str)))
    now = flat_dict(json.loads(json.dumps(to_dict(cfg), default=str)))
    defaults = built_in_defaults()
    return sorted(k for k in was.keys() | now.keys()
                  if was.get(k) != now.get(k) and not added_since_at_default(k, was, now, defaults))


def flat_dict(d: dict, prefix: str = "") -> dict:
    """Dotted keys of a ``to_dict`` config's sections (a mapping field such as reward.heads stays one value)."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and not prefix:
            out.update(flat_dict(v, f"{k}."))
        else:
            out[prefix + k] = v
    return out


def describe(cls: type = Config, prefix: str = "") -> list[str]:
    """Lines ``key = default  # doc`` for --help, read from the field comments in this file."""
    import inspect

    lines = []
    src = inspect.getsource(cls)
    docs = {}
    for line in src.splitlines():
        s = line.strip()
        if ":" in s and "#" in s and not s.startswith("#"):
            docs[s.split(":", 1)[0].strip()] = s.split("#", 1)[1].strip()
    for f in dataclasses.fields(cls):
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if dataclasses.is_dataclass(default):
            lines += describe(type(default), prefix + f.name + ".")
        else:
            lines.append(f"  {prefix}{f.name} = {default!r}  # {docs.get(f.name, '')}")
    return lines
