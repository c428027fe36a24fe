//! The annotation API for Rust programs: [`trace`], [`trace_scope`] and [`step`] return
//! a guard that records one host event, from its creation to its drop, with typed
//! arguments — TensorFlow's `tf.profiler.experimental.Trace` and JAX's
//! `TraceAnnotation`/`StepTraceAnnotation`, for Rust.
//!
//! The design decision to know: whether to record is decided once, when the guard is
//! created (like TF's `TraceMe`). With no profiling session active that is one atomic
//! load and the guard is empty; arguments are not even converted. An event that started
//! before a session began is therefore not part of it, and one still open when a
//! session stops is not either: a session holds only events that lie entirely in its
//! window.

use std::borrow::Cow;

use super::recorder::{self, RawEvent};

/// The value of one event argument: an XSpace stat of the matching type.
#[derive(Clone, Debug, PartialEq)]
pub enum ArgValue {
    /// A signed integer (`int64_value`); also booleans, as 0 or 1.
    Int(i64),
    /// An unsigned integer (`uint64_value`).
    Uint(u64),
    /// A floating-point number (`double_value`).
    Float(f64),
    /// Text (`str_value`).
    Str(Cow<'static, str>),
}

/// Turns a value into an [`ArgValue`] without consuming it. Implemented for the
/// integer and float types, `bool`, `str`, `String` and `ArgValue` itself (use
/// `ArgValue` to mix types in one argument list).
pub trait ToArg {
    /// The value as an event argument.
    fn to_arg(&self) -> ArgValue;
}

macro_rules! to_arg {
    ($variant:ident as $target:ty: $($t:ty),*) => {$(
        impl ToArg for $t {
            #[allow(clippy::unnecessary_cast, clippy::cast_lossless)]
            fn to_arg(&self) -> ArgValue {
                ArgValue::$variant(*self as $target)
            }
        }
        impl From<$t> for ArgValue {
            fn from(v: $t) -> ArgValue {
                v.to_arg()
            }
        }
    )*};
}
to_arg!(Int as i64: i8, i16, i32, i64, isize);
to_arg!(Uint as u64: u8, u16, u32, u64, usize);
to_arg!(Float as f64: f32, f64);

impl ToArg for bool {
    fn to_arg(&self) -> ArgValue {
        ArgValue::Int(i64::from(*self))
    }
}

impl ToArg for str {
    fn to_arg(&self) -> ArgValue {
        ArgValue::Str(Cow::Owned(self.to_string()))
    }
}

impl ToArg for String {
    fn to_arg(&self) -> ArgValue {
        self.as_str().to_arg()
    }
}

impl ToArg for ArgValue {
    fn to_arg(&self) -> ArgValue {
        self.clone()
    }
}

impl<T: ToArg + ?Sized> ToArg for &T {
    fn to_arg(&self) -> ArgValue {
        (**self).to_arg()
    }
}

impl From<bool> for ArgValue {
    fn from(v: bool) -> ArgValue {
        v.to_arg()
    }
}

impl From<&str> for ArgValue {
    fn from(v: &str) -> ArgValue {
        v.to_arg()
    }
}

impl From<String> for ArgValue {
    fn from(v: String) -> ArgValue {
        ArgValue::Str(Cow::Owned(v))
    }
}

/// An open host event; it ends, and is recorded, when dropped — on the line of the
/// thread that drops it (keep guards on the thread that opened them, as scopes).
#[must_use = "the event ends when the guard is dropped: bind it with `let _t = ...`"]
#[derive(Debug)]
pub struct TraceGuard {
    open: Option<OpenEvent>,
}

#[derive(Debug)]
struct OpenEvent {
    name: Cow<'static, str>,
    start_ns: i64,
    args: Vec<(&'static str, ArgValue)>,
}

impl TraceGuard {
    #[inline]
    fn inactive() -> TraceGuard {
        TraceGuard { open: None }
    }

    fn open(name: Cow<'static, str>, args: Vec<(&'static str, ArgValue)>) -> TraceGuard {
        TraceGuard { open: Some(OpenEvent { name, start_ns: recorder::now_ns(), args }) }
    }

    /// True when this event will be recorded (a session was active when it began).
    pub fn is_recording(&self) -> bool {
        self.open.is_some()
    }

    /// Adds an argument known only after the event began (a loss, a byte count).
    /// Does nothing when the event is not recorded.
    pub fn add_arg(&mut self, key: &'static str, value: impl ToArg) {
        if let Some(open) = &mut self.open {
            open.args.push((key, value.to_arg()));
        }
    }
}

impl Drop for TraceGuard {
    #[inline]
    fn drop(&mut self) {
        if let Some(open) = self.open.take() {
            let end_ns = recorder::now_ns();
            recorder::record(RawEvent { name: open.name, start_ns: open.start_ns, end_ns, args: open.args });
        }
    }
}

/// Records a host event named `name` with typed arguments, from now until the guard is
/// dropped: `let _t = trace("load", &[("batch", 32)]);`. Keys are static strings;
/// values are anything [`ToArg`] (wrap them in [`ArgValue`] to mix types). The name may
/// be a `&'static str` (no allocation) or a `String`. Without arguments, use
/// [`trace_scope`] (`&[]` leaves the value type unknown).
#[inline]
pub fn trace<V: ToArg>(name: impl Into<Cow<'static, str>>, args: &[(&'static str, V)]) -> TraceGuard {
    if !recorder::is_recording() {
        return TraceGuard::inactive();
    }
    TraceGuard::open(name.into(), args.iter().map(|(k, v)| (*k, v.to_arg())).collect())
}

/// Records a host event without arguments: `let _t = trace_scope("forward");`.
#[inline]
pub fn trace_scope(name: impl Into<Cow<'static, str>>) -> TraceGuard {
    if !recorder::is_recording() {
        return TraceGuard::inactive();
    }
    TraceGuard::open(name.into(), Vec::new())
}

/// Records one training (or inference) step: an event named `name` with the stats
/// `step_num` and `_r=1`, exactly as TF's `Trace("train", step_num=n, _r=1)` and JAX's
/// `StepTraceAnnotation` write them, so XProf's step grouping (and mlprof's) sees a
/// step root named `name <step_num>`. Step numbers beyond `i64::MAX` are clamped.
#[inline]
pub fn step<N: TryInto<i64>>(name: impl Into<Cow<'static, str>>, step_num: N) -> TraceGuard {
    if !recorder::is_recording() {
        return TraceGuard::inactive();
    }
    let step_num = step_num.try_into().unwrap_or(i64::MAX);
    TraceGuard::open(name.into(), vec![("step_num", ArgValue::Int(step_num)), ("_r", ArgValue::Int(1))])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::recorder::{begin, test_lock};

    fn recorded(f: impl FnOnce()) -> Vec<RawEvent> {
        let session = begin(0).unwrap();
        f();
        let got = session.finish();
        got.threads.into_iter().flat_map(|t| t.events).collect()
    }

    #[test]
    fn guards_without_a_session_record_nothing() {
        let _serial = test_lock();
        let guard = trace("idle", &[("step_num", 3)]);
        assert!(!guard.is_recording());
        let session = begin(0).unwrap();
        drop(guard); // opened before the session: not part of it
        assert!(session.finish().threads.is_empty());
    }

    #[test]
    fn the_documented_call_syntax_records_typed_args() {
        let _serial = test_lock();
        let events = recorded(|| {
            let _t = trace("name", &[("step_num", 3)]);
            let mut g = trace(
                String::from("mixed"),
                &[("file", ArgValue::from("a.bin")), ("bytes", ArgValue::from(7u64)), ("lr", ArgValue::from(0.5))],
            );
            g.add_arg("ok", true);
            let _s = trace_scope("bare");
        });
        let by_name = |n: &str| events.iter().find(|e| e.name == n).unwrap();
        assert_eq!(by_name("name").args, [("step_num", ArgValue::Int(3))]);
        assert_eq!(
            by_name("mixed").args,
            [
                ("file", ArgValue::Str("a.bin".into())),
                ("bytes", ArgValue::Uint(7)),
                ("lr", ArgValue::Float(0.5)),
                ("ok", ArgValue::Int(1)),
            ]
        );
        assert!(by_name("bare").args.is_empty());
        // Nested scopes: the outer event encloses the inner one.
        let (outer, inner) = (by_name("name"), by_name("bare"));
        assert!(outer.start_ns <= inner.start_ns && inner.end_ns <= outer.end_ns);
    }

    #[test]
    fn steps_carry_step_num_and_root_marker() {
        let _serial = test_lock();
        let events = recorded(|| {
            let _s = step("train", 12usize);
            let _big = step("train", u64::MAX);
        });
        let mut nums: Vec<_> = events.iter().map(|e| e.args.clone()).collect();
        nums.sort_by_key(|a| format!("{a:?}"));
        assert_eq!(
            nums,
            [
                vec![("step_num", ArgValue::Int(12)), ("_r", ArgValue::Int(1))],
                vec![("step_num", ArgValue::Int(i64::MAX)), ("_r", ArgValue::Int(1))],
            ]
        );
        assert!(events.iter().all(|e| e.name == "train"));
    }
}
