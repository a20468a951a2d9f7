"""A GSM-Symbolic study read by what each held-out problem was grafted with: its own template's
solution (a *sibling*), another template's, or nothing — and the library's template coverage.

`flywheel study` pairs the `none` and `graft` arms over all near (train-template) or far
(held-out-template) instances. In a cold library only the templates the model solved itself
have a sibling to graft; the others are routed to whatever the retriever finds nearest. This
splits each part by the graft actually restored (from the catalog: the attempt's grafted
artifact -> its solution's problem -> that problem's template) — a descriptive split, not a
pre-registered test: the groups are chosen by what the model solved.

    .venv/bin/python bench/study_split.py --library /tmp/cold32/lib --study /tmp/cold32/out.json [--json]
    # a study run with --arms graft only, its `none` arm an anchor from another study's exported attempts:
    .venv/bin/python bench/study_split.py --library /tmp/cold15-32/lib --study /tmp/cold15-32/out.json \
        --none-attempts bench/results/issue32-base-qwen2.5-coder-1.5b-attempts.jsonl
    # two other arms of one study (the columns keep the names `none` and `graft`):
    .venv/bin/python bench/study_split.py --library /tmp/calc32/lib --study /tmp/calc32/out.json \
        --arms none+calc,graft+calc

Coverage counts the train templates with at least one artifact not deposited by a curator
(`deposited_by` not starting with `curator`): the model's own verified solutions.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
from collections import defaultdict  # noqa: E402
from typing import Any  # noqa: E402

_TEMPLATE = re.compile(r"^gsm-symbolic-t(\d+)-")


def template_of(problem_id: str | None) -> int | None:
    """The template number in a GSM-Symbolic problem id (`gsm-symbolic-t7-s11-0` -> 7), else None."""
    m = _TEMPLATE.match(problem_id or "")
    return int(m.group(1)) if m else None


def anchor_outcomes(path: Path) -> dict[str, tuple[bool, int]]:
    """problem id -> (verified, decode tokens) of attempt 0 of the `-heldout-none` run in an exported attempts file."""
    rows: dict[str, tuple[bool, int]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        a = json.loads(line) if line.strip() else None
        if a and a["run_id"].endswith("-heldout-none") and a["attempt"] == 0:
            rows[a["problem_id"]] = (bool(a["verified"]), int(a["decode_tokens"]))
    if not rows:
        raise SystemExit(f"{path}: no attempt 0 of a run ending in '-heldout-none'")
    return rows


def split(study: dict[str, Any], lib: Any, none: dict[str, tuple[bool, int]] | None = None,
          arms: tuple[str, str] = ("none", "graft")) -> dict[str, Any]:
    """Coverage and the per-group pass@1 of the study's `none` and `graft` arms (attempt 0 of each problem).

    `none`: the `none` arm's (verified, decode tokens) by problem from elsewhere (`anchor_outcomes`), for a
    study that ran `graft` alone; its problems must cover the graft arm's. `arms`: the study's arms that play
    `none` and `graft` (e.g. `none+calc`, `graft+calc`)."""
    from flywheel.sources.gsm_symbolic import HELDOUT_TEMPLATES, split_of, templates
    from flywheel.stats import mcnemar_exact, wilson

    cat = lib.catalog
    own_templates: set[int] = set()
    artifact_template: dict[str, int | None] = {}
    kinds: dict[str, int] = defaultdict(int)
    for art in cat.list_artifacts():
        sol = cat.get_solution(art.solution_id)
        t = template_of(sol.problem_id if sol else None)
        artifact_template[art.sha256] = t
        own = sol is not None and not (sol.deposited_by or "").startswith("curator")
        kinds["own" if own else "curated"] += 1
        if own and t is not None and split_of(t) == "train":
            own_templates.add(t)
    n_train = len(templates()) - len(HELDOUT_TEMPLATES)

    accuracy = study["arms"]["accuracy"]
    base, grafted_arm = arms
    if none is None and base not in accuracy:
        raise SystemExit(f"the study has no `{base}` arm: give its anchor's attempts with --none-attempts")
    if grafted_arm not in accuracy:
        raise SystemExit(f"the study has no `{grafted_arm}` arm; it has {', '.join(sorted(accuracy))}")
    runs = {"graft": accuracy[grafted_arm]["run_ids"][0]}
    if none is None:                                   # the study's own base arm, not an anchor from elsewhere
        runs["none"] = accuracy[base]["run_ids"][0]
    first = {arm: {a.problem_id: a for a in cat.attempts_for_run(run) if a.attempt_index == 0}
             for arm, run in runs.items()}
    if none is None:
        none = {pid: (bool(a.verified), a.decode_tokens) for pid, a in first["none"].items()}
    missing = sorted(first["graft"].keys() - none.keys())
    if missing:
        raise SystemExit(f"the `none` outcomes lack {len(missing)} of the graft arm's problems (e.g. {missing[0]})")
    groups: dict[tuple[str, str], list[tuple[bool, bool, int, int]]] = defaultdict(list)
    for pid, g in first["graft"].items():
        base_verified, base_tokens = none[pid]
        own_t = template_of(pid)
        part = "near" if own_t is not None and split_of(own_t) == "train" else "far"
        grafted = artifact_template.get(g.grafted_artifact_sha or "", None) if g.grafted_artifact_sha else None
        group = ("no graft" if not g.grafted_artifact_sha else
                 "sibling" if grafted == own_t else "other template")
        groups[(part, group)].append((base_verified, bool(g.verified), base_tokens, g.decode_tokens))
    rows = []
    for (part, group), pairs in sorted(groups.items()):
        n = len(pairs)
        without, with_ = sum(p[0] for p in pairs), sum(p[1] for p in pairs)
        only_with = sum(p[1] and not p[0] for p in pairs)
        only_without = sum(p[0] and not p[1] for p in pairs)
        rows.append({"part": part, "group": group, "n": n,
                     "none": {"correct": without, "ci95": wilson(without, n), "decode_tokens": sum(p[2] for p in pairs)},
                     "graft": {"correct": with_, "ci95": wilson(with_, n), "decode_tokens": sum(p[3] for p in pairs)},
                     "only_with": only_with, "only_without": only_without,
                     "mcnemar_p": mcnemar_exact(only_with, only_without)})
    return {"library": {"artifacts": dict(kinds), "own_train_templates": sorted(own_templates),
                        "coverage": {"covered": len(own_templates), "of": n_train,
                                     "share": len(own_templates) / n_train,
                                     "ci95": wilson(len(own_templates), n_train)}},
            "arms": {"none": base, "graft": grafted_arm}, "runs": runs, "groups": rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--library", required=True, help="the study's library root")
    ap.add_argument("--study", required=True, help="the study's JSON (`flywheel study --json` output)")
    ap.add_argument("--none-attempts", type=Path,
                    help="the `none` arm from another study's exported attempts (a study run with --arms graft)")
    ap.add_argument("--arms", default="none,graft", metavar="NONE,GRAFT",
                    help="the study's two arms to compare, without and with a graft (default: none,graft)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = ap.parse_args(argv)
    arms = tuple(a.strip() for a in args.arms.split(","))
    if len(arms) != 2 or not all(arms):
        ap.error(f"--arms {args.arms!r}: give two arm names, e.g. none+calc,graft+calc")
    from flows import runtime
    from flywheel import config

    root = Path(args.library)
    lib = runtime.library(str(root), config.database_url(root, None))
    study = json.loads(Path(args.study).read_text().strip().splitlines()[-1])
    out = split(study, lib, anchor_outcomes(args.none_attempts) if args.none_attempts else None, (arms[0], arms[1]))
    if args.json:
        print(json.dumps(out, sort_keys=True))
        return 0
    c = out["library"]["coverage"]
    print(f"library: {out['library']['artifacts']}; the model's own cover {c['covered']}/{c['of']} train templates "
          f"({c['share']:.0%}, 95% CI {c['ci95'][0]:.0%}-{c['ci95'][1]:.0%})")
    print(f"{'part':<5} {'grafted with':<15} {'n':>4} {'none':>6} {'graft':>6} {'+/-':>7} {'p':>7} {'tokens none':>12} {'graft':>8}")
    for r in out["groups"]:
        print(f"{r['part']:<5} {r['group']:<15} {r['n']:>4} {r['none']['correct']:>6} {r['graft']['correct']:>6} "
              f"{'+' + str(r['only_with']) + '/-' + str(r['only_without']):>7} {r['mcnemar_p']:>7.3g} "
              f"{r['none']['decode_tokens']:>12,} {r['graft']['decode_tokens']:>8,}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
