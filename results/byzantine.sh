#!/bin/sh
# Attack study: crc simulate --byzantine K --attack A --aggregate mean|clipped on three data sets (paper's default
# setting otherwise: 50 peers on a random tree, 50 instances each, 64 rounds, naive Bayes), 3 repeats each.
# Writes results/byzantine/*.json, then results/byzantine.csv and results/byzantine.md from them.
set -e
cd "$(dirname "$0")/.."
mkdir -p results/byzantine
for data in letter penbased magic; do
  for aggregate in mean clipped; do
    crc -q simulate --data $data --repeats 3 --aggregate $aggregate --json --out results/byzantine/$data-0-none-$aggregate.json > /dev/null
    for k in 1 2 4; do
      for attack in scale permute noise; do
        crc -q simulate --data $data --repeats 3 --byzantine $k --attack $attack --aggregate $aggregate --json \
            --out results/byzantine/$data-$k-$attack-$aggregate.json > /dev/null
      done
    done
  done
done
python3 results/byzantine_table.py
