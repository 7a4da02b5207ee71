# Second call: the default profile from `ground` on (prepare..distill's outputs carried from the
# CPU run of the same code, their GPU seconds measured in the first call), then the layer's speed.
export PYTHONUNBUFFERED=1 TQDM_MININTERVAL=10
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/.gpu/shim:$PWD
START_AT=ground timeout $(( 470 - ($(date +%s) - T0) )) python3 .gpu/dag.py > $OUT/dag2.log 2>&1
echo "dag exit $? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/dag2.log
tar czf $OUT/metrics2.tgz metrics models/permutation.json 2>/dev/null
tr '\r' '\n' < $OUT/dag2.log | grep -a -v "it/s\]" | tail -25
cat $OUT/stage_seconds.json
LEFT=$(( 500 - ($(date +%s) - T0) ))
[ $LEFT -gt 60 ] && timeout $LEFT python3 benchmarks/satnet_speed.py --repeats 3 --ranks 16 --no-reference > $OUT/h200_k16.txt 2>&1; tail -30 $OUT/h200_k16.txt
