"""tune's --seed is what optuna's sampler takes (0..2**32-1): a larger one is refused by the
command line in one line, before the tune writes anything."""

from __future__ import annotations

from suites.cli.main import main
from tests.unit.test_bad_input_corpus import REPO


def test_seed_beyond_32_bits_is_refused_before_anything_is_written(tmp_path, capsys):
    out = tmp_path / "tt"
    argv = ["tune", str(REPO / "configs/suites/smoke.toml"), "--allocator", "jemalloc",
            "--budget", "10m", "--out", str(out), "--seed", "99999999999999999999999"]  # fmt: skip
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "--seed" in err and "0..4294967295" in err and "Traceback" not in err
    assert not out.exists()
