//! Framework op names as XProf reads them (`ParseTfOpFullname`): `scope/name:Type` for
//! TensorFlow, `scope/name:jax_type[params]` for JAX, `Iterator::…` for tf.data, and
//! `Memcpy…` copies. Anything else is an unknown TraceMe, which op statistics ignore.
//!
//! The patterns XProf matches with regular expressions are spelled out by hand here
//! (character classes only), so the crate needs no regex engine.

/// What kind of framework op a name denotes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TfOpCategory {
    /// Not a framework op (a user TraceMe, a runtime event).
    Unknown,
    /// A TensorFlow op (`name:Type`).
    TensorFlow,
    /// A JAX op (`name:jax_type`).
    Jax,
    /// A tf.data iterator (`Iterator::…`), op type `Dataset`.
    TfData,
    /// A host-to-device copy.
    MemcpyHToD,
    /// A device-to-host copy.
    MemcpyDToH,
    /// A device-to-device copy.
    MemcpyDToD,
    /// A host-to-host copy.
    MemcpyHToH,
    /// An input-pipeline stage identified by stage-id and stage-category stats.
    InputPipeline,
}

/// A parsed framework op name; borrowed from the full name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TfOp<'a> {
    /// Its category.
    pub category: TfOpCategory,
    /// The op name without its type (the full name for unknown ops and datasets).
    pub name: &'a str,
    /// The op type (`MatMul`, `dot_general`, `Dataset`, …); empty when unknown.
    pub op_type: &'a str,
    /// Input-pipeline stage id (0 for all other ops).
    pub id: i64,
}

/// Op type of tf.data iterators.
pub const DATASET_OP: &str = "Dataset";

/// Parses a full op name the way XProf's `ParseTfOpFullname` does.
pub fn parse_tf_op_fullname(full: &str) -> TfOp<'_> {
    parse_tf_op_fullname_with(full, TfOpCategory::Unknown, "", 0)
}

/// Parses a full op name whose category and type may already be known (input-pipeline
/// stages); a known category with a non-empty type is taken as is.
pub fn parse_tf_op_fullname_with<'a>(full: &'a str, category: TfOpCategory, op_type: &'a str, id: i64) -> TfOp<'a> {
    let given = TfOp { category, name: full, op_type, id };
    if category != TfOpCategory::Unknown && !op_type.is_empty() {
        return given;
    }
    let Some((head, tail)) = full.split_once(':') else {
        return memcpy_op(full).unwrap_or(given);
    };
    if head == "Iterator" {
        return TfOp { category: TfOpCategory::TfData, op_type: DATASET_OP, ..given };
    }
    if is_tf_op_name(head) && is_tf_op_type(tail) {
        return TfOp { category: TfOpCategory::TensorFlow, name: head, op_type: tail, ..given };
    }
    let derived = if tail.is_empty() { derive_op_type(head) } else { tail };
    if is_jax_op_type(derived) {
        let op_type = derived.find('[').map_or(derived, |at| &derived[..at]);
        return TfOp { category: TfOpCategory::Jax, name: head, op_type, ..given };
    }
    if tail.is_empty() {
        return TfOp { category: TfOpCategory::TensorFlow, name: head, op_type: derived, ..given };
    }
    given
}

fn memcpy_op(full: &str) -> Option<TfOp<'_>> {
    let kinds = [
        ("MEMCPYHToD", TfOpCategory::MemcpyHToD, "MemcpyHToD"),
        ("MEMCPYDToH", TfOpCategory::MemcpyDToH, "MemcpyDToH"),
        ("MEMCPYDToD", TfOpCategory::MemcpyDToD, "MemcpyDToD"),
        ("MEMCPYHToH", TfOpCategory::MemcpyHToH, "MemcpyHToH"),
    ];
    kinds.into_iter().find_map(|(prefix, category, op_type)| {
        let head = full.get(..prefix.len())?;
        head.eq_ignore_ascii_case(prefix).then_some(TfOp { category, name: full, op_type, id: 0 })
    })
}

/// The op type implied by a name without one: the last scope, minus a numeric `_N`
/// suffix (`model/layer/MatMul_1` → `MatMul`).
fn derive_op_type(full: &str) -> &str {
    let last = full.rsplit('/').next().unwrap_or(full);
    match last.rsplit_once('_') {
        Some((stem, suffix)) if is_integer(suffix) => stem,
        _ => last,
    }
}

/// Whether `s` reads as a 64-bit integer, surrounding ASCII whitespace allowed.
fn is_integer(s: &str) -> bool {
    s.trim_matches(|c: char| c.is_ascii_whitespace()).parse::<i64>().is_ok()
}

/// `[A-Za-z0-9.][A-Za-z0-9_./>-]*`
pub fn is_tf_op_name(s: &str) -> bool {
    let mut bytes = s.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphanumeric() || b == b'.')
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'/' | b'>' | b'-'))
}

/// `[A-Z_][a-zA-Z0-9_]*`
pub fn is_tf_op_type(s: &str) -> bool {
    let mut bytes = s.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_uppercase() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// `[a-z_][a-z0-9_]*(\[.*\])?` (the bracketed part without line breaks).
pub fn is_jax_op_type(s: &str) -> bool {
    let bytes = s.as_bytes();
    if !bytes.first().is_some_and(|&b| b.is_ascii_lowercase() || b == b'_') {
        return false;
    }
    let ident = bytes.iter().take_while(|&&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_').count();
    let rest = &bytes[ident..];
    rest.is_empty() || (rest.len() >= 2 && rest[0] == b'[' && rest[rest.len() - 1] == b']' && !rest.contains(&b'\n'))
}

/// Whether `(name, op_type)` is a JAX op: a JAX type that the last scope of the name
/// contains.
pub fn is_jax_op_name_and_type(name: &str, op_type: &str) -> bool {
    !name.is_empty() && is_jax_op_type(op_type) && name.rsplit('/').next().unwrap_or(name).contains(op_type)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(full: &str) -> (TfOpCategory, &str, &str) {
        let op = parse_tf_op_fullname(full);
        (op.category, op.name, op.op_type)
    }

    #[test]
    fn tensorflow_jax_dataset_and_memcpy_names() {
        use TfOpCategory::*;
        assert_eq!(parsed("model/dense/MatMul:MatMul"), (TensorFlow, "model/dense/MatMul", "MatMul"));
        assert_eq!(parsed("EagerPyFunc:EagerPyFunc"), (TensorFlow, "EagerPyFunc", "EagerPyFunc"));
        assert_eq!(parsed("Iterator::Root::Prefetch"), (TfData, "Iterator::Root::Prefetch", "Dataset"));
        assert_eq!(parsed("jit(f)/dot_general:dot_general"), (Jax, "jit(f)/dot_general", "dot_general"));
        assert_eq!(parsed("a/transpose:transpose[permutation=(0, 1)]"), (Jax, "a/transpose", "transpose"));
        assert_eq!(parsed("model/MatMul_1:"), (TensorFlow, "model/MatMul_1", "MatMul"));
        assert_eq!(parsed("model/add_3:"), (Jax, "model/add_3", "add"));
        assert_eq!(parsed("MemcpyHToD"), (MemcpyHToD, "MemcpyHToD", "MemcpyHToD"));
        assert_eq!(parsed("memcpydtoh_async"), (MemcpyDToH, "memcpydtoh_async", "MemcpyDToH"));
        assert_eq!(parsed("EagerExecute"), (Unknown, "EagerExecute", ""));
        assert_eq!(parsed("$sharding_impls.py:154 memory_kind"), (Unknown, "$sharding_impls.py:154 memory_kind", ""));
        assert_eq!(parsed(""), (Unknown, "", ""));
    }

    #[test]
    fn input_pipeline_stages_keep_their_category() {
        let op = parse_tf_op_fullname_with("MapMapDataset", TfOpCategory::InputPipeline, "preprocessing", 7);
        assert_eq!((op.name, op.op_type, op.id), ("MapMapDataset", "preprocessing", 7));
        let op = parse_tf_op_fullname_with("Nothing", TfOpCategory::InputPipeline, "", 7);
        assert_eq!((op.category, op.id), (TfOpCategory::InputPipeline, 7));
    }

    #[test]
    fn jax_name_and_type() {
        assert!(is_jax_op_name_and_type("jit(f)/add", "add"));
        assert!(!is_jax_op_name_and_type("", "add"));
        assert!(!is_jax_op_name_and_type("jit(f)/mul", "Add"));
    }
}
