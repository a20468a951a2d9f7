#!/usr/bin/env bash
# Resume the pre-registered 1.5B cold run (bench/preregistered/issue32-cold-1.5b.md, "Started") on any host:
# rebuild its library from the committed catalog, refuse to go on unless every artifact is the same bytes under
# fingerprint 6559d68d…, then finish the study with --resume. Output: /tmp/cold15-32/{out.json,err.log}.
#   bash bench/interrupted/issue32-cold-1.5b/resume.sh        (after `make model-qwen-1.5b`)
set -euo pipefail
cd "$(dirname "$0")/../../.."
HERE=bench/interrupted/issue32-cold-1.5b
LIB=/tmp/cold15-32/lib
FW=".venv/bin/flywheel --model qwen2.5-coder-1.5b --library $LIB"
if [ ! -e "$LIB/catalog.db" ]; then
  mkdir -p "$LIB"
  gunzip -c "$HERE/catalog.db.gz" > "$LIB/catalog.db"
  cp "$HERE/library.id" "$LIB/library.id"
  $FW library rebuild
fi
$FW library verify        # every catalogued artifact present, re-hashed equal to its name (exit 1 otherwise)
python3 - "$LIB/catalog.db" <<'PY'
import sqlite3, sys
digests = {r[0] for r in sqlite3.connect(sys.argv[1]).execute("SELECT DISTINCT fingerprint_digest FROM artifacts")}
if digests != {"6559d68dafa7295a8ff9cd9f2c271ed05c786055897b0043c7cb75b9c7c31796"}:
    sys.exit(f"artifacts under another fingerprint {sorted(digests)}: the run is not continued (pre-registration)")
print("fingerprint 6559d68d… only: the same artifacts; resuming")
PY
$FW study --problems 'gsm-symbolic:?templates=train&n=1&seed=1' \
    --heldout 'gsm-symbolic:?templates=all&n=2&seed=11' \
    --passes 2 --attempts 4 --curated 0 --arms graft \
    --json --resume run-20261206T080501Z-509a44 > /tmp/cold15-32/out.json 2>> /tmp/cold15-32/err.log
