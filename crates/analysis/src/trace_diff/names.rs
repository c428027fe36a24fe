//! HTA's `shorten_name`: an operator or kernel name without its function arguments,
//! template arguments and return type (`void at::native::f<4, T>(int)` →
//! `at::native::f`), as `compare_traces(use_short_name=True)` groups by.

/// The short form of `name`, character for character as HTA 0.5.0's `shorten_name`:
/// memory kernels (`Memcpy…`, `Memset…`, `dma…`) and names without `<` or `(` are kept;
/// otherwise `->` is removed, every `<…>` and `(…)` group is dropped (innermost
/// first, an unmatched closer drops everything before it), and the last
/// space-separated word of what is left is returned.
pub fn shorten_name(name: &str) -> String {
    if name.starts_with("Memcpy") || name.starts_with("Memset") || name.starts_with("dma") {
        return name.to_string();
    }
    if !name.contains('<') && !name.contains('(') {
        return name.to_string();
    }
    let text = name.replace("->", "");
    let mut stack: Vec<char> = Vec::with_capacity(text.len());
    for c in text.chars() {
        let open = match c {
            '>' => '<',
            ')' => '(',
            _ => {
                stack.push(c);
                continue;
            }
        };
        while stack.last().is_some_and(|&top| top != open) {
            stack.pop();
        }
        if stack.last() == Some(&open) {
            stack.pop();
        }
    }
    let kept: String = stack.into_iter().collect();
    kept.rsplit(' ').next().unwrap_or("").to_string()
}

#[cfg(test)]
mod tests {
    use super::shorten_name;

    #[test]
    fn matches_hta_short_names() {
        assert_eq!(
            shorten_name(
                "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<int>, \
                 at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<int>, at::detail::Array<char*, 3>)"
            ),
            "at::native::vectorized_elementwise_kernel"
        );
        assert_eq!(shorten_name("Memcpy HtoD (Pinned -> Device)"), "Memcpy HtoD (Pinned -> Device)");
        assert_eq!(shorten_name("aten::add"), "aten::add");
        assert_eq!(shorten_name("std::vector<int> f(a->b)"), "f");
        assert_eq!(shorten_name("ends with space (x) "), "");
    }
}
