"""``model.cpu_malloc`` changes glibc's allocator thresholds only (speed and resident memory, the same numbers), so
resuming or rerunning a run under another value is no change of settings, as ``trainer.threads`` is not; the CPU
linear kernel (``model.cpu_linear``, another rounding) still is."""

import pytest

from mmevo.config import ConfigError, load_config, to_dict
from mmevo.demo import _changed_keys
from mmevo.evolve.rerun import check_rerun_config
from mmevo.grpo.sft import sft_config_changes
from mmevo.grpo.trainer import resume_config_changes


def _cfg(*overrides):
    return load_config(None, list(overrides))


def test_resume_and_rerun_checks_let_cpu_malloc_change():
    saved = to_dict(_cfg("model.cpu_malloc=auto"))
    for now in ("system", "keep"):
        cfg = _cfg(f"model.cpu_malloc={now}")
        assert resume_config_changes(saved, to_dict(cfg)) == []  # GRPO resume (and the evolve loops' reruns)
        assert sft_config_changes(saved, cfg) == []  # an interrupted SFT's state
        assert _changed_keys(saved, cfg) == []  # the demo's interrupted / finished runs


def test_cpu_linear_still_counts_as_a_change():
    saved = to_dict(_cfg("model.cpu_linear=onednn"))
    cfg = _cfg("model.cpu_linear=torch")
    assert resume_config_changes(saved, to_dict(cfg)) == ["model.cpu_linear"]
    assert sft_config_changes(saved, cfg) == ["model.cpu_linear"]
    assert _changed_keys(saved, cfg) == ["model.cpu_linear"]


def test_evolve_rerun_with_another_cpu_malloc_is_accepted(tmp_path):
    check_rerun_config(tmp_path, _cfg("model.cpu_malloc=keep"), "trainer", frozenset())
    check_rerun_config(tmp_path, _cfg("model.cpu_malloc=system"), "trainer", frozenset())  # no ConfigError
    with pytest.raises(ConfigError, match="model.cpu_linear"):
        check_rerun_config(tmp_path, _cfg("model.cpu_linear=torch"), "trainer", frozenset())
