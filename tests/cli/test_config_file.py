"""Settings from a TOML file (``--config``) under the command line, and ``--print-config``, for ``crc node`` and
``crc launch``: precedence, the round trip, bad keys and values, paths relative to the file, size limit."""

import json

import click
import pytest
from click.testing import CliRunner

from crc.cli.config_file import MAX_CONFIG_BYTES, ConfigFileCommand, configurable, toml_value
from crc.cli.main import main
from crc.cli.peer import node
from crc.nodes.keys import deployment_run_id
from crc.nodes.settings import PeerSettings
from support.toml import tomllib

ADDRESSES = "tcp://127.0.0.1:7100,tcp://127.0.0.1:7101,tcp://127.0.0.1:7102"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def settings(output: str) -> dict:
    """The settings a --print-config printed (it must be TOML)."""
    return tomllib.loads(output)


def error_lines(result) -> list[str]:
    return [line for line in result.output.splitlines() if line.startswith("Error")]


@pytest.fixture(scope="module")
def deploy(tmp_path_factory):
    """A trial deployment with peer-<i>.toml files, written by `crc split --keys-for`."""
    directory = tmp_path_factory.mktemp("deploy")
    result = run("split", "--data", "twonorm", "--nodes", "3", "--local-size", "20", "--test-size", "100",
                 "--out", directory, "--keys-for", ADDRESSES)
    assert result.exit_code == 0, result.output
    return directory


def test_split_writes_one_config_file_per_peer_that_crc_node_reads(deploy):
    for index, address in enumerate(ADDRESSES.split(",")):
        result = run("node", "--config", deploy / f"peer-{index}.toml", "--print-config")
        assert result.exit_code == 0, result.output
        got = settings(result.stdout)
        assert got["bind"] == address and got["peers"] == [a for a in ADDRESSES.split(",") if a != address]
        assert got["data"] == str(deploy / f"node-{index}.csv") and got["schema"] == str(deploy / "schema.json")
        assert got["secret-key"] == str(deploy / "keys" / f"node-{index}.key_secret")
        assert got["known-peers"] == str(deploy / f"known-peers-{index}.json")
        assert got["out"] == str(deploy / f"model-{index}.json") and got["checkpoint"] == str(deploy / f"checkpoint-{index}")
        assert got["run-id"] == deployment_run_id(deploy) != PeerSettings.run  # a run of its own: its keys are new


def test_split_says_each_node_files_size_without_a_range_that_reads_as_fifty_fifty(tmp_path):
    result = run("split", "--data", "twonorm", "--nodes", "3", "--local-size", "50", "--test-size", "100", "--out", tmp_path)
    assert result.exit_code == 0, result.output
    assert f"{tmp_path}: 3 node files (50 instances each, iid partition), test.csv (100 instances)" in result.output


def test_split_gives_peers_of_unequal_sizes_one_ess(tmp_path):
    """Each peer's default ESS is its local size / lr: peers of unequal sizes would refuse each other's statistics, so
    the files give every peer the run's (the simulator's ``ess_for``)."""
    result = run("split", "--data", "twonorm", "--nodes", "3", "--local-size", "40", "--size-skew", "1",
                 "--test-size", "100", "--out", tmp_path, "--keys-for", ADDRESSES)
    assert result.exit_code == 0, result.output
    sizes = {len((tmp_path / f"node-{index}.csv").read_text().splitlines()) - 1 for index in range(3)}
    assert len(sizes) > 1 and sum(sizes) > 0
    assert f"3 node files ({min(sizes)} to {max(sizes)} instances, iid partition)" in result.output
    given = {tomllib.loads((tmp_path / f"peer-{index}.toml").read_text())["ess"] for index in range(3)}
    assert given == {800.0}  # m / (lr n) = 120 / (0.05 x 3), written to 12 significant digits


def test_split_with_secure_aggregation_writes_the_neighbourhoods_its_peers_mask_with(tmp_path):
    """A newcomer adding --secure-aggregation to a split's peers got 'needs --neighbourhoods' and wrote the files by
    hand: for each neighbour, the address and key of every member of its neighbourhood."""
    result = run("split", "--data", "twonorm", "--nodes", "3", "--local-size", "20", "--test-size", "100",
                 "--out", tmp_path, "--keys-for", ADDRESSES, "--secure-aggregation")
    assert result.exit_code == 0, result.output
    addresses = ADDRESSES.split(",")
    keys = {a: (tmp_path / "keys" / f"node-{i}.key").read_text().split('public-key = "')[1].split('"')[0]
            for i, a in enumerate(addresses)}
    for index, address in enumerate(addresses):
        printed = run("node", "--config", tmp_path / f"peer-{index}.toml", "--print-config")
        assert printed.exit_code == 0, printed.output
        got = settings(printed.stdout)
        assert got["secure-aggregation"] is True and got["neighbourhoods"] == str(tmp_path / f"neighbourhoods-{index}.json")
        hoods = json.loads((tmp_path / f"neighbourhoods-{index}.json").read_text())
        assert hoods == {u: {w: keys[w] for w in addresses if w != u} for u in addresses if u != address}
    refused = run("split", "--data", "twonorm", "--nodes", "3", "--out", tmp_path / "no-keys", "--secure-aggregation")
    assert refused.exit_code == 2 and error_lines(refused) == ["Error: --secure-aggregation is for --keys-for"]


def test_the_command_line_overrides_the_file_which_overrides_the_defaults(deploy, tmp_path):
    config = tmp_path / "peer.toml"
    config.write_text((deploy / "peer-0.toml").read_text() + "timeout = 5\nrounds = 7\nmodel = \"qda\"\n")
    result = run("node", "--config", config, "--rounds", "9", "--peers", "tcp://127.0.0.1:7105", "--print-config")
    assert result.exit_code == 0, result.output
    got = settings(result.stdout)
    assert got["timeout"] == 5.0 and got["model"] == "qda"  # the file over the defaults
    assert got["rounds"] == 9 and got["peers"] == ["tcp://127.0.0.1:7105"]  # the command line over the file
    assert got["down-after"] == 3 and got["aggregate"] == "mean"  # defaults where neither says
    lines = result.stdout.splitlines()
    assert f"timeout = 5.0  # from {config}" in lines and "rounds = 9  # from the command line" in lines
    assert "down-after = 3" in lines and "# momentum: not set" in lines


@pytest.mark.parametrize("extra", [[], ["--rounds", "12", "--metrics-port", "9100", "--safeguard", "--insecure",
                                         "--start-at", "2026-11-24T09:00:00+00:00"]])
def test_print_config_reads_back_to_the_same_settings(deploy, tmp_path, extra):
    first = run("node", "--config", deploy / "peer-1.toml", *extra, "--print-config")
    assert first.exit_code == 0, first.output
    elsewhere = tmp_path / "elsewhere" / "printed.toml"  # another directory: the printed paths are absolute
    elsewhere.parent.mkdir()
    elsewhere.write_text(first.stdout)
    second = run("node", "--config", elsewhere, "--print-config")
    assert second.exit_code == 0, second.output
    assert settings(second.stdout) == settings(first.stdout)
    unset = {line[2:].split(":")[0] for line in first.stdout.splitlines() if line.endswith(": not set")}
    assert set(settings(first.stdout)) | unset == set(configurable(node))  # every option, with a value or not set


def test_launch_print_config_reads_back_and_keeps_a_data_set_name(tmp_path):
    (tmp_path / "launch.toml").write_text('data = "twonorm"\nnodes = 3\nrounds = 4\nrc-converged = false\n')
    first = run("launch", "--config", tmp_path / "launch.toml", "--seed", "5", "--print-config")
    assert first.exit_code == 0, first.output
    got = settings(first.stdout)
    assert got["data"] == "twonorm" and got["nodes"] == 3 and got["seed"] == 5 and got["rc-converged"] is False
    (tmp_path / "again.toml").write_text(first.stdout)
    second = run("launch", "--config", tmp_path / "again.toml", "--print-config")
    assert second.exit_code == 0 and settings(second.stdout) == got


def test_paths_in_the_file_are_relative_to_its_directory(tmp_path, monkeypatch):
    (tmp_path / "site" / "graphs").mkdir(parents=True)
    (tmp_path / "site" / "graphs" / "g.json").write_text('{"nodes": 3, "edges": [[0, 1], [1, 2]]}')
    (tmp_path / "site" / "launch.toml").write_text('data = "mine.csv"\nlabel = "y"\ntopology = "file:graphs/g.json"\n'
                                                   'workdir = "work"\nout = "/abs/run.json"\n')
    monkeypatch.chdir(tmp_path)
    result = run("launch", "--config", "site/launch.toml", "--print-config")
    assert result.exit_code == 0, result.output
    got = settings(result.stdout)
    assert got["data"] == str(tmp_path / "site" / "mine.csv")
    assert got["topology"] == f"file:{tmp_path / 'site' / 'graphs' / 'g.json'}"
    assert got["workdir"] == str(tmp_path / "site" / "work") and got["out"] == "/abs/run.json"


def test_a_peer_runs_from_a_config_file_in_another_directory(tmp_path, monkeypatch):
    site = tmp_path / "site"
    result = run("split", "--data", "twonorm", "--nodes", "1", "--local-size", "20", "--test-size", "100", "--out", site)
    assert result.exit_code == 0, result.output
    (site / "alone.toml").write_text('bind = "tcp://127.0.0.1:7109"\ndata = "node-0.csv"\nschema = "schema.json"\n'
                                     'out = "model.json"\ninsecure = true\nrounds = 2\nlog-level = "error"\n')
    monkeypatch.chdir(tmp_path)
    result = run("node", "--config", "site/alone.toml")
    assert result.exit_code == 0, result.output
    assert (site / "model.json").exists() and not (tmp_path / "model.json").exists()


@pytest.mark.parametrize("text, problem", [
    ("timout = 5\n", "timout: no such option (did you mean 'timeout'?)"),
    ("--timeout = 5\n", "--timeout: no such option (did you mean 'timeout'?)"),
    ("timeout = \"5\"\n", "timeout: expected a number, got a string '5'"),
    ("timeout = 0\n", "timeout: 0.0 is not in the range x>0"),
    ("timeout = nan\n", "timeout: expected a number, got a number nan"),
    ("timeout = inf\n", "timeout: inf is not a finite number"),
    ("rounds = 2.5\n", "rounds: expected a whole number, got a number 2.5"),
    ("rounds = true\n", "rounds: expected a whole number, got a boolean True"),
    ("model = \"svm\"\n", "model: 'svm' is not one of"),
    ("insecure = \"yes\"\n", "insecure: expected true or false, got a string 'yes'"),
    ("peers = [1, 2]\n", "peers: expected comma-separated strings or a list of strings"),
    ("[data]\nfile = \"x.csv\"\n", "data: expected a string, got a table {'file': 'x.csv'}"),
    ("rounds = 3\nrounds = 4\n", "not TOML"),
    ("config = \"other.toml\"\n", "config: no such option"),
    ("a = " + "[" * 5000 + "]" * 5000 + "\n", "not TOML"),
])
def test_a_bad_key_or_value_is_one_line_naming_the_file_and_the_key(tmp_path, text, problem):
    config = tmp_path / "peer.toml"
    config.write_text(text)
    result = run("node", "--config", config, "--bind", "tcp://127.0.0.1:7110", "--data", "d.csv", "--schema", "s.json",
                 "--out", "m.json", "--insecure")
    assert result.exit_code == 2, result.output
    (line,) = error_lines(result)
    assert line.startswith(f"Error: {config}: ") and problem in line, line
    assert "Traceback" not in result.output


def test_a_file_that_is_not_utf8_or_too_large_or_missing_is_refused(tmp_path):
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"rounds = 3\n# \xff\xfe\n")
    large = tmp_path / "large.toml"
    large.write_text("# padding\n" * (MAX_CONFIG_BYTES // 10 + 1))
    for path, problem in ((binary, "not UTF-8"), (large, f"larger than {MAX_CONFIG_BYTES} bytes"),
                          (tmp_path / "missing.toml", "cannot read configuration file")):
        result = run("launch", "--config", path)
        assert result.exit_code == 2, result.output
        (line,) = error_lines(result)
        assert line.startswith(f"Error: {path}: ") and problem in line, line


def test_peers_on_the_command_line_stay_comma_separated(deploy):
    result = run("node", "--config", deploy / "peer-0.toml", "--peers", "tcp://127.0.0.1:7103, tcp://127.0.0.1:7104,",
                 "--print-config")
    assert result.exit_code == 0, result.output
    assert settings(result.stdout)["peers"] == ["tcp://127.0.0.1:7103", "tcp://127.0.0.1:7104"]


def test_a_new_option_needs_no_config_code(tmp_path):
    @click.command(cls=ConfigFileCommand)
    @click.option("--colour", type=click.Choice(["red", "blue"]), default="red")
    @click.option("--size", type=click.IntRange(1, 10), default=1)
    @click.option("--where", type=click.Path(), default=None)
    def paint(colour, size, where):
        click.echo(f"{colour} {size} {where}")

    (tmp_path / "paint.toml").write_text('colour = "blue"\nsize = 4\nwhere = "canvas"\n')
    result = CliRunner().invoke(paint, ["--config", str(tmp_path / "paint.toml"), "--size", "6"])
    assert result.exit_code == 0 and result.output == f"blue 6 {tmp_path / 'canvas'}\n", result.output


@pytest.mark.parametrize("value, text", [(True, "true"), (3, "3"), (0.1, "0.1"), (1e-05, "1e-05"), (float("inf"), "inf"),
                                         ('a "quoted"\\ \x7f\n', '"a \\"quoted\\"\\\\ \\u007f\\n"'),
                                         (("x", 2), '["x", 2]')])
def test_toml_values_read_back(value, text):
    assert toml_value(value) == text
    assert tomllib.loads(f"v = {text}")["v"] == (list(value) if isinstance(value, tuple) else value)


def test_a_missing_required_option_says_it_may_come_from_a_config_file():
    result = CliRunner().invoke(main, ["node"])
    assert result.exit_code == 2
    assert "Error: Missing option '--bind'. Give it on the command line or in a --config FILE." in result.output
