"""``specbound check-sampler MODULE:FUNCTION --protocol ...``: exit 0 pass, 1 fail, 2 usage.

The passing runs check correct reference samplers at false-failure rate 1e-3 per check (four
checks: at most 4e-3 together); the failing one is a sampler off by TV 0.04.
"""

from __future__ import annotations

import pytest

from specbound.cli import main


def _run(capsys, *argv):
    code = main(["check-sampler", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_correct_batch_sampler_passes(capsys):
    code, out, err = _run(capsys, "specbound.testing.gallery:sd_batch", "--protocol", "batch")
    assert code == 0, out + err
    assert out.count("passed") == 2 and "check_lossless" in out and "check_acceptance" in out


def test_a_buggy_sampler_fails_with_exit_1(capsys):
    code, out, _ = _run(capsys, "specbound.testing.gallery:resample_from_p", "--protocol",
                        "batch")
    assert code == 1 and "FAILED" in out and "failing: token" in out


@pytest.mark.parametrize(("target", "protocol", "extra"), [
    ("specbound.testing.gallery:sd_block", "block", ["--n", "3000", "--L", "2"]),
    ("specbound.testing.gallery:race_keyed", "keyed", ["--n", "1500"]),
])
def test_block_and_keyed_protocols(capsys, target, protocol, extra):
    code, out, err = _run(capsys, target, "--protocol", protocol, *extra)
    assert code == 0, out + err


def test_a_sampler_with_bad_output_fails_naming_the_call(capsys):
    code, out, _ = _run(capsys, "specbound.testing.gallery:sd_step", "--protocol", "batch",
                        "--n", "200")
    assert code == 1 and out.startswith("check FAILED: sampler: ")


@pytest.mark.parametrize("argv", [
    ["nosuchmodule_xyz:f", "--protocol", "step"],
    ["specbound.testing.gallery", "--protocol", "step"],
    ["specbound.testing.gallery:nothing", "--protocol", "step"],
    ["specbound.testing.gallery:GALLERY", "--protocol", "step"],
    ["specbound.testing.gallery:sd_step"],
    ["specbound.testing.gallery:sd_step", "--protocol", "tree"],
    ["specbound.testing.gallery:sd_step", "--protocol", "step", "--n", "5"],
    ["specbound.testing.gallery:sd_step", "--protocol", "step", "--false-failure-rate", "0"],
])
def test_usage_errors_exit_2_with_one_line(capsys, argv):
    code, out, err = _run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("specbound check-sampler: error: ")
