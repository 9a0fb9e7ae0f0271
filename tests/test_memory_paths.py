"""The memory-saving paths are exact: gradient checkpointing (also with shared prompts), chunked padding-free
log-probs / entropy, and token-budget micro-batches, on the tiny VL and text models."""

import pytest
import torch

from conftest import randomize
from mmevo.grpo.trainer import sequence_logprobs, token_logprobs
from mmevo.models.inputs import encode_prompt
from mmevo.models.loader import load_model


def _batch(lm, is_vl):
    from PIL import Image

    imgs = [Image.new("RGB", (56, 56), (200, 30, 30)), Image.new("RGB", (70, 42), (20, 90, 200))]
    proc = lm.processor
    texts = ["<image>Find angle C.", "In triangle ABC, angle A = 50. <image> Find x."]
    prompts = [encode_prompt(proc, is_vl, t, [im] if is_vl else []) for t, im in zip(texts, imgs)]
    ps = [prompts[0]] * 3 + [prompts[1]] * 2  # two groups sharing their prompt, as the trainer lays them out
    rs = [[105, 106, 107], [108], [109, 110, 111, 112, 113], [114, 115], [116, 117, 118]]
    return ps, rs


def _logprobs_and_grads(lm, ps, rs, **kw):
    lm.model.zero_grad(set_to_none=True)
    logp, ent, mask = sequence_logprobs(lm.model, ps, rs, lm.tokenizer.pad_token_id, 0.9, "cpu", with_entropy=True,
                                        **kw)
    ((logp * mask).sum() + 0.3 * (ent * mask).sum()).backward()
    grads = {n: p.grad.clone() for n, p in lm.model.named_parameters() if p.grad is not None}
    return (logp * mask).detach(), (ent * mask).detach(), grads


@pytest.mark.parametrize("which", ["vl", "text"])
def test_gradient_checkpointing_gives_the_same_logprobs_and_gradients(which, tiny_vl_path, tiny_text_path):
    lm = load_model(tiny_vl_path if which == "vl" else tiny_text_path)
    randomize(lm.model, std=0.2, seed=4)
    ps, rs = _batch(lm, which == "vl")
    lm.model.train()
    ref = _logprobs_and_grads(lm, ps, rs, share_prefix=False)  # no checkpointing, one full pass per sample
    shared = _logprobs_and_grads(lm, ps, rs)  # no checkpointing, one prompt pass per group (the default)
    lm.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    got = _logprobs_and_grads(lm, ps, rs)  # checkpointing: recomputed in backward, same numbers
    assert ref[2].keys() == got[2].keys() == shared[2].keys() and any("embed" in n for n in got[2])
    for other, tol in ((got, 1e-6), (shared, 2e-4)):  # the shared path sums in another order
        assert torch.allclose(ref[0], other[0], atol=tol) and torch.allclose(ref[1], other[1], atol=tol)
        for n in ref[2]:
            assert torch.allclose(ref[2][n], other[2][n], atol=tol, rtol=1e-4), n


def test_checkpointing_would_break_the_shared_prompt_path(tiny_vl_path):
    """The trap the fallback avoids: transformers drops the prompt's KV cache under checkpointing in train mode."""
    import mmevo.grpo.trainer as T

    lm = load_model(tiny_vl_path)
    randomize(lm.model, std=0.2, seed=4)
    ps, rs = _batch(lm, True)
    lm.model.train()
    ref = _logprobs_and_grads(lm, ps, rs)
    lm.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    owner = {}
    for p in ps:
        owner.setdefault(id(p), len(owner))
    hidden, ids, mask = T._shared_prefix_hidden(lm.model, ps, rs, owner, lm.tokenizer.pad_token_id, "cpu")
    broken, _ = token_logprobs(lm.model.lm_head, hidden, ids, mask, 0.9)
    assert (broken * mask - ref[0]).abs().max() > 1e-2  # scored without the prompt: wrong


@pytest.mark.parametrize("chunk", [1, 3, 7])
def test_chunked_logprobs_entropy_and_gradients_equal_the_full_computation(chunk):
    g = torch.Generator().manual_seed(0)
    head = torch.nn.Linear(16, 50, bias=False)
    hidden = torch.randn(3, 5, 16, generator=g, requires_grad=True)
    labels = torch.randint(0, 50, (3, 5), generator=g)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]])
    out = []
    for c in (0, chunk):
        head.zero_grad()
        hidden.grad = None
        lp, en = token_logprobs(head, hidden, labels, mask, 0.7, c, with_entropy=True)
        ((lp * 1.3).sum() + (en * 0.4).sum()).backward()
        out.append((lp.detach(), en.detach(), hidden.grad.clone(), head.weight.grad.clone()))
    for a, b in zip(*out):
        assert torch.allclose(a, b, atol=1e-6)
    lp = out[0][0]
    assert (lp[mask == 0] == 0).all() and (lp[mask == 1] < 0).all()
    # the entropy as a metric only: same values, no gradient path
    lp2, en2 = token_logprobs(head, hidden, labels, mask, 0.7, chunk, with_entropy=True, entropy_grad=False)
    assert torch.allclose(en2, out[0][1], atol=1e-6) and not en2.requires_grad and lp2.requires_grad


def test_empty_responses_still_give_a_graph():
    head = torch.nn.Linear(4, 9)
    hidden = torch.randn(2, 1, 4, requires_grad=True)
    lp, en = token_logprobs(head, hidden, torch.zeros(2, 1, dtype=torch.long), torch.zeros(2, 1), 1.0, 2, True)
    assert lp.abs().sum() == 0 and lp.requires_grad
    (lp.sum() + 0).backward()  # no "does not require grad" error
