#!/usr/bin/env bash
# Resume the pre-registered 1.5B sampled run's `none` arm (bench/preregistered/issue32-sampled-1.5b.md) on any
# host: rebuild its library from the committed catalog, refuse to go on unless its artifacts are the 1.5B cold
# run's 57 SHA-256s under fingerprint 6559d68d…, then finish the study with --resume (what its greedy and
# sampled runs recorded is kept; each goes on from its last recorded attempt).
# Output: /tmp/k4-15-none/out.json, /tmp/k4-15-none/err.log (appended).
#   bash bench/interrupted/issue32-sampled-none-1.5b/resume.sh        (after `make model-qwen-1.5b`)
set -euo pipefail
cd "$(dirname "$0")/../../.."
HERE=bench/interrupted/issue32-sampled-none-1.5b
LIB=/tmp/k4-15-none/lib
FW=".venv/bin/flywheel --model qwen2.5-coder-1.5b --library $LIB"
if [ ! -e "$LIB/catalog.db" ]; then
  mkdir -p "$LIB"
  gunzip -c "$HERE/catalog.db.gz" > "$LIB/catalog.db"
  cp "$HERE/library.id" "$LIB/library.id"
  $FW library rebuild
fi
$FW library verify        # every catalogued artifact present, re-hashed equal to its name (exit 1 otherwise)
python3 - "$LIB" <<'PY'
import json, pathlib, sqlite3, sys
lib = pathlib.Path(sys.argv[1])
digests = {r[0] for r in sqlite3.connect(lib / "catalog.db").execute("SELECT DISTINCT fingerprint_digest FROM artifacts")}
if digests != {"6559d68dafa7295a8ff9cd9f2c271ed05c786055897b0043c7cb75b9c7c31796"}:
    sys.exit(f"artifacts under another fingerprint {sorted(digests)}: the run is not continued (pre-registration)")
want = sorted(a["sha256"] for a in json.load(open("bench/results/issue32-cold-qwen2.5-coder-1.5b.json"))["inputs"]["artifacts"])
have = sorted(p.name for p in (lib / "artifacts").rglob("*") if p.is_file())
if have != want:
    sys.exit(f"{len(have)} artifacts, not the cold run's 57 SHA-256s: the run is not continued (pre-registration)")
print("fingerprint 6559d68d… only, the cold run's 57 artifacts: resuming")
PY
$FW study --problems 'gsm-symbolic:?templates=train&n=1&seed=1' \
    --heldout 'gsm-symbolic:?templates=all&n=2&seed=11' \
    --passes 0 --curated 0 --arms none --samples 4 \
    --json --resume run-20261207T021743Z-64de9c > /tmp/k4-15-none/out.json 2>> /tmp/k4-15-none/err.log
