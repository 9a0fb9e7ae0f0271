"""The parity scripts name a missing --data file and where it comes from (a fresh clone has no ../shared/data: they
ended in a FileNotFoundError traceback from deep inside the row loader)."""
import importlib
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


@pytest.mark.parametrize("script, wanted", [("parity_mathvision", "MATH-V's test.jsonl or testmini.jsonl"),
                                            ("parity_mathvista", "MathVista's testmini.json")])
def test_missing_data_file_is_named_with_its_source(script, wanted, tmp_path):
    sys.path.insert(0, str(SCRIPTS))
    try:
        module = importlib.import_module(script)
    finally:
        sys.path.remove(str(SCRIPTS))
    missing = tmp_path / "absent.json"
    with pytest.raises(SystemExit) as e:
        module.main(["--data", str(missing), "--rows", "1"])
    message = str(e.value)
    assert message.startswith(f"--data {missing}: no such file; give {wanted}")
    assert "shared/data" in message
