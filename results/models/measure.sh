#!/bin/sh
# Issue 32: CRC against centralized RC per model, default setting (50 peers x 50 instances, random tree, 64 rounds),
# 3 repeats, default algorithm and the paper's. Usage: sh results/models/measure.sh DATA... (writes results/models/json/).
set -e
cd "$(dirname "$0")/../.."
mkdir -p results/models/json
for data in "$@"; do
  for model in nb qda mixture region-graph; do
    case $model in
      mixture) options="--model pc" ;;
      region-graph) options="--model pc --structure region-graph" ;;
      *) options="--model $model" ;;
    esac
    for algorithm in accelerated paper; do
      out=results/models/json/$data-$model-$algorithm.json
      [ -s "$out" ] || crc -q simulate --data "$data" $options --algorithm $algorithm --repeats 3 --no-rc-converged --out "$out" > /dev/null
    done
  done
done
