#!/usr/bin/env bash
# Resume the pre-registered sampled run's `none` arm (bench/preregistered/issue32-sampled-0.5b.md, amendment
# step 2, "Started") on any host: rebuild its library from the committed catalog, refuse to go on unless its
# artifacts are the cold run's 27 SHA-256s under fingerprint c793aa59…, then finish the study with --resume.
# Output: /tmp/k4-none.json, /tmp/k4-none.err (appended).
#   bash bench/interrupted/issue32-sampled-none-0.5b/resume.sh        (after `make install`)
set -euo pipefail
cd "$(dirname "$0")/../../.."
HERE=bench/interrupted/issue32-sampled-none-0.5b
LIB=/tmp/k4-none/lib
FW=".venv/bin/flywheel --model qwen2.5-coder-0.5b --library $LIB"
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
if digests != {"c793aa594ef33d505ea5f085af4de9be198e2cff7724d15642220c3160101906"}:
    sys.exit(f"artifacts under another fingerprint {sorted(digests)}: the run is not continued (pre-registration)")
want = sorted(a["sha256"] for a in json.load(open("bench/results/issue32-cold-qwen2.5-coder-0.5b.json"))["inputs"]["artifacts"])
have = sorted(p.name for p in (lib / "artifacts").rglob("*") if p.is_file())
if have != want:
    sys.exit(f"{len(have)} artifacts, not the cold run's 27 SHA-256s: the run is not continued (pre-registration)")
print("fingerprint c793aa59… only, the cold run's 27 artifacts: resuming")
PY
$FW study --problems 'gsm-symbolic:?templates=train&n=1&seed=1' \
    --heldout 'gsm-symbolic:?templates=all&n=2&seed=11' \
    --passes 0 --curated 0 --arms none --samples 4 \
    --json --resume run-20261206T160336Z-157001 > /tmp/k4-none.json 2>> /tmp/k4-none.err
