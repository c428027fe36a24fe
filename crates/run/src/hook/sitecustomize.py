# mlprof run's start-up hook. Python imports this `sitecustomize` before the job's code
# because `mlprof run` put its directory first on PYTHONPATH. It:
#   1. chains the `sitecustomize` the job would otherwise have imported (removing this
#      directory from sys.path first, so the job sees the sys.path it would have had);
#   2. once `jax` or `tensorflow` has been imported by the job, starts that framework's
#      own profiler server on the loopback port mlprof chose ($MLPROF_RUN_PORT), in the
#      first process of the job that gets there (a claim file decides), and writes
#      $MLPROF_RUN_DIR/server.json so that mlprof captures it over gRPC;
#   3. once `torch` has been imported, announces the process ($MLPROF_RUN_DIR/torch-PID.ready)
#      and, where Kineto's on-demand mode is off in it (MLPROF_PYTORCH_TRACER=hook, or a
#      launcher that dropped KINETO_USE_DAEMON), waits for mlprof to ask
#      (torch-PID.request), then records every thread with torch.profiler for the asked
#      duration and writes the trace where mlprof said, by rename; where on-demand mode is
#      on, a process that exits while a Kineto trace is due or recording waits through a
#      start or end of the trace due within _EXIT_MARGIN_S (torch-PID.window says when)
#      and stops a trace still recording (PyTorch crashes otherwise); in either mode it
#      sets TEARDOWN_CUPTI=1 where the job has not set it, PyTorch is 2.11 or later and its
#      CUDA 12.6 or later, so that Kineto detaches CUPTI after each trace instead of leaving
#      the job's kernel launches slower until it exits (see tear_cupti_down_after_traces).
# Everything is inside try/except: the hook never raises into the job, never blocks an
# import, and writes what went wrong to $MLPROF_RUN_DIR/hook.log instead.
import os
import sys

# A start or end of a Kineto trace due within this many seconds of the process's exit is
# waited for: the process's last moments must not hold one (see stop_ondemand_trace).
_EXIT_MARGIN_S = 3.0
# Kineto's profiler thread wakes once a second: a trace starts or ends up to a second
# after it is due.
_TICK_S = 1.5
# How long after its end Kineto may take to write a trace the process waits for.
_WRITE_GRACE_S = 10.0


def _mlprof_install():
    run_dir = os.environ.get("MLPROF_RUN_DIR", "")
    here = os.path.dirname(os.path.abspath(__file__))

    def log(message):
        try:
            with open(os.path.join(run_dir, "hook.log"), "a") as f:
                f.write("pid %d: %s\n" % (os.getpid(), message))
        except Exception:
            pass

    def report(name, info):
        # Written whole (by rename), so mlprof never reads half a report.
        import json

        tmp = os.path.join(run_dir, name + ".tmp")
        with open(tmp, "w") as f:
            json.dump(info, f)
        os.rename(tmp, os.path.join(run_dir, name))

    def start_server(framework, module):
        import threading

        def start():
            claim = os.path.join(run_dir, "server.claim")
            try:
                fd = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
                os.close(fd)
            except FileExistsError:
                return
            except Exception as e:
                log("claiming the profiler server: %r" % (e,))
                return
            try:
                port = int(os.environ["MLPROF_RUN_PORT"])
                if framework == "jax":
                    import jax.profiler

                    jax.profiler.start_server(port)
                    version = getattr(module, "__version__", "")
                else:
                    import tensorflow as tf

                    tf.profiler.experimental.server.start(port)
                    version = getattr(tf, "__version__", "")
                report("server.json", {"pid": os.getpid(), "framework": framework, "version": version, "port": port})
            except BaseException as e:  # SystemExit from a framework must not end the job
                log("starting the %s profiler server: %r" % (framework, e))

        # Off the importing thread: the job's import returns at once.
        threading.Thread(target=start, name="mlprof-hook", daemon=True).start()

    def trace_torch(wanted):
        import time

        import torch
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
        options = {}
        try:
            from torch._C._profiler import _ExperimentalConfig

            options["experimental_config"] = _ExperimentalConfig(profile_all_threads=True)
        except Exception as e:
            log("torch.profiler cannot record every thread here, only mlprof's: %r" % (e,))
        profiler = profile(activities=activities, record_shapes=True, profile_memory=True, **options)
        profiler.start()
        try:
            time.sleep(max(0.001, float(wanted["duration_ms"]) / 1000.0))
        finally:
            profiler.stop()
        out = str(wanted["log_file"])
        profiler.export_chrome_trace(out + ".tmp")
        os.rename(out + ".tmp", out)

    def settle_ondemand_trace():
        # Waits through a start or end of the timed trace mlprof handed Kineto
        # (torch-PID.window: when it should start and end, the file Kineto writes) that is
        # due within _EXIT_MARGIN_S: whether the trace was then written (nothing is left
        # to stop).
        import json
        import time

        try:
            with open(os.path.join(run_dir, "torch-%d.window" % os.getpid())) as f:
                window = json.load(f)
            starts, ends = float(window["starts_unix_s"]), float(window["ends_unix_s"])
            trace = str(window["trace"])
        except FileNotFoundError:
            return False  # no timed trace was handed to this process
        except Exception as e:
            log("reading mlprof's window of the Kineto trace: %r" % (e,))
            return False
        if os.path.exists(trace):
            return False
        began = time.monotonic()
        now = time.time()
        if now < starts <= now + _EXIT_MARGIN_S:
            time.sleep(starts - now + _TICK_S)
            now = time.time()
        if starts <= now and ends - _EXIT_MARGIN_S <= now < ends + _WRITE_GRACE_S:
            while not os.path.exists(trace) and time.time() < ends + _WRITE_GRACE_S:
                time.sleep(0.05)
            written = os.path.exists(trace)
            log(
                "exited as Kineto's on-demand trace was about to end: waited %.1f s for it to %s"
                % (time.monotonic() - began, "end and be written" if written else "be written, in vain")
            )
            return written
        if time.monotonic() - began > 0.1:
            log(
                "exited as Kineto's on-demand trace was about to start: waited %.1f s for it to start"
                % (time.monotonic() - began)
            )
        return False

    def stop_ondemand_trace():
        # PyTorch dies when a process exits while a Kineto on-demand trace is recording:
        # of SIGSEGV, as the trace's global profiler state is destroyed after libkineto and
        # logs through it (also when the trace starts as the process exits); of SIGABRT,
        # when the trace was stopped here but its end comes before the process is gone
        # (Kineto's thread then stops it again, and that throws). Registered when torch is
        # imported, this runs after the job's own atexit handlers and before the
        # interpreter finalizes. A start or end due within _EXIT_MARGIN_S is waited
        # through (an ending trace is then written whole); a trace still recording after
        # that is stopped, which costs PyTorch's finalization of what it recorded (2 s for
        # 15 s of the small model in mlprof's tests) and loses the trace, which could not
        # be written anyway.
        try:
            import time

            import torch

            autograd = torch._C._autograd
            if autograd._profiler_enabled():
                return  # this thread's own torch.profiler is the job's, not ours to stop
            if settle_ondemand_trace():
                return
            began = time.monotonic()
            try:
                autograd._disable_profiler()
            except RuntimeError:
                return  # no on-demand trace is recording
            log(
                "exited while Kineto's on-demand trace was recording: stopped it first (%.1f s), "
                "as PyTorch crashes when a process exits during one" % (time.monotonic() - began)
            )
        except BaseException as e:
            log("stopping Kineto's on-demand trace at exit: %r" % (e,))

    def tear_cupti_down_after_traces(module):
        # Kineto detaches CUPTI after a trace only when TEARDOWN_CUPTI=1 (read when the
        # trace stops); otherwise CUPTI stays attached and the job's steps stay 10-20 %
        # slower until it exits (pytorch/pytorch#144455; on an H200 a job under mlprof
        # run stayed at 17.8 ms a step from its one 500 ms trace to its exit, 14.8 ms
        # alone). PyTorch's own profiler keeps CUPTI attached only for CUDA graphs before
        # CUDA 12.6, which detaching it could crash; and the Kineto of PyTorch before 2.11
        # could crash detaching it between back-to-back traces (kineto#1169). Returns why
        # CUPTI stays attached in this process, or None.
        own = os.environ.get("TEARDOWN_CUPTI")
        if own is not None:
            return None if own == "1" else "TEARDOWN_CUPTI=%s in the job's environment" % own
        cuda = getattr(getattr(module, "version", None), "cuda", None)
        if not cuda:
            return None  # a CPU or ROCm build: no CUPTI

        def major_minor(text):
            try:
                return tuple(int(part) for part in str(text).split("+")[0].split(".")[:2])
            except ValueError:
                return None

        torch_version = getattr(module, "__version__", "")
        if (major_minor(torch_version) or (0, 0)) < (2, 11):
            return "PyTorch %s: before 2.11, Kineto could crash detaching CUPTI" % torch_version
        if major_minor(cuda) is None:
            return "PyTorch's CUDA version %r is not one mlprof knows" % (cuda,)
        if major_minor(cuda) < (12, 6):
            return "CUDA %s: before 12.6, detaching CUPTI could crash CUDA graphs" % cuda
        os.environ["TEARDOWN_CUPTI"] = "1"
        return None

    def watch_torch(module):
        import json
        import threading
        import time

        pid = os.getpid()
        request = os.path.join(run_dir, "torch-%d.request" % pid)
        # Where Kineto's on-demand mode is on, no thread of the hook's runs in the process:
        # one polling beside it kept PyTorch 2.11's on-demand traces from recording ops.
        daemon = os.environ.get("KINETO_USE_DAEMON", "") == "1"
        info = {"pid": pid, "version": getattr(module, "__version__", ""), "kineto_daemon": daemon}
        try:
            info["cupti_stays"] = tear_cupti_down_after_traces(module)
        except Exception as e:
            log("setting TEARDOWN_CUPTI: %r" % (e,))
        report("torch-%d.ready" % pid, info)
        if daemon:
            import atexit

            atexit.register(stop_ondemand_trace)
            return

        def serve():
            while True:
                time.sleep(0.25)
                try:
                    with open(request) as f:
                        wanted = json.load(f)
                    os.remove(request)
                except FileNotFoundError:
                    continue
                except Exception as e:
                    log("reading mlprof's request: %r" % (e,))
                    continue
                try:
                    trace_torch(wanted)
                except BaseException as e:  # the job's own profiler may hold torch's
                    log("tracing with torch.profiler: %r" % (e,))

        threading.Thread(target=serve, name="mlprof-hook-torch", daemon=True).start()

    class Finder:
        watched = {"jax": "jax", "tensorflow": "tensorflow", "torch": "torch"}

        def find_spec(self, name, path=None, target=None):
            framework = self.watched.get(name)
            if framework is None:
                return None
            try:
                import importlib.util

                self.watched.pop(name, None)
                if not self.watched and self in sys.meta_path:
                    sys.meta_path.remove(self)
                spec = importlib.util.find_spec(name)
                if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
                    return spec
                loader_exec = spec.loader.exec_module

                def exec_module(module):
                    loader_exec(module)
                    try:
                        if framework == "torch":
                            watch_torch(module)
                        else:
                            start_server(framework, module)
                    except Exception as e:
                        log("after importing %s: %r" % (name, e))

                spec.loader.exec_module = exec_module
                return spec
            except Exception as e:
                log("watching the import of %s: %r" % (name, e))
                return None

    if run_dir and os.environ.get("MLPROF_RUN_PORT"):
        sys.meta_path.insert(0, Finder())

    # Chain the job's own sitecustomize, as if this one were not here.
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    ours = sys.modules.pop("sitecustomize", None)
    try:
        import importlib

        importlib.import_module("sitecustomize")
    except ModuleNotFoundError as e:
        if e.name != "sitecustomize":
            log("the job's sitecustomize: %r" % (e,))
        if ours is not None:
            sys.modules["sitecustomize"] = ours
    except Exception as e:
        log("the job's sitecustomize: %r" % (e,))


try:
    _mlprof_install()
except Exception:
    pass
del _mlprof_install
