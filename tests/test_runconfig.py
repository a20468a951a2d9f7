"""Run settings have one owner below the flows (`flywheel.runconfig`): a config built in code equals the
command line's for the same inputs, the model profile's budget is applied there once, and there is one
window check."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from flywheel import config, modelzoo
from flywheel.cli import Settings
from flywheel.cli import run as cli_run
from flywheel.errors import InputError
from flywheel.runconfig import RunConfig

SPEC = "gen:linear?n=2&seed=1"


def cli_config(monkeypatch: pytest.MonkeyPatch, library: Path, model: str, **options: object) -> RunConfig:
    """What `flywheel --model MODEL --library LIBRARY run ...` builds from its options (None: not given), without
    booting the Prefect server the command starts beside it (a side effect, not part of the settings)."""
    monkeypatch.setattr(cli_run, "_start_prefect", lambda: None)
    root = click.Context(click.Command("flywheel"))
    root.obj = Settings(library=library, db_url=config.database_url(library, None), model=model)
    with root:
        return cli_run._config(root, problems=SPEC, **options)


@pytest.mark.parametrize("model", ["qwen2.5-coder-0.5b", "smollm2-135m"])
def test_a_config_built_in_code_equals_the_cli_s_for_the_same_inputs(monkeypatch: pytest.MonkeyPatch,
                                                                      tmp_path: Path, model: str) -> None:
    cli = cli_config(monkeypatch, tmp_path, model, budget=None, attempts=None, seed=None)
    code = RunConfig(problems=SPEC, model=model, library=str(tmp_path), db_url=config.database_url(tmp_path, None))
    assert cli == code
    assert code.budget == modelzoo.PACKAGED[model].budget   # the profile's, applied in one place
    told = cli_config(monkeypatch, tmp_path, model, budget=40, attempts=None, seed=None)
    assert told == RunConfig(problems=SPEC, model=model, library=str(tmp_path),
                             db_url=config.database_url(tmp_path, None), budget=40)


def test_the_profile_budget_differs_where_the_model_reasons() -> None:
    # Without this the equality above could hold with one default for every model.
    assert RunConfig(problems=SPEC, model="qwen2.5-coder-1.5b").budget == 512
    assert RunConfig(problems=SPEC, model="gemma3-270m").budget == config.DEFAULT_BUDGET != 512
    assert RunConfig(problems=SPEC, model="qwen2.5-coder-1.5b", budget=None).budget == 512


def test_the_one_window_check() -> None:
    cfg = RunConfig(problems=SPEC, model="qwen2.5-coder-0.5b", budget=600)
    cfg.check_window(None)      # a model that names no window
    cfg.check_window(600)
    with pytest.raises(InputError, match="--budget 600 is longer than qwen2.5-coder-0.5b's 512-token window"):
        cfg.check_window(512)
    with pytest.raises(InputError, match="outside 0..") as err:
        RunConfig(problems=SPEC, budget=config.MAX_BUDGET + 1)
    assert err.value.hint and "--budget" in err.value.hint
