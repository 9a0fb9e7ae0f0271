"""Review 11 of today's changes: ``reward.head_args`` overrides for a head named by its import path, per-kind held-out
accuracy with kinds that are not text, and a held-out set whose every prompt is over ``data.max_prompt_length``."""

import json
import textwrap

import pytest

from mmevo.config import ConfigError, load_config
from mmevo.grpo.trainer import head_arguments
from mmevo.rewards.heads import RewardMixer, ScoredSample

HEAD_MODULE = """
import torch


class Coverage:
    name = "coverage"

    def __init__(self, alpha=1.0):
        self.alpha = float(alpha)

    def score(self, samples):
        return torch.full((len(samples),), self.alpha), {}
"""


@pytest.fixture
def import_path_head(tmp_path, monkeypatch):
    pkg = tmp_path / "rev11pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "heads.py").write_text(textwrap.dedent(HEAD_MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    return "rev11pkg.heads:Coverage"


@pytest.mark.parametrize("head", ["rev11pkg.heads:Coverage", "rev11pkg.heads.Coverage"])
def test_head_args_override_of_a_head_named_by_import_path_matches_the_yaml_file(import_path_head, tmp_path, head):
    """``reward.heads.<import path>=W`` became one head today, but ``reward.head_args.<import path>.alpha=2`` still
    split the path on its dots: head_args {'rev11pkg': {'heads:Coverage': {'alpha': 2}}}, refused as a head 'rev11pkg'
    not in reward.heads, while the same setting in a YAML file worked."""
    yaml_file = tmp_path / "c.yaml"
    yaml_file.write_text(f"reward:\n  heads: {{{head}: 0.5}}\n  head_args: {{{head}: {{alpha: 2.0}}}}\n")
    from_file = load_config(str(yaml_file), [])
    from_overrides = load_config(None, [f"reward.heads={{{head}: 0.5}}", f"reward.head_args.{head}.alpha=2.0"])
    assert from_overrides.reward.head_args == from_file.reward.head_args == {head: {"alpha": 2.0}}
    mixer = RewardMixer(from_overrides.reward.heads, head_arguments(from_overrides))
    total, _ = mixer([ScoredSample(response="r", group_id=0, gold="1", choices=None)])
    assert total.tolist() == [1.0]  # 0.5 x alpha 2
    # a path with ':' also before its head is set (the ':' ends the module part); a whole mapping for the head
    if ":" in head:
        either = load_config(None, [f"reward.head_args.{head}.alpha=3", f"reward.heads.{head}=1"])
        assert either.reward.head_args == {head: {"alpha": 3}}
    whole = load_config(None, [f"reward.heads.{head}=1", f"reward.head_args.{head}={{alpha: 4}}"])
    assert whole.reward.head_args == {head: {"alpha": 4}}


def test_head_args_override_of_registered_heads_is_unchanged():
    cfg = load_config(None, ["reward.heads.format=0.5", "reward.head_args.format.x=1"])
    assert cfg.reward.head_args == {"format": {"x": 1}}
    with pytest.raises(ConfigError, match=r"names \['fromat'\]"):
        load_config(None, ["reward.head_args.fromat.x=1"])


HELDOUT = [
    {"problem": "What is 1+1?", "answer": "2", "meta": {"kind": None}},
    {"problem": "What is 2+2?", "answer": "4", "meta": {"kind": "arith"}},
    {"problem": "What is 3+3?", "answer": "6", "meta": {"kind": 7}},
    {"problem": "What is 4+4?", "answer": "8"},
]


def _heldout_cfg(model, tmp_path, *over):
    path = tmp_path / "heldout.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in HELDOUT))
    return load_config(None, [f"model.path={model}", f"data.heldout={path}", f"data.train={path}",
                              "rollout.max_tokens=4", "trainer.steps=0", "trainer.progress=false",
                              f"trainer.output_dir={tmp_path / 'run'}", *over])


def test_heldout_kinds_that_are_not_text_are_scored(tiny_text_path, tmp_path):
    """A data file's meta.kind of null beside text kinds made summarize_eval's sorted() raise a bare TypeError
    ('<' not supported between 'str' and 'NoneType') after the whole set was generated, in `mmevo eval CONFIG`, in a
    training run's evaluation before it and in every trainer.eval_every step. Now kinds are text; none is "all"."""
    from mmevo import recipes
    from mmevo.grpo.trainer import eval_metrics

    got = recipes.run_eval(_heldout_cfg(tiny_text_path, tmp_path))
    assert got["n"] == 4 and set(got["by_kind"]) == {"all", "arith", "7"}
    assert {k for k in eval_metrics(got) if k.startswith("eval/by_kind/")} == \
        {"eval/by_kind/all", "eval/by_kind/arith", "eval/by_kind/7"}


def test_a_heldout_set_with_no_prompt_that_fits(tiny_text_path, tmp_path, capsys):
    """Every held-out prompt over data.max_prompt_length: `mmevo eval CONFIG` returned a summary without an accuracy
    (exit 0), and a training run ended with KeyError 'accuracy' on its "held-out accuracy before" line (on a resume:
    after training, before summary.json). Now the first is a clear error, the second says so and goes on."""
    from mmevo import recipes

    with pytest.raises(ValueError, match=r"all 4 prompts are over data.max_prompt_length=3"):
        recipes.run_eval(_heldout_cfg(tiny_text_path, tmp_path, "data.max_prompt_length=3"))
    summary = recipes.run_grpo(_heldout_cfg(tiny_text_path, tmp_path, "data.max_prompt_length=3"))
    assert summary["eval_before"] == summary["eval_after"] == {"skipped_overlong_prompts": 4, "samples": []}
    assert "held-out accuracy before GRPO: none: all 4 held-out prompts" in capsys.readouterr().out
    assert (tmp_path / "run" / "summary.json").exists()
