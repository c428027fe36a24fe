import time, threading, nvtx
def work(tag):
    with nvtx.annotate(f"thread_{tag}", color="green", domain="worker"):
        time.sleep(0.005)
nvtx.mark(message="start_mark", color="red")
for step in range(5):
    with nvtx.annotate(f"step_{step}", color="blue", category="train", domain="mlprof_test"):
        with nvtx.annotate("forward", color="yellow"):
            time.sleep(0.01)
        r = nvtx.start_range(message="async_range", color="purple")
        nvtx.push_range("backward", color="orange")
        time.sleep(0.005)
        nvtx.pop_range()
        nvtx.end_range(r)
        nvtx.mark(message="step_mark", domain="mlprof_test", category="train")
ts = [threading.Thread(target=work, args=(i,)) for i in range(2)]
[t.start() for t in ts]; [t.join() for t in ts]
nvtx.mark(message="end_mark")
