"""CSRS rollout strategy (Algorithm 1): n maternal responses per prompt, then m re-inferences from each one's anchor.

For maternal response R_j of a prompt: the anchor is floor(omega * len(R_j)) over its own tokens (RRM); the prefix
prompt + R_j[:anchor] is continued in the same assistant turn m times (one shared prefill), on an image perturbed
with Gaussian noise that is drawn once per maternal response and shared by its m re-inferences (VSP). Only maternal
responses are trained on; re-inferences feed the reward (SFR, or the pooled majority vote).

Ablations (Table 5): ``csrs.retrace=false`` re-infers from scratch (anchor 0); ``csrs.perturb=false`` keeps the
clean image; with both off there are no re-inferences at all and the run is plain MM-UPT majority vote (or SFR with
an empty re-inference set, i.e. the frequency reward R_base).
"""

from __future__ import annotations

import dataclasses
import random

import torch

from mmevo.config import CSRSConfig
from mmevo.csrs.perturb import derive_seed, perturb_images
from mmevo.csrs.retrace import anchor_prefixes, sample_omegas
from mmevo.data.schema import Example
from mmevo.models.inputs import EncodedPrompt
from mmevo.rollout.base import RolloutRequest
from mmevo.rollout.strategy import Rollout, RolloutContext, RolloutStrategy, sample_groups
from mmevo.validation import is_integer_number


def perturbed_prompt(processor, prompt: EncodedPrompt, sigma: float, seed: int) -> EncodedPrompt:
    """The same prompt tokens with Gaussian-noised images (new pixel values, same grid, so same placeholders)."""
    return perturbed_prompts(processor, [prompt], sigma, [seed])[0]


def perturbed_prompts(processor, prompts: list[EncodedPrompt], sigma: float, seeds: list[int]) -> list[EncodedPrompt]:
    """``perturbed_prompt`` for many prompts with one image-processor call (a call per image costs more than the
    pixels: the re-inferences of one CSRS step perturb an image per maternal response)."""
    images = [perturb_images(p.images, sigma, seed) if p.images else [] for p, seed in zip(prompts, seeds)]
    flat = [im for ims in images for im in ims]
    if not flat:
        return list(prompts)
    enc = processor.image_processor(images=flat, return_tensors="pt")
    rows = enc["image_grid_thw"].prod(-1).tolist()  # pixel-value rows (patches) of each image
    pixels = list(torch.split(enc["pixel_values"], rows))
    out, k = [], 0
    for p, ims in zip(prompts, images):
        if not ims:
            out.append(p)
            continue
        grid = enc["image_grid_thw"][k:k + len(ims)]
        if not torch.equal(grid, p.image_grid_thw):
            raise RuntimeError("VSP changed the image grid; perturbation must keep the image size")
        out.append(dataclasses.replace(p, images=ims, pixel_values=torch.cat(pixels[k:k + len(ims)])))
        k += len(ims)
    return out


class CSRSStrategy(RolloutStrategy):
    """Maternal groups + re-inferences, flattened into one Rollout with a trainable mask and parent links."""

    name = "csrs"

    def __init__(self, csrs: CSRSConfig):
        if not is_integer_number(csrs.m) or csrs.m < 1:  # m = 0 ran without re-inferences, reporting none of it
            raise ValueError(f"csrs.m must be an integer >= 1 (re-inferences per maternal response), got {csrs.m!r}")
        if csrs.retrace and not csrs.random_anchor:  # Eq. 6: omega in (0, 1); omega = 1 re-infers after the answer
            try:
                (omega,) = sample_omegas(1, csrs.omega, False, random.Random(0))  # the rate as the anchors read it
            except ValueError:  # no number (a bool, a text, NaN) or outside [0, 1]
                omega = None
            if omega is None or not 0 < omega < 1:
                raise ValueError(f"csrs.omega must be in (0, 1) (Eq. 6), got {csrs.omega!r}")
        self.c = csrs

    def rollout(self, ctx: RolloutContext, examples: list[Example]) -> Rollout:
        c = self.c
        # on the clean image a re-inference's prompt + prefix is exactly what its maternal response already ran
        # through the model: engines that can keep those KV caches continue from them instead of prefilling again
        reuse = bool(c.retrace and not c.perturb and getattr(ctx.engine, "supports_kv_reuse", False))
        maternal = sample_groups(ctx, examples, keep_kv=reuse)
        n_mat = len(maternal)
        if n_mat == 0 or not (c.retrace or c.perturb):  # Table 5 "MajorityVote" / "+SFR" rows: no re-inference
            maternal.extra_metrics.update({"csrs/reinference_frac": 0.0})
            return maternal

        rng = random.Random(ctx.seed)
        omegas = sample_omegas(n_mat, c.omega, c.random_anchor, rng) if c.retrace else [0.0] * n_mat
        prefixes = anchor_prefixes([comp.token_ids for comp in maternal.completions], omegas,
                                   strip_ids=set(ctx.stop_ids))
        images = (perturbed_prompts(ctx.processor, list(maternal.prompts), c.sigma,
                                    [derive_seed(ctx.seed, j) for j in range(n_mat)]) if c.perturb else [None] * n_mat)
        requests = [RolloutRequest(prompt, n=c.m, prefix_ids=prefix, image_override=image,
                                   max_tokens=ctx.params.max_tokens - len(prefix),
                                   continue_from=comp if reuse else None)
                    for prompt, prefix, image, comp in zip(maternal.prompts, prefixes, images, maternal.completions)]
        params = dataclasses.replace(ctx.params, seed=ctx.seed + 1)
        outs = ctx.engine.generate(requests, params)
        if len(outs) != n_mat:  # one list per anchor: fewer would silently leave anchors without re-inferences
            raise ValueError(f"engine {type(ctx.engine).__name__}.generate returned {len(outs)} completion lists for "
                             f"{n_mat} re-inference requests (one list per request, in order)")
        short = [j for j, group in enumerate(outs) if len(group) != c.m]
        if short:  # |A_m| must be m n: a short or long list would silently reweight every f_r of the group
            raise ValueError(f"engine {type(ctx.engine).__name__}.generate returned {len(outs[short[0]])} completions "
                             f"for re-inference request {short[0]}, csrs.m={c.m} were asked for")
        for j, group in enumerate(outs):  # a re-inference's text (its answer) is prefix + continuation (Eq. 6)
            lost = next((comp for comp in group if list(comp.prefix_ids) != prefixes[j]), None)
            if lost is not None:  # decoded without its anchor prefix, an answer boxed before the anchor was never seen
                raise ValueError(f"engine {type(ctx.engine).__name__}.generate returned a completion for re-inference "
                                 f"request {j} whose prefix_ids ({len(lost.prefix_ids)} tokens) are not the request's "
                                 f"anchor prefix ({len(prefixes[j])} tokens): a Completion must carry its request's "
                                 f"prefix_ids, token_ids only the new tokens")
        for comp in maternal.completions:  # the kept caches are not needed past this point
            comp.kv = None

        prompts, comps, exs = list(maternal.prompts), list(maternal.completions), list(maternal.examples)
        gids, parents = maternal.group_ids.tolist(), [-1] * n_mat
        for j, group in enumerate(outs):
            for comp in group:
                prompts.append(maternal.prompts[j])
                comps.append(comp)
                exs.append(maternal.examples[j])
                gids.append(gids[j])
                parents.append(j)
        texts = list(maternal.texts) + [ctx.decode(comp.full_ids) for comp in comps[n_mat:]]
        trainable = torch.zeros(len(comps), dtype=torch.bool)
        trainable[:n_mat] = True
        anchors = [len(p) for p in prefixes]
        metrics = dict(maternal.extra_metrics)
        metrics.update({
            "csrs/anchor_mean": sum(anchors) / len(anchors),
            "csrs/anchor_zero_frac": sum(a == 0 for a in anchors) / len(anchors),
            "csrs/reinference_tokens": float(sum(len(x.token_ids) for x in comps[n_mat:])),
            "csrs/reinference_frac": (len(comps) - n_mat) / len(comps),
        })
        return Rollout(prompts, comps, texts, torch.tensor(gids, dtype=torch.long), exs, trainable=trainable,
                       parents=parents, skipped_prompts=maternal.skipped_prompts, extra_metrics=metrics)
