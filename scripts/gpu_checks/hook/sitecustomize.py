"""Start-up hook: once `jax` is imported, start its profiler server on
$MLPROF_HOOK_PORT (loopback). Any failure is swallowed; the job runs on."""
import os, sys, threading

def _start():
    try:
        import jax.profiler
        jax.profiler.start_server(int(os.environ["MLPROF_HOOK_PORT"]))
        sys.stderr.write("[hook] profiler server on %s\n" % os.environ["MLPROF_HOOK_PORT"])
    except Exception as e:  # never harm the job
        sys.stderr.write("[hook] not started: %r\n" % (e,))

class _Finder:
    def find_spec(self, name, path=None, target=None):
        if name != "jax":
            return None
        sys.meta_path.remove(self)
        try:
            import importlib.util
            spec = importlib.util.find_spec(name)
        finally:
            pass
        if spec is None or spec.loader is None:
            return spec
        orig = spec.loader.exec_module
        def exec_module(module):
            orig(module)
            threading.Timer(0.5, _start).start()
        spec.loader.exec_module = exec_module
        return spec

if os.environ.get("MLPROF_HOOK_PORT"):
    sys.meta_path.insert(0, _Finder())
