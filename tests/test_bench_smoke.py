"""The benchmarks run end to end on tiny configurations and say what they claim in their JSON."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


def run_bench(script: str, *args: str, tmp_path: Path, printed: list[str] | None = None) -> dict[str, Any]:
    """Run a bench script with --json; its last stdout line parsed. `printed` receives the lines before it."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / script), *args, "--json"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    if printed is not None:
        printed.extend(lines[:-1])
    return json.loads(lines[-1])


def test_context_bench_grafts_exact_and_resident_flat(tmp_path: Path) -> None:
    out = run_bench("context.py", "--target-tokens", "5000", "--window", "1024", "--stride", "256",
                    "--probe-tokens", "512", "--points", "3", "--checks", "2", "--models", "tiny",
                    "--zstd-levels", "3", "--workdir", str(tmp_path), tmp_path=tmp_path)
    assert out["library_tokens"] >= 5000 and out["library_tokens"] > out["window"]
    assert out["catalog_context"][0]["stored_tokens"] == out["library_tokens"]
    assert len(out["checks"]) == 2 and out["all_exact"]
    assert all(c["header_logits_equal"] and c["graft_equals_fresh"] for c in out["checks"])
    points = out["points"]
    assert len(points) >= 2 and points[-1]["library_tokens"] > points[0]["library_tokens"]
    assert len({p["tensor_bytes"] for p in points}) == 1 and out["resident_flat"]
    assert points[0]["probe_tokens"] == 512
    tiny = out["models"][0]
    assert tiny["model"] == "tiny-gemma3" and tiny["bytes_per_token"] > tiny["kv_bytes_per_token_past_window"] > 0
    assert tiny["zstd"]["zstd3"]["ratio"] >= 1.0


def test_graft_bench_restores_exactly_on_tiny_model(capsys: pytest.CaptureFixture[str], tiny_dirs: dict[str, Path],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # In process (the suite has torch loaded already): the script's main() with small arguments;
    # bench/ on the path as when the script runs (it imports bench/procmem.py).
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location("bench_graft_vs_prefill", ROOT / "bench" / "graft_vs_prefill.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rc = bench.main(["--model", str(tiny_dirs["gemma3"]), "--tokens", "64", "--repeats", "2",
                     "--prefill-repeats", "1", "--bw-mib", "16", "--json"])
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert rc == 0
    assert out["exact"] and out["rows"][0]["exact_by_path"] == {"store": True, "file": True, "torch_load": True}
    assert out["speedup"] > 0 and out["prefill_s"] > 0 and out["restore_s"] > 0
    assert out["machine"]["memcpy_bytes_per_s"] > 0 and out["machine"]["read_cold_bytes_per_s"] > 0


def test_throughput_bench_compares_paths_on_tiny_model(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    import shutil

    from flywheel.testing import add_tiny_blocks

    model = add_tiny_blocks(Path(shutil.copytree(tiny_dirs["gemma3"], tmp_path / "tiny-blocks")))
    out = run_bench("throughput.py", "--model", str(model), "--problems", "4", "--budget", "6",
                    "--slots", "2", "4", "--weights", "fp32,q-i8a,default", "--one-at-a-time", "--bf16",
                    tmp_path=tmp_path)
    from flywheel.decode import onednn_dtype_problem

    bf16 = onednn_dtype_problem(torch.bfloat16) is None   # AVX2-only hosts cannot: the bench says so and skips it
    assert out["bf16_unsupported"] is None if bf16 else "bf16" in out["bf16_unsupported"]
    assert out["problems"] == 4 and out["machine"]["memory_bytes_per_s"] > 0
    rows = {(r["weights"], r["dtype"], r["slots"]): r for r in out["rows"]}
    # `default` names q-i8a here: measured once, not twice
    assert set(k for k in rows if k[1] == "float32") == {("fp32", "float32", None), ("fp32", "float32", 2),
                                                         ("fp32", "float32", 4), ("q-i8a", "float32", 2),
                                                         ("q-i8a", "float32", 4)}
    assert len(out["rows"]) == len(rows)
    assert set(k for k in rows if k[1] == "bfloat16") == ({("fp32", "bfloat16", 2), ("fp32", "bfloat16", 4)}
                                                          if bf16 else set())
    assert all(r["tokens"] > 0 and r["tok_s"] > 0 for r in out["rows"])
    assert rows[("fp32", "float32", 2)]["steps"] < rows[("fp32", "float32", 2)]["tokens"]   # slots shared the steps
    for weights in ("fp32", "q-i8a"):                 # a slot's bits do not depend on B, under either weights
        assert rows[(weights, "float32", 2)]["tokens_sha256"] == rows[(weights, "float32", 4)]["tokens_sha256"]
    assert [(r["weights"], r["slots"]) for r in out["ratios"]] == [("q-i8a", 2), ("q-i8a", 4)]
    assert all(r["vs_fp32"] > 0 and r["vs_llama_cpp"] is None for r in out["ratios"])
    assert rows[("q-i8a", "float32", 2)]["weight_mib"] < rows[("fp32", "float32", 2)]["weight_mib"] * 2
    compared = out["bf16_answers"]
    assert [c["slots"] for c in compared] == ([2, 4] if bf16 else []) and all(c["problems"] == 4 for c in compared)
    assert all(0 <= c["same_answer"] <= 4 and 0 <= c["correct_bfloat16"] <= 4 for c in compared)


@pytest.mark.parametrize(("total", "per_attempt"), [(400_000, 1024), (401_026, 1000), (2048, 128), (100, 128)])
def test_paper_scale_rule_spends_at_least_the_total_it_is_given(total: int, per_attempt: int) -> None:
    """The selection rule is fixed before any model call and never undercuts the ungrafted budget asked for."""
    spec = importlib.util.spec_from_file_location("bench_recurring", ROOT / "bench" / "recurring.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rule = mod.selection_rule(total, per_attempt)
    assert rule["budget_tokens_total"] == 8 * rule["attempts_per_problem"] * per_attempt >= total
    assert rule["budget_tokens_total"] - total < 8 * per_attempt            # the smallest K that reaches it
    assert (rule["temperature"] > 0) is (rule["attempts_per_problem"] > 1)  # one attempt is greedy


def test_pass_throughput_bench_decodes_the_same_work_three_ways(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    # The decoder alone (twice, fresh prompts each round), a real flow and the command in a fresh
    # process, on the same routed problems: the same attempts, so the same decode tokens.
    out = run_bench("pass_throughput.py", "--model", str(tiny_dirs["gemma3"]), "--per-family", "1", "--attempts", "2",
                    "--budget", "4", "--slots", "4", tmp_path=tmp_path)
    dec, run, cli = out["decoder"], out["pass"], out["command"]
    assert dec["problems"] == run["problems"] == 10 and dec["requests"] == 20
    assert dec["grafted"] == 10 and run["routes"] == ["near"]         # every problem routed to a near graft
    assert dec["decode_tokens"] == run["decode_tokens"] == cli["decode_tokens"] > 0
    assert len(dec["rounds_tokens_per_s"]) == 2 and dec["rounds_identical"]   # round 2 prefilled again, same bits
    assert dec["prefill_tokens"] >= dec["problems"] * 10 and dec["prefill_in_steps_s"] > 0
    assert out["pass_efficiency"] == pytest.approx(out["pass_tokens_per_s"] / out["decoder_tokens_per_s"])
    assert {"decode_step", "prefill", "pick_tokens", "route", "record", "verify"} <= set(out["breakdown"])


def test_paper_scale_scan_resumes_where_it_stopped(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    """An interrupted scan picks up after its last judged problem, under the same rule only, and ends
    where an uninterrupted one does."""
    common = ["--paper-scale", "--model", str(tiny_dirs["gemma3"]), "--budget-total", "64", "--attempt-budget", "4",
              "--slots", "2"]
    whole = tmp_path / "whole.jsonl"
    full = run_bench("recurring.py", *common, "--state", str(whole), tmp_path=tmp_path)
    assert len(full["selected"]) == 8 and full["budget_tokens"] == 8 * 2 * 4
    assert full["rule"]["attempts_per_problem"] == 2
    lines = whole.read_text().splitlines()
    judged = [i for i, line in enumerate(lines) if i and '"partial"' not in line]
    assert len(judged) == len(full["scanned"])               # one verdict line per judged problem
    partial = [json.loads(line)["partial"] for line in lines if '"partial"' in line]
    assert len(partial) == sum(r["attempts_decoded"] for r in full["scanned"])   # and one line per attempt before it
    same = ("problem_id", "solved", "decode_tokens", "logits_sha256", "attempts_decoded")
    # Interrupted after 3 judged problems and the 4th's attempts, its verdict line torn mid-write.
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(lines[:judged[3]]) + "\n" + lines[judged[3]][:20])
    # --scan-status reads where it stands without a model and without touching the log (torn line kept).
    before = cut.read_text()
    status = run_bench("recurring.py", *common, "--state", str(cut), "--scan-status", tmp_path=tmp_path)
    assert cut.read_text() == before
    assert [j["problem_id"] for j in status["judged"]] == [r["problem_id"] for r in full["scanned"][:3]]
    assert status["unsolved"] == sum(not r["solved"] for r in full["scanned"][:3])
    fourth = full["scanned"][3]
    assert status["in_progress"] == {fourth["problem_id"]: {"attempts_decoded": fourth["attempts_decoded"],
                                                            "decode_tokens": fourth["decode_tokens"],
                                                            "wall_s": pytest.approx(fourth["wall_s"])}}
    resumed = run_bench("recurring.py", *common, "--state", str(cut), tmp_path=tmp_path)
    assert [r["problem_id"] for r in resumed["scanned"]] == [r["problem_id"] for r in full["scanned"]]
    assert [{k: r[k] for k in same} for r in resumed["scanned"]] == [{k: r[k] for k in same} for r in full["scanned"]]
    assert resumed["scanned"][:3] == full["scanned"][:3]    # the judged ones were read back, not decoded again
    assert resumed["scanned"][3]["resumed_after"] == full["scanned"][3]["attempts_decoded"]  # its attempts kept
    # Interrupted inside the 4th problem, after its first attempt: that attempt is kept, the rest decoded.
    inside = tmp_path / "inside.jsonl"
    first_of_4th = judged[2] + 1
    assert json.loads(lines[first_of_4th])["partial"] == full["scanned"][3]["problem_id"]
    inside.write_text("\n".join(lines[:first_of_4th + 1]) + "\n")
    printed: list[str] = []
    mid = run_bench("recurring.py", *common, "--state", str(inside), tmp_path=tmp_path, printed=printed)
    assert [{k: r[k] for k in same} for r in mid["scanned"]] == [{k: r[k] for k in same} for r in full["scanned"]]
    assert mid["scanned"][3]["resumed_after"] == 1
    # A line per attempt decoded in this segment (a long problem is not silent), none for the kept one.
    said = [line for line in printed if line.strip().startswith(f"{fourth['problem_id']}: attempt ")]
    assert len(said) == mid["scanned"][3]["attempts_decoded"] - 1
    assert f"{mid['scanned'][3]['attempts_decoded']} of 2 decoded" in said[-1] and "unsolved so far" in said[-1]
    bits = ("attempt_index", "seed", "decode_tokens", "logits_sha256", "text", "answer", "verified")
    assert [{k: a[k] for k in bits} for a in mid["scanned"][3]["attempts"]] == \
        [{k: a[k] for k in bits} for a in full["scanned"][3]["attempts"]]
    assert resumed["selected_set_hash"] == full["selected_set_hash"]
    assert resumed["decode_factor"] == pytest.approx(resumed["decoded_without_graft"] / resumed["graft_decode_tokens"])
    assert resumed["budget_factor"] == pytest.approx(resumed["budget_tokens"] / resumed["graft_decode_tokens"])
    # Another rule on the same log is refused, naming what differs.
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "recurring.py"), *common[:-4], "--attempt-budget", "8",
                           "--slots", "2", "--state", str(cut)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0 and "'rule'" in proc.stderr


def test_paper_scale_passes_are_runs_the_report_shows(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    """With --library, the scan and the grafted pass are recorded as two runs, and `flywheel report`
    folds them under the bench's own definitions (decode factor = decoded without / with)."""
    model = str(tiny_dirs["gemma3"])
    state, library = tmp_path / "scan.jsonl", tmp_path / "lib"
    common = ["--paper-scale", "--model", model, "--budget-total", "64", "--attempt-budget", "4", "--slots", "2",
              "--state", str(state), "--library", str(library)]
    out = run_bench("recurring.py", *common, tmp_path=tmp_path)
    runs = out["catalog"]
    assert runs["not_recorded"] == [] and runs["scan_run"] == "scan-scan"
    scanned_attempts = sum(r["attempts_decoded"] for r in out["scanned"])
    assert scanned_attempts == sum(len(r["attempts"]) for r in out["scanned"])
    proc = subprocess.run([str(Path(sys.executable).parent / "flywheel"), "--model", model, "--library", str(library),
                           "report", "--format", "json"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    by_run = {r["run_id"] if "run_id" in r else r["id"]: r for r in report["runs"]}
    assert set(by_run) == {runs["scan_run"], runs["graft_run"]}
    scan_attempts = [a for a in report["attempts"] if a["run_id"] == runs["scan_run"]]
    assert len(scan_attempts) == scanned_attempts and not any(a["grafted"] for a in scan_attempts)
    graft = by_run[runs["graft_run"]]
    assert graft["compared_problems"] == len(out["selected"]) == 8
    assert graft["decode_tokens_without"] == out["decoded_without_graft"]
    assert graft["decode_tokens_with"] == out["graft_decode_tokens"]
    assert graft["decode_factor"] == pytest.approx(out["decode_factor"])
    # Run again on the same log and library: nothing is scanned or recorded twice.
    again = run_bench("recurring.py", *common, tmp_path=tmp_path)
    assert again["scanned"] == out["scanned"] and again["catalog"]["scan_run"] == runs["scan_run"]


def test_first_decode_bench_times_fresh_commands_in_turns(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    models = [str(tiny_dirs["gemma3"]), str(tiny_dirs["qwen2"])]
    out = run_bench("first_decode.py", "--models", ",".join(models), "--rounds", "1", "--workdir", str(tmp_path),
                    tmp_path=tmp_path)
    assert set(out["median_wall_s"]) == set(models) and out["ratio_to_first"][models[0]] == 1.0
    for m in models:
        (only,) = out["runs"][m]
        assert only["decode_tokens"] == 1 and only["prefill_tokens"] > 0
        assert only["wall_s"] > only["flow_wall_s"] > 0      # the command's wall holds the flow's and its start-up
    assert out["ratio_to_first"][models[1]] == pytest.approx(out["median_wall_s"][models[1]] / out["median_wall_s"][models[0]])
    assert "AVX" in out["cpu"] and out["cores"] >= 1


def test_paired_runs_pairs_two_studies_by_problem_within_a_part(tmp_path: Path) -> None:
    def attempts(path: Path, arm: str, verified: dict[str, bool]) -> Path:
        rows = [{"run_id": f"run-x-heldout-{arm}", "problem_id": pid, "attempt": 0, "verified": ok}
                for pid, ok in verified.items()]
        rows.append({"run_id": f"run-x-heldout-{arm}", "problem_id": "gsm-symbolic-t0-s11-0", "attempt": 1,
                     "verified": False})                                     # a sampled attempt: not pass@1
        rows.append({"run_id": "run-x-train1", "problem_id": "gsm-symbolic-t1-s1-0", "attempt": 0, "verified": True})
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return path

    # templates 0, 1 are train (near); 2 is held out (far)
    a = attempts(tmp_path / "a.jsonl", "graft", {"gsm-symbolic-t0-s11-0": True, "gsm-symbolic-t1-s11-0": True,
                                                 "gsm-symbolic-t2-s11-0": False, "gsm-symbolic-t3-s11-0": True})
    b = attempts(tmp_path / "b.jsonl", "none", {"gsm-symbolic-t0-s11-0": True, "gsm-symbolic-t1-s11-0": False,
                                                "gsm-symbolic-t2-s11-0": True})
    near = run_bench("paired_runs.py", "--a", str(a), "--a-arm", "graft", "--b", str(b), "--b-arm", "none",
                     "--part", "near", tmp_path=tmp_path)
    assert (near["n"], near["a"]["correct"], near["b"]["correct"], near["only_a"], near["only_b"]) == (2, 2, 1, 1, 0)
    assert near["only_in_a"] == 1 and near["mcnemar_p"] == 1.0        # t3 has no partner in B: left out, counted
    assert near["decode_tokens_a"] is None                              # these attempts do not record them
    far = run_bench("paired_runs.py", "--a", str(a), "--a-arm", "graft", "--b", str(b), "--b-arm", "none",
                    "--part", "far", tmp_path=tmp_path)
    assert (far["n"], far["only_a"], far["only_b"]) == (1, 0, 1)
    wrong_arm = subprocess.run([sys.executable, str(ROOT / "bench" / "paired_runs.py"), "--a", str(a), "--a-arm", "none",
                                "--b", str(b), "--b-arm", "none"], capture_output=True, text=True, timeout=120)
    assert wrong_arm.returncode != 0 and "no attempt 0 of a run ending in '-heldout-none'" in wrong_arm.stderr


def test_paired_runs_by_template_tests_templates_as_units(tmp_path: Path) -> None:
    """Per template counts, `powered` only with instances enough to reach p < 0.05 alone, and the sign test."""
    def attempts(path: Path, arm: str, verified: dict[str, bool]) -> Path:
        path.write_text("".join(json.dumps({"run_id": f"run-x-heldout-{arm}", "problem_id": pid, "attempt": 0,
                                            "verified": ok}) + "\n" for pid, ok in verified.items()))
        return path

    t0 = {f"gsm-symbolic-t0-s11-{i}": True for i in range(6)}            # six instances: powered alone
    a = attempts(tmp_path / "a.jsonl", "graft", {**t0, "gsm-symbolic-t1-s11-0": False, "gsm-symbolic-t1-s11-1": True,
                                                 "gsm-symbolic-t2-s11-0": True, "problem-7": True})
    b = attempts(tmp_path / "b.jsonl", "none", {**{k: False for k in t0}, "gsm-symbolic-t1-s11-0": True,
                                                "gsm-symbolic-t1-s11-1": True, "gsm-symbolic-t2-s11-0": False,
                                                "problem-7": False})
    near = run_bench("paired_runs.py", "--a", str(a), "--a-arm", "graft", "--b", str(b), "--b-arm", "none",
                     "--part", "near", "--by-template", tmp_path=tmp_path)
    assert (near["n"], near["only_a"], near["only_b"]) == (8, 6, 1)     # far t2 and the non-GSM problem left out
    assert [(r["template"], r["n"], r["a"], r["b"], r["powered"]) for r in near["templates"]] == [
        (0, 6, 6, 0, True), (1, 2, 1, 2, False)]
    assert near["templates"][0]["mcnemar_p"] == 2 / 2 ** 6 and near["powered_templates"] == 1
    assert near["sign_test"] == {"templates": 2, "a_more": 1, "b_more": 1, "tied": 0, "p": 1.0}
    everything = run_bench("paired_runs.py", "--a", str(a), "--a-arm", "graft", "--b", str(b), "--b-arm", "none",
                           "--by-template", tmp_path=tmp_path)
    assert everything["n"] == 10 and [r["template"] for r in everything["templates"]] == [0, 1, 2]
    assert everything["sign_test"]["a_more"] == 2                          # problem-7 counted by instance only
    files = [sys.executable, str(ROOT / "bench" / "paired_runs.py"), "--a", str(a), "--a-arm", "graft",
             "--b", str(b), "--b-arm", "none", "--by-template"]
    printed = subprocess.run(files + ["--part", "near"], capture_output=True, text=True, timeout=120)
    assert "t0: A 6/6 vs B 0/6, p = 0.0312" in printed.stdout and "sign test over templates p = 1" in printed.stdout
    only_other = attempts(tmp_path / "c.jsonl", "graft", {"problem-7": True})
    other = attempts(tmp_path / "d.jsonl", "none", {"problem-7": False})
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "paired_runs.py"), "--a", str(only_other), "--a-arm",
                           "graft", "--b", str(other), "--b-arm", "none", "--by-template"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "nothing to group by template" in proc.stderr


def test_paired_runs_scores_sampled_arms_as_the_study_does(tmp_path: Path) -> None:
    """maj@4 and pass@4 from two studies' exported attempts: what one study with both arms would report."""
    def sampled(path: Path, arm: str, tries: dict[str, list[tuple[str | None, bool]]]) -> Path:
        rows = [{"run_id": f"run-{arm}-heldout-{arm}-k4", "problem_id": pid, "attempt": i, "answer": ans, "verified": ok,
                 "decode_tokens": len(arm) * 100 + i}
                for pid, answers in tries.items() for i, (ans, ok) in enumerate(answers)]
        rows += [{"run_id": f"run-{arm}-heldout-{arm}", "problem_id": pid, "attempt": 0, "answer": None,
                  "verified": False} for pid in tries]                        # the greedy run: not maj@4
        path.write_text("".join(json.dumps(r) + "\n" for r in reversed(rows)))   # any order
        return path

    t0, t1, t2 = "gsm-symbolic-t0-s11-0", "gsm-symbolic-t1-s11-0", "gsm-symbolic-t2-s11-0"
    a = sampled(tmp_path / "a.jsonl", "graft", {
        t0: [("7", False), ("12", True), (" 7", False), ("12 ", True)],   # tie 7:12 goes to 7, given first: maj wrong
        t1: [(None, False), ("3", True), ("4", False), ("3", True)],      # maj right
        t2: [("5", False), ("6", False), ("9", True), (None, False)]})    # every answer once: the first wins
    b = sampled(tmp_path / "b.jsonl", "none", {
        t0: [("12", True), ("12", True), ("7", False), (None, False)],
        t1: [("4", False), ("4", False), ("5", False), ("6", False)],
        t2: [(None, False)] * 4})
    maj = run_bench("paired_runs.py", "--a", str(a), "--a-arm", "graft", "--b", str(b), "--b-arm", "none",
                    "--part", "near", "--measure", "maj@4", tmp_path=tmp_path)
    assert (maj["n"], maj["a"]["correct"], maj["b"]["correct"], maj["only_a"], maj["only_b"]) == (2, 1, 1, 1, 1)
    # the 4 sampled attempts of the 2 near problems: graft 500..503 each, none 400..403 each; greedy runs not counted
    assert (maj["decode_tokens_a"], maj["decode_tokens_b"]) == (2 * 2006, 2 * 1606)
    any4 = run_bench("paired_runs.py", "--a", str(a), "--a-arm", "graft", "--b", str(b), "--b-arm", "none",
                     "--measure", "pass@4", tmp_path=tmp_path)
    assert (any4["n"], any4["a"]["correct"], any4["b"]["correct"], any4["measure"]) == (3, 3, 1, "pass@4")
    cut = tmp_path / "cut.jsonl"
    kept = [line for line in a.read_text().splitlines()
            if not (json.loads(line)["problem_id"] == t2 and json.loads(line)["attempt"] == 3)]
    cut.write_text("".join(line + "\n" for line in kept))                   # one sampled attempt lost
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "paired_runs.py"), "--a", str(cut), "--a-arm", "graft",
                           "--b", str(b), "--b-arm", "none", "--measure", "maj@4"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "not 0..3" in proc.stderr and "--resume" in proc.stderr


def test_same_attempts_says_whether_a_rerun_reproduced_attempt_by_attempt(tmp_path: Path) -> None:
    def attempts(path: Path, tag: str, rows: list[tuple[str, str, int, str, bool]]) -> Path:
        path.write_text("".join(json.dumps({"run_id": f"run-{tag}-{kind}", "problem_id": pid, "attempt": i,
                                            "text_sha256": text, "verified": ok, "answer": "1",
                                            "decode_tokens": 10}) + "\n" for kind, pid, i, text, ok in rows))
        return path

    recorded = [("train1", "p0", 0, "aa", True), ("train1", "p0", 1, "bb", False), ("heldout-none", "p1", 0, "cc", False)]
    a = attempts(tmp_path / "a.jsonl", "20261205T183807Z-8dd1f0", recorded)
    same = attempts(tmp_path / "same.jsonl", "20261206T142118Z-6e951e", recorded)      # another tag, same attempts
    ok = run_bench("same_attempts.py", "--a", str(a), "--b", str(same), tmp_path=tmp_path)
    assert ok["reproduced"] is True
    assert [(r["kind"], r["attempts"], r["identical"], r["verified"]) for r in ok["kinds"]] == [
        ("heldout-none", 1, 1, 0), ("train1", 2, 2, 1)]

    changed = attempts(tmp_path / "changed.jsonl", "20261206T142118Z-6e951e",
                       [("train1", "p0", 0, "aa", True), ("train1", "p0", 1, "bX", False),   # another text
                        ("train1", "p9", 0, "dd", False)])                                  # not recorded at all
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "same_attempts.py"), "--a", str(a), "--b",
                           str(changed), "--json"], capture_output=True, text=True, timeout=120)
    out = json.loads(proc.stdout)
    assert proc.returncode == 1 and out["reproduced"] is False
    assert out["kinds"] == [{"kind": "train1", "attempts": 3, "in_a": 2, "identical": 1, "verified": 1,
                             "differ": ["p0#1"]}]
    only = subprocess.run([sys.executable, str(ROOT / "bench" / "same_attempts.py"), "--a", str(a), "--b", str(same),
                           "--kind", "heldout-graft"], capture_output=True, text=True, timeout=120)
    assert only.returncode != 0 and "no run of kind 'heldout-graft'" in only.stderr


def test_stream_study_pairs_two_arms_per_slice_and_resumes_without_running_again(
        tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    """bench/stream.py (issue 55's study) on the tiny model: two slices, two arms, one run each, read back."""
    slices = []
    for i in (1, 2):
        path = tmp_path / f"slice{i}.jsonl"
        path.write_text("".join(json.dumps({"id": f"s{i}-{k}", "problem": f"Solve for x: x + {k} = {k + i}.",
                                            "reference": str(i)}) + "\n" for k in range(2)))
        slices += ["--slice", str(path)]
    work, out = tmp_path / "work", tmp_path / "out.json"
    cmd = [sys.executable, str(ROOT / "bench" / "stream.py"), "--model", str(tiny_dirs["gemma3"]), "--work", str(work),
           *slices, "--budget", "4", "--out", str(out)]
    env = {**os.environ, "PYTHONHASHSEED": "0", "PREFECT_HOME": str(tmp_path / "prefect")}
    env.pop("FLYWHEEL_LIBRARY", None)
    first = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["mode"] == "stream" and [row["slice"] for row in result["slices"]] == [1, 2]
    for row in result["slices"]:
        for arm in ("flywheel", "baseline"):
            assert row[arm]["n"] == 2 and row[arm]["missing"] == 0 and row[arm]["decode_tokens"] > 0
        assert row["baseline"]["routes"]["none"] == 2          # the baseline has no library to route to
    later = result["later"]
    assert later["n"] == 2 and {"flywheel", "baseline", "mcnemar_p", "sign_test"} <= later.keys()
    assert result["library_verify"]["exit"] == 0
    assert str(work) not in json.dumps(result) and "<work>" in result["command"]   # the work folder is not recorded
    problems = [json.loads(line) for line in (tmp_path / "out-problems.jsonl").read_text().splitlines()]
    assert len(problems) == 8
    again = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    resumed = json.loads(out.read_text())
    assert resumed["run_seconds_this_invocation"] == {"flywheel": 0, "baseline": 0}   # everything read back
    assert resumed["slices"] == result["slices"] and resumed["later"] == result["later"]


def test_no_committed_result_records_a_machine_path() -> None:
    """Results say paths relative to the repository or none (issue 57): a scan of every committed result."""
    pattern = re.compile(r'"(/tmp/|/root/|/home/|/work/|/Users/)')
    found = [f"{path.relative_to(ROOT)}:{n}" for path in sorted((ROOT / "bench" / "results").rglob("*.json*"))
             for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1) if pattern.search(line)
             or re.search(r"--(library|work|out) /(tmp|root|home|work)/", line)]
    assert found == [], found[:10]
