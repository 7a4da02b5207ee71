# label smoothing 0.1: the reread stage (main's code) on each seed's trained model, then dev scores
cd /work/main
for s in 0 1 2 3 4; do
  [ -f /work/ws/s$s/ls01/dev.csv ] && continue
  while ! grep -q "seed $s exit" /work/ws/build.log; do sleep 20; done
  W=/work/ws/s$s; L=$W/ls01; mkdir -p $L/models
  sed -e "s/^seed: 0 /seed: $s /" -e "s/^  label_smoothing: 0.0 /  label_smoothing: 0.1 /" /work/main/params.yaml > $L/params.yaml
  grep -n "label_smoothing\|^seed:" $L/params.yaml | cut -c1-40
  ln -sf $W/models/solver.pt $L/models/solver.pt
  date; .venv/bin/python stages/reread.py --params $L/params.yaml --prepared $W/data/prepared --model $W/models/solver.pt --model-out $L/models/solver_reread.pt --metrics-out $L/metrics > $L/reread.log 2>&1; echo "reread seed $s exit $?"
  tail -2 $L/reread.log
  .venv/bin/python studies/dev_choices.py --params $L/params.yaml --prepared $W/data/prepared --models $L/models --folds 36 --starts 4 --views 7 --out $L/dev.csv > $L/dev.log 2>&1
  echo "scored seed $s exit $? $(date)"; grep -a "solver_reread |" $L/dev.log
done
