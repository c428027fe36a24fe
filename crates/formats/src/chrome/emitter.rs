//! The one Chrome trace writer underneath every Chrome trace mlprof writes: the
//! document's opening (top-level keys, then `"traceEvents":[`), one event object per
//! line separated by commas, and the closing; text is buffered and written in chunks
//! of about 1 MiB. [`super::write_chrome_trace`] writes a whole profile through it;
//! other views (tfprof's timeline) write their own events with the field helpers.

use std::io::{self, Write};

use super::json_text::{push_json_str, push_us};

/// The size at which buffered text is written out, bytes.
const CHUNK_BYTES: usize = 1 << 20;

/// Writes one Chrome trace document, event by event.
pub struct TraceWriter<'w> {
    out: &'w mut dyn Write,
    /// The text not yet written (an event is built here in place).
    pub(crate) buf: String,
    first: bool,
}

impl<'w> TraceWriter<'w> {
    /// Starts the document: `{`, then `top_level` (raw `"key":value,` pairs, each
    /// ending in a comma), then `"traceEvents":[`.
    pub fn start(out: &'w mut dyn Write, top_level: &str) -> TraceWriter<'w> {
        let mut buf = String::with_capacity(CHUNK_BYTES);
        buf.push('{');
        buf.push_str(top_level);
        buf.push_str("\"traceEvents\":[");
        TraceWriter { out, buf, first: true }
    }

    /// Starts a new event object (writes the separating comma and `{`).
    pub(crate) fn begin(&mut self) -> io::Result<()> {
        if self.buf.len() > CHUNK_BYTES - 4096 {
            self.flush()?;
        }
        self.buf.push_str(if self.first { "\n{" } else { ",\n{" });
        self.first = false;
        Ok(())
    }

    /// Starts a new event object of phase `ph` (its `"ph"` field first); end it with
    /// [`TraceWriter::end_event`].
    pub fn begin_event(&mut self, ph: &str) -> io::Result<()> {
        self.begin()?;
        self.buf.push_str("\"ph\":");
        push_json_str(&mut self.buf, ph);
        Ok(())
    }

    /// Adds field `key` with a string value to the event begun.
    pub fn str_field(&mut self, key: &str, value: &str) {
        self.key(key);
        push_json_str(&mut self.buf, value);
    }

    /// Adds field `key` with an integer value.
    pub fn int_field(&mut self, key: &str, value: i64) {
        self.key(key);
        self.buf.push_str(&value.to_string());
    }

    /// Adds field `key` with a time, `ps` picoseconds written in microseconds.
    pub fn us_field(&mut self, key: &str, ps: i64) {
        self.key(key);
        push_us(&mut self.buf, 0, ps);
    }

    /// Adds field `key` with an object of string values (`"args":{"name":"…"}`).
    pub fn str_object_field(&mut self, key: &str, entries: &[(&str, &str)]) {
        self.key(key);
        self.buf.push('{');
        for (index, (name, value)) in entries.iter().enumerate() {
            if index > 0 {
                self.buf.push(',');
            }
            push_json_str(&mut self.buf, name);
            self.buf.push(':');
            push_json_str(&mut self.buf, value);
        }
        self.buf.push('}');
    }

    /// Ends the event begun.
    pub fn end_event(&mut self) {
        self.buf.push('}');
    }

    /// Closes the document and writes what is left.
    pub fn finish(mut self) -> io::Result<()> {
        self.buf.push_str("\n]}\n");
        self.flush()
    }

    fn key(&mut self, key: &str) {
        self.buf.push(',');
        push_json_str(&mut self.buf, key);
        self.buf.push(':');
    }

    pub(crate) fn flush(&mut self) -> io::Result<()> {
        self.out.write_all(self.buf.as_bytes())?;
        self.buf.clear();
        Ok(())
    }
}
