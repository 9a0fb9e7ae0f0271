"""Prism review 5: bools / text read as numbers by the coverage reward's pure functions, the head's aux["p"], the
warm-start counts file and a saved head state; the diversity table's k and its -0.0 entropy."""

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from mmevo.rewards.prism import PrismCoverageHead, coverage_rewards, diversity_stats, ema_counts, load_init_counts, zpd

RARE = 1 + 5 * math.exp(-1)  # 1 + lam exp(-n_c / mean n) with every count equal


def _sample(**aux):
    return SimpleNamespace(aux=aux, role="maternal")


@pytest.mark.parametrize("call", [
    lambda: zpd([0.75, True]),  # zpd(True) = zpd(1.0) = 0, silently
    lambda: zpd(np.array([True])),
    lambda: coverage_rewards([True, False], [0, 1], [1.0, 1.0]),  # p = 1, 0: reward 0, silently
    lambda: coverage_rewards([0.75, True], [0, 1], [1.0, 1.0]),
])
def test_bool_agreements_are_refused_naming_p(call):
    with pytest.raises(ValueError, match="p must be a floating-point tensor of numbers, got bools"):
        call()


@pytest.mark.parametrize("counts", [[True, False], np.array([True, False]), torch.tensor([True, False])])
def test_bool_counts_are_refused(counts):
    # [True, False] read as counts [1, 0]: cluster 0's reward 1 + 5 exp(-2) = 1.677, silently
    with pytest.raises(ValueError, match="counts must be a float"):
        coverage_rewards([0.75], [0], counts)
    with pytest.raises(ValueError, match="counts must be a f"):
        ema_counts(counts, [0])


def test_text_or_none_agreements_are_named_value_errors():
    # were torch's ValueError "too many dimensions 'str'" and TypeError "must be real number, not NoneType"
    for p in (["0.75"], [None]):
        with pytest.raises(ValueError, match=r"p must be a floating-point tensor of numbers, got \["):
            coverage_rewards(p, [0], [1.0])
    with pytest.raises(ValueError, match=r"counts must be a floating-point tensor of numbers, got \['1'\]"):
        coverage_rewards([0.75], [0], ["1"])


def test_valid_must_be_a_bool_mask():
    # a list of 0 / 1 was cast to bool, silently (2 read as True)
    with pytest.raises(ValueError, match="valid must be a bool"):
        coverage_rewards([0.75, 0.75], [0, 1], [1.0, 1.0], valid=[1, 0])
    got = coverage_rewards([0.75, 0.75], [0, -1], [1.0, 1.0], valid=[True, False]).tolist()
    assert got == pytest.approx([RARE, -1.0], abs=1e-15)
    got = coverage_rewards([0.75, 0.75], [0, -1], [1.0, 1.0], valid=np.array([True, False])).tolist()
    assert got == pytest.approx([RARE, -1.0], abs=1e-15)
    assert coverage_rewards([], [], [1.0], valid=[]).tolist() == []


@pytest.mark.parametrize("p", ["0.75", "abc", 1j, [0.75], np.array([0.75]), torch.tensor([0.75]), np.True_])
def test_head_refuses_an_aux_p_that_is_no_number(p):
    # "0.75" and the one-element array / tensor scored as p = 0.75 (2.839), silently; "abc", 1j and [0.75] failed with
    # float()'s message, naming neither the sample nor aux['p']
    head = PrismCoverageHead(centroids="", k=4)
    with pytest.raises(ValueError, match=r"sample 1: aux\['p'\]=.* is not a number"):
        head.score([_sample(question="a", p=0.5, cluster=0), _sample(question="b", p=p, cluster=1)])
    assert head.counts.tolist() == [1.0] * 4 and head.steps == 0  # nothing was counted


@pytest.mark.parametrize("p", [0.75, np.float32(0.75), torch.tensor(0.75), np.array(0.75)])
def test_head_reads_numbers_and_zero_dim_agreements(p):
    head = PrismCoverageHead(centroids="", k=4)
    r, _ = head.score([_sample(question="q", p=p, cluster=2)])
    assert r.tolist() == pytest.approx([RARE], rel=1e-7)
    assert head.counts.tolist() == pytest.approx([0.99, 0.99, 1.0, 0.99], abs=1e-15)


@pytest.mark.parametrize("content,match", [
    ([True, False, True], "count 0 is True, not a number"),  # read as counts 1, 0, 1
    (["1", "2", "0.5"], "count 0 is '1', not a number"),  # read as 1, 2, 0.5
    ({"counts": [1, None, 2]}, "count 1 is None, not a number"),  # said "count 1 is nan"
    (3.0, "holds no list of 3 counts"),
])
def test_init_counts_json_of_no_numbers_is_refused_naming_the_file(tmp_path, content, match):
    f = tmp_path / "counts.json"
    f.write_text(json.dumps(content))
    with pytest.raises(ValueError, match=match) as e:
        load_init_counts(str(f), 3)
    assert str(f) in str(e.value)


def test_init_counts_npy_of_bools_is_refused_and_of_ints_read(tmp_path):
    f = tmp_path / "counts.npy"
    np.save(f, np.array([True, False, True]))
    with pytest.raises(ValueError, match="holds a bool array, not numbers"):
        load_init_counts(str(f), 3)
    np.save(f, np.array([3, 0, 1]))
    assert load_init_counts(str(f), 3).tolist() == [3.0, 0.0, 1.0]


@pytest.mark.parametrize("state,match", [
    ({"counts": [float("nan"), 1, 1]}, "saved count 0 is nan"),
    ({"counts": [1, -1, 1]}, "saved count 1 is -1.0"),
    ({"counts": [1, 1, float("inf")]}, "saved count 2 is inf"),
    ({"counts": [True, 1, 1]}, "hold bools"),
    ({"counts": torch.tensor([True, True, True])}, "hold bools"),
    ({"counts": ["1", 1, 1]}, "not numbers"),
    ({"steps": 3}, "has no 'counts'"),
])
def test_head_refuses_a_saved_state_with_bad_counts(state, match):
    # NaN / inf / negative counts were loaded and failed at the next step's reward with a message naming no saved
    # state; bools loaded as 1; a state without counts was a KeyError
    head = PrismCoverageHead(centroids="", k=3)
    with pytest.raises(ValueError, match=match):
        head.load_state_dict(state)
    assert head.counts.tolist() == [1.0, 1.0, 1.0]
    head.load_state_dict({"counts": [0.5, 2.0, 0.5], "steps": 4})  # a good state still loads
    r, _ = head.score([_sample(question="q", p=0.75, cluster=1)])
    assert r.tolist() == pytest.approx([1 + 5 * math.exp(-2.0)], rel=1e-7)  # n_c / mean n = 2 / 1


@pytest.mark.parametrize("k", [float("nan"), float("inf"), "4", None, True])
def test_diversity_stats_names_a_k_of_no_integer(k):
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        diversity_stats([0, 1], k)


def test_diversity_entropy_of_one_active_cluster_is_plus_zero():
    stats = diversity_stats([3] * 10, 10)
    assert stats["normalized_entropy"] == 0.0 and math.copysign(1.0, stats["normalized_entropy"]) == 1.0
    assert "-0.0" not in json.dumps(stats)
    assert stats["gini"] == pytest.approx(0.9, abs=1e-15) and stats["top10_share"] == 1.0


# -- a non-finite question embedding at run time names the sample and the question -------------------------------
@pytest.fixture(scope="module")
def nan_encoder(tmp_path_factory):
    """A 1-layer random BERT whose word "broken" embeds to NaN (as an embedder with damaged weights would), and
    centroids of its dimension recorded as built with it."""
    import mmevo  # noqa: F401  (torchvision shim before transformers)
    from transformers import BertConfig, BertModel, BertTokenizer

    from mmevo.prism.clusters import save_centroids

    d = tmp_path_factory.mktemp("enc") / "nan-bert"
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "what", "is", "two", "plus", "three", "broken", "?"]
    tok = BertTokenizer(vocab={w: i for i, w in enumerate(vocab)})
    tok.save_pretrained(d)
    torch.manual_seed(0)
    model = BertModel(BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=32, max_position_embeddings=32))
    with torch.no_grad():
        model.embeddings.word_embeddings.weight[vocab.index("broken")] = float("nan")
    model.save_pretrained(d)
    centroids = torch.nn.functional.normalize(torch.randn(3, 16, generator=torch.Generator().manual_seed(1)), dim=1)
    npy, _ = save_centroids(d.parent / "centroids.npy", centroids.numpy(), {"embedder": "nan-bert"})
    return d, npy


def test_head_names_the_sample_whose_question_embeds_to_nan(nan_encoder):
    # assign_clusters said "embeddings row 0", the row among the questions to embed: sample 2 here
    enc, npy = nan_encoder
    head = PrismCoverageHead(centroids=str(npy), embedder=str(enc))
    samples = [_sample(question="what is two plus three ?", p=0.75, cluster=1), _sample(question=None),
               _sample(question="what is broken ?", p=0.75)]
    with pytest.raises(ValueError, match=r"'nan-bert' .*non-finite embedding for 1 of 1 questions, the first "
                                         r"sample 2: 'what is broken \?'"):
        head.score(samples)
    r, _ = head.score([samples[0], _sample(question="what is two plus three ?", p=0.5)])
    assert r.tolist() == pytest.approx([RARE, 0.375 * RARE], rel=1e-7)  # a finite one is assigned


def test_loop_assigner_names_the_question_that_embeds_to_nan(nan_encoder):
    from mmevo.evolve.prism import ClusterAssigner

    enc, npy = nan_encoder
    assign = ClusterAssigner(str(npy), str(enc))
    with pytest.raises(ValueError, match=r"non-finite embedding for 1 of 2 questions, the first question 1: 'what is "
                                         r"broken \?'"):
        assign(["what is two plus three ?", "what is broken ?"])
    assert len(assign(["what is two plus three ?"])) == 1 and assign([]) == []


@pytest.mark.parametrize("copy_of_0", [[2.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
def test_load_centroids_refuses_two_centroids_of_one_direction(tmp_path, copy_of_0):
    # row 2 (a copy or a scaled copy of row 0) was loaded: assignment never picked cluster 2, a dead cluster that
    # still counted in the mean count and the diversity tables' K
    from mmevo.prism.clusters import assign_clusters, load_centroids, save_centroids

    rows = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], copy_of_0, [0.0, 0.0, 1.0]], dtype=np.float32)
    npy, _ = save_centroids(tmp_path / "centroids.npy", rows, {"embedder": "e"})
    with pytest.raises(ValueError, match="centroids 0 and 2 point the same way"):
        load_centroids(npy)
    rows[2] = [0.6, 0.8, 0.0]  # a distinct direction loads, and its cluster is reachable
    npy, _ = save_centroids(tmp_path / "centroids.npy", rows, {"embedder": "e"})
    c, _ = load_centroids(npy)
    assert assign_clusters(torch.tensor([[0.6, 0.8, 0.0], [1.0, 0.1, 0.0]]), c).tolist() == [2, 0]


def test_a_fraction_lam_or_gamma_is_read_as_its_value():
    # is_real_number accepts a Fraction; the reward then failed with TypeError (Fraction * Tensor)
    from fractions import Fraction

    assert coverage_rewards([0.75], [0], [1.0, 3.0], lam=Fraction(5)).tolist() == pytest.approx(
        [1 + 5 * math.exp(-0.5)], abs=1e-15)  # n_c / mean n = 1 / 2
    assert ema_counts([1.0, 1.0], [1], Fraction(3, 4)).tolist() == [0.75, 1.0]
