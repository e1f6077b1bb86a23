#!/bin/sh
# Robust aggregation under attack (issue 29): results/robust/byzantine.json and .md.
# Simulator grid: penbased, one Byzantine peer, 3 repeats, every rule with the paper's averaging, the mean, clipped and
# screened (= robust) with the default (accelerated) algorithm, geomedian under it too; then 5 real peers (`crc launch`,
# complete graph, seed 0) with --aggregate robust, clean and under extreme and permute, and the mean under extreme.
set -e
cd "$(dirname "$0")/.."
python3 results/robust/byzantine.py --algorithm paper
python3 results/robust/byzantine.py --rules mean,clipped,screened
python3 results/robust/byzantine.py --algorithm accelerated --graphs complete,ring+chord,regular:4 --attacks none,extreme,permute \
    --rules geomedian
mkdir -p results/robust/launch
crc -q launch --data penbased --nodes 5 --topology complete --rounds 64 --aggregate robust --json \
    --out results/robust/launch/complete5-clean-robust.json > /dev/null
for attack in extreme permute; do
  crc -q launch --data penbased --nodes 5 --topology complete --rounds 64 --aggregate robust --byzantine 1 --attack $attack \
      --json --out results/robust/launch/complete5-$attack-robust.json > /dev/null
done
crc -q launch --data penbased --nodes 5 --topology complete --rounds 64 --aggregate mean --algorithm paper --byzantine 1 \
    --attack extreme --json --out results/robust/launch/complete5-extreme-mean.json > /dev/null
python3 results/robust/byzantine_table.py
