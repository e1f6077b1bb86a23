#!/bin/sh
# Issue 32: would QDA and the mixture circuits gain from naive Bayes' averaged classifier (its category counts
# averaged over the rounds, `--classifier averaged`)? Default setting and algorithm, 3 repeats, 25 % test set, on
# the bundled sets with discrete features; the region graph's leaves hold no category counts of that block, so it is
# left out. Usage: sh results/models/averaged.sh (writes results/models/averaged/, prints a table's rows).
set -e
cd "$(dirname "$0")/../.."
mkdir -p results/models/averaged
for data in marketing optdigits splice chess mushroom; do
  for model in qda pc2 pc4 pc8; do
    case $model in
      pc*) options="--model pc --components ${model#pc}" ;;
      *) options="--model $model" ;;
    esac
    for classifier in local averaged; do
      out=results/models/averaged/$data-$model-$classifier.json
      [ -s "$out" ] || crc -q simulate --data "$data" $options --classifier $classifier --repeats 3 --no-rc-converged --out "$out" > /dev/null
    done
    python -c "import json, sys; a, b = (json.load(open(f))['crc']['test_error'] for f in sys.argv[2:]); print(f'| {sys.argv[1]} | {a:.4f} | {b:.4f} | {b - a:+.4f} |')" "$data $model" results/models/averaged/$data-$model-local.json results/models/averaged/$data-$model-averaged.json
  done
done
