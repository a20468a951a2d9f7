"""`flywheel study`: does verified knowledge, grafted into the frozen model, lift it on unseen problems?

The measurement, on one library:

1. seed: at most `curated` curated worked solutions per family of the train set are deposited
   (the first train problems of each family that carry one); everything else the library gains
   comes from the model's own verified attempts, and the catalog says which is which
   (`deposited_by` is `curator:study` or the flow run that verified it);
2. `passes` flywheel passes over the train set: K sampled attempts per unsolved problem sharing
   one prefill, each verified, the first verified one deposited as the model's own;
3. the held-out set (disjoint from train by construction of the `split=` specs) once per arm, paired
   on the same problems and budget: `none` (no grafts) and `graft` (the router's `near` grafts),
   and where asked the arms with other levers (`graft+calc` / `none+calc`: exact arithmetic in the
   decode schedule, so the tool's own share shows; `+ground`: number-grounded decoding). Each arm
   answers once greedily (pass@1) and, with `samples` K > 1 (for the `sampled_arms`, default all),
   K more times sampled: maj@K (the most frequent of the K extracted answers,
   no reference used; a tie goes to the earliest attempt's answer) and pass@K (any of the K
   verified: what the flywheel would deposit). No arm deposits, so the arm is the only difference.

A study is named by a tag (its first stage line says it) and its runs by the tag (`<tag>-train1`,
`<tag>-heldout-graft-k4`, ...): an interrupted study resumes with `resume=<tag>` (`flywheel study
--resume <tag>`), each run where it stopped and finished ones read back, so nothing decoded is lost.
Held-out arms deposit nothing, so a resumed arm gives the uninterrupted figures; a cut train pass
routes its remaining problems through the deposits made before the cut (its decode tokens may differ).
The study owns its library while it runs: a pass's self-deposits are the non-curated ones made
between its run's start and the next pass's, which stays true across resumed segments.

Reported: per pass the verified count, self-deposits, decode tokens and verified solutions per
1,000 decode tokens; held-out accuracy per arm and measure with Wilson 95% intervals; the exact
McNemar test on the paired outcomes and its power (to see a 3:1 discordant split), of every arm
against `none` and against `graft`, pooled and per family (`heldout` and `families` keep the
`none` vs `graft` pass@1 pair; `heldout.paired` is false in a study of one arm, whose "pair" is that arm
against itself);
the inputs' hashes (problem sets, model fingerprint, every artifact SHA-256) so a third party
can re-score. Whatever the model achieves is the result.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from flows.run import RunConfig, flywheel_run, new_run_id, run_env
from flywheel import config
from flywheel.domain import ROUTE_KINDS, Progress
from flywheel.errors import DepositRefusedError, InputError
from flywheel.problemsets import Problem, load_problem_set
from flywheel.stats import mcnemar_exact, mcnemar_power, wilson

CURATOR = "curator:study"
#: Held-out arms: name -> (near grafts, calculator, number grounding); a name lists its levers.
ARMS: dict[str, tuple[bool, bool, bool]] = {
    arm: ("graft" in arm.split("+"), "calc" in arm.split("+"), "ground" in arm.split("+")) for arm in config.STUDY_ARMS}
DEFAULT_ARMS = config.STUDY_DEFAULT_ARMS
#: The arms every other arm is compared with (when they ran).
BASELINES = ("none", "graft")


def family_of(problem_id: str, meta: dict[str, str] | None = None) -> str:
    """The family of a problem: its generated family or GSM-Symbolic template (`meta`), else from its
    id `gen-<family>-...`, or `other`."""
    if meta and meta.get("family"):
        return meta["family"]
    if meta and meta.get("template"):
        return f"template-{meta['template']}"
    parts = problem_id.split("-")
    return parts[1] if len(parts) > 2 and parts[0] == "gen" else "other"


def seed_curated(cfg: RunConfig, problems: list[Problem], per_family: int,
                 progress: Progress | None = None) -> list[str]:
    """Deposit up to `per_family` curated solutions per family; returns the problem ids seeded.

    `progress(i, n, note)` follows the problems looked at: a deposit prefills its whole graft, and
    75 of them take minutes on the 1.5B, which a user should see as deposits, not as silence.
    """
    if per_family <= 0:
        return []
    eng = run_env(cfg).engine()
    lib = run_env(cfg).open_library()
    taken: dict[str, int] = defaultdict(int)
    seeded, circular = [], set()
    for i, p in enumerate(problems, 1):
        if progress is not None:
            progress(i, len(problems), f"depositing curated solution {p.id}")
        fam = family_of(p.id, p.meta)
        if taken[fam] >= per_family or not p.solution or not p.reference:
            continue
        if _plugin_family(p):   # its reference is its own generator's: checking against it proves nothing
            circular.add(fam)
            continue
        try:
            lib.deposit(eng, p, p.solution, p.reference, deposited_by=CURATOR)
        except DepositRefusedError:
            continue
        taken[fam] += 1
        seeded.append(p.id)
    if circular:
        print(f"flywheel: curated solutions of plug-in families are not seeded ({', '.join(sorted(circular))}): "
              "a plug-in's reference is its own generator's, so its check is circular", file=sys.stderr, flush=True)
    return seeded


def _plugin_family(problem: Problem) -> bool:
    """Whether `problem` was generated by a family a plug-in registered (not one kv-flywheel ships)."""
    from flywheel.families import FAMILIES

    name = problem.meta.get("family") if problem.source.startswith("gen:") else None
    return name is not None and name in FAMILIES and not FAMILIES.builtin(name)


def paired(rows: list[tuple[bool, bool]]) -> dict[str, Any]:
    """Accuracy of both arms with Wilson intervals, and the exact McNemar test on (without, with) pairs."""
    n = len(rows)
    out: dict[str, Any] = {"n": n}
    for name, i in (("without_graft", 0), ("with_graft", 1)):
        k = sum(r[i] for r in rows)
        lo, hi = wilson(k, n)
        out[name] = {"correct": k, "accuracy": k / n if n else 0.0, "ci95": [lo, hi]}
    only_with = sum(w and not wo for wo, w in rows)
    only_without = sum(wo and not w for wo, w in rows)
    out.update(only_with=only_with, only_without=only_without, mcnemar_p=mcnemar_exact(only_without, only_with),
               power_3to1=mcnemar_power(only_with + only_without))
    return out


def majority(answers: Sequence[str | None]) -> int | None:
    """Index of the attempt whose answer the most attempts gave (whitespace-insensitive; None does not vote).

    A tie goes to the answer given first. No reference is used: this is what a user without one gets.

        >>> majority(["12", None, " 7", "7", "12"])
        0
        >>> majority([None, "3 ", "3", "4"])
        1
    """
    votes: dict[str, list[int]] = {}
    for i, a in enumerate(answers):
        if a is not None and a.strip():
            votes.setdefault(" ".join(a.split()), []).append(i)
    if not votes:
        return None
    return max(votes.values(), key=lambda idx: (len(idx), -idx[0]))[0]


def _train_run(tag: str, i: int) -> str:
    """The run id of study `tag`'s train pass `i` (1-based)."""
    return f"{tag}-train{i}"


def _heldout_run(tag: str, arm: str, samples: int = 1) -> str:
    """The run id of study `tag`'s held-out `arm`: its greedy run, or with `samples` > 1 its sampled one."""
    return f"{tag}-heldout-{arm}" + (f"-k{samples}" if samples > 1 else "")


def _arm_config(cfg: RunConfig, heldout: str, run_id: str, arm: str, attempts: int) -> RunConfig:
    graft, calc, ground = ARMS[arm]
    return cfg.model_copy(update={"problems": heldout, "run_id": run_id, "no_graft": not graft, "deposit": False,
                                  "attempts": attempts, "calculator": calc, "grounding": ground})


def _say(stages: Progress | None) -> Callable[[str], None]:
    """Report a stage's line to `stages`, counting the stages (their number is not known ahead)."""
    count = [0]

    def say(line: str) -> None:
        count[0] += 1
        if stages is not None:
            stages(count[0], None, line)

    return say


def run_arm(cfg: RunConfig, heldout: str, tag: str, arm: str, samples: int,
            progress: Progress | None = None, stages: Progress | None = None) -> dict[str, Any]:
    """One held-out arm: a greedy run (pass@1) and, with `samples` > 1, a sampled one (maj@K, pass@K).

    Returns per measure {problem_id: verified}, the runs' summaries and decode tokens. `progress`
    follows each run's problems, `stages` each run's result (a line).
    """
    say = _say(stages)
    lib = run_env(cfg).open_library()
    greedy = flywheel_run(_arm_config(cfg, heldout, _heldout_run(tag, arm), arm, 1), progress)
    out: dict[str, Any] = {"summaries": [greedy], "outcomes": {
        "pass@1": {r["problem_id"]: bool(r["verified"]) for r in greedy["results"]}}}
    t = greedy["totals"]
    say(f"held-out {arm}: pass@1 {t['verified']}/{t['problems']}, {t['decode_tokens']:,} decode tokens")
    if samples > 1:
        sampled = flywheel_run(_arm_config(cfg, heldout, _heldout_run(tag, arm, samples), arm, samples),
                               progress)
        by_problem: dict[str, list[Any]] = defaultdict(list)
        for a in sorted(lib.catalog.attempts_for_run(sampled["run_id"]), key=lambda a: a.attempt_index):
            by_problem[a.problem_id].append(a)
        maj, any_ = {}, {}
        for r in sampled["results"]:
            attempts = by_problem.get(r["problem_id"], [])
            winner = majority([a.answer for a in attempts])
            maj[r["problem_id"]] = winner is not None and bool(attempts[winner].verified)
            any_[r["problem_id"]] = any(a.verified for a in attempts)
        out["outcomes"][f"maj@{samples}"] = maj
        out["outcomes"][f"pass@{samples}"] = any_
        out["summaries"].append(sampled)
        say(f"held-out {arm}: maj@{samples} {sum(maj.values())}/{len(maj)}, pass@{samples} {sum(any_.values())}/"
            f"{len(any_)}, {sampled['totals']['decode_tokens']:,} decode tokens")
    return out


def _accuracy(outcomes: dict[str, bool], ids: Sequence[str]) -> dict[str, Any]:
    k, n = sum(outcomes[i] for i in ids), len(ids)
    lo, hi = wilson(k, n)
    return {"correct": k, "n": n, "accuracy": k / n if n else 0.0, "ci95": [lo, hi]}


def compare(a: dict[str, bool], b: dict[str, bool], ids: Sequence[str]) -> dict[str, Any]:
    """Exact McNemar of arm `b` against arm `a` on the same problems (`only_with` = solved only by b)."""
    only_b = sum(b[i] and not a[i] for i in ids)
    only_a = sum(a[i] and not b[i] for i in ids)
    return {"n": len(ids), "only_with": only_b, "only_without": only_a, "mcnemar_p": mcnemar_exact(only_a, only_b),
            "power_3to1": mcnemar_power(only_a + only_b)}


def arms_report(results: dict[str, dict[str, Any]], order: Sequence[str],
                family: dict[str, str]) -> dict[str, Any]:
    """Accuracy per arm and measure, and each arm against each baseline, pooled and per family."""
    families = sorted(set(family.values()))
    report: dict[str, Any] = {"accuracy": {}, "comparisons": []}
    for arm, res in results.items():
        report["accuracy"][arm] = {m: _accuracy(o, order) for m, o in res["outcomes"].items()}
        report["accuracy"][arm]["decode_tokens"] = sum(s["totals"]["decode_tokens"] for s in res["summaries"])
        report["accuracy"][arm]["run_ids"] = [s["run_id"] for s in res["summaries"]]
    for base in BASELINES:
        if base not in results:
            continue
        for arm, res in results.items():
            if arm == base or (base == "graft" and arm == "none"):
                continue
            for measure, outcome in res["outcomes"].items():
                if measure not in results[base]["outcomes"]:   # the baseline was not sampled
                    continue
                ref = results[base]["outcomes"][measure]
                row = {"arm": arm, "against": base, "measure": measure, **compare(ref, outcome, order),
                       "families": {f: compare(ref, outcome, [i for i in order if family[i] == f]) for f in families}}
                report["comparisons"].append(row)
    return report


#: GSM-Symbolic's template split as transfer: an instance of a train template is `near` (a verified sibling
#: may be in the library), one of a held-out template is `far` (no sibling can be).
TRANSFER_OF_SPLIT = {"train": "near", "heldout": "far"}


def transfer_report(results: dict[str, dict[str, Any]], order: Sequence[str],
                    meta: dict[str, dict[str, str]]) -> dict[str, Any]:
    """`arms_report` on the near and the far held-out problems apart (problems whose `meta` names a `split`),
    with each arm's greedy decode tokens on that part; empty when no problem names its split."""
    kind = {pid: TRANSFER_OF_SPLIT.get((meta.get(pid) or {}).get("split", ""), "") for pid in order}
    out: dict[str, Any] = {}
    for name in ("near", "far"):
        ids = [pid for pid in order if kind[pid] == name]
        if not ids:
            continue
        part = arms_report(results, ids, {pid: name for pid in ids})
        for arm, res in results.items():
            rows = {r["problem_id"]: r for r in res["summaries"][0]["results"]}
            part["accuracy"][arm]["decode_tokens"] = sum(rows[pid]["decode_tokens"] for pid in ids if pid in rows)
            part["accuracy"][arm]["routes"] = {k: sum(rows[pid]["route"] == k for pid in ids if pid in rows)
                                               for k in ROUTE_KINDS}
        out[name] = part
    return out


def _first_run(tag: str, passes: int, arms: Sequence[str]) -> str:
    """The run a study tagged `tag` starts first (runs go in order: train passes, then the arms'):
    it exists once the study has run anything."""
    return _train_run(tag, 1) if passes > 0 else _heldout_run(tag, arms[0])


def check_resumable(run: Any, tag: str, shape: dict[str, Any]) -> None:
    """Refuse to resume the study whose first run is `run` in another shape than it recorded, naming what differs
    (a study started before shapes were recorded has none, and resumes as before)."""
    then = (run.recorded("settings") or {}).get("study")
    if not isinstance(then, dict):
        return
    for key in sorted(then.keys() | shape.keys()):
        if then.get(key) != shape.get(key):
            option = "--problems" if key == "train" else "--" + key.replace("_", "-")
            raise InputError(f"study {tag!r} was started with {option} {then.get(key)!r}, "
                             f"not {shape.get(key)!r}",
                             hint="resume with the study's own arguments, or start a new study without --resume")


def _own_deposits(lib: Any, tag: str, i: int) -> int:
    """Self-deposits of train pass `i` (1-based): non-curated solutions catalogued from its run's start
    until the next pass's run started (or now). Exact across resumed segments of the pass, whose
    deposits carry each segment's flow-run id, as long as the study alone writes to its library."""
    start = lib.catalog.get_run(_train_run(tag, i)).started_at
    nxt = lib.catalog.get_run(_train_run(tag, i + 1))
    end = nxt.started_at if nxt is not None else None
    return sum(1 for a in lib.catalog.list_artifacts()
               if (s := lib.catalog.get_solution(a.solution_id)) is not None and s.deposited_by != CURATOR
               and s.created_at >= start and (end is None or s.created_at < end))


def run_study(cfg: RunConfig, *, train: str, heldout: str, passes: int = config.STUDY_PASSES,
              curated: int = config.STUDY_CURATED, arms: Sequence[str] = DEFAULT_ARMS, samples: int = 1,
              sampled_arms: Sequence[str] | None = None, resume: str | None = None,
              progress: Progress | None = None, stages: Progress | None = None) -> dict[str, Any]:
    """The study described in the module docstring; `cfg` carries model, library, budget, attempts, slots.

    `progress(done, total, note)` follows each run's problems (`flywheel_run`); `stages(n, None, line)`
    follows each stage (seeding, each train pass, each held-out run) with a line saying how it went,
    the first one naming the study's tag. `resume` is the tag of an interrupted study to finish, with
    the same arguments (each run refuses other settings, as `flywheel run --run-id` does).

    Returns the JSON object of `flywheel study --json` (keys `passes`, `heldout`, `families`,
    `arms`, `inputs`).
    """
    unknown = [a for a in arms if a not in ARMS]
    if unknown or not arms:
        raise InputError(f"unknown study arm(s): {', '.join(unknown) or '(none given)'}",
                         hint=f"arms are {', '.join(ARMS)}, e.g. --arms none,graft,graft+calc")
    if samples < 1:
        raise InputError(f"--samples must be at least 1, got {samples}")
    sampled = list(arms) if sampled_arms is None else list(sampled_arms)
    if not set(sampled) <= set(arms):
        raise InputError(f"--sampled-arms {', '.join(a for a in sampled if a not in arms)} is not among --arms",
                         hint=f"sampled arms are a subset of {', '.join(arms)}")
    say = _say(stages)
    lib = run_env(cfg).open_library()
    if resume is not None and lib.catalog.get_run(_first_run(resume, passes, arms)) is None:
        raise InputError(f"no run of study {resume!r} in the library {cfg.library}",
                         hint="--resume takes the tag an interrupted study printed first (`study run-...: ...`), "
                              "with that study's library and arguments; a study stopped before its first run "
                              "is started again without --resume (curated deposits already made are kept)")
    shape = {"train": train, "heldout": heldout, "passes": passes, "curated": curated, "arms": list(arms),
             "samples": samples, "sampled_arms": sampled}
    if resume is not None:   # before anything is seeded: a resume in another shape changes nothing
        check_resumable(lib.catalog.get_run(_first_run(resume, passes, arms)), resume, shape)
    cfg = cfg.model_copy(update={"study": shape})
    tag = resume or new_run_id()
    say(f"study {tag}: {'resuming' if resume else 'started'} (if interrupted, the same command with "
        f"--resume {tag} finishes it)")
    train_set = load_problem_set(train)
    held_set = load_problem_set(heldout)
    overlap = {p.text for p in train_set.problems} & {p.text for p in held_set.problems}
    seeded = seed_curated(cfg, train_set.problems, curated, progress)
    say(f"seeded {len(seeded)} curated solutions ({curated} per family at most)")
    pass_rows = []
    for i in range(1, passes + 1):
        summary = flywheel_run(cfg.model_copy(update={"problems": train, "run_id": _train_run(tag, i),
                                                      "no_graft": False, "deposit": True}), progress)
        own = _own_deposits(lib, tag, i)
        t = summary["totals"]
        pass_rows.append({"pass": i, "run_id": summary["run_id"], "problems": t["problems"],
                          "verified": t["verified"], "self_deposits": own, "decode_tokens": t["decode_tokens"],
                          "verified_per_1k_decode_tokens": 1000 * t["verified"] / max(1, t["decode_tokens"]),
                          "wall_seconds": summary["timing"]["wall_seconds"],   # this call's (see resumed_attempts)
                          "resumed_attempts": summary["timing"]["resumed_attempts"]})
        say(f"train pass {i}: {t['verified']}/{t['problems']} verified, {own} self-deposits, "
            f"{t['decode_tokens']:,} decode tokens")
        if not own and i < passes:   # the library is as it was: another pass (same seeds) would repeat this one
            say(f"train pass {i} deposited nothing new: the passes stop here (another would repeat it)")
            break
    results = {arm: run_arm(cfg, heldout, tag, arm, samples if arm in sampled else 1, progress, stages)
               for arm in dict.fromkeys(arms)}
    meta = {p.id: p.meta for p in held_set.problems}
    order = list(results[next(iter(results))]["outcomes"]["pass@1"])
    family = {pid: family_of(pid, meta.get(pid)) for pid in order}
    # The study's headline pair (none vs graft, pass@1), where both ran; else the first arm against itself.
    base_arm, graft_arm = ("none" if "none" in results else next(iter(results))), ("graft" if "graft" in results
                                                                                 else next(iter(results)))
    without_ok, with_ok = results[base_arm]["outcomes"]["pass@1"], results[graft_arm]["outcomes"]["pass@1"]
    rows, per_family = [], defaultdict(list)
    for pid in order:
        pair = (without_ok[pid], with_ok[pid])
        rows.append(pair)
        per_family[family[pid]].append(pair)
    held = paired(rows)
    for key, arm in (("without_graft", base_arm), ("with_graft", graft_arm)):
        t = results[arm]["summaries"][0]["totals"]
        held[key].update(arm=arm, decode_tokens=t["decode_tokens"], run_id=results[arm]["summaries"][0]["run_id"],
                         decode_tokens_per_solved=t["decode_tokens"] / t["verified"] if t["verified"] else None)
    held["paired"] = base_arm != graft_arm   # False: one arm only (an arm split into its own study), nothing paired
    graft_runs = results[graft_arm]["summaries"][0]
    held["routes"] = {k: sum(r["route"] == k for r in graft_runs["results"]) for k in ROUTE_KINDS}
    eng = run_env(cfg).engine()
    artifacts = [{"sha256": a.sha256, "deposited_by": s.deposited_by if (s := lib.catalog.get_solution(a.solution_id))
                  else None} for a in lib.catalog.list_artifacts(eng.fingerprint.digest)]
    return {
        "passes": pass_rows,
        "heldout": held,
        "families": {fam: paired(pairs) for fam, pairs in sorted(per_family.items())},
        "arms": arms_report(results, order, family),
        "transfer": transfer_report(results, order, meta),
        "library_growth": [{"pass": 0, "artifacts": len(seeded)}] + [
            {"pass": p["pass"], "artifacts": len(seeded) + sum(q["self_deposits"] for q in pass_rows[:p["pass"]])}
            for p in pass_rows],
        "inputs": {"train": train, "train_hash": train_set.hash, "heldout": heldout, "heldout_hash": held_set.hash,
                   "train_heldout_overlap": len(overlap), "study": tag, "model": cfg.model,
                   "model_fingerprint": eng.fingerprint.digest, "budget": cfg.budget, "attempts": cfg.attempts,
                   "seed": cfg.seed, "slots": cfg.slots, "near_members": cfg.near_members, "curated": seeded,
                   "arms": list(results), "samples": samples,
                   "sampled_arms": [a for a in results if a in sampled] if samples > 1 else [],
                   # what each held-out run decoded under (calculator version, grounding, kernel, sampler, ...),
                   # as its catalog row records it: a reader of this JSON need not open the catalog
                   "heldout_schedules": {s["run_id"]: s["timing"]["schedule"]
                                         for res in results.values() for s in res["summaries"]},
                   "artifacts": artifacts},
    }


def report_lines(study: dict[str, Any]) -> list[str]:
    """What `flywheel study` prints after its stage lines: held-out accuracy of the headline pair (named by its
    arms) with the paired test and per family, near/far transfer, every arm's measures and comparisons.

    A study of one arm (an arm run as its own study, to be paired with another's by `bench/paired_runs.py`)
    prints that arm once and says nothing was paired: its headline "pair" is the arm against itself.
    """
    h = study["heldout"]
    paired = h.get("paired", True)   # JSON written before the key existed always had both arms

    def acc(key: str) -> str:
        a = h[key]
        return (f"{a['correct']}/{h['n']} = {a['accuracy']:.1%} (95% CI {a['ci95'][0]:.1%}-{a['ci95'][1]:.1%})")

    if paired:
        lines = [f"held-out {key.replace('_', ' ')} (arm {h[key]['arm']}): {acc(key)}"
                 for key in ("without_graft", "with_graft")]
        lines.append(f"paired: only with graft {h['only_with']}, only without {h['only_without']}; exact McNemar "
                     f"p = {h['mcnemar_p']:.3g} (power to see a 3:1 split: {h['power_3to1']:.0%})")
        lines += [f"  {fam:>10}: {f['without_graft']['correct']}/{f['n']} -> {f['with_graft']['correct']}/{f['n']}"
                  f" (p = {f['mcnemar_p']:.3g})" for fam, f in study["families"].items()]
    else:
        lines = [f"held-out, arm {h['with_graft']['arm']} (one arm: nothing paired; pair two studies' exported "
                 f"attempts with bench/paired_runs.py): {acc('with_graft')}"]
    for kind, part in study["transfer"].items():   # GSM-Symbolic: instances of train (near) / held-out (far) templates
        for arm, a_acc in part["accuracy"].items():
            a = a_acc["pass@1"]
            lines.append(f"{kind} transfer, arm {arm}: pass@1 {a['correct']}/{a['n']} ({a['ci95'][0]:.0%}-"
                         f"{a['ci95'][1]:.0%}), {a_acc['decode_tokens']:,} decode tokens")
    for arm, a_acc in study["arms"]["accuracy"].items():
        measures = ", ".join(f"{m} {a['correct']}/{a['n']} ({a['ci95'][0]:.0%}-{a['ci95'][1]:.0%})"
                             for m, a in a_acc.items() if isinstance(a, dict))
        lines.append(f"arm {arm}: {measures}")
    lines += [f"  {c['arm']} vs {c['against']} ({c['measure']}): +{c['only_with']} -{c['only_without']}, "
              f"p = {c['mcnemar_p']:.3g}" for c in study["arms"]["comparisons"]]
    return lines


def plot(study: dict[str, Any], path: Path) -> Path:
    """Accuracy per train pass (verified share), then held-out accuracy with and without grafts, with intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    xs = [p["pass"] for p in study["passes"]]
    for p in study["passes"]:
        lo, hi = wilson(p["verified"], p["problems"])
        acc = p["verified"] / max(1, p["problems"])
        ax.errorbar([p["pass"]], [acc], yerr=[[acc - lo], [hi - acc]], fmt="o", color="tab:blue", capsize=4)
        ax.annotate(f"{p['verified']}/{p['problems']}", (p["pass"], acc), textcoords="offset points", xytext=(6, 4))
    h = study["heldout"]
    x_held = (max(xs) if xs else 0) + 1
    paired = h.get("paired", True)
    shown = ((-0.12, "without_graft", "tab:gray"), (0.12, "with_graft", "tab:green")) if paired else \
        ((0.0, "with_graft", "tab:gray"),)   # one arm: drawn once, under its own name
    for dx, key, colour in shown:
        a = h[key]
        lo, hi = a["ci95"]
        name = f"{key.replace('_', ' ')} (arm {a['arm']})" if paired else f"arm {a['arm']}"
        ax.errorbar([x_held + dx], [a["accuracy"]], yerr=[[a["accuracy"] - lo], [hi - a["accuracy"]]], fmt="s",
                    color=colour, capsize=4, label=f"held-out {name}: {a['correct']}/{h['n']}")
    ax.set_xticks([*xs, x_held], [*(f"train pass {x}" for x in xs), "held-out"])
    ax.set_ylim(0, 1)
    ax.set_ylabel("verified share (95% Wilson interval)")
    ax.set_title(f"study: McNemar p = {h['mcnemar_p']:.3g} (power for a 3:1 split {h['power_3to1']:.0%})" if paired
                 else "study: one held-out arm (nothing paired)")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
