"""The solver never trains on a held-out calibration task: the SMC curriculum's generated tasks and the GSS stub's
unmutated draws reproduced held-out questions (28 of 3,000 curriculum draws with ``OVERLAP`` below; 3 of 2,000 stub
draws of the tiny config with ``honest.gss_stub_mutate_share=0``), so ``eval_after`` was partly measured on trained
tasks. Each producer now draws again, counted."""

import json
from pathlib import Path

from mmevo.config import load_config
from mmevo.honest.heldout import HeldoutGuard, HeldoutGuardSource
from mmevo.honest.loop import heldout_guard, role_config, solver_sources


def _solver_cfg(*extra):
    cfg = load_config("configs/honest_tiny.yaml", ["model.path=tiny-text", *extra])
    return cfg, role_config(cfg, "solver", Path("unused") / "solver", "tiny-text")


def _draw(source, steps, k=4):
    return [ex for _ in range(steps) for ex in source.take(k)]


# a curriculum cell without train tasks draws from the generator's "smc" stream; one task per stub draw unmutated
OVERLAP = ("data.n_train=1", "data.n_heldout=188", "honest.gss_stub_mutate_share=0")


def test_no_drawn_prompt_is_held_out_and_the_draws_again_are_counted():
    cfg, rc = _solver_cfg(*OVERLAP)
    held = heldout_guard(rc)
    _, source, _, _ = solver_sources(cfg, rc, Path("unused"))
    drawn = _draw(source, 750)
    assert len(drawn) == 3000
    assert not [ex.id for ex in drawn if held.holds(ex.problem)]
    assert source.heldout_overlap_skipped >= 20  # 28 curriculum + stub draws were held-out tasks before
    assert source.metrics() == source.base.metrics()  # the count is the trainer's metric, not the strategy's


def test_draws_stay_as_they_were_where_nothing_is_held_out():
    # the shipped tiny config: no overlap in 600 draws, so the guarded source hands out exactly the unguarded draws
    from mmevo.honest.selfplay import GSSMixSource, StubGenerator

    cfg, rc = _solver_cfg()
    _, source, _, train = solver_sources(cfg, rc, Path("unused"))
    guarded = [ex.id for ex in _draw(source, 150)]
    from mmevo.honest import build_honest_plugins

    h = cfg.honest
    seed = rc.trainer.seed * 1_000_003 + h.seed + 7
    _, base = build_honest_plugins(rc, train)
    plain = GSSMixSource(base, StubGenerator(h.domains, h.min_difficulty, h.max_difficulty, seed=seed,
                                             mutators=list(h.smc_mutators), mutate_share=h.gss_stub_mutate_share),
                         h.gss_share, seed=seed)
    assert source.heldout_overlap_skipped == 0
    assert guarded == [ex.id for ex in _draw(plain, 150)]


def test_the_count_and_the_position_survive_a_checkpoint():
    cfg, rc = _solver_cfg(*OVERLAP)
    _, source, _, _ = solver_sources(cfg, rc, Path("unused"))
    _draw(source, 200)
    state = json.loads(json.dumps(source.state_dict(), default=list))
    after = [ex.id for ex in _draw(source, 200)]
    _, resumed, _, _ = solver_sources(cfg, rc, Path("unused"))
    resumed.load_state_dict(state)
    assert resumed.heldout_overlap_skipped == state["heldout_skipped"] > 0
    assert [ex.id for ex in _draw(resumed, 200)] == after
    assert resumed.heldout_overlap_skipped == source.heldout_overlap_skipped


def test_a_held_out_prompt_from_an_unguarded_source_is_refused():
    from mmevo.data.prompts import EpochSampler
    from mmevo.honest.tasks import generate_task

    t = generate_task("arithmetic", 1)
    source = HeldoutGuardSource(EpochSampler([t.to_example()], 0), HeldoutGuard([t.question]))
    try:
        source.take(1)
    except ValueError as e:
        assert t.id in str(e) and "held-out" in str(e)
    else:
        raise AssertionError("a held-out prompt was handed out")


def test_a_run_reports_the_count_in_its_metrics_and_summary_and_a_resume_repeats_it(tiny_text_path, tmp_path):
    # every solver prompt from the unmutated stub over modular difficulty 1, of which 188 tasks are held out: steps
    # 3 and 4 draw held-out tasks (3, then 1), drawn again
    from mmevo.honest.loop import run_honest

    def cfg(out, blocks):
        return load_config("configs/honest_tiny.yaml", [
            f"model.path={tiny_text_path}", f"honest.output_dir={out}", "honest.warmup_sft=false",
            "honest.eval_calibration=false", "honest.domains=[modular]", "honest.max_difficulty=1", "data.n_train=2",
            "data.n_heldout=188", "honest.gss_share=1.0", "honest.gss_stub_mutate_share=0", "rollout.max_tokens=8",
            f"honest.gss_blocks={blocks}", "honest.gss_block_steps=2"])

    whole = run_honest(cfg(tmp_path / "whole", 2))
    rows = [json.loads(x) for x in (tmp_path / "whole" / "solver" / "metrics.jsonl").read_text().splitlines()]
    assert [r["data/heldout_overlap_skipped"] for r in rows] == [0, 0, 3, 4]
    assert whole["heldout_overlap_skipped"] == 4
    assert json.loads((tmp_path / "whole" / "summary.json").read_text())["heldout_overlap_skipped"] == 4
    # stopped after block 1 and run on: the same count, step by step
    run_honest(cfg(tmp_path / "split", 1))
    split = run_honest(cfg(tmp_path / "split", 2))
    again = [json.loads(x) for x in (tmp_path / "split" / "solver" / "metrics.jsonl").read_text().splitlines()]
    assert [r["data/heldout_overlap_skipped"] for r in again] == [0, 0, 3, 4] and split["heldout_overlap_skipped"] == 4
    assert [r["gss/stub_draws"] for r in again] == [r["gss/stub_draws"] for r in rows]


def test_a_seed_api_pool_item_without_an_expression_is_counted_not_silently_dropped():
    from mmevo.honest.seed_api import SelfMutatingCurriculum
    from mmevo.honest.curriculum import DifficultyController
    from mmevo.data.schema import Example
    from mmevo.honest.tasks import generate_task

    good = generate_task("logic", 2).to_example()
    bare = Example("no-expr", "Compute 2 + 2.", "4", [], [], meta={"domain": "arithmetic", "difficulty": 1})
    other = Example("gss-1", "Compute 1 + 1.", "2", [], [], meta={"domain": "gss", "expression": "1 + 1"})
    smc = SelfMutatingCurriculum(DifficultyController(["arithmetic", "logic"]), pool=[good, bare, other])
    assert smc.source.pool_size == 1 and smc.source.pool_skipped == 1  # the GSS row is no curriculum row at all
    assert smc.source.metrics()["curriculum/pool_skipped"] == 1.0
