# One lease (H200): the layer's CUDA tests at k = 32 and 16, the published build beside ours, the
# GPU at larger batches and at k = 16, the default layer's CPU thread scaling. Output under $OUT.
export PYTHONUNBUFFERED=1
T0=$(date +%s); left() { echo $(( ${1} - ($(date +%s) - T0) )); }
{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  lscpu; nproc; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda)"; which nvcc cc; nvcc --version | tail -2; } > $OUT/machine.txt 2>&1
export PYTHONPATH=$PWD
timeout $(left 150) python3 -m pytest -q -p no:cacheprovider tests/test_satnet.py -k "cuda or gpu" > $OUT/satnet_cuda_tests.txt 2>&1
echo "tests exit $? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/satnet_cuda_tests.txt; tail -3 $OUT/satnet_cuda_tests.txt
# the published layer (locuslab/SATNet 5089768), built here; CUDA 13 lacks `saturate`
cp -r .gpu/SATNet /tmp/SATNet && cd /tmp/SATNet && sed -i "s/'nvcc': \['-g',/'nvcc': ['-g', '-Dsaturate=__saturatef',/" setup.py
TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16 timeout $(left 300) python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/pub . > $OUT/published_build.txt 2>&1
echo "build exit $? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/published_build.txt; cd - > /dev/null
export PYTHONPATH=$PWD:/tmp/pub
python3 -c "import satnet, importlib.util as u; print('published', satnet.__file__, 'cuda', u.find_spec('satnet._cuda') is not None)" 2>&1 | tee -a $OUT/published_build.txt
echo '$ python benchmarks/satnet_speed.py --repeats 5 --ranks 16 --precisions bf16' > $OUT/h200_speed.txt
timeout $(left 390) python3 benchmarks/satnet_speed.py --repeats 5 --ranks 16 --precisions bf16 >> $OUT/h200_speed.txt 2>&1
echo "exit $? at $(( $(date +%s) - T0 )) s" >> $OUT/h200_speed.txt; tail -32 $OUT/h200_speed.txt
# the GPU at the default's k = 16 and the published k = 32, larger batches, against the published CUDA build
for b in 40 160 300; do for be in "gpu --k=32" "gpu --k=16" "published_gpu --k=32"; do
  [ $(left 450) -gt 20 ] || break 2
  echo "batch $b $be $(timeout $(left 450) python3 benchmarks/satnet_speed.py --one $be --batch=$b --repeats=5 2>&1 | tail -1)"
done; done > $OUT/h200_gpu_batches.txt; cat $OUT/h200_gpu_batches.txt
# the default layer's CPU scaling (k = 16, bf16 products) and the published rank's
[ $(left 545) -gt 30 ] && timeout $(left 545) python3 benchmarks/thread_scaling.py --k 16 --precision bf16 --repeats 3 > $OUT/h200_thread_scaling_k16_bf16.txt 2>&1
cat $OUT/h200_thread_scaling_k16_bf16.txt; echo "all done at $(( $(date +%s) - T0 )) s"
