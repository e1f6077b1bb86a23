#!/bin/sh
# Issue 32: the mixture circuit under the default algorithm from the uniform start (today) or naive Bayes' start
# (--start categorical: the category counts of the peer's own data), on the sets with discrete features.
# Usage: sh results/models/mixture_start.sh (writes results/models/mixture_start/*.json, skipping those written).
set -e
cd "$(dirname "$0")/../.."
mkdir -p results/models/mixture_start
for cell in marketing:2000:"2 4 8" mushroom:2000:"2 4 8" optdigits:2000:"2 4 8" chess:500:"2 4" splice:500:"2 4"; do
  data=${cell%%:*}; rest=${cell#*:}; test_size=${rest%%:*}; components=${rest#*:}
  for k in $components; do
    for start in categorical uniform; do
      out=results/models/mixture_start/$data-pc$k-$start.json
      [ -s "$out" ] || nice -n 10 crc -q simulate --data "$data" --model pc --components "$k" --start "$start" \
        --repeats 3 --no-rc-converged --test-size "$test_size" --out "$out" > /dev/null
    done
  done
done
