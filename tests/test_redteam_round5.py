"""Red-team round five (issue 56): each class's reproduction, fixed. The reproductions themselves stay with
the planners; these tests pin the class."""

from __future__ import annotations

import copy

import pytest

from flywheel.engine import Engine
from flywheel.errors import ModelError
from flywheel.prompts import ChatFormat, chat_format


def test_named_chat_templates_use_the_default_and_hash_its_name(tiny_qwen: Engine) -> None:
    """Class 9: a checkpoint shipping `{"default": ..., "tool_use": ...}` was refused as having no template."""
    tok = copy.deepcopy(tiny_qwen.tokenizer)
    plain = chat_format(tok, "tiny")
    tok.chat_template = {"default": tiny_qwen.tokenizer.chat_template, "tool_use": "{{ messages }}"}
    named = chat_format(tok, "tiny")
    assert isinstance(named, ChatFormat) and isinstance(plain, ChatFormat)
    assert named.scaffold == plain.scaffold                     # asked exactly as with the plain template
    assert named.template_sha256 != plain.template_sha256       # but the name is in its hash (another tag)
    tok.chat_template = {"tool_use": "{{ messages }}"}
    with pytest.raises(ModelError, match="none called 'default'"):
        chat_format(tok, "tiny")


def _outlives(parent_code: str, seconds: float = 10) -> bool:
    """Start `parent_code` (it prints its worker's pid once the worker is busy), kill it with SIGKILL, and
    say whether the worker is still alive `seconds` later (it is then killed)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    parent = subprocess.Popen([sys.executable, "-c", parent_code], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    os.kill(child, 0)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return False
        time.sleep(0.2)
    os.kill(child, signal.SIGKILL)
    return True


def test_a_busy_worker_ends_within_seconds_of_its_parent_killed_outright() -> None:
    """Class 8: kill -9 during GSM-Symbolic generation left the generator worker burning a core for minutes:
    it runs in a session of its own and, busy, never reads the EOF of its closed stdin. Here the worker is
    busy in a loop after starting the watch both bounded workers start first (`verifiers.parentwatch`)."""
    busy = ("from verifiers.parentwatch import exit_with_parent\nexit_with_parent(0.2)\n"
            "import sys\nprint('busy', flush=True)\nwhile True: pass\n")
    parent_code = (
        "import subprocess, sys\n"
        f"p = subprocess.Popen([sys.executable, '-c', {busy!r}], stdout=subprocess.PIPE, start_new_session=True)\n"
        "p.stdout.readline()\n"
        "print(p.pid, flush=True)\n"
        "import time; time.sleep(600)\n")
    assert not _outlives(parent_code)


@pytest.mark.parametrize("module", ["flywheel.sources.gsm_worker", "verifiers.worker"])
def test_both_bounded_workers_start_the_watch_first(module: str) -> None:
    import importlib
    import inspect

    from verifiers import lineworker

    worker = importlib.import_module(module)
    assert worker.serve is lineworker.serve and "serve(memory_mb" in inspect.getsource(worker._serve)   # the one loop
    source = inspect.getsource(lineworker.serve)
    body = [line.strip() for line in source.splitlines()[2:] if line.strip() and not line.strip().startswith(('"""', "#"))]
    calls = [i for i, line in enumerate(body) if line.startswith("exit_with_parent(")]
    assert calls and all("setrlimit" not in line for line in body[:calls[0]])   # before any work


EXITING = """
import sys
sys.exit(0)
"""

FAILING_AT_USE = """
from flywheel.sources import source

@source("bad", prefix="bad:", keys=(), example="bad:", description="a loader that raises")
def _bad(spec):
    raise SystemExit(0)

@source("shape", prefix="shape:", keys=(), example="shape:", description="a loader of the wrong shape")
def _shape(spec):
    return "not problems"

def raising_format(tokenizer, model):
    raise RuntimeError("the factory's own bug")
"""


def test_a_plugin_calling_sys_exit_at_import_is_one_line_and_the_command_goes_on(tmp_path: object) -> None:
    """Class 6: a plug-in whose import calls sys.exit() ended `deposit` with status 0 and nothing stored."""
    from pathlib import Path

    from tests.test_plugins import _python, install  # type: ignore[import-not-found]

    site = Path(str(tmp_path)) / "site"
    site.mkdir()
    install(site, "exiting-plugin", {"kv_flywheel.sources": {"exits": "exiting_plugin"}}, {"exiting_plugin": EXITING})
    proc = _python(site, "from flywheel.problemsets import load_problem_set\n"
                         "print(len(load_problem_set('gen:linear?n=2&seed=1').problems))")
    assert proc.returncode == 0 and proc.stdout.strip() == "2"
    assert "plugin 'exits' from 'exiting-plugin' (group kv_flywheel.sources) could not be loaded: SystemExit" \
        in proc.stderr


def test_a_plugin_failing_when_used_is_one_line_naming_it_not_a_traceback(tmp_path: object) -> None:
    """Class 7: a source loader that raises or returns the wrong shape, a format factory that raises."""
    from pathlib import Path

    from tests.test_plugins import _python, install  # type: ignore[import-not-found]

    site = Path(str(tmp_path)) / "site"
    site.mkdir()
    install(site, "failing-plugin", {"kv_flywheel.sources": {"failing": "failing_plugin"},
                                     "kv_flywheel.prompt_formats": {"raising": "failing_plugin:raising_format"}},
            {"failing_plugin": FAILING_AT_USE})
    for spec, said in (("bad:", "problem source 'bad' (plugin 'failing' from 'failing-plugin') failed: SystemExit"),
                       ("shape:", "problem source 'shape' (plugin 'failing' from 'failing-plugin') returned str")):
        proc = _python(site, "from flywheel.cli import main; "
                             f"main(['--library', 'lib', 'run', '--problems', {spec!r}], prog_name='flywheel')")
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert said in proc.stderr
    proc = _python(site, "from flywheel.prompts import make_format\n"
                         "from flywheel.errors import InputError\n"
                         "try:\n    make_format('raising', None, 'm')\n"
                         "except InputError as e:\n    print(e.message)\n")
    assert "prompt format 'raising' (plugin 'raising' from 'failing-plugin') failed: RuntimeError: the factory's" \
        in proc.stdout


@pytest.mark.parametrize("fixture", ["tiny_qwen", "tiny_gemma"])
def test_a_solution_boxing_another_answer_is_refused_in_every_format(fixture: str, request: pytest.FixtureRequest,
                                                                     tmp_path: object) -> None:
    """Class 1: a chat-format worked solution whose own \\boxed{} contradicts its answer was stored as verified."""
    from pathlib import Path

    from flywheel.errors import DepositRefusedError
    from flywheel.library import Library
    from flywheel.problemsets import Problem

    engine: Engine = request.getfixturevalue(fixture)
    with Library.open(Path(str(tmp_path)) / "lib") as lib:
        problem = Problem("p", "What is 2+3?", reference="5")
        with pytest.raises(DepositRefusedError, match="states the final answer '7', not the answer '5'"):
            lib.deposit(engine, problem, "2+3 = 7, so $\\boxed{7}$.", "5")
        lib.deposit(engine, problem, "2+3 = 5, so $\\boxed{5}$.", "5")   # agreeing is fine
        lib.deposit(engine, problem, "2+3 = 5.", "5")


@pytest.mark.parametrize("model", ["qwen2.5-coder-0.5b", "gemma3-270m", "smollm2-135m"])
def test_no_added_token_of_a_packaged_tokenizer_becomes_a_control_token_in_data(model: str) -> None:
    """Class 4: Qwen's `<tool_call>` / `</tool_call>` (added, special = false) in a problem or solution were
    stored in the graft and asked as the model's tool-call tokens. Every added token of each packaged model's
    tokenizer, special or not, appearing in data, is split as text."""
    from transformers import AutoTokenizer

    from flywheel import modelzoo
    from flywheel.prompts import Piece

    tok = AutoTokenizer.from_pretrained(modelzoo.prepare(model, progress=False), local_files_only=True)
    engine = Engine.__new__(Engine)   # the tokenizer is all encode_data reads
    engine.tokenizer = tok
    from flywheel.engine import MARKUP_TOKEN

    added = {t: i for t, i in tok.get_added_vocab().items() if MARKUP_TOKEN.fullmatch(t)}
    assert added, "every packaged tokenizer adds markup tokens"
    text = "Compute 2+3. " + " then ".join(added) + " and answer."
    ids = engine.encode_data(text)
    assert not set(ids) & set(added.values()), model       # not one of them is a control (or added) token
    assert tok.decode(ids) == text                          # the text, split as text
    plain = "Natalia sold clips to 48 of her friends in April. How many?"
    assert engine.encode_data(plain) == tok.encode(plain, add_special_tokens=False)   # unchanged without them
    assert Piece  # the data/control split is the prompt format's (flywheel.prompts.Piece)


def test_a_resume_under_anything_else_that_shapes_the_attempts_is_refused_naming_it(
        tiny_dirs: dict[str, object], tiny_gemma: Engine, tmp_path: object) -> None:
    """Class 5: `run --run-id` resumed a cut run under another prompt format or template, another
    `--no-graft` or another `--seed` without a word."""
    import json
    from pathlib import Path

    from flows import RunConfig, flywheel_run, runtime
    from flywheel.errors import InputError

    model = str(tiny_dirs["gemma3"])
    runtime.register_engine(model, tiny_gemma)
    root = Path(str(tmp_path))
    problems = root / "set.jsonl"
    problems.write_text(json.dumps({"id": "a", "problem": "Solve for x: x + 1 = 5.", "reference": "4"}) + "\n")

    def run(**kw: object) -> dict:
        return flywheel_run(RunConfig(problems=str(problems), model=model, library=str(root / "lib"), budget=3,
                                      starter=False, **kw))  # type: ignore[arg-type]

    first = run(attempts=2, seed=5)
    for changed, said in (({"seed": 6}, "seed 5"), ({"no_graft": True}, "--no-graft")):
        with pytest.raises(InputError, match=said):
            run(attempts=2, run_id=first["run_id"], **{"seed": 5, **changed})
    from flywheel import config

    catalog = runtime.library(str(root / "lib"), config.database_url(root / "lib")).catalog
    row = catalog.get_run(first["run_id"])
    recorded = json.loads(row.settings)
    assert recorded["prompt_format"] == tiny_gemma.prompt_format.tag      # another format is another tag
    run(attempts=2, seed=5, run_id=first["run_id"])                       # the same settings resume
    runtime.close_libraries()


def test_a_plugin_family_never_seeds_the_starter_set_or_curated_knowledge(
        tiny_dirs: dict[str, object], tiny_gemma: Engine, tmp_path: object) -> None:
    """Class 2: a plug-in word family joined `gen:all` and so the starter set, deposited as a built-in starter,
    its check circular (answer == its own generator's reference); curated seeding trusted it the same way."""
    from pathlib import Path

    from flows import RunConfig, runtime
    from flows.starter import starter_set
    from flows.study import seed_curated
    from flywheel.families import FAMILIES, family
    from flywheel.families.base import NAMES, Derived, Params, ints
    from flywheel.problemsets import load_problem_set

    with FAMILIES.isolated():
        @family("buggy", "a plug-in family whose arithmetic is wrong", template="{name} has {a} pears and eats one. Left?",
                solution="{a} - 1 = {answer}.", axes=(("name", NAMES[:2]), ("a", range(3, 9))))
        def _buggy(p: Params) -> Derived:
            (a,) = ints(p, "a")
            return {"answer": a + 1}   # the bug: its own reference agrees with its own solution

        assert "buggy" in {p.meta["family"] for p in load_problem_set("gen:all?n=1&seed=1&split=train").problems}
        assert "buggy" not in starter_set() and not FAMILIES.builtin("buggy") and FAMILIES.builtin("ages")
        problems = load_problem_set("gen:buggy+ages?n=1&seed=1&split=train").problems
        model = str(tiny_dirs["gemma3"])
        runtime.register_engine(model, tiny_gemma)
        cfg = RunConfig(problems="champ", model=model, library=str(Path(str(tmp_path)) / "lib"))
        seeded = seed_curated(cfg, problems, 1)
        assert [pid for pid in seeded if "buggy" in pid] == [] and any("ages" in pid for pid in seeded)


def test_a_forged_gsm_symbolic_cache_entry_is_regenerated_never_trusted(tmp_path: object,
                                                                       monkeypatch: pytest.MonkeyPatch,
                                                                       capfd: pytest.CaptureFixture[str]) -> None:
    """Class 3: the instance cache checked an entry only against a hash stored in the same file, so anyone who
    could write the folder forged an entry (and a study seeded it as a verified curated solution)."""
    import json
    import os
    from pathlib import Path

    from flywheel import config
    from flywheel.domain import json_sha256
    from flywheel.sources import gsm_symbolic as gsm

    root = Path(str(tmp_path))
    monkeypatch.setenv("FLYWHEEL_PROBLEM_CACHE", str(root / "cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(root / "mine"))
    first, _ = gsm.instances([1], n=1, seed=6)
    key = config.cache_key_path()
    assert key.is_file() and (key.stat().st_mode & 0o777) == 0o600 and root / "cache" not in key.parents
    (entry,) = (root / "cache" / "gsm-symbolic").glob("*.json")
    good = entry.read_text()

    # the forger rewrites the answer and the stored hash consistently: the old check passed this
    data = json.loads(good)
    data["instances"][0][1] = data["instances"][0][1].replace(first[0].reference or "", "999999")
    data["sha256"] = json_sha256(data["instances"])
    entry.write_text(json.dumps(data))
    capfd.readouterr()
    again, _ = gsm.instances([1], n=1, seed=6)
    assert again == first and "is not signed by this user's cache key" in capfd.readouterr().err

    # an entry signed under another user's key is not this user's to trust either
    monkeypatch.setenv("XDG_CONFIG_HOME", str(root / "theirs"))
    capfd.readouterr()
    assert gsm.instances([1], n=1, seed=6)[0] == first
    assert "is not signed by this user's cache key" in capfd.readouterr().err

    # a key file others could have written is not used: nothing read from the cache is trusted
    monkeypatch.setenv("XDG_CONFIG_HOME", str(root / "shared"))
    shared = config.cache_key_path()
    shared.parent.mkdir(parents=True)
    shared.write_bytes(os.urandom(32))
    shared.chmod(0o666)
    capfd.readouterr()
    assert gsm.instances([1], n=1, seed=6)[0] == first
    assert "writable by group or others" in capfd.readouterr().err


def test_a_study_resumed_in_another_shape_is_refused_before_anything_is_seeded(
        tiny_gemma: Engine, tmp_path: object) -> None:
    """Class 5, the study: `study --resume` accepted other `--curated` / `--passes` and seeded, then mixed runs."""
    import json
    from pathlib import Path

    from flows import RunConfig, runtime
    from flows.study import run_study
    from flywheel import config
    from flywheel.errors import InputError
    from tests.flows.conftest import ScriptedEngine  # type: ignore[import-not-found]

    root = Path(str(tmp_path))
    runtime.register_engine("shape-tiny", ScriptedEngine(tiny_gemma.model, tiny_gemma.tokenizer,
                                                         tiny_gemma.fingerprint, tiny_gemma.settings))
    rows = [{"id": "gen-nine-train-0", "problem": "Ann has 4 pens and buys 5. How many pens?", "reference": "9",
             "solution": "4 + 5 = 9."},
            {"id": "gen-ten-train-0", "problem": "Di has 8 pens and buys 2. How many pens?", "reference": "10",
             "solution": "8 + 2 = 10."}]
    train = root / "train.jsonl"
    train.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = RunConfig(problems=str(train), model="shape-tiny", library=str(root / "lib"), budget=20)
    args = {"train": str(train), "heldout": str(train), "passes": 1, "curated": 1, "arms": ["none"]}
    lines: list[str] = []
    run_study(cfg, **args, stages=lambda n, total, line: lines.append(line))
    tag = lines[0].split()[1].rstrip(":")
    catalog = runtime.library(str(root / "lib"), config.database_url(root / "lib")).catalog
    before = len(catalog.list_artifacts())
    for changed, said in (({"curated": 0}, "--curated 1, not 0"), ({"heldout": "champ"}, "--heldout"),
                          ({"arms": ["none", "graft"]}, "--arms")):
        with pytest.raises(InputError, match=said):
            run_study(cfg, **{**args, **changed}, resume=tag)
        assert len(catalog.list_artifacts()) == before   # refused before anything was seeded
    assert run_study(cfg, **args, resume=tag)["inputs"]["study"] == tag   # its own shape resumes


#: Runs `flywheel` in a process whose SQLite connections may not grow the catalog file: SQLite's own
#: "database or disk is full" (SQLITE_FULL), the error a full disk gives, caused without filling a disk.
_CATALOG_FULL = """
import sqlite3, sys
from sqlalchemy import event
from sqlalchemy.engine import Engine

@event.listens_for(Engine, "connect")
def _no_room(dbapi, record):
    if isinstance(dbapi, sqlite3.Connection):
        pages = dbapi.execute("PRAGMA page_count").fetchone()[0]
        dbapi.execute(f"PRAGMA max_page_count = {max(pages, 1)}")

from flywheel.cli import main
main(sys.argv[1:], prog_name="flywheel")
"""


def test_a_full_disk_under_the_catalog_is_one_line_and_the_catalog_stays_consistent(
        tiny_dirs: dict[str, object], tmp_path: object) -> None:
    """Class 7: a catalog commit on a full disk printed SQLite's traceback (`database or disk is full`)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(str(tmp_path))
    env = {**os.environ, "FLYWHEEL_LIBRARY": str(root / "lib"), "FLYWHEEL_MODEL": str(tiny_dirs["gemma3"])}
    env.pop("FLYWHEEL_DB", None)
    curated = Path(__file__).resolve().parents[1] / "library" / "curated" / "examples.jsonl"
    rows = curated.read_text().splitlines()
    (root / "first.jsonl").write_text("\n".join(rows[:2]) + "\n")
    (root / "rest.jsonl").write_text("\n".join(rows[2:]) + "\n")
    flywheel = [str(Path(sys.executable).with_name("flywheel"))]
    ok = subprocess.run([*flywheel, "deposit", "--file", str(root / "first.jsonl")], env=env, cwd=root,
                        capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr
    full = subprocess.run([sys.executable, "-c", _CATALOG_FULL, "deposit", "--file", str(root / "rest.jsonl")],
                          env=env, cwd=root, capture_output=True, text=True, timeout=300)
    assert full.returncode == 1 and "Traceback" not in full.stderr, full.stderr
    assert "Error: the catalog's disk is full" in full.stderr
    listed = subprocess.run([*flywheel, "library", "verify"], env=env, cwd=root, capture_output=True, text=True,
                            timeout=300)
    assert listed.returncode == 0, listed.stdout + listed.stderr   # every catalogued artifact is there and whole


def test_a_path_over_the_name_limit_is_one_line_wherever_a_path_is_taken(tiny_dirs: dict[str, object],
                                                                          tmp_path: object) -> None:
    """Class 7: a path over the file-name limit printed a traceback from --library, --db, --problems FILE,
    deposit --file and library export."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(str(tmp_path))
    long = root / ("x" * 300)
    env = {**os.environ, "FLYWHEEL_MODEL": str(tiny_dirs["gemma3"]), "PREFECT_HOME": str(root / "prefect")}
    env.pop("FLYWHEEL_DB", None)
    env.pop("FLYWHEEL_LIBRARY", None)
    flywheel = str(Path(sys.executable).with_name("flywheel"))
    for args in (["--library", str(long), "library", "ls"],
                 ["--db", f"sqlite:///{long}/catalog.db", "library", "ls"],
                 ["--library", str(root / "lib"), "run", "--problems", f"{long}.jsonl"],
                 ["--library", str(root / "lib"), "deposit", "--file", f"{long}.jsonl"],
                 ["--library", str(root / "lib"), "library", "export", f"{long}.jsonl"]):
        proc = subprocess.run([flywheel, *args], env=env, cwd=root, capture_output=True, text=True, timeout=300)
        assert proc.returncode in (1, 2) and "Traceback" not in proc.stderr, (args, proc.stderr)
        assert "File name too long" in proc.stderr and "hint: a shorter path" in proc.stderr, (args, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 2, proc.stderr
