#!/bin/sh
# Issue 32: what keeps the circuits' CRC on texture above naive Bayes' CRC: the random tree's mixing, or the number of
# global calibration steps in 64 rounds? Usage: sh results/models/mixing.sh REPEATS DATA... (writes
# results/models/mixing/json/). Every cell: the default setting and algorithm (2000 test instances, seed 0,
# --no-rc-converged), changed only as its name says: tree (the default), complete (the complete graph, which is also
# what --sum-over network averages over any connected graph), tree-256 (256 rounds).
set -e
cd "$(dirname "$0")/../.."
repeats=$1
shift
mkdir -p results/models/mixing/json
for data in "$@"; do
  for model in nb pc2 pc4 pc8 pc-rg; do
    case $model in
      nb) options="--model nb" ;;
      pc-rg) options="--model pc --structure region-graph" ;;
      *) options="--model pc --components ${model#pc}" ;;
    esac
    for cell in tree complete tree-256; do
      case $cell in
        tree) changes="" ;;
        complete) changes="--topology complete" ;;
        tree-256) changes="--rounds 256" ;;
      esac
      out=results/models/mixing/json/$data-$model-$cell-r$repeats.json
      [ -s "$out" ] || nice -n 10 crc -q simulate --data "$data" $options $changes --test-size 2000 \
        --repeats "$repeats" --no-rc-converged --out "$out" > /dev/null
    done
  done
done
