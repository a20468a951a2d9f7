"""`flywheel study`: does verified knowledge, grafted into the frozen model, lift it on unseen problems?

The measurement, on one library:

1. seed: at most `curated` curated worked solutions per family of the train set are deposited
   (the first train problems of each family that carry one); everything else the library gains
   comes from the model's own verified attempts, and the catalog says which is which
   (`deposited_by` is `curator:study` or the flow run that verified it);
2. `passes` flywheel passes over the train set: K sampled attempts per unsolved problem sharing
   one prefill, each verified, the first verified one deposited as the model's own;
3. the held-out set (disjoint from train by construction of the `split=` specs), twice, paired on
   the same problems and budget, one greedy attempt each: without grafts, and with the router's
   `near` grafts. Neither arm deposits, so the graft is the only difference.

Reported: per pass the verified count, self-deposits, decode tokens and verified solutions per
1,000 decode tokens; held-out accuracy per arm with Wilson 95% intervals, the exact McNemar test
on the paired outcomes and its power (to see a 3:1 discordant split), pooled and per family;
the inputs' hashes (problem sets, model fingerprint, every artifact SHA-256) so a third party
can re-score. Whatever the model achieves is the result.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flows.run import RunConfig, flywheel_run, new_run_id, run_env
from flywheel import config
from flywheel.domain import ROUTE_KINDS
from flywheel.errors import DepositRefusedError
from flywheel.problemsets import Problem, load_problem_set
from flywheel.stats import mcnemar_exact, mcnemar_power, wilson

CURATOR = "curator:study"


def family_of(problem_id: str, meta: dict[str, str] | None = None) -> str:
    """The generated family of a problem (its `meta`, else its id `gen-<family>-...`), or `other`."""
    if meta and meta.get("family"):
        return meta["family"]
    parts = problem_id.split("-")
    return parts[1] if len(parts) > 2 and parts[0] == "gen" else "other"


def seed_curated(cfg: RunConfig, problems: list[Problem], per_family: int) -> list[str]:
    """Deposit up to `per_family` curated solutions per family; returns the problem ids seeded."""
    if per_family <= 0:
        return []
    eng = run_env(cfg).engine()
    lib = run_env(cfg).open_library()
    taken: dict[str, int] = defaultdict(int)
    seeded = []
    for p in problems:
        fam = family_of(p.id, p.meta)
        if taken[fam] >= per_family or not p.solution or not p.reference:
            continue
        try:
            lib.deposit(eng, p, p.solution, p.reference, deposited_by=CURATOR)
        except DepositRefusedError:
            continue
        taken[fam] += 1
        seeded.append(p.id)
    return seeded


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


def run_study(cfg: RunConfig, *, train: str, heldout: str, passes: int = config.STUDY_PASSES,
              curated: int = config.STUDY_CURATED, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The study described in the module docstring; `cfg` carries model, library, budget, attempts, slots.

    Returns the JSON object of `flywheel study --json` (keys `passes`, `heldout`, `families`, `inputs`).
    """
    say = progress or (lambda _: None)
    tag = new_run_id()
    train_set = load_problem_set(train)
    held_set = load_problem_set(heldout)
    overlap = {p.text for p in train_set.problems} & {p.text for p in held_set.problems}
    seeded = seed_curated(cfg, train_set.problems, curated)
    say(f"seeded {len(seeded)} curated solutions ({curated} per family at most)")
    lib = run_env(cfg).open_library()
    pass_rows = []
    for i in range(1, passes + 1):
        summary = flywheel_run(cfg.model_copy(update={"problems": train, "run_id": f"{tag}-train{i}",
                                                      "no_graft": False, "deposit": True}))
        by = {summary["flow_run_id"], summary["run_id"]}
        own = [a for a in lib.catalog.list_artifacts()
               if (sol := lib.catalog.get_solution(a.solution_id)) is not None and sol.deposited_by in by]
        t = summary["totals"]
        pass_rows.append({"pass": i, "run_id": summary["run_id"], "problems": t["problems"],
                          "verified": t["verified"], "self_deposits": len(own), "decode_tokens": t["decode_tokens"],
                          "verified_per_1k_decode_tokens": 1000 * t["verified"] / max(1, t["decode_tokens"]),
                          "wall_seconds": summary["timing"]["wall_seconds"]})
        say(f"train pass {i}: {t['verified']}/{t['problems']} verified, {len(own)} self-deposits, "
            f"{t['decode_tokens']:,} decode tokens")
        if not own and i < passes:   # the library is as it was: another pass (same seeds) would repeat this one
            say(f"train pass {i} deposited nothing new: the passes stop here (another would repeat it)")
            break
    arms = {}
    for arm, no_graft in (("without", True), ("with", False)):
        arms[arm] = flywheel_run(cfg.model_copy(update={
            "problems": heldout, "run_id": f"{tag}-heldout-{arm}", "no_graft": no_graft, "deposit": False,
            "attempts": 1}))
        t = arms[arm]["totals"]
        say(f"held-out {arm} grafts: {t['verified']}/{t['problems']} verified, {t['decode_tokens']:,} decode tokens")
    with_by = {r["problem_id"]: r for r in arms["with"]["results"]}
    meta = {p.id: p.meta for p in held_set.problems}
    rows, per_family = [], defaultdict(list)
    for r in arms["without"]["results"]:
        g = with_by[r["problem_id"]]
        pair = (bool(r["verified"]), bool(g["verified"]))
        rows.append(pair)
        per_family[family_of(r["problem_id"], meta.get(r["problem_id"]))].append(pair)
    held = paired(rows)
    for arm in ("without", "with"):
        t = arms[arm]["totals"]
        held[f"{arm}_graft"].update(decode_tokens=t["decode_tokens"], run_id=arms[arm]["run_id"],
                                    decode_tokens_per_solved=t["decode_tokens"] / t["verified"] if t["verified"]
                                    else None)
    held["routes"] = {k: sum(r["route"] == k for r in arms["with"]["results"]) for k in ROUTE_KINDS}
    eng = run_env(cfg).engine()
    artifacts = [{"sha256": a.sha256, "deposited_by": s.deposited_by if (s := lib.catalog.get_solution(a.solution_id))
                  else None} for a in lib.catalog.list_artifacts(eng.fingerprint.digest)]
    return {
        "passes": pass_rows,
        "heldout": held,
        "families": {fam: paired(pairs) for fam, pairs in sorted(per_family.items())},
        "library_growth": [{"pass": 0, "artifacts": len(seeded)}] + [
            {"pass": p["pass"], "artifacts": len(seeded) + sum(q["self_deposits"] for q in pass_rows[:p["pass"]])}
            for p in pass_rows],
        "inputs": {"train": train, "train_hash": train_set.hash, "heldout": heldout, "heldout_hash": held_set.hash,
                   "train_heldout_overlap": len(overlap), "model": cfg.model,
                   "model_fingerprint": eng.fingerprint.digest, "budget": cfg.budget, "attempts": cfg.attempts,
                   "seed": cfg.seed, "slots": cfg.slots, "near_members": cfg.near_members, "curated": seeded, "artifacts": artifacts},
    }


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
    for dx, arm, colour in ((-0.12, "without_graft", "tab:gray"), (0.12, "with_graft", "tab:green")):
        a = h[arm]
        lo, hi = a["ci95"]
        ax.errorbar([x_held + dx], [a["accuracy"]], yerr=[[a["accuracy"] - lo], [hi - a["accuracy"]]], fmt="s",
                    color=colour, capsize=4, label=f"held-out {arm.replace('_', ' ')}: {a['correct']}/{h['n']}")
    ax.set_xticks([*xs, x_held], [*(f"train pass {x}" for x in xs), "held-out"])
    ax.set_ylim(0, 1)
    ax.set_ylabel("verified share (95% Wilson interval)")
    ax.set_title(f"study: McNemar p = {h['mcnemar_p']:.3g} (power for a 3:1 split {h['power_3to1']:.0%})")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
