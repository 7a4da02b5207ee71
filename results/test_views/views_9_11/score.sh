# score each seed's final model on dev at 7, 9, 11 views as soon as its workspace is built
cd /work/main
for s in 0 1 2 3 4; do
  while ! grep -q "seed $s exit" /work/ws/build.log; do sleep 30; done
  grep "seed $s exit 0" /work/ws/build.log || { echo "seed $s failed"; continue; }
  W=/work/ws/s$s; date
  OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 .venv/bin/python studies/dev_choices.py --params $W/params.yaml --prepared $W/data/prepared --models $W/models --folds 36 --starts 4 --views 7 9 11 --out /work/ws/views_seed$s.csv > /work/ws/views_seed$s.log 2>&1
  echo "scored seed $s exit $? $(date)"; tail -8 /work/ws/views_seed$s.log
done
