"""``_vision_tower_in_graph``: the dummy vision-tower run that keeps ZeRO-3 ranks with and without images making the
same collectives (tests/test_distributed.py runs the 2-process case) changes no result and no gradient."""

import torch

from mmevo.grpo.trainer import _vision_tower_in_graph, sequence_logprobs
from mmevo.models.inputs import encode_prompt
from mmevo.models.loader import load_model


def _text_only_logprobs(lm):
    prompts = [encode_prompt(lm.processor, lm.is_vl, q, []) for q in ("What is 2 + 3?", "What is 4 + 1?")]
    assert all(p.pixel_values is None for p in prompts)
    lm.model.zero_grad()
    # distinct prompts: the unshared path, one forward of the model as under ZeRO-3
    logp, _, mask = sequence_logprobs(lm.model, prompts, [[105, 106, 107], [108]], 0, 1.0, "cpu", padding_free=False)
    (logp * mask).sum().backward()
    return logp.detach(), {n: p.grad.clone() for n, p in lm.model.named_parameters() if p.grad is not None}


def test_dummy_vision_tower_runs_once_per_forward_and_changes_nothing(tiny_vl_path):
    torch.manual_seed(0)
    lm = load_model(tiny_vl_path)
    visual = lm.model.model.visual
    calls = []
    visual.register_forward_hook(lambda *a: calls.append(1))
    plain, plain_grads = _text_only_logprobs(lm)
    assert calls == []  # a text-only batch runs no vision tower by itself
    with _vision_tower_in_graph(lm.model):
        dummy, dummy_grads = _text_only_logprobs(lm)
    assert len(calls) == 1  # one forward of the language model, one of the tower
    assert torch.equal(plain, dummy)
    vision = {n for n in dummy_grads if ".visual." in f".{n}"}
    assert vision and set(dummy_grads) - vision == set(plain_grads)  # the tower is in the graph now ...
    assert all(float(dummy_grads[n].abs().max()) == 0.0 for n in vision)  # ... with zero gradients
    assert all(torch.equal(plain_grads[n], dummy_grads[n]) for n in plain_grads)
    _text_only_logprobs(lm)
    assert len(calls) == 1  # the hook is gone after the block
