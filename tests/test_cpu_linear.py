"""model.cpu_linear: float32 CPU linears over many rows on oneDNN, numerically F.linear's (forward and gradients),
everything else unchanged, and the trainer's log-probs / gradients those of the plain model."""

import copy
import pickle

import pytest
import torch
import torch.nn.functional as F

from mmevo.models import cpu_linear as cl

pytestmark = pytest.mark.skipif(not cl.onednn_linear_available(), reason="this torch build has no oneDNN linear")


def _grads(fn, x, w, b):
    x, w = x.detach().requires_grad_(), w.clone().requires_grad_()  # detach keeps x's strides (clone may not)
    b = None if b is None else b.clone().requires_grad_()
    y = fn(x, w, b)
    g = torch.randn(y.shape, generator=torch.Generator().manual_seed(7))
    (y * g).sum().backward()
    return y.detach(), x.grad, w.grad, None if b is None else b.grad


@pytest.mark.parametrize("shape", [(300, 48), (4, 90, 48), (2, 3, 50, 48)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_forward_and_gradients_match_f_linear(shape, with_bias):
    gen = torch.Generator().manual_seed(0)
    x, w = torch.randn(shape, generator=gen), torch.randn(40, 48, generator=gen)
    b = torch.randn(40, generator=gen) if with_bias else None
    assert cl.takes_onednn(x, w)
    got, want = _grads(cl.linear, x, w, b), _grads(F.linear, x, w, b)
    assert got[0].shape == want[0].shape == (*shape[:-1], 40)
    for g, e in zip(got, want):
        if e is None:
            assert g is None
        else:
            torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("layout", ["transposed", "strided", "expanded", "sliced_3d"])
def test_non_contiguous_input(layout):
    gen = torch.Generator().manual_seed(1)
    x = {"transposed": lambda: torch.randn(48, 400, generator=gen).t(),  # [400, 48]
         "strided": lambda: torch.randn(800, 96, generator=gen)[::2, ::2],
         "expanded": lambda: torch.randn(1, 48, generator=gen).expand(400, 48),
         "sliced_3d": lambda: torch.randn(4, 100, 60, generator=gen)[:, :, 6:54]}[layout]()
    w, b = torch.randn(32, 48, generator=gen), torch.randn(32, generator=gen)
    assert not x.is_contiguous() and not x.detach().is_contiguous() and cl.takes_onednn(x, w)
    for g, e in zip(_grads(cl.linear, x, w, b), _grads(F.linear, x, w, b)):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-4)


def test_only_what_needs_a_gradient_gets_one():
    gen = torch.Generator().manual_seed(2)
    x, w = torch.randn(300, 16, generator=gen), torch.randn(8, 16, generator=gen, requires_grad=True)
    cl.linear(x, w).sum().backward()  # the input needs no gradient (a frozen embedding's output)
    torch.testing.assert_close(w.grad, torch.ones(300, 8).t() @ x, rtol=1e-5, atol=1e-4)
    x.requires_grad_()
    frozen = torch.randn(8, 16, generator=gen)
    cl.linear(x, frozen).sum().backward()  # a frozen layer passes the gradient on to its input
    torch.testing.assert_close(x.grad, torch.ones(300, 8) @ frozen, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("case", ["few_rows", "float64", "bfloat16", "zero3"])
def test_other_cases_keep_f_linear_exactly(case):
    gen = torch.Generator().manual_seed(3)
    rows = cl.MIN_ROWS - 1 if case == "few_rows" else cl.MIN_ROWS
    dtype = {"float64": torch.float64, "bfloat16": torch.bfloat16}.get(case, torch.float32)
    x, w = torch.randn(rows, 24, generator=gen).to(dtype), torch.randn(12, 24, generator=gen).to(dtype)
    if case == "zero3":
        w.ds_id = 0  # a DeepSpeed ZeRO-3 parameter: its own linear must see it
    assert not cl.takes_onednn(x, w)
    assert torch.equal(cl.linear(x, w), F.linear(x, w))


def _layers():
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4, bias=False))


class MyLinear(torch.nn.Linear):
    pass


def test_use_cpu_linear_swaps_and_restores_plain_linears_only(monkeypatch):
    monkeypatch.setattr(cl, "cpu_vendor", lambda: "AuthenticAMD")  # where auto is oneDNN
    model = torch.nn.Sequential(_layers(), MyLinear(4, 4))
    state = {k: v.clone() for k, v in model.state_dict().items()}
    assert cl.use_cpu_linear(model, "onednn") == 2
    assert [type(m).__name__ for m in model.modules() if isinstance(m, torch.nn.Linear)] == [
        "OneDNNLinear", "OneDNNLinear", "MyLinear"]
    assert cl.use_cpu_linear(model, "auto") == 2  # idempotent
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())
    x = torch.randn(cl.MIN_ROWS, 16)
    for clone in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        assert type(clone[0][0]) is cl.OneDNNLinear
        assert torch.equal(clone(x), model(x))
    assert cl.use_cpu_linear(model, "torch") == 0
    assert {type(m) for m in model.modules() if isinstance(m, torch.nn.Linear)} == {torch.nn.Linear, MyLinear}
    with pytest.raises(ValueError, match="model.cpu_linear='fast' not in"):
        cl.use_cpu_linear(model, "fast")


def test_swapped_layers_train_like_plain_ones():
    torch.manual_seed(0)
    plain = _layers()
    fast = copy.deepcopy(plain)
    cl.use_cpu_linear(fast, "onednn")
    x = torch.randn(512, 16)
    for m in (plain, fast):
        m(x).square().mean().backward()
    for (name, p), q in zip(plain.named_parameters(), fast.parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-5, atol=1e-6, msg=name)


def test_onednn_refused_where_unavailable(monkeypatch):
    monkeypatch.setattr(cl, "onednn_linear_available", lambda: False)
    model = _layers()
    with pytest.raises(ValueError, match="no working oneDNN linear"):
        cl.use_cpu_linear(model, "onednn")
    assert cl.use_cpu_linear(model, "auto") == 0  # auto falls back to F.linear


def test_config_refuses_an_unknown_kernel():
    from mmevo.config import ConfigError, load_config

    assert load_config(None, []).model.cpu_linear == "auto"
    with pytest.raises(ConfigError, match="model.cpu_linear='mkl' not in"):
        load_config(None, ["model.cpu_linear=mkl"])


def test_trainer_logprobs_and_gradients_match_the_plain_model(tiny_vl_path):
    """The GRPO update's log-probs and gradients on the tiny VL model, oneDNN against F.linear (configure_training
    applies the setting), on a micro-batch big enough for the oneDNN path."""
    from mmevo.config import load_config
    from mmevo.grpo.trainer import configure_training, sequence_logprobs
    from mmevo.models.loader import load_model
    from mmevo.data.synthetic import generate_geometry
    from mmevo.grpo.trainer import PromptCache

    results = {}
    for choice in ("torch", "onednn"):
        torch.manual_seed(0)
        lm = load_model(tiny_vl_path)
        cfg = load_config(None, [f"model.cpu_linear={choice}"])
        configure_training(lm.model, cfg.model, seed=0)
        n_fast = sum(type(m) is cl.OneDNNLinear for m in lm.model.modules())
        assert (n_fast > 0) == (choice == "onednn")
        cache = PromptCache(lm.processor, lm.is_vl, "none")
        examples = generate_geometry(2, seed=0)
        prompts = [cache(ex) for ex in examples for _ in range(4)]
        gen = torch.Generator().manual_seed(1)
        responses = [torch.randint(20, 400, (60,), generator=gen).tolist() for _ in prompts]
        lm.model.train()
        logp, _, mask = sequence_logprobs(lm.model, prompts, responses, lm.tokenizer.pad_token_id, 1.0, "cpu",
                                          padding_free=True)
        assert int(mask.sum()) >= cl.MIN_ROWS  # the response rows alone take the oneDNN path
        (logp * mask).sum().backward()
        results[choice] = (logp.detach(), {n: p.grad.clone() for n, p in lm.model.named_parameters()
                                           if p.grad is not None})
    (lp_t, g_t), (lp_f, g_f) = results["torch"], results["onednn"]
    torch.testing.assert_close(lp_f, lp_t, rtol=1e-5, atol=1e-5)
    assert g_f.keys() == g_t.keys() and len(g_t) > 20
    for name in g_t:
        torch.testing.assert_close(g_f[name], g_t[name], rtol=1e-4, atol=1e-5, msg=name)


def test_reference_model_takes_the_policys_kernel(tiny_vl_path, tmp_path):
    """At equal weights the reference's log-probs equal the policy's bit for bit (KL exactly 0 at the start), which
    needs both on the same kernel."""
    from mmevo.config import load_config
    from mmevo.data.synthetic import generate_geometry
    from mmevo.grpo.trainer import GRPOTrainer
    from mmevo.models.loader import load_model
    from mmevo.rollout.hf import HFEngine

    lm, ref = load_model(tiny_vl_path), load_model(tiny_vl_path).model.eval()
    cfg = load_config(None, ["model.cpu_linear=onednn", "algo.kl_coef=0.1", f"trainer.output_dir={tmp_path}",
                             "trainer.wandb_mode=disabled", "data.prompt_template=none", "trainer.micro_batch_seqs=8"])
    engine = HFEngine(lm.model, lm.tokenizer.pad_token_id, stop_ids=[])
    tr = GRPOTrainer(cfg, lm, engine, [], [], ref_model=ref, log=False)
    assert {type(m) for m in ref.modules() if isinstance(m, torch.nn.Linear)} == {cl.OneDNNLinear}
    prompts = [tr.prompts(ex) for ex in generate_geometry(2, seed=0) for _ in range(4)]
    gen = torch.Generator().manual_seed(2)
    responses = [torch.randint(20, 400, (50,), generator=gen).tolist() for _ in prompts]
    policy = tr._logprobs_no_grad(tr.model, prompts, responses)
    reference = tr._logprobs_no_grad(ref, prompts, responses)
    assert sum(len(r) for r in responses) >= cl.MIN_ROWS
    assert all(torch.equal(p, r) for p, r in zip(policy, reference))
    tr.close()


@pytest.mark.parametrize("vendor, available, want", [
    ("AuthenticAMD", True, "onednn"), ("", True, "onednn"), ("HygonGenuine", True, "onednn"),
    ("GenuineIntel", True, "torch"), ("AuthenticAMD", False, "torch"), ("GenuineIntel", False, "torch")])
def test_auto_is_onednn_except_on_intel_cpus_or_without_the_kernel(monkeypatch, vendor, available, want):
    """MKL's sgemm takes its AVX2 path on AMD CPUs (oneDNN ~2x faster there) and its AVX-512 path on Intel's, where
    F.linear was as fast on the training shapes and faster on the decode step's: auto follows the vendor."""
    monkeypatch.setattr(cl, "cpu_vendor", lambda: vendor)
    monkeypatch.setattr(cl, "onednn_linear_available", lambda: available)
    assert cl.resolve_cpu_linear("auto") == want
    assert cl.resolve_cpu_linear("torch") == "torch" and cl.resolve_cpu_linear("onednn") == "onednn"
    assert cl.use_cpu_linear(_layers(), "auto") == (2 if want == "onednn" else 0)
    with pytest.raises(ValueError, match="model.cpu_linear='fast' not in"):
        cl.resolve_cpu_linear("fast")


def test_cpu_vendor_reads_this_machine():
    vendor = cl.cpu_vendor()
    assert isinstance(vendor, str) and vendor == vendor.strip()
