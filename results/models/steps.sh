#!/bin/sh
# Issue 32: local steps per round of QDA and the circuits under the default algorithm, beside naive Bayes' default.
# Usage: sh results/models/steps.sh REPEATS "ITERS..." DATA... (writes results/models/steps/json/).
# Every cell: the circuits table's setting (2000 test instances, seed 0) with --no-rc-converged; the same seeds for
# every ITERS, so the columns differ by the local steps alone.
set -e
cd "$(dirname "$0")/../.."
repeats=$1
iters=$2
shift 2
mkdir -p results/models/steps/json
for data in "$@"; do
  out=results/models/steps/json/$data-nb-default-r$repeats.json
  [ -s "$out" ] || nice -n 10 crc -q simulate --data "$data" --model nb --test-size 2000 --repeats "$repeats" \
    --no-rc-converged --out "$out" > /dev/null
  for model in qda pc2 pc4 pc8 pc-rg; do
    case $model in
      qda) options="--model qda" ;;
      pc-rg) options="--model pc --structure region-graph" ;;
      *) options="--model pc --components ${model#pc}" ;;
    esac
    for i in $iters; do
      out=results/models/steps/json/$data-$model-iters$i-r$repeats.json
      [ -s "$out" ] || nice -n 10 crc -q simulate --data "$data" $options --iters "$i" --test-size 2000 \
        --repeats "$repeats" --no-rc-converged --out "$out" > /dev/null
    done
  done
done
