//! Small JSON text writers shared by the Chrome-trace writer: escaped strings, exact
//! microsecond timestamps, and numbers that keep their type on a re-read.

use mlprof_model::time::PS_PER_US;

/// Appends `s` as a JSON string literal.
pub fn push_json_str(out: &mut String, s: &str) {
    out.push('"');
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        let escape = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[start..i]);
        if escape.is_empty() {
            out.push_str(&format!("\\u{b:04x}"));
        } else {
            out.push_str(escape);
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// Appends the time `origin_us` µs + `ps` picoseconds as an exact decimal number of
/// microseconds (`1712195495519695.8`).
pub fn push_us(out: &mut String, origin_us: i64, ps: i64) {
    let whole = i128::from(origin_us) + i128::from(ps.div_euclid(PS_PER_US));
    let frac = ps.rem_euclid(PS_PER_US);
    out.push_str(&whole.to_string());
    if frac != 0 {
        let digits = format!("{frac:06}");
        out.push('.');
        out.push_str(digits.trim_end_matches('0'));
    }
}

/// Appends a double so that a JSON reader sees a non-integer number (`68.0`, not
/// `68`); NaN and infinities, which JSON cannot hold, become strings.
pub fn push_double(out: &mut String, v: f64) {
    if !v.is_finite() {
        push_json_str(out, &v.to_string());
        return;
    }
    let text = v.to_string();
    out.push_str(&text);
    if !text.contains(['.', 'e', 'E']) {
        out.push_str(".0");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped() {
        let mut s = String::new();
        push_json_str(&mut s, "a\"b\\c\n\u{1}é");
        assert_eq!(s, r#""a\"b\\c\n\u0001é""#);
    }

    #[test]
    fn times_are_exact() {
        let mut s = String::new();
        push_us(&mut s, 1_712_195_495_519_689, 6_800_000);
        assert_eq!(s, "1712195495519695.8");
        s.clear();
        push_us(&mut s, 10, -1);
        assert_eq!(s, "9.999999");
    }

    #[test]
    fn doubles_stay_doubles() {
        let mut s = String::new();
        push_double(&mut s, 68.0);
        s.push(',');
        push_double(&mut s, 0.1);
        assert_eq!(s, "68.0,0.1");
    }
}
