"""Tests for mmevo.csrs.retrace: anchor points of the Retracing Re-inference Mechanism (Eq. 6)."""

import random
from fractions import Fraction

import pytest
import torch

from mmevo.csrs.retrace import anchor_position, anchor_prefixes, sample_omegas


@pytest.mark.parametrize(
    "length, omega, expected",
    [
        (10, 0.7, 7),  # the exact binary value of 0.7 is below 0.7: read as that value, 10 * it floors to 6
        (90, 0.7, 63),  # the double product 0.7 * 90 is 62.99999999999999: floor(float) would give 62
        (20, 0.7, 14),
        (10, 0.3, 3),
        (30, 0.1, 3),
        (3, 0.7, 2),
        (137, 0.7, 95),  # 95.9
        (100, 0.7, 70),
        (1000, 0.9, 900),
        (10, 0.5, 5),
        (0, 0.7, 0),
        (1, 0.7, 0),
        (2, 0.7, 1),
        (137, 1.0, 137),
        (1, 1, 1),
        (137, 0.0, 0),
        (0, 0, 0),
        (10, Fraction(7, 10), 7),
    ],
)
def test_anchor_position(length, omega, expected):
    assert anchor_position(length, omega) == expected


def test_anchor_position_exact_for_many_decimals():
    for tenths in range(11):
        w = tenths / 10
        for length in range(0, 200):
            assert anchor_position(length, w) == (tenths * length) // 10


@pytest.mark.parametrize("omega", [-0.1, 1.0001, float("nan"), float("inf"), "x", True])
def test_anchor_position_rejects_bad_omega(omega):
    with pytest.raises(ValueError):
        anchor_position(10, omega)


def test_anchor_position_rejects_bad_length():
    with pytest.raises(ValueError):
        anchor_position(-1, 0.5)
    with pytest.raises(ValueError):
        anchor_position(2.5, 0.5)


def test_sample_omegas_fixed():
    assert sample_omegas(4, 0.7, False, random.Random(0)) == [0.7] * 4
    assert sample_omegas(0, 0.7, False, random.Random(0)) == []


def test_sample_omegas_random_seeded_and_open_interval():
    a = sample_omegas(500, 0.7, True, random.Random(123))
    b = sample_omegas(500, 0.7, True, random.Random(123))
    c = sample_omegas(500, 0.7, True, random.Random(124))
    assert a == b and a != c
    assert all(0.0 < w < 1.0 for w in a)
    assert len(set(a)) == 500  # independent draws, not one copied value
    assert 0.4 < sum(a) / len(a) < 0.6


def test_sample_omegas_validates():
    with pytest.raises(ValueError):
        sample_omegas(-1, 0.7, False, random.Random(0))
    with pytest.raises(ValueError):
        sample_omegas(2, 1.5, False, random.Random(0))


def test_prefixes_cut_at_own_length_not_padded():
    r10, r20 = list(range(100, 110)), list(range(200, 220))
    out = anchor_prefixes([r10, r20], [0.7, 0.7])
    assert out == [r10[:7], r20[:14]]
    assert [len(p) for p in out] == [7, 14]


def test_prefixes_per_response_omegas_and_tensors():
    out = anchor_prefixes([torch.arange(10), (1, 2, 3)], [0.3, 1.0])
    assert out == [[0, 1, 2], [1, 2, 3]]
    assert all(type(t) is int for t in out[0])


def test_prefixes_strip_trailing_stop_tokens():
    EOS, PAD = 99, 0
    resp = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, EOS, PAD, PAD]  # 10 content tokens
    assert anchor_prefixes([resp], [0.7], strip_ids={EOS, PAD}) == [resp[:7]]
    # omega = 1 keeps the content only, never the stop token
    assert anchor_prefixes([resp], [1.0], strip_ids=[EOS, PAD]) == [resp[:10]]
    # without strip_ids the stop/pad tokens count in the length: floor(0.7 * 13) = 9
    assert anchor_prefixes([resp], [0.7]) == [resp[:9]]
    # only TRAILING tokens are stripped; an inner EOS id stays
    assert anchor_prefixes([[1, EOS, 2, EOS]], [1.0], strip_ids={EOS}) == [[1, EOS, 2]]
    assert anchor_prefixes([[EOS, EOS]], [1.0], strip_ids={EOS}) == [[]]


def test_prefixes_length_mismatch():
    with pytest.raises(ValueError):
        anchor_prefixes([[1, 2]], [0.5, 0.5])
