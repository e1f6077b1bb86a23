#!/bin/sh
# Issue 32: on texture naive Bayes under CRC (0.032) is below the circuits' centralized RC at 64 iterations (0.042-0.060).
# Centralized RC run to convergence as the reference: the default setting, the default algorithm, 3 repeats, RC to
# convergence on. Usage: sh results/models/converged.sh DATA MODEL... (MODEL: nb, qda, region-graph, or pcK for the
# mixture circuit with K components; writes results/models/converged/DATA-MODEL.json). Run with
# texture nb region-graph pc8 pc4 pc2, and marketing nb pc2.
set -e
cd "$(dirname "$0")/../.."
mkdir -p results/models/converged
data=$1
shift
for model in "$@"; do
  case $model in
    region-graph) options="--model pc --structure region-graph" ;;
    pc*) options="--model pc --components ${model#pc}" ;;
    *) options="--model $model" ;;
  esac
  out=results/models/converged/$data-$model.json
  [ -s "$out" ] || nice -n 10 crc -q simulate --data "$data" $options --repeats 3 --out "$out" > /dev/null
done
