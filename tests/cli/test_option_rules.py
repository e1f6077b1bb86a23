"""Rules between options are one check each (``crc.protocol.rules``): ``crc simulate``, ``crc launch`` and
``crc node`` refuse the same combination with the same line and exit status 2, before any work."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from crc.cli.main import main
from crc.core.errors import CRCError, OptionConflict
from crc.protocol import SimulationConfig
from crc.protocol.rules import MAX_ROUNDS, check_secure_aggregation

NODE = ["node", "--bind", "tcp://127.0.0.1:7001", "--peers", "tcp://127.0.0.1:7002", "--data", "missing.csv",
        "--schema", "missing.json", "--out", "m.json"]
NEEDS_THE_MEAN = "--secure-aggregation needs --aggregate mean: a peer then sees only the sum of its neighbours' statistics"
NEEDS_KEYS = ("--secure-aggregation derives its masks from the peers' CURVE keys, so it needs the encrypted transport: "
              "drop --insecure")


def refusal(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 2, result.output
    return result.output.strip().splitlines()[-1]


@pytest.mark.parametrize("command", [["simulate"], ["launch"], [*NODE, "--insecure"]], ids=["simulate", "launch", "node"])
def test_secure_aggregation_with_another_aggregation_is_one_refusal_everywhere(command):
    assert refusal(*command, "--secure-aggregation", "--aggregate", "clipped") == f"Error: {NEEDS_THE_MEAN}"


@pytest.mark.parametrize("command", [["launch"], NODE], ids=["launch", "node"])
def test_secure_aggregation_without_the_encrypted_transport_is_one_refusal_everywhere(command):
    assert refusal(*command, "--secure-aggregation", "--insecure") == f"Error: {NEEDS_KEYS}"


NEEDS_SECURE_AGGREGATION = ("--dp-noise distributed needs --secure-aggregation: each peer adds only a share of the "
                            "noise, which adds up to the full noise only in the sum a recipient unmasks")


@pytest.mark.parametrize("command", [["simulate"], ["launch"], [*NODE, "--insecure"]], ids=["simulate", "launch", "node"])
def test_distributed_noise_without_secure_aggregation_is_one_refusal_everywhere(command):
    distributed = ["--dp-epsilon", "4", "--dp-noise", "distributed", "--classifier", "aggregate"]
    assert refusal(*command, *distributed) == f"Error: {NEEDS_SECURE_AGGREGATION}"


def test_the_rule_itself():
    check_secure_aggregation(secure_aggregation=False, aggregate="clipped", encrypted_transport=False)
    check_secure_aggregation(secure_aggregation=True, aggregate="mean")
    with pytest.raises(OptionConflict, match="needs --aggregate mean"):
        check_secure_aggregation(secure_aggregation=True, aggregate="clipped")
    with pytest.raises(OptionConflict, match="drop --insecure"):
        check_secure_aggregation(secure_aggregation=True, aggregate="mean", encrypted_transport=False)
    with pytest.raises(OptionConflict, match="needs --secure-aggregation"):
        check_secure_aggregation(secure_aggregation=False, aggregate="mean", dp_noise="distributed")


@pytest.mark.parametrize("command", [["simulate"], ["launch"], NODE], ids=["simulate", "launch", "node"])
def test_rounds_beyond_the_most_a_run_may_take_are_one_refusal_everywhere(command):
    """A round number of 21 digits went into the checkpoint's header, which the peer could then not read back."""
    line = refusal(*command, "--rounds", "100000000000000000000")
    assert line == f"Error: Invalid value for '--rounds': 100000000000000000000 is not in the range 1<=x<={MAX_ROUNDS}."
    with pytest.raises(CRCError, match=f"--rounds must be between 1 and {MAX_ROUNDS}, got {MAX_ROUNDS + 1}"):
        SimulationConfig(rounds=MAX_ROUNDS + 1, algorithm="paper").validate()


@pytest.mark.parametrize("command", [["simulate"], ["launch"], [*NODE, "--insecure"]], ids=["simulate", "launch", "node"])
@pytest.mark.parametrize("given, refused", [
    (["--clip", "3"], "--clip needs --dp-epsilon: a run without it ignores --clip"),
    (["--dp-delta", "1e-6"], "--dp-delta needs --dp-epsilon: a run without it ignores --dp-delta"),
    (["--colluders", "1"], "--colluders needs --secure-aggregation: a run without it ignores --colluders"),
    (["--dp-colluders", "1"], "--colluders needs --secure-aggregation: a run without it ignores --colluders"),
    (["--dp-epsilon", "4", "--dp-dropouts", "1"], "--dp-dropouts needs --dp-noise distributed: a run without it ignores "
                                                  "--dp-dropouts"),
])
def test_a_privacy_setting_the_run_would_ignore_is_one_refusal_everywhere(command, given, refused):
    """A newcomer's --clip without --dp-epsilon clipped nothing, and said nothing."""
    assert refusal(*command, *given) == f"Error: {refused}"


@pytest.mark.parametrize("given, refused", [
    (["--algorithm", "paper", "--dp-epsilon", "4", "--iters", "2"], "--dp-epsilon needs --iters 1 (got 2)"),
    (["--algorithm", "paper", "--dp-epsilon", "4", "--safeguard"], "--dp-epsilon cannot be combined with --safeguard"),
    (["--dp-epsilon", "4", "--aggregate", "robust"], "--dp-epsilon cannot be combined with --aggregate screened"),
    (["--algorithm", "paper", "--dp-epsilon", "4", "--secure-aggregation", "--dp-noise", "distributed"],
     "--dp-noise distributed needs --classifier aggregate"),
    (["--secure-aggregation", "--dp-noise", "distributed", "--classifier", "aggregate", "--algorithm", "paper"],
     "--dp-noise distributed needs --dp-epsilon"),
    (["--algorithm", "accelerated", "--momentum", "0.5"], "--exact-diffusion (part of --algorithm accelerated) cannot be "
                                                          "combined with --momentum"),
    (["--nodes", "4", "--byzantine", "4"], "--byzantine must be from 0 to nodes - 1 = 3, got 4"),
    (["--blocks", "blocks.json"], "--blocks needs a vertical or hybrid --partition"),
])
def test_options_each_valid_alone_that_cannot_go_together_are_a_usage_error(tmp_path, given, refused):
    """Such a combination ended with exit status 1, as bad data does, where the rules between options of
    ``crc.protocol.rules`` gave 2 (the command line reference: 2 for a malformed command line)."""
    (tmp_path / "blocks.json").write_text('{"blocks": [["x1"], ["x2"]]}')
    given = [str(tmp_path / arg) if arg == "blocks.json" else arg for arg in given]
    assert refusal("simulate", "--data", "twonorm", *given).startswith(f"Error: {refused}")


@pytest.mark.parametrize("given, refused", [
    ([], "--sum-over network needs --secure-aggregation"),
    (["--secure-aggregation", "--loss", "0.1"], "--sum-over network takes no --loss"),
    (["--secure-aggregation", "--period", "4"], "--sum-over network needs a static --topology"),
    (["--secure-aggregation", "--dp-epsilon", "4", "--dp-noise", "distributed", "--classifier", "aggregate",
      "--algorithm", "paper", "--dp-dropouts", "1"], "--sum-over network takes no --dp-dropouts"),
])
def test_a_network_sum_without_what_it_needs_is_one_refusal(given, refused):
    assert refusal("simulate", "--data", "twonorm", "--sum-over", "network", *given).startswith(f"Error: {refused}")


@pytest.mark.parametrize("option", ["--timeout", "--first-round-timeout", "--ess", "--lr"])
@pytest.mark.parametrize("value", ["nan", "inf", "1e400"])
def test_a_peer_s_numbers_must_be_finite(option, value):
    """click's ranges let nan and infinity through: --timeout nan ended in a traceback, --first-round-timeout nan and
    --timeout inf waited for a silent neighbour forever, --ess inf was refused only by the starting statistics."""
    assert refusal(*NODE, option, value).endswith(f"Invalid value for '{option}': {float(value)} is not a finite number.")
