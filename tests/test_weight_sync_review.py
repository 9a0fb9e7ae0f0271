"""The weights pushed to vLLM (``iter_weights``) are every distinct tensor of the model, also when they are fresh
tensors (LoRA-merged) whose addresses are reused once a bucket is freed."""

import torch

from mmevo.models.adapters import apply_lora
from mmevo.models.loader import load_model
from mmevo.models.weights import full_state_items
from mmevo.rollout.vllm_engine import iter_weights, vllm_weight_name


def test_every_lora_merged_weight_reaches_vllm_whatever_the_bucket_size(tiny_vl_path):
    model = load_model(tiny_vl_path).model
    apply_lora(model, 4, 8.0, 0.0, ["q_proj", "v_proj", "gate_proj"])
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_()  # a real delta, so merged weights differ from the base weights
    want = {}
    for name, t in full_state_items(model):
        want.setdefault(vllm_weight_name(name), t.detach().clone())
    for bucket_bytes in (1, 4096, 256 << 20):
        got = []
        for n, t in iter_weights(model, None, bucket_bytes=bucket_bytes):  # consumed and dropped, as vLLM loads them
            assert torch.equal(t, want[n]), n
            got.append(n)
        missing = sorted(set(want) - set(got))
        # tied lm_head / embed_tokens is the only name allowed to be left out (sent once, as save_pretrained does)
        assert all("lm_head" in n for n in missing), (bucket_bytes, missing[:5])
        assert len(got) == len(set(got))
    # the merged layers really were merged (not the base weights)
    base = dict(load_model(tiny_vl_path).model.named_parameters())
    q = next(n for n in want if n.endswith("layers.0.self_attn.q_proj.weight"))
    assert not torch.equal(want[q], base[next(k for k in base if k.endswith("layers.0.self_attn.q_proj.weight"))])
