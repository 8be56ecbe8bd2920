#!/bin/bash
# session 15, lead: the merged decode work's remaining GPU programs (s15-dec builds: test_cuda_layers and
# test_cuda_model at e4007ef's dispatch, test_cuda at 3f3c2a2)
R=$OUT; mkdir -p /tmp/d && tar xzf .dev-dec/final.tgz -C /tmp/d; export LINSTATE_FIXTURES=$PWD/.fixtures
timeout 40 /tmp/d/d/test_cuda_layers > $R/test_cuda_layers.txt 2>&1; echo rc=$? >> $R/test_cuda_layers.txt
timeout 40 /tmp/d/d/test_cuda_model > $R/test_cuda_model.txt 2>&1; echo rc=$? >> $R/test_cuda_model.txt
timeout 40 /tmp/d/d/test_cuda > $R/test_cuda.txt 2>&1; echo rc=$? >> $R/test_cuda.txt
tail -n 4 $R/*.txt
