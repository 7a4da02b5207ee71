# One lease: the layer's CUDA tests after the layer changes since 2026-11-26, then the default
# profile (params.yaml) end to end on the GPU, stage by stage, timed. Output under $OUT.
export PYTHONUNBUFFERED=1 TQDM_MININTERVAL=10
T0=$(date +%s)
{ nvidia-smi -L; lscpu | grep -E "Model name|^CPU\(s\)|Flags" | cut -c1-300; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > $OUT/machine.txt 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/.gpu/shim:$PWD
timeout 110 python3 -m pytest -q -p no:cacheprovider tests/test_satnet.py -k "cuda or gpu" 2>&1 | tail -30 > $OUT/satnet_cuda_tests.txt
echo "tests done at $(( $(date +%s) - T0 )) s" | tee -a $OUT/satnet_cuda_tests.txt
timeout $(( 575 - ($(date +%s) - T0) )) python3 .gpu/dag.py > $OUT/dag.log 2>&1
echo "dag exit $? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/dag.log
tar czf $OUT/metrics.tgz metrics models/permutation.json 2>/dev/null
tail -c 3000 $OUT/dag.log | tr '\r' '\n' | tail -20
cat $OUT/stage_seconds.json
