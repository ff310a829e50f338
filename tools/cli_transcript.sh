#!/usr/bin/env bash
# A user's terminal session with the daskauc CLI, recorded with `script` so that the progress
# bars are drawn as on a terminal: `daskauc demo`, then ijcnn1 (ingest, embed, fit with a
# history plot, evaluate with a ROC plot). Writes docs/benchmarks/cli_transcript.{md,txt}
# (the terminal's final text, bars as last drawn) and the two figures beside them.
# With --text-labels, a new user's session instead: ijcnn1 as CSV files with a header and
# text labels (fault / normal), through ingest, embed, fit (nsauc, nbauc, kernel) and
# evaluate, written to docs/benchmarks/cli_text_labels.{md,txt}.
#   tools/cli_transcript.sh [--text-labels] [DATA_DIR]     (default ../shared/data)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
NAME=cli_transcript
if [[ "${1:-}" == "--text-labels" ]]; then NAME=cli_text_labels; shift; fi
DATA="${1:-$ROOT/../shared/data}"
OUT="$ROOT/docs/benchmarks"
WORK="$(mktemp -d)"
# the daskauc of this checkout's virtual environment (the README's two commands make it)
[[ -x "$ROOT/.venv/bin/daskauc" ]] && export PATH="$ROOT/.venv/bin:$PATH"
trap 'rm -rf "$WORK"' EXIT
if [[ "$NAME" == cli_text_labels ]]; then
# ijcnn1's LIBSVM files as a user's CSV files: a header, named columns, text labels
python3 - "$DATA/ijcnn1" "$WORK" <<'PY'
import bz2, sys
src, dst = sys.argv[1], sys.argv[2]
for part, out in (("trn", "train.csv"), ("tst", "test.csv")):
    with bz2.open(f"{src}/ijcnn1.{part}.bz2", "rt") as f, open(f"{dst}/{out}", "w") as g:
        g.write(",".join(f"sensor_{j}" for j in range(1, 23)) + ",outcome\n")
        for line in f:
            label, *items = line.split()
            row = ["0"] * 22
            for item in items:
                j, v = item.split(":")
                row[int(j) - 1] = v
            g.write(",".join(row) + ("," + ("fault" if float(label) > 0 else "normal")) + "\n")
PY
cat >"$WORK/session.sh" <<SESSION
set -e
cd "$WORK"
run() { echo "\$ \$*"; /usr/bin/time -f "(%e s wall, %M KB max RSS of the command)" "\$@"; echo; }
echo "\$ head -c 300 train.csv"; head -c 300 train.csv; echo; echo
run daskauc ingest train.csv train.zarr --label outcome --positive fault
run daskauc ingest test.csv test.zarr --label outcome --positive fault
run daskauc embed train.zarr train-emb.zarr --also test.zarr test-emb.zarr
run daskauc fit train-emb.zarr nsauc.zarr --method nsauc
run daskauc fit train-emb.zarr nbauc.zarr --method nbauc
run daskauc fit train.zarr kernel.zarr --method kernel
run daskauc evaluate nsauc.zarr test-emb.zarr
run daskauc evaluate nbauc.zarr test-emb.zarr
run daskauc evaluate kernel.zarr test.zarr
SESSION
else
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
fi
script -q -e -c "bash $WORK/session.sh" "$WORK/raw.txt" >/dev/null
# the terminal's final text: each carriage return redraws the line, so keep what was drawn last
python3 - "$WORK/raw.txt" "$OUT/$NAME.txt" <<'PY'
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
if [[ "$NAME" == cli_text_labels ]]; then
  TITLE="A new user's session: a CSV file with a header and text labels"
  CMD="tools/cli_transcript.sh --text-labels"
  FIGS="ijcnn1 (49,990 training rows, 91,701 test rows, 22 features) written as CSV files with named columns and labels fault / normal."
else
  TITLE="The command line, as a user sees it"
  CMD="tools/cli_transcript.sh"
  FIGS="Figures: [history](cli_history.png), [ROC](cli_roc.png)."
fi
{
  echo "# $TITLE"
  echo
  echo "\`$CMD\`: a terminal session recorded with \`script\` (progress bars"
  echo "drawn on a terminal; below, each bar as it was last drawn), on $(nproc) cores, load"
  echo "average $(cut -d' ' -f1-3 /proc/loadavg) at the end. $FIGS"
  echo
  echo '```text'
  cat "$OUT/$NAME.txt"
  echo '```'
} >"$OUT/$NAME.md"
echo "wrote $OUT/$NAME.md"
