//! Memory stays bounded by what a profile holds (issue 17): a file of millions of tiny
//! empty planes or lines is refused with one line at the limit, not read into
//! gigabytes of model, and the same structure just under the limits still reads.

use mlprof_formats::limits::{MAX_LINES, MAX_PLANES};
use mlprof_formats::xspace::read_xspace;

fn varint(mut n: usize, out: &mut Vec<u8>) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// An XSpace of one plane with `lines` empty lines.
fn empty_lines(lines: usize) -> Vec<u8> {
    let plane: Vec<u8> = [0x1a, 0x00].repeat(lines);
    let mut file = vec![0x0a];
    varint(plane.len(), &mut file);
    file.extend(plane);
    file
}

#[test]
fn more_empty_planes_than_the_limit_are_refused_at_the_limit() {
    let file = [0x0a, 0x00].repeat(MAX_PLANES + 1);
    let err = read_xspace(&file, "planes.xplane.pb", "h").expect_err("refused").to_string();
    let at = MAX_PLANES * 2;
    assert_eq!(
        err,
        format!(
            "planes.xplane.pb: byte offset {at}: more than {MAX_PLANES} planes in one profile: no profiler writes \
             that many, so it is refused to keep memory bounded"
        )
    );
    let host = read_xspace(&[0x0a, 0x00].repeat(MAX_PLANES), "ok.xplane.pb", "h").expect("at the limit");
    assert_eq!(host.planes.len(), MAX_PLANES);
}

#[test]
fn more_empty_lines_than_the_limit_are_refused_at_the_limit() {
    let err = read_xspace(&empty_lines(MAX_LINES + 1), "lines.xplane.pb", "h").expect_err("refused").to_string();
    assert!(err.contains(&format!("more than {MAX_LINES} lines in one profile")), "{err}");
    let host = read_xspace(&empty_lines(MAX_LINES), "ok.xplane.pb", "h").expect("at the limit");
    assert_eq!(host.planes[0].lines.len(), MAX_LINES);
}

#[test]
fn the_line_limit_counts_the_lines_of_all_planes() {
    let half = empty_lines(MAX_LINES / 2 + 1);
    let err = read_xspace(&[half.clone(), half].concat(), "two.xplane.pb", "h").expect_err("refused").to_string();
    assert!(err.contains("lines in one profile"), "{err}");
}
