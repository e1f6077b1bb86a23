#!/bin/sh
# Attack study: crc simulate --byzantine K --attack A --aggregate mean|clipped on three data sets (the paper's algorithm
# and default setting otherwise: 50 peers on a random tree, 50 instances each, 64 rounds, naive Bayes), 3 repeats each.
# Writes results/byzantine/*.json, then results/byzantine.csv and results/byzantine.md from them.
set -e
cd "$(dirname "$0")/.."
mkdir -p results/byzantine
for data in letter penbased magic; do
  for aggregate in mean clipped; do
    crc -q simulate --algorithm paper --data $data --repeats 3 --aggregate $aggregate --json --out results/byzantine/$data-0-none-$aggregate.json > /dev/null
    for k in 1 2 4; do
      for attack in scale permute noise; do
        crc -q simulate --algorithm paper --data $data --repeats 3 --byzantine $k --attack $attack --aggregate $aggregate --json \
            --out results/byzantine/$data-$k-$attack-$aggregate.json > /dev/null
      done
    done
  done
done
# Real peers: 16 `crc node` processes on 127.0.0.1 (penbased, random tree, seed 0); with --byzantine 1 the simulator's
# choice is node 1, a leaf whose one neighbour, node 12, is a centre of the tree: it sends permuted statistics there.
mkdir -p results/byzantine-launch
crc -q launch --algorithm paper --nodes 16 --rounds 64 --json --out results/byzantine-launch/launch-16-clean.json > /dev/null
for aggregate in mean clipped; do
  crc -q launch --algorithm paper --nodes 16 --rounds 64 --byzantine 1 --attack permute --aggregate $aggregate --json \
      --out results/byzantine-launch/launch-16-permute-$aggregate.json > /dev/null
done
python3 results/byzantine_table.py
