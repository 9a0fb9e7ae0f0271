"""Defects a README walk-through found in the command line: `render -o x.jpg`, another loop's section overridden on
an evolve command line, a one-slash model.path typo tried on the hub, the resume warning's formatting."""

import pytest

from mmevo.cli import main

PLOT = "import matplotlib.pyplot as plt\nplt.plot([0, 1], [1, 0])\n"


@pytest.mark.parametrize("name", ["x.jpg", "x.jpeg", "x.webp", "x", "x.png.gif"])
def test_render_refuses_an_output_that_is_not_png(tmp_path, capsys, name):
    # the sandbox returns PNG bytes: `-o x.jpg` wrote them under a JPEG name
    src = tmp_path / "plot.py"
    src.write_text(PLOT)
    with pytest.raises(SystemExit) as e:
        main(["render", str(src), "-o", str(tmp_path / name)])
    assert e.value.code == 2
    assert f"-o {tmp_path / name}: the render is a PNG image; give a path ending in .png" in capsys.readouterr().err
    assert not (tmp_path / name).exists()


def test_render_takes_a_png_suffix_in_any_case(tmp_path):
    src = tmp_path / "plot.py"
    src.write_text(PLOT)
    out = tmp_path / "X.PNG"
    assert main(["render", str(src), "-o", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# -- an override of another loop's section on an evolve command line ------------------------------------------------
# each call also points the command's own output at a file, so that a command that took the stray key (the old code)
# stops at that check, in seconds, instead of running its loop
@pytest.mark.parametrize("argv, key, section", [
    (["evolve", "mmzero", "configs/mmzero_tiny.yaml", "prism.roles.solver={trainer.lr: 1e-6}"],
     "prism.roles.solver", "prism"),
    (["evolve", "mmzero", "configs/mmzero_tiny.yaml", "honest.gss_mode=stub"], "honest.gss_mode", "honest"),
    (["evolve", "prism", "configs/prism_tiny.yaml", "mmzero.phase_steps=3"], "mmzero.phase_steps", "mmzero"),
    (["evolve", "prism", "configs/prism_tiny.yaml", "mmzero={phase_steps: 3}"], "mmzero", "mmzero"),
    (["evolve", "honest", "configs/honest_tiny.yaml", "prism.solver_steps=2"], "prism.solver_steps", "prism"),
    (["evolve", "honest", "configs/honest_tiny.yaml", "mmzero.roles.solver={trainer.lr: 1e-6}"],
     "mmzero.roles.solver", "mmzero"),
    (["prism", "build-clusters", "configs/prism_tiny.yaml", "honest.roles.solver={trainer.lr: 1e-6}"],
     "honest.roles.solver", "honest"),
])
def test_evolve_refuses_another_loops_key_on_the_command_line(tmp_path, capsys, argv, key, section):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    own = argv[1] if argv[0] == "evolve" else "prism"
    own_out = f"{own}.output_dir={blocker}" if argv[0] == "evolve" else f"prism.centroids={blocker}/c.npy"
    assert main([*argv, own_out]) == 2
    err = capsys.readouterr().err
    assert f"{key}: set on the command line, but it belongs to the {section} loop" in err
    assert f"`mmevo {' '.join(argv[:2]) if argv[0] == 'evolve' else 'prism build-clusters'}` would ignore it" in err


def test_evolve_keeps_its_own_and_shared_keys_on_the_command_line(tmp_path, capsys):
    # its own section, and honest.* keys other loops' data reads (honest.domains): not refused as another loop's
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    for argv in (["evolve", "prism", "configs/prism_tiny.yaml", "prism.solver_steps=2"],
                 ["evolve", "mmzero", "configs/mmzero_tiny.yaml", "honest.min_difficulty=2"],
                 ["evolve", "honest", "configs/honest_tiny.yaml", "honest.gss_blocks=1"]):
        assert main([*argv, f"{argv[1]}.output_dir={blocker}"]) == 2
        err = capsys.readouterr().err
        assert "belongs to the" not in err and f"{argv[1]}.output_dir={blocker}: cannot be" in err, err
