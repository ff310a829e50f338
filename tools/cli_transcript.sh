#!/usr/bin/env bash
# A user's terminal session with the daskauc CLI, recorded with `script` so that the progress
# bars are drawn as on a terminal: `daskauc demo`, then ijcnn1 (ingest, embed, fit with a
# history plot, evaluate with a ROC plot). Writes docs/benchmarks/cli_transcript.{md,txt}
# (the terminal's final text, bars as last drawn) and the two figures beside them.
#   tools/cli_transcript.sh [DATA_DIR]     (default ../shared/data)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DATA="${1:-$ROOT/../shared/data}"
OUT="$ROOT/docs/benchmarks"
WORK="$(mktemp -d)"
# the daskauc of this checkout's virtual environment (the README's two commands make it)
[[ -x "$ROOT/.venv/bin/daskauc" ]] && export PATH="$ROOT/.venv/bin:$PATH"
trap 'rm -rf "$WORK"' EXIT
cat >"$WORK/session.sh" <<SESSION
set -e
cd "$WORK"
run() { echo "\$ \$*"; /usr/bin/time -f "(%e s wall, %M KB max RSS of the command)" "\$@"; echo; }
run daskauc --version
run daskauc demo
run daskauc ingest "$DATA/ijcnn1/ijcnn1.trn.bz2" train.zarr
run daskauc ingest "$DATA/ijcnn1/ijcnn1.tst.bz2" test.zarr --n-features 22
run daskauc embed train.zarr train-emb.zarr --landmarks 1600 --also test.zarr test-emb.zarr
run daskauc fit train-emb.zarr model --method nsauc --epochs 10 --validation test-emb.zarr --plot "$OUT/cli_history.png" --overwrite
run daskauc evaluate model test-emb.zarr --plot "$OUT/cli_roc.png" --pr --overwrite --json
run daskauc evaluate missing-model test-emb.zarr || true
# a cluster that stays (it takes port 8787 for its dashboard), reused by a later command
echo "\$ daskauc cluster --port 0 --scheduler-file sched.json &"
daskauc cluster --port 0 --scheduler-file sched.json > cluster.log 2>&1 &
for _ in \$(seq 100); do [[ -s sched.json ]] && break; sleep 0.1; done
cat cluster.log; echo
run daskauc --scheduler sched.json evaluate model test-emb.zarr
# the dashboard port is taken now: another command's local cluster picks a free one
run daskauc demo --landmarks 100 --epochs 1 --json
kill -INT %1; wait %1; cat cluster.log | tail -n 1
SESSION
script -q -e -c "bash $WORK/session.sh" "$WORK/raw.txt" >/dev/null
# the terminal's final text: each carriage return redraws the line, so keep what was drawn last
python3 - "$WORK/raw.txt" "$OUT/cli_transcript.txt" <<'PY'
import re, sys
raw = open(sys.argv[1], errors="replace", newline="").read()  # keep lone \r
raw = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", raw)
lines = []
for line in raw.replace("\r\n", "\n").split("\n"):
    if line.startswith("Script started") or line.startswith("Script done"):
        continue
    # a redrawn bar is a run of frames separated by \r, then cleared for the next line:
    # show its last frame (what the terminal showed just before) above that line
    parts = [p for p in line.split("\r") if p.strip()]
    if len(parts) > 1:
        lines.append("  " + parts[-2].strip())
    lines.append(parts[-1] if parts else "")
open(sys.argv[2], "w").write("\n".join(lines).strip() + "\n")
PY
{
  echo "# The command line, as a user sees it"
  echo
  echo "\`tools/cli_transcript.sh\`: a terminal session recorded with \`script\` (progress bars"
  echo "drawn on a terminal; below, each bar as it was last drawn), on $(nproc) cores, load"
  echo "average $(cut -d' ' -f1-3 /proc/loadavg) at the end. Figures: [history](cli_history.png), [ROC](cli_roc.png)."
  echo
  echo '```text'
  cat "$OUT/cli_transcript.txt"
  echo '```'
} >"$OUT/cli_transcript.md"
echo "wrote $OUT/cli_transcript.md"
