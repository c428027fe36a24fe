"""A PyTorch loop that marks each step with an NVTX range (torch.cuda.nvtx), for checking
that mlprof run's NVTX_INJECTION64_PATH hands NVTX to CUPTI: under
`mlprof run --device-tracer cupti` its profile should hold one `NVTX:step N` range per
step. Usage: nvtx_job.py [STEPS]."""
import sys

import torch

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
x = torch.randn(2048, 2048, device="cuda")
for i in range(steps):
    torch.cuda.nvtx.range_push("step %d" % i)
    y = x @ x
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
print("NVTX_JOB steps=%d" % steps, flush=True)
