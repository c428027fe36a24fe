//! Python stack frames recorded as events on a thread: PyTorch's `python_function`
//! events (`with_stack=True`, `torch/nn/modules/conv.py(564): forward`) and the
//! TensorFlow/JAX Python tracer's `$`-prefixed events (`$train.py:42 step`), named
//! the tfprof way (`file:line:function`) and turned into code-view paths by nesting.
//!
//! The one design decision to know: a frame's path is its enclosing frames' path plus
//! itself, so an op gets the path of the innermost frame open where it starts on its
//! thread — "the line that created it" in tfprof's code view.

use mlprof_model::{Line, Plane};

use super::super::nesting::{Nesting, nest};
use super::super::profile::{Profile, ROOT_PATH};
use crate::xstats;

/// A frame name the tfprof way: `file:line:function`; other names (built-ins, module
/// frames) as recorded, without the object address PyTorch appends (`… at 0x7f…>`).
pub(super) fn frame_name(raw: &str) -> String {
    let raw = raw.strip_prefix('$').unwrap_or(raw);
    // PyTorch: `file.py(12): function`.
    if let Some((file_line, function)) = raw.split_once("): ")
        && let Some((file, line)) = file_line.rsplit_once('(')
        && line.parse::<u64>().is_ok()
    {
        return format!("{file}:{line}:{function}");
    }
    // Python tracer: `file.py:12 function`.
    if let Some((file_line, function)) = raw.split_once(' ')
        && let Some((file, line)) = file_line.rsplit_once(':')
        && line.parse::<u64>().is_ok()
    {
        return format!("{file}:{line}:{function}");
    }
    strip_address(raw).into_owned()
}

/// `<built-in method mean of Tensor object at 0x7fbc060af840>` without ` at 0x…`.
fn strip_address(name: &str) -> std::borrow::Cow<'_, str> {
    match name.rfind(" at 0x") {
        Some(at) if name.ends_with('>') && name[at + 6..name.len() - 1].bytes().all(|b| b.is_ascii_hexdigit()) => {
            format!("{}>", &name[..at]).into()
        }
        _ => name.into(),
    }
}

/// The Python tracer frames of one XSpace line, nested, with their code paths.
#[derive(Debug, Default)]
pub(super) struct LineFrames {
    nesting: Nesting,
    paths: Vec<u32>,
}

impl LineFrames {
    /// The `$` frames of `line` (none when the Python tracer was off).
    pub(super) fn of_line(profile: &mut Profile, plane: &Plane, line: &Line) -> LineFrames {
        let frames: Vec<(i64, i64, &str)> = line
            .iter()
            .filter_map(|event| {
                let name = xstats::event_name(plane, &event);
                name.starts_with('$').then(|| (event.start_ps(), event.duration_ps(), name))
            })
            .collect();
        let spans: Vec<(i64, i64)> = frames.iter().map(|&(start, duration, _)| (start, duration)).collect();
        let nesting = nest(&spans);
        let mut paths = vec![ROOT_PATH; frames.len()];
        for &at in &nesting.order {
            let parent = nesting.parent[at].map_or(ROOT_PATH, |p| paths[p]);
            let component = profile.strings.intern(&frame_name(frames[at].2));
            paths[at] = profile.code.child(parent, component);
        }
        LineFrames { nesting, paths }
    }

    /// Whether the line has frames.
    pub(super) fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    /// The code path of the innermost frame open at `time_ps` ([`ROOT_PATH`] when none).
    pub(super) fn path_at(&self, time_ps: i64) -> u32 {
        self.nesting.innermost(time_ps).map_or(ROOT_PATH, |frame| self.paths[frame])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_named_file_line_function() {
        assert_eq!(frame_name("torch/nn/modules/conv.py(564): forward"), "torch/nn/modules/conv.py:564:forward");
        assert_eq!(frame_name("$train.py:42 step"), "train.py:42:step");
        assert_eq!(
            frame_name("<built-in method mean of Tensor object at 0x7fbc060af840>"),
            "<built-in method mean of Tensor object>"
        );
        assert_eq!(frame_name("nn.Module: Linear_0"), "nn.Module: Linear_0");
        assert_eq!(frame_name("$builtins isinstance"), "builtins isinstance");
        assert_eq!(frame_name("f(x): y"), "f(x): y");
        assert_eq!(frame_name("<a at 0xzz>"), "<a at 0xzz>");
    }
}
