"""Per-request seeds and the sampled evaluations built on them: an item's samples depend on (eval seed, its place in
the evaluated set) only, not on the engine's batching, the other items of a call, their order or the world size.

Before, the HF engine drew every row's uniforms from one generator seeded by the call (an item's samples followed
its neighbours), and the evaluations seeded per call / batch / rank, so maj@k and pass@k changed with eval.batch_size,
max_batch_seqs, a resume and the number of ranks."""

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from conftest import hf_engine, randomized_model
from mmevo.models.inputs import encode_prompt
from mmevo.rollout.base import RolloutRequest, SamplingParams, item_seed, item_seeds


@pytest.fixture(scope="module")
def vl(tiny_vl_path):
    return randomized_model(tiny_vl_path, seed=2)


@pytest.fixture(scope="module")
def prompts(vl):
    imgs = [Image.new("RGB", (56, 56), "white"), Image.new("RGB", (70, 42), (200, 30, 30)),
            Image.new("RGB", (42, 70), (0, 90, 30))]
    texts = ["What is 2+2?", "Name the colour of this image please", "x"]
    return [encode_prompt(vl.processor, True, t, [im]) for t, im in zip(texts, imgs)]


def _tokens(vl, requests, max_batch_seqs, params):
    return [[c.token_ids for c in o] for o in hf_engine(vl, max_batch_seqs=max_batch_seqs).generate(requests, params)]


def test_hf_seeded_request_samples_alike_whatever_the_batching_order_and_neighbours(vl, prompts):
    params = SamplingParams(temperature=1.0, max_tokens=12, seed=5)
    seeds = [11, 2**40, 2**62]

    def run(order, max_batch_seqs, extra=()):
        reqs = [RolloutRequest(prompts[i], n=3, seed=seeds[i]) for i in order] + list(extra)
        out = _tokens(vl, reqs, max_batch_seqs, params)
        return {i: out[j] for j, i in enumerate(order)}

    whole = run([0, 1, 2], 64)
    assert run([0, 1, 2], 1) == whole  # one row at a time (each request split into pieces of one sample)
    assert run([0, 1, 2], 2) == whole  # n=3 split 2 + 1: the second piece continues at seed + 2
    assert run([2, 0, 1], 4) == whole  # another order and chunking
    assert run([1], 64) == {1: whole[1]}  # alone in its call
    # beside unseeded requests drawing from the call's stream
    assert run([2, 0, 1], 64, extra=[RolloutRequest(prompts[0], n=2)]) == whole
    # the samples are random draws, not one stream repeated: another seed samples otherwise
    assert len({tuple(t) for t in whole[0]}) > 1
    other = _tokens(vl, [RolloutRequest(prompts[0], n=3, seed=12)], 64, params)[0]
    assert other != whole[0] and other[:2] == whole[0][1:]  # seed 12's samples 0, 1 are seed 11's samples 1, 2


def test_hf_seeded_request_ignores_the_call_seed_and_unseeded_rows_keep_it(vl, prompts):
    a = _tokens(vl, [RolloutRequest(prompts[0], n=2, seed=3)], 64, SamplingParams(max_tokens=8, seed=1))
    b = _tokens(vl, [RolloutRequest(prompts[0], n=2, seed=3)], 64, SamplingParams(max_tokens=8, seed=99))
    assert a == b
    # no request seed: the call's single stream, as before (a seed of the call reproduces its samples)
    c = _tokens(vl, [RolloutRequest(prompts[0], n=2)], 64, SamplingParams(max_tokens=8, seed=1))
    assert c == _tokens(vl, [RolloutRequest(prompts[0], n=2)], 64, SamplingParams(max_tokens=8, seed=1))


@pytest.mark.parametrize("seed, n", [(-1, 1), (True, 1), (2.0, 1), ("3", 1), (2**63, 1), (2**63 - 2, 3),
                                     (np.int64(2**63 - 1), 3), (np.uint64(2**63), 1)])
def test_bad_request_seed_is_refused_naming_the_request(vl, prompts, seed, n):
    """-1 would be read by vLLM as no seed (unseeded, silently); seed + n - 1 must fit a 63-bit generator seed."""
    reqs = [RolloutRequest(prompts[0]), RolloutRequest(prompts[1], n=n, seed=seed)]
    with pytest.raises(ValueError, match=r"RolloutRequest 1: RolloutRequest\.seed"):
        hf_engine(vl).generate(reqs, SamplingParams(max_tokens=2))


def test_largest_request_seed_samples_and_numpy_seeds_sample_as_python_ints(vl, prompts):
    out = hf_engine(vl).generate([RolloutRequest(prompts[0], n=3, seed=2**63 - 3)], SamplingParams(max_tokens=2))
    assert [len(c.token_ids) for c in out[0]] == [2, 2, 2]
    params = SamplingParams(max_tokens=4)
    assert _tokens(vl, [RolloutRequest(prompts[0], n=2, seed=np.int64(7))], 64, params) == \
        _tokens(vl, [RolloutRequest(prompts[0], n=2, seed=7)], 64, params)


def test_item_seed_is_reproducible_distinct_and_leaves_room_for_the_samples():
    seeds = [item_seed(s, i) for s in (-2, 0, 1, 2**64 - 1) for i in range(50)]
    assert len(set(seeds)) == len(seeds) and all(0 <= s < 2**62 for s in seeds)
    assert item_seed(1, 7) == item_seed(1, 7)
    # one item's sample range (seed .. seed + 63) does not meet another's
    ranges = sorted(seeds)
    assert min(b - a for a, b in zip(ranges, ranges[1:])) > 64
    assert item_seeds(1, range(3), 0.0) == [None] * 3  # greedy: requests carry no seed
    assert item_seeds(1, [4, 0], 0.7) == [item_seed(1, 4), item_seed(1, 0)]
    for bad in (-1, True, 1.0):
        with pytest.raises(ValueError, match="item_seed index"):
            item_seed(0, bad)


# -- the evaluations ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def heldout():
    from mmevo.data.synthetic import split_train_heldout

    _, ex = split_train_heldout(0, 5, seed=4)
    return ex


@pytest.fixture(scope="module")
def prompt_cache(vl):
    from mmevo.grpo.trainer import PromptCache

    return PromptCache(vl.processor, vl.is_vl, "none", None, 64)


class _Recording:
    """A real engine, with the requests of each call kept (to see which seeds they carried)."""

    def __init__(self, engine):
        self.engine, self.calls = engine, []

    def generate(self, requests, params):
        self.calls.append(list(requests))
        return self.engine.generate(requests, params)


def test_heldout_records_depend_on_the_item_index_not_the_batching_or_order(vl, heldout, prompt_cache):
    from mmevo.grpo.trainer import eval_records

    def responses(examples, max_batch_seqs, indices=None, temperature=1.0):
        recs = eval_records(hf_engine(vl, max_batch_seqs=max_batch_seqs), prompt_cache, examples, vl.tokenizer, 8,
                            temperature, seed=3, indices=indices)
        return [r["response"] for r in recs]

    whole = responses(heldout, 64)
    assert len(set(whole)) > 1
    assert responses(heldout, 1) == whole
    # rank 1 of 2: items 1 and 3 (their indices in the whole set) sample what they sample in one process
    assert responses(heldout[1::2], 64, indices=range(1, 5, 2)) == whole[1::2]
    assert responses([heldout[2], heldout[0], heldout[1]], 2, indices=[2, 0, 1]) == [whole[2], whole[0], whole[1]]
    with pytest.raises(ValueError, match="2 indices for 5 examples"):
        responses(heldout, 64, indices=[0, 1])
    # greedy: no request seeds, the same responses as before
    rec = _Recording(hf_engine(vl))
    greedy = eval_records(rec, prompt_cache, heldout, vl.tokenizer, 8, 0.0, seed=3)
    assert all(r.seed is None for r in rec.calls[0])
    assert [r["response"] for r in greedy] == responses(heldout, 1, temperature=0.0)


def test_sampled_records_do_not_depend_on_the_engine_batching(vl, heldout, prompt_cache):
    from mmevo.eval.sampled import sampled_records

    def records(max_batch_seqs):
        rec = _Recording(hf_engine(vl, max_batch_seqs=max_batch_seqs))
        out = sampled_records(rec, prompt_cache, heldout, vl.tokenizer, n=4, max_tokens=8, temperature=1.0, seed=9)
        assert [r.seed for r in rec.calls[0]] == [item_seed(9, i) for i in range(len(heldout))]
        return out

    a, b = records(64), records(3)  # 20 rows in one chunk vs 3-row chunks (requests split 3 + 1)
    assert [(r["correct"], r["sample"]) for r in a] == [(r["correct"], r["sample"]) for r in b]


def test_benchmark_sampled_answers_do_not_depend_on_batch_size_or_resume(tiny_vl_path, tmp_path):
    from datapaths import FIXTURES
    from mmevo.config import load_config
    from mmevo.eval.runner import run_benchmark

    def run(out, **over):
        args = {"model.path": tiny_vl_path, "eval.benchmark": "mathvision_testmini",
                "eval.data": FIXTURES / "mathvision", "eval.out_dir": out, "eval.max_tokens": 6,
                "trainer.progress": "false", "rollout.eval_temperature": 1.0, **over}
        run_benchmark(load_config(None, [f"{k}={v}" for k, v in args.items()]))
        return [json.loads(x)["response"] for x in (Path(out) / "responses.jsonl").read_text().splitlines()]

    by4 = run(tmp_path / "by4", **{"eval.batch_size": 4, "eval.limit": 5})
    assert len(set(by4)) > 1
    assert run(tmp_path / "by1", **{"eval.batch_size": 1, "eval.limit": 5}) == by4
    run(tmp_path / "resumed", **{"eval.batch_size": 4, "eval.limit": 2})  # interrupted after two items
    assert run(tmp_path / "resumed", **{"eval.batch_size": 4, "eval.limit": 5}) == by4


def test_calibration_samples_do_not_depend_on_the_engine_batching(tiny_text_path):
    from mmevo.config import load_config
    from mmevo.honest.calibration import calibration_heldout, generate_records

    def responses(max_batch_seqs):
        cfg = load_config(None, [f"model.path={tiny_text_path}", "data.heldout=honest_tasks", "data.n_heldout=3",
                                 "data.system_prompt=honest", f"rollout.max_batch_seqs={max_batch_seqs}",
                                 "trainer.progress=false"])
        held, _ = calibration_heldout(cfg)
        recs = generate_records(cfg, tiny_text_path, held[:3], samples=3, max_tokens=6, temperature=1.0)
        return [(r["id"], r["sample"], r["response"]) for r in recs]

    whole = responses(64)
    assert len({r for _, _, r in whole}) > 1
    assert responses(2) == whole  # 9 rows in one chunk vs 2-row chunks


def test_sample_categorical_row_uniforms():
    import torch

    from mmevo.rollout.hf import row_uniform_table, sample_categorical
    from mmevo.rollout.base import RolloutRequest

    w = torch.tensor([[1.0, 1.0, 1.0, 1.0]] * 3)
    # a seeded row's uniforms are its own generator's stream, drawn once for all steps
    table = row_uniform_table([RolloutRequest(None, n=1), RolloutRequest(None, n=1, seed=4),
                               RolloutRequest(None, n=1)], steps=3)
    assert torch.isnan(table[0]).all() and torch.isnan(table[2]).all()
    assert table[1].tolist() == [torch.rand((), generator=g).item()
                                 for g in [torch.Generator().manual_seed(4)] for _ in range(3)]
    assert row_uniform_table([RolloutRequest(None, n=2)], steps=3) is None
    # a row's draw comes from its own stream alone: the same token with or without neighbours
    alone = sample_categorical(w[:1], None, table[1:2, 0])
    mixed = sample_categorical(w, torch.Generator().manual_seed(0), table[:, 0])
    assert mixed[1] == alone[0]
    # its uniform is the generator's first: u = 0.X -> token floor(4 u)
    u = torch.rand((), generator=torch.Generator().manual_seed(4)).item()
    assert int(alone[0]) == int(4 * u)
    # the unseeded rows draw together from the call's generator, in row order
    shared = torch.rand(2, generator=torch.Generator().manual_seed(0))
    assert [int(mixed[0]), int(mixed[2])] == [int(4 * v) for v in shared.tolist()]
    with pytest.raises(ValueError, match=r"row_uniforms of shape \(1,\) for 3 rows"):
        sample_categorical(w, None, table[1:2, 0])
