#!/usr/bin/env bash
# Resume the pre-registered stream study (bench/preregistered/issue55-stream-1.5b.md) on any host, after
# `make install` and `make model-qwen-1.5b`. Where /tmp/stream15 survived, the registered command simply goes on.
# Else its state is restored from this folder: both arms' catalogs (SQLite backups) and library ids, both
# inboxes (slices and claim ledgers); the flywheel arm's artifacts are prefilled again (`library rebuild`) and
# must hash equal to their catalogued names under the runs' own fingerprint, else the study is not continued
# (it is reported cut where it stopped). The driver runs from a worktree of the prereg commit a2969ce.
#   bash bench/interrupted/issue55-stream-1.5b/resume.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
HERE=bench/interrupted/issue55-stream-1.5b
WORK=/tmp/stream15
MODEL=qwen2.5-coder-1.5b
if [ ! -e "$WORK/flywheel/lib/catalog.db" ]; then
  for arm in flywheel baseline; do
    mkdir -p "$WORK/$arm/lib"
    gunzip -c "$HERE/$arm-catalog.db.gz" > "$WORK/$arm/lib/catalog.db"
    cp "$HERE/$arm-library.id" "$WORK/$arm/lib/library.id"
    tar -xzf "$HERE/$arm-inbox.tar.gz" -C "$WORK/$arm"
  done
  .venv/bin/flywheel --model "$MODEL" --library "$WORK/flywheel/lib" library rebuild
fi
.venv/bin/flywheel --model "$MODEL" --library "$WORK/flywheel/lib" library verify   # exit 1 on any bad artifact
.venv/bin/python - "$WORK" <<'PY'
import sqlite3, sys
work = sys.argv[1]
con = sqlite3.connect(f"{work}/flywheel/lib/catalog.db")
runs = {r[0] for r in con.execute("SELECT DISTINCT model_fingerprint FROM runs")}
arts = {r[0] for r in con.execute("SELECT DISTINCT fingerprint_digest FROM artifacts")}
if len(runs) != 1 or not arts <= runs:
    sys.exit(f"runs under {sorted(runs)}, artifacts under {sorted(arts)}: the study is not continued (pre-registration)")
print(f"fingerprint {next(iter(runs))[:12]}… only: resuming")
PY
if [ ! -d /tmp/study-wt ]; then git worktree add --detach /tmp/study-wt a2969ce && ln -s "$PWD/.venv" /tmp/study-wt/.venv; fi
cd /tmp/study-wt
PYTHONPATH=/tmp/study-wt .venv/bin/python bench/stream.py --model "$MODEL" --work "$WORK" \
    --slice 'gsm-symbolic:?templates=all&n=1&seed=301' \
    --slice 'gsm-symbolic:?templates=all&n=1&seed=302' \
    --slice 'gsm-symbolic:?templates=all&n=1&seed=303' \
    --attempts 1 --out "$OLDPWD/bench/results/issue55-stream-qwen2.5-coder-1.5b.json" 2>> "$WORK/driver.log"
cd "$OLDPWD"
# The prereg commit's driver records the work folder's absolute path; the committed result says `<work>` (the
# later driver's rule, reporting only; tests/test_bench_smoke.py refuses machine paths in bench/results).
.venv/bin/python - "$WORK" bench/results/issue55-stream-qwen2.5-coder-1.5b.json <<'PY'
import pathlib, sys
work, out = sys.argv[1], pathlib.Path(sys.argv[2])
root = str(pathlib.Path.cwd()) + "/"
out.write_text(out.read_text().replace(work, "<work>").replace(root, ""))
PY
