#!/usr/bin/env bash
# after the verify: seeds 1-2 of the default trained (dvc repro train in g1, g2: no test read),
# then reread.width 16 against 32 on each seed's dev boards (dev_choices, 16 folds x 4 starts)
set -uo pipefail
while pgrep -f verify.sh > /dev/null; do sleep 20; done
for seed in 1 2; do
  dir=/work/runs/g$seed; cd $dir
  export PATH="$dir/.venv/bin:$PATH" PYTHONPATH="$dir"
  date; dvc repro train > repro_train.log 2>&1 || { echo "train failed $seed"; exit 1; }
  date; K=$dir/width; mkdir -p $K
  for spec in "w32 32" "w16 16"; do
    set -- $spec; name=$1 width=$2; mkdir -p $K/$name
    sed "s/^  width: 32 /  width: $width /" params.yaml > $K/$name/params.yaml
    grep -n "^  width:" $K/$name/params.yaml
    start=$(date +%s)
    python stages/reread.py --params $K/$name/params.yaml --prepared data/prepared --model models/solver.pt \
      --model-out $K/$name/solver_reread.pt --metrics-out $K/$name/metrics > $K/$name/reread.log 2>&1
    echo "$name reread $(( $(date +%s) - start )) s" >> $K/times.txt
    python studies/dev_choices.py --params $K/$name/params.yaml --models $K/$name --folds 16 --starts 4 \
      --intervals --out $K/$name/dev.csv > $K/$name/dev.log 2>&1
  done
  cat $K/times.txt
done
date; echo DONE
