"""`--ray` refused before any work: bad input in one line and exit 2, and Ray not installed.

No cluster and no timing: these run beside other tests (tests/loadgen/test_loadgen_ray.py holds
the cluster's tests, which time against truth and so run alone).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests import cli_run


@pytest.mark.slow
def test_bad_ray_input_is_one_line_and_exit_2(
    sagemeter_env: dict[str, str], tmp_path: Path
) -> None:
    url = "http://127.0.0.1:9"
    cases = [
        (["load", url, "--ray", "not an address"], "--ray 'not an address'"),
        (["load", url, "--ray", "auto", "--shard", "0/2"], "leave out --shard"),
        (["selfcheck", "--ray", "ray://host:99999"], "--ray 'ray://host:99999'"),
        (["load", url, "--ray", "127.0.0.1:9"], "nothing answers at 127.0.0.1:9"),
        (
            ["measure", str(tmp_path), "my-endpoint@us-east-1", "--ray", "auto"],
            "a SageMaker endpoint's batches go through boto3 on this machine",
        ),
    ]
    for args, expected in cases:
        done = cli_run.run(args, {**sagemeter_env, "COLUMNS": "200"}, tmp_path)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert expected in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_without_ray_installed_the_flag_says_how_to_install_it(
    sagemeter_env: dict[str, str], tmp_path: Path
) -> None:
    # `None` in sys.modules is Python's own way to make a module unimportable.
    code = (
        "import sys; sys.modules['ray'] = None; sys.argv = ['sagemeter', *sys.argv[1:]]; "
        "from sagemeter.cli import main; main()"
    )
    for args in (["load", "http://127.0.0.1:9", "--ray", "auto"], ["selfcheck", "--ray", "local"]):
        process = subprocess.run(
            [sys.executable, "-c", code, *args],
            capture_output=True,
            text=True,
            env=sagemeter_env,
            cwd=tmp_path,
            timeout=60,
        )
        assert process.returncode == 2, process.stderr
        assert "pip install 'sagemeter[ray]'" in process.stderr
        assert len(process.stderr.strip().splitlines()) == 1, process.stderr
