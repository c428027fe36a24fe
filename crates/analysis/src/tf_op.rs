//! Parsing framework op names the way XProf does (`ParseTfOpFullname`): TensorFlow
//! `name:Type`, tf.data `Iterator::…`, JAX `name:jax_type`, and GPU memcpy names.
//!
//! The one design decision to know: parsing borrows from the event name (no
//! allocation), so it can run on every event of a large profile.

/// What kind of op a name denotes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OpCategory {
    /// Not an op name (a user TraceMe, a runtime event).
    Unknown,
    /// A TensorFlow op (`name:Type`).
    TensorFlow,
    /// A tf.data iterator (`Iterator::…`), op type `Dataset`.
    TfData,
    /// A JAX op (`name:jax_type`).
    Jax,
    /// Host-to-device copy.
    MemcpyHToD,
    /// Device-to-host copy.
    MemcpyDToH,
    /// Device-to-device copy.
    MemcpyDToD,
    /// Host-to-host copy.
    MemcpyHToH,
}

/// A parsed op name; `name` and `op_type` borrow from the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TfOp<'a> {
    /// The category.
    pub category: OpCategory,
    /// The op name (for TF ops, without `:Type`; otherwise the whole input).
    pub name: &'a str,
    /// The op type (`MatMul`, `Dataset`, `MemcpyHToD`, …; empty when unknown).
    pub op_type: &'a str,
}

/// The op type XProf gives tf.data iterators.
pub const DATASET_OP: &str = "Dataset";

/// Parses a full op name as XProf's `ParseTfOpFullname` does.
pub fn parse_tf_op(full_name: &str) -> TfOp<'_> {
    let unknown = TfOp { category: OpCategory::Unknown, name: full_name, op_type: "" };
    let Some((left, right)) = full_name.split_once(':') else {
        return memcpy_op(full_name).unwrap_or(unknown);
    };
    if left == "Iterator" {
        return TfOp { category: OpCategory::TfData, name: full_name, op_type: DATASET_OP };
    }
    if is_tf_op_name(left) && is_tf_op_type(right) {
        return TfOp { category: OpCategory::TensorFlow, name: left, op_type: right };
    }
    let op_type = if right.is_empty() { derive_op_type(left) } else { right };
    if is_jax_op_type(op_type) {
        let op_type = op_type.find('[').map_or(op_type, |bracket| &op_type[..bracket]);
        return TfOp { category: OpCategory::Jax, name: left, op_type };
    }
    if right.is_empty() {
        return TfOp { category: OpCategory::TensorFlow, name: left, op_type };
    }
    unknown
}

fn memcpy_op(name: &str) -> Option<TfOp<'_>> {
    const KINDS: [(&str, OpCategory); 4] = [
        ("MemcpyHToD", OpCategory::MemcpyHToD),
        ("MemcpyDToH", OpCategory::MemcpyDToH),
        ("MemcpyDToD", OpCategory::MemcpyDToD),
        ("MemcpyHToH", OpCategory::MemcpyHToH),
    ];
    KINDS.iter().find(|(prefix, _)| starts_with_ignore_case(name, prefix)).map(|&(op_type, category)| TfOp {
        category,
        name,
        op_type,
    })
}

/// ASCII case-insensitive prefix test.
pub fn starts_with_ignore_case(text: &str, prefix: &str) -> bool {
    text.len() >= prefix.len() && text.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

/// `[A-Za-z0-9.][A-Za-z0-9_./>-]*` (XProf's `IsTfOpName`).
pub(crate) fn is_tf_op_name(s: &str) -> bool {
    let mut bytes = s.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphanumeric() || b == b'.')
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'/' | b'>' | b'-'))
}

/// `[A-Z_][a-zA-Z0-9_]*` (XProf's `IsTfOpType`).
pub(crate) fn is_tf_op_type(s: &str) -> bool {
    let mut bytes = s.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_uppercase() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// `[a-z_][a-z0-9_]*(\[.*\])?` (XProf's `IsJaxOpType`; no line break in the brackets).
pub(crate) fn is_jax_op_type(s: &str) -> bool {
    let bytes = s.as_bytes();
    if !bytes.first().is_some_and(|&b| b.is_ascii_lowercase() || b == b'_') {
        return false;
    }
    let ident = bytes.iter().take_while(|&&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_').count();
    let rest = &bytes[ident..];
    rest.is_empty() || (rest.len() >= 2 && rest[0] == b'[' && rest[rest.len() - 1] == b']' && !rest.contains(&b'\n'))
}

/// A JAX type that the last scope of a non-empty name contains (XProf's
/// `IsJaxOpNameAndType`).
pub(crate) fn is_jax_op_name_and_type(name: &str, op_type: &str) -> bool {
    !name.is_empty() && is_jax_op_type(op_type) && name.rsplit('/').next().unwrap_or(name).contains(op_type)
}

/// The op type of an op name without one: its last name-scope component minus a
/// numeric `_N` suffix (`model/layer/MatMul_1` → `MatMul`).
fn derive_op_type(full_op_name: &str) -> &str {
    let op_name = full_op_name.rsplit('/').next().unwrap_or(full_op_name);
    match op_name.rsplit_once('_') {
        Some((head, suffix)) if !suffix.is_empty() && suffix.parse::<i64>().is_ok() => head,
        _ => op_name,
    }
}

/// Whether `op_type` is an infeed-enqueue op (`InfeedEnqueue`, `InfeedEnqueueTuple`, …).
pub fn is_infeed_enqueue(op_type: &str) -> bool {
    op_type.starts_with("InfeedEnqueue")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_op_name_kinds_xprof_knows() {
        let op = parse_tf_op("model/dense/MatMul:MatMul");
        assert_eq!((op.category, op.name, op.op_type), (OpCategory::TensorFlow, "model/dense/MatMul", "MatMul"));
        let op = parse_tf_op("Iterator::Root::MapAndBatch");
        assert_eq!((op.category, op.op_type), (OpCategory::TfData, DATASET_OP));
        assert_eq!(op.name, "Iterator::Root::MapAndBatch");
        let op = parse_tf_op("jit(f)/dot_general:dot_general[precision=None]");
        assert_eq!((op.category, op.op_type), (OpCategory::Jax, "dot_general"));
        let op = parse_tf_op("conv/Conv2D_1:");
        assert_eq!((op.category, op.op_type), (OpCategory::TensorFlow, "Conv2D"));
        assert_eq!(parse_tf_op("MEMCPYHToD").category, OpCategory::MemcpyHToD);
        assert_eq!(parse_tf_op("EagerExecute").category, OpCategory::Unknown);
        assert_eq!(parse_tf_op("a b:c d").category, OpCategory::Unknown);
        assert_eq!(parse_tf_op("").category, OpCategory::Unknown);
    }
}
