//! Who recorded a host, and how its source lists devices: the facts that word advice,
//! name the run environment and explain a missing column.

use mlprof_model::{Host, names};
use serde::Serialize;

/// Whether `host` holds only what mlprof sampled (and its time span).
pub fn is_sampled_only(host: &Host) -> bool {
    use names::sampled::{COUNTERS_PLANE, NATIVE_PLANE, PYTHON_PLANE};
    let sampled =
        |name: &str| matches!(name, PYTHON_PLANE | NATIVE_PLANE | COUNTERS_PLANE | names::TASK_ENVIRONMENT_PLANE);
    host.planes.iter().any(|p| matches!(p.name.as_str(), PYTHON_PLANE | NATIVE_PLANE | COUNTERS_PLANE))
        && host.planes.iter().all(|p| sampled(&p.name))
}

/// The framework (or program) that wrote a profile: it decides how fixes are worded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Framework {
    /// TensorFlow / Keras (XSpace without JAX's version stats).
    #[default]
    Tensorflow,
    /// JAX (XSpace whose `/host:metadata` plane has a `jax_version` stat).
    Jax,
    /// PyTorch (Kineto trace).
    Pytorch,
    /// A CUDA program with no framework events (XSpace that `mlprof run`'s CUPTI
    /// injection wrote: its `/host:metadata` plane says `profiler` "mlprof-inject").
    Cuda,
    /// A Python program seen only through the stacks and counters `mlprof run` or
    /// `mlprof attach` sampled (no framework trace): it has no steps and no device
    /// activity, so the rules that word fixes by framework never reach it.
    Python,
}

impl Framework {
    /// The framework of a profile whose hosts were written by `each`, leaving out hosts
    /// of samples alone: PyTorch when every host is, else JAX when any host is, else a
    /// CUDA program when every host is, else TensorFlow; a Python program when every
    /// host holds samples alone.
    pub fn of_profile(each: impl IntoIterator<Item = Framework>) -> Framework {
        let (mut count, mut pytorch, mut jax, mut cuda, mut python) = (0, 0, false, 0, 0);
        for framework in each {
            count += 1;
            match framework {
                Framework::Pytorch => pytorch += 1,
                Framework::Jax => jax = true,
                Framework::Cuda => cuda += 1,
                Framework::Python => python += 1,
                Framework::Tensorflow => {}
            }
        }
        let count = count - python;
        match () {
            _ if count == 0 && python > 0 => Framework::Python,
            _ if count > 0 && pytorch == count => Framework::Pytorch,
            _ if jax => Framework::Jax,
            _ if count > 0 && cuda == count => Framework::Cuda,
            _ => Framework::Tensorflow,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Framework::{self, *};

    #[test]
    fn a_profile_is_pytorch_or_cuda_only_when_every_host_is_and_jax_when_any_is() {
        assert_eq!(Framework::of_profile([]), Tensorflow);
        assert_eq!(Framework::of_profile([Pytorch, Pytorch]), Pytorch);
        assert_eq!(Framework::of_profile([Pytorch, Tensorflow]), Tensorflow);
        assert_eq!(Framework::of_profile([Tensorflow, Jax]), Jax);
        assert_eq!(Framework::of_profile([Pytorch, Jax]), Jax);
        assert_eq!(Framework::of_profile([Cuda, Cuda]), Cuda);
        assert_eq!(Framework::of_profile([Cuda, Tensorflow]), Tensorflow);
        assert_eq!(Framework::of_profile([Python, Python]), Python);
        assert_eq!(Framework::of_profile([Pytorch, Python]), Pytorch, "samples beside a trace say nothing");
        assert_eq!(Framework::of_profile([Python, Cuda]), Cuda);
    }
}
