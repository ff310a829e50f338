#!/usr/bin/env bash
# A multi-host daskauc run on one machine: a Dask scheduler and two workers, each in a network
# namespace of its own (its own interfaces, address and ports), joined by a bridge; one shared
# directory holds the Zarr stores; the daskauc CLI runs end to end (ingest, embed, fit,
# evaluate) from the host namespace against --scheduler tcp://<scheduler address>:8786.
#
#   sudo env "PATH=$PATH" tools/multihost.sh                 # ijcnn1 from ../shared/data
#   sudo tools/multihost.sh --venv /work/main/.venv          # the same, naming the env
#   sudo tools/multihost.sh --dataset spambase --methods nsauc   # the shipped data, ~25 s
#   sudo tools/multihost.sh --methods kernel --centres 8192 --memory-limit 700MiB
#        # KernelAUC on the raw store, the preconditioner's factor as tiles on the two workers
#   sudo tools/multihost.sh --cleanup        # remove what a run killed with -9 left behind
#
# Executables: dask and daskauc come from one Python environment: --venv DIR, else the active
# virtualenv ($VIRTUAL_ENV), else the directory of `daskauc` on PATH (sudo resets PATH and
# VIRTUAL_ENV: pass --venv, or run `sudo env "PATH=$PATH" ...`). The interpreter is the one in
# daskauc's #! line, so the probes import the same distributed as the CLI.
#
# What is created, and removed at exit (also on errors and Ctrl-C, by an EXIT trap):
#   namespaces dauc-br (bridge br0 and the bridge ends of the veths, no addresses),
#              dauc-sched, dauc-w1, dauc-w2 (eth0 = <subnet>.10, .11, .12, and lo);
#   host veth  dauc-host (<subnet>.1/24), its peer in dauc-br: the host reaches the namespaces
#              through it, with the kernel route for <subnet>.0/24 that its address brings;
#   processes  dask scheduler (dauc-sched), dask worker (dauc-w1, dauc-w2; each a nanny and a
#              worker process), killed by pid, then any process left inside the namespaces;
#   files      a temporary work directory (stores, logs, worker local directories) unless
#              --workdir is given or --keep.
# Nothing else on the host is touched (no forwarding, NAT or firewall rules).
set -euo pipefail

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
  cat <<'EOF'
Options:
  --dataset ijcnn1|spambase  ijcnn1: official train/test files from --data-dir (default);
                             spambase: the copy shipped in daskauc, split 80/20 at ingest
  --data-dir DIR             where ijcnn1/ijcnn1.{trn,tst}.bz2 are
                             (default $DAUC_DATA_DIR, else <repo>/../shared/data)
  --landmarks N              k-means Nystroem landmarks (default 400)
  --epochs N                 NSAUC epochs (default 3)
  --chains N                 NSAUC n_chains: chains of one epoch run side by side (default 2)
  --methods LIST             comma-separated fit methods (default nsauc,nbauc); kernel
                             (KernelAUC) fits the raw store, the others its embedding
  --centres N                kernel: KernelAUC's n_centres (default 2048)
  --factor-placement WHERE   kernel: auto, client or workers (default workers: the
                             preconditioner's factor as tiles on the workers)
  --chunk-rows N             rows per store chunk (default 5000 for ijcnn1, 500 for spambase)
  --memory-limit SIZE        per worker (default 2GiB)
  --subnet A.B.C             the /24 the namespaces live in (default 10.147.14)
  --workdir DIR              shared directory for stores and logs (kept); default a temp dir
  --keep                     keep the temporary work directory
  --venv DIR                 Python environment whose bin/ has dask and daskauc
  --cleanup                  only remove namespaces and the veth left by a killed run
  -h, --help
EOF
}

die() { echo "multihost.sh: error: $*" >&2; exit 1; }

# -- options ----------------------------------------------------------------------------------
DATASET=ijcnn1 DATA_DIR=${DAUC_DATA_DIR:-} LANDMARKS=400 EPOCHS=3 CHAINS=2
METHODS=nsauc,nbauc CHUNK_ROWS= MEMORY_LIMIT=2GiB SUBNET=10.147.14 WORKDIR= KEEP=0 VENV=
CENTRES=2048 FACTOR_PLACEMENT=workers
CLEANUP_ONLY=0 PORT=8786
while [[ $# -gt 0 ]]; do
  case $1 in
    --dataset) DATASET=$2; shift 2 ;;
    --data-dir) DATA_DIR=$2; shift 2 ;;
    --landmarks) LANDMARKS=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --chains) CHAINS=$2; shift 2 ;;
    --methods) METHODS=$2; shift 2 ;;
    --centres) CENTRES=$2; shift 2 ;;
    --factor-placement) FACTOR_PLACEMENT=$2; shift 2 ;;
    --chunk-rows) CHUNK_ROWS=$2; shift 2 ;;
    --memory-limit) MEMORY_LIMIT=$2; shift 2 ;;
    --subnet) SUBNET=$2; shift 2 ;;
    --workdir) WORKDIR=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --venv) VENV=$2; shift 2 ;;
    --cleanup) CLEANUP_ONLY=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
[[ $DATASET == ijcnn1 || $DATASET == spambase ]] || die "--dataset must be ijcnn1 or spambase"
[[ $SUBNET =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "--subnet takes three octets, e.g. 10.147.14"

# -- refuse early: root, ip netns -------------------------------------------------------------
[[ $EUID -eq 0 ]] || die "must run as root (it creates network namespaces and veth pairs): sudo $0 ..."
command -v ip >/dev/null || die "the 'ip' command (iproute2) is not installed"
ip netns list >/dev/null 2>&1 || die "'ip netns' is unavailable (iproute2 without netns support?)"

NS_BR=dauc-br NS_SCHED=dauc-sched NS_W1=dauc-w1 NS_W2=dauc-w2 HOST_VETH=dauc-host
NAMESPACES=("$NS_SCHED" "$NS_W1" "$NS_W2" "$NS_BR")
HOST_IP=$SUBNET.1 SCHED_IP=$SUBNET.10 W1_IP=$SUBNET.11 W2_IP=$SUBNET.12
SCHEDULER=tcp://$SCHED_IP:$PORT

ns_exists() { ip netns list | awk -v n="$1" '$1 == n { f = 1 } END { exit !f }'; }

# Kill every process inside namespace $1 (all were started by this script), TERM then KILL.
kill_ns_procs() {
  local ns=$1 pids i
  for i in 1 2 3 4 5 6 7 8 9 10; do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [[ -z $pids ]] && return 0
    if [[ $i -lt 10 ]]; then kill -TERM $pids 2>/dev/null || true; else kill -KILL $pids 2>/dev/null || true; fi
    sleep 0.5
  done
}

remove_network() {  # namespaces and the host veth, if present
  local ns
  for ns in "$NS_SCHED" "$NS_W1" "$NS_W2" "$NS_BR"; do
    ns_exists "$ns" && kill_ns_procs "$ns"
  done
  ip link del "$HOST_VETH" 2>/dev/null || true   # takes its peer in dauc-br with it
  for ns in "$NS_SCHED" "$NS_W1" "$NS_W2" "$NS_BR"; do
    if ns_exists "$ns"; then ip netns del "$ns" || echo "could not delete namespace $ns" >&2; fi
  done
}

if [[ $CLEANUP_ONLY == 1 ]]; then
  remove_network
  echo "removed: namespaces ${NAMESPACES[*]} and veth $HOST_VETH (where present)"
  exit 0
fi

# -- the environment: dask, daskauc, python from one place ------------------------------------
if [[ -n $VENV ]]; then
  BIN=$(cd "$VENV/bin" 2>/dev/null && pwd) || die "--venv $VENV has no bin/ directory"
elif [[ -n ${VIRTUAL_ENV:-} && -x $VIRTUAL_ENV/bin/daskauc ]]; then
  BIN=$VIRTUAL_ENV/bin
elif command -v daskauc >/dev/null; then
  BIN=$(dirname "$(command -v daskauc)")
else
  die "no daskauc found: activate its environment, pass --venv DIR, or run sudo env \"PATH=\$PATH\" $0"
fi
[[ -x $BIN/daskauc && -x $BIN/dask ]] || die "$BIN lacks dask or daskauc (pip install -e . there)"
PY=$(head -n1 "$BIN/daskauc" | sed -n 's/^#!\([^ ]*\).*/\1/p')
[[ -x $PY && $PY != */sh ]] || PY=$BIN/python
[[ -x $PY ]] || die "cannot find the Python interpreter of $BIN/daskauc"
PROBE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/multihost_probe.py
[[ -f $PROBE ]] || die "$PROBE is missing (it ships next to this script)"

# -- data -------------------------------------------------------------------------------------
if [[ $DATASET == ijcnn1 ]]; then
  if [[ -z $DATA_DIR ]]; then
    DATA_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/shared/data
  fi
  TRAIN_SRC=$DATA_DIR/ijcnn1/ijcnn1.trn.bz2 TEST_SRC=$DATA_DIR/ijcnn1/ijcnn1.tst.bz2
  [[ -f $TRAIN_SRC && -f $TEST_SRC ]] || die "ijcnn1 not found under $DATA_DIR (--data-dir DIR)"
  CHUNK_ROWS=${CHUNK_ROWS:-5000}
else
  TRAIN_SRC=$("$PY" -c 'from daskauc.data.default import default_dataset_path as p; print(p())')
  CHUNK_ROWS=${CHUNK_ROWS:-500}
fi

# -- nothing of ours may exist yet, and the subnet must be free on the host -------------------
for ns in "${NAMESPACES[@]}"; do
  ns_exists "$ns" && die "namespace $ns exists: another run is active, or one was killed (then: $0 --cleanup)"
done
ip link show "$HOST_VETH" >/dev/null 2>&1 && die "interface $HOST_VETH exists (another run, or: $0 --cleanup)"
if [[ -n $(ip -4 route show root "$SUBNET.0/24") ||
      -n $(ip -4 route show match "$SUBNET.0/24" | grep -v '^default' || true) ]]; then
  die "$SUBNET.0/24 is already routed on this host; pick another --subnet"
fi

now() { echo "${EPOCHREALTIME/,/.}"; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
T_START=$(now)
STEPS=() TIMES=()
PIDS=()
CREATED_WORK=0
if [[ -z $WORKDIR ]]; then
  WORKDIR=$(mktemp -d /tmp/dauc-multihost.XXXXXX)
  CREATED_WORK=1
fi
mkdir -p "$WORKDIR"
WORKDIR=$(cd "$WORKDIR" && pwd)
STORES=$WORKDIR/stores LOGS=$WORKDIR/logs
mkdir -p "$STORES" "$LOGS" "$WORKDIR/w1-local" "$WORKDIR/w2-local"

# -- teardown, whatever happens from here on --------------------------------------------------
cleanup() {
  local rc=$? t0 pid i left
  trap - EXIT INT TERM HUP
  set +e
  t0=$(now)
  echo
  echo "== teardown"
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for i in $(seq 20); do
    left=0
    for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && left=1; done
    [[ $left == 0 ]] && break
    sleep 0.25
  done
  for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  wait 2>/dev/null
  remove_network
  if [[ $CREATED_WORK == 1 && $KEEP == 0 ]]; then
    rm -rf "$WORKDIR"
  else
    echo "kept $WORKDIR (stores, logs)"
  fi
  left=$(ip netns list | awk '{print $1}' | grep -E '^dauc-(br|sched|w1|w2)$' || true)
  ip link show "$HOST_VETH" >/dev/null 2>&1 && left="$left $HOST_VETH"
  for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && left="$left pid-$pid"; done
  if [[ -n $left ]]; then
    echo "teardown left: $left" >&2
    [[ $rc == 0 ]] && rc=1
  else
    echo "removed namespaces ${NAMESPACES[*]}, veth $HOST_VETH and its address $HOST_IP/24;" \
      "no dask process of this run is left"
  fi
  echo "teardown: $(since "$t0") s"
  echo "total (setup to teardown): $(since "$T_START") s, exit status $rc"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# Print a command the way a user would type it (daskauc for $BIN/daskauc), run it, time it.
step() {
  local name=$1 t0 rc=0
  shift
  echo
  echo "== $name"
  echo "\$ ${*/#"$BIN"\//}"
  t0=$(now)
  "$@" 2>&1 | tee "$LOGS/last-step.log" || rc=$?
  [[ $rc == 0 ]] || die "step '$name' failed (exit $rc)"
  STEPS+=("$name") TIMES+=("$(since "$t0")")
  echo "-- $name: ${TIMES[-1]} s"
}
tasks() { "$PY" "$PROBE" tasks "$SCHEDULER" "$WORKDIR/task-counts.json" "$1"; }

echo "multihost daskauc run: dataset $DATASET, $LANDMARKS landmarks, methods $METHODS"
echo "daskauc = $BIN/daskauc (python $PY, $("$PY" -c 'import daskauc, distributed; print("daskauc", daskauc.__version__, "distributed", distributed.__version__)'))"
echo "shared directory for the stores: $STORES"

# -- network ----------------------------------------------------------------------------------
t0=$(now)
echo
echo "== network: namespaces ${NAMESPACES[*]}, bridge br0 in $NS_BR, host veth $HOST_VETH"
for ns in "${NAMESPACES[@]}"; do
  ip netns add "$ns" || die "cannot create network namespace $ns (a container without CAP_SYS_ADMIN?)"
done
ip -n "$NS_BR" link add br0 type bridge
ip -n "$NS_BR" link set lo up
ip -n "$NS_BR" link set br0 up
attach() {  # namespace, bridge-side name, address: a veth from the bridge to eth0 in $1
  ip -n "$NS_BR" link add "$2" type veth peer name eth0 netns "$1"
  ip -n "$NS_BR" link set "$2" master br0 up
  ip -n "$1" link set lo up
  ip -n "$1" addr add "$3/24" dev eth0
  ip -n "$1" link set eth0 up
}
attach "$NS_SCHED" b-sched "$SCHED_IP"
attach "$NS_W1" b-w1 "$W1_IP"
attach "$NS_W2" b-w2 "$W2_IP"
ip link add "$HOST_VETH" type veth peer name b-host netns "$NS_BR"
ip -n "$NS_BR" link set b-host master br0 up
ip addr add "$HOST_IP/24" dev "$HOST_VETH"
ip link set "$HOST_VETH" up
for ns in "$NS_SCHED" "$NS_W1" "$NS_W2"; do
  echo "  $ns: $(ip -n "$ns" -4 -o addr show dev eth0 | awk '{print $4}') on eth0"
done
echo "  host: $HOST_IP/24 on $HOST_VETH; $(ip -4 route show "$SUBNET.0/24")"

# -- cluster ----------------------------------------------------------------------------------
echo
echo "== cluster: dask scheduler in $NS_SCHED, one dask worker in each of $NS_W1, $NS_W2"
cmd=("$BIN/dask" scheduler --host "$SCHED_IP" --port "$PORT" --dashboard-address "$SCHED_IP:8787")
echo "\$ ip netns exec $NS_SCHED ${cmd[*]/#"$BIN"\//}"
ip netns exec "$NS_SCHED" "${cmd[@]}" >"$LOGS/scheduler.log" 2>&1 &
PIDS+=($!)
for w in 1 2; do
  ns=$NS_W1 ip=$W1_IP
  [[ $w == 2 ]] && ns=$NS_W2 ip=$W2_IP
  cmd=("$BIN/dask" worker "$SCHEDULER" --host "$ip" --name "w$w" --nworkers 1 --nthreads 1
       --memory-limit "$MEMORY_LIMIT" --local-directory "$WORKDIR/w$w-local" --no-dashboard)
  echo "\$ ip netns exec $ns ${cmd[*]/#"$BIN"\//}"
  ip netns exec "$ns" "${cmd[@]}" >"$LOGS/w$w.log" 2>&1 &
  PIDS+=($!)
done
echo "the scheduler's view (from the host namespace):"
"$PY" "$PROBE" workers "$SCHEDULER" "$SUBNET.0/24" 2 || {
  tail -n 20 "$LOGS"/*.log >&2
  die "the workers did not join the scheduler"
}
STEPS+=("network + cluster start") TIMES+=("$(since "$t0")")
echo "-- network + cluster start: ${TIMES[-1]} s"

# -- the CLI end to end, from the host namespace ----------------------------------------------
D=("$BIN/daskauc" --scheduler "$SCHEDULER")
if [[ $DATASET == ijcnn1 ]]; then
  step "ingest train" "${D[@]}" ingest "$TRAIN_SRC" "$STORES/train.zarr" --shuffle \
    --chunk-rows "$CHUNK_ROWS"
  step "ingest test" "${D[@]}" ingest "$TEST_SRC" "$STORES/test.zarr" --chunk-rows "$CHUNK_ROWS"
else
  step "ingest + split" "${D[@]}" ingest "$TRAIN_SRC" "$STORES/all.zarr" --shuffle \
    --chunk-rows "$CHUNK_ROWS" --split "$STORES/train.zarr" "$STORES/test.zarr"
fi
echo "(ingest parses the file in the client process and writes the stores; no cluster tasks)"
IFS=, read -r -a METHOD_LIST <<<"$METHODS"
if [[ ",$METHODS," =~ ,(nsauc|nsvmsgd2|nbauc|ranksvm|lsauc|twopass|opauc|solam|spam|spdam|oam|uni-exp|uni-squ), ]]; then
  step "embed" "${D[@]}" embed "$STORES/train.zarr" "$STORES/train-emb.zarr" \
    --landmarks "$LANDMARKS" --also "$STORES/test.zarr" "$STORES/test-emb.zarr"
  tasks "embed"
fi
declare -A AUC
for m in "${METHOD_LIST[@]}"; do
  extra=() train=$STORES/train-emb.zarr test=$STORES/test-emb.zarr
  [[ $m == nsauc ]] && extra=(--lam 1e-8 --epochs "$EPOCHS" --param "n_chains=$CHAINS")
  if [[ $m == kernel ]]; then  # KernelAUC scales and maps the raw rows itself
    train=$STORES/train.zarr test=$STORES/test.zarr
    extra=(--param "n_centres=$CENTRES" --param "factor_placement=\"$FACTOR_PLACEMENT\"")
  fi
  step "fit $m" "${D[@]}" fit "$train" "$STORES/$m-model" --method "$m" "${extra[@]}"
  tasks "fit $m"
  if [[ $m == kernel ]]; then
    "$PY" -c 'import sys; from daskauc.io import load_model; e = load_model(sys.argv[1])
print(f"KernelAUC: {e.centres_.shape[0]} centres, factor on the {e.factor_placement_}, "
      f"{e.n_iter_} Newton steps; seconds:", {k: round(v, 2) for k, v in
      {**e.timings_, **e.preconditioner_seconds_}.items()})' "$STORES/$m-model"
  fi
  step "evaluate $m" "${D[@]}" --json evaluate "$STORES/$m-model" "$test"
  AUC[$m]=$(sed -n 's/.*"auc": *\([0-9.eE+-]*\).*/\1/p' "$LOGS/last-step.log" | tail -n1)
  [[ -n ${AUC[$m]} ]] || die "no AUC in the output of evaluate"
  tasks "evaluate $m"
done
echo
"$PY" "$PROBE" total "$SCHEDULER"

# -- summary ----------------------------------------------------------------------------------
echo
echo "== summary ($DATASET, scheduler $SCHEDULER, workers $W1_IP and $W2_IP)"
for i in "${!STEPS[@]}"; do printf '  %-26s %8s s\n' "${STEPS[$i]}" "${TIMES[$i]}"; done
printf '  %-26s %8s s\n' "until teardown" "$(since "$T_START")"
for m in "${METHOD_LIST[@]}"; do
  echo "RESULT $m test AUC ${AUC[$m]}"
done
