//! A borrowed scan of the JSON of big tokenizer files.
//!
//! A 150,000-token `tokenizer.json` is 10 MB of JSON, almost all of it two values: the
//! `vocab` object and the `merges` array. Building a general tree (or even a map of
//! owned strings) for them cost more than the whole rest of a load. Like `jiter`, this
//! scanner walks the text once and hands out each string as a slice of the input
//! ([`RawStr`], its escapes left in place): the loader decodes every token straight into
//! its table, and nothing is copied on the way. Strings are found with `memchr`, so the
//! scan runs at memory speed.
//!
//! The scanner validates what it reads (structure, strings, numbers); a value it only
//! skips is returned as raw text for `serde_json` to parse when it is needed, so no part
//! of a file is accepted unchecked.

use std::borrow::Cow;
use std::io::Read;

use memchr::memchr2;

/// A JSON string as it appears in the input, between its quotes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawStr<'a> {
    /// The bytes between the quotes, escapes undecoded.
    pub(crate) raw: &'a [u8],
    /// Whether `raw` holds a backslash escape.
    pub(crate) escaped: bool,
}

impl<'a> RawStr<'a> {
    /// Whether the string is exactly `key` (an ASCII key without escapes).
    pub(crate) fn is(&self, key: &str) -> bool {
        !self.escaped && self.raw == key.as_bytes()
    }

    /// The string, escapes decoded.
    pub(crate) fn decoded(&self) -> Result<String, String> {
        let mut out = String::with_capacity(self.raw.len());
        self.for_each_char(|c| {
            out.push(char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER));
            true
        })?;
        Ok(out)
    }

    /// The string's characters, escapes decoded, each given to `char`; stops with
    /// `false` as soon as `char` returns `false`.
    #[inline]
    pub(crate) fn for_each_char(&self, mut char: impl FnMut(u32) -> bool) -> Result<bool, String> {
        let raw = self.raw;
        // The input is bytes: a string's UTF-8 is checked here, where it is decoded.
        if !raw.is_ascii() && std::str::from_utf8(raw).is_err() {
            return Err("a string is not UTF-8".to_owned());
        }
        let mut i = 0;
        while i < raw.len() {
            let b = raw[i];
            let (c, len) = if b == b'\\' {
                unescape(raw, i)?
            } else if b < 0x80 {
                if b < 0x20 {
                    return Err("a control character inside a string".to_owned());
                }
                (u32::from(b), 1)
            } else {
                utf8_char(raw, i)
            };
            if !char(c) {
                return Ok(false);
            }
            i += len;
        }
        Ok(true)
    }
}

/// The character starting at `raw[i]`, a non-ASCII lead byte of valid UTF-8, and its
/// length.
#[inline]
fn utf8_char(raw: &[u8], i: usize) -> (u32, usize) {
    let b = u32::from(raw[i]);
    let cont = |k: usize| u32::from(raw.get(i + k).copied().unwrap_or(0x80) & 0x3F);
    if b < 0xE0 {
        (((b & 0x1F) << 6) | cont(1), 2)
    } else if b < 0xF0 {
        (((b & 0x0F) << 12) | (cont(1) << 6) | cont(2), 3)
    } else {
        (
            ((b & 0x07) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3),
            4,
        )
    }
}

/// The character of the escape at `raw[i]` (a backslash) and the escape's length.
fn unescape(raw: &[u8], i: usize) -> Result<(u32, usize), String> {
    let bad = || "a bad escape inside a string".to_owned();
    let c = match raw.get(i + 1).ok_or_else(bad)? {
        b'"' => '"',
        b'\\' => '\\',
        b'/' => '/',
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        b'u' => {
            let unit = |at: usize| -> Result<u32, String> {
                let hex = raw.get(at..at + 4).ok_or_else(bad)?;
                if !hex.iter().all(u8::is_ascii_hexdigit) {
                    return Err(bad()); // `from_str_radix` alone takes a leading `+`
                }
                let hex = std::str::from_utf8(hex).map_err(|_| bad())?;
                u32::from_str_radix(hex, 16).map_err(|_| bad())
            };
            let first = unit(i + 2)?;
            if (0xD800..0xDC00).contains(&first) {
                // A high surrogate must be followed by an escaped low one.
                if raw.get(i + 6..i + 8) != Some(b"\\u") {
                    return Err("an unpaired surrogate inside a string".to_owned());
                }
                let second = unit(i + 8)?;
                if !(0xDC00..0xE000).contains(&second) {
                    return Err("an unpaired surrogate inside a string".to_owned());
                }
                return Ok((0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00), 12));
            }
            if (0xDC00..0xE000).contains(&first) {
                return Err("an unpaired surrogate inside a string".to_owned());
            }
            return Ok((first, 6));
        }
        _ => return Err(bad()),
    };
    Ok((c as u32, 2))
}

/// Where the JSON whitespace at `text[i..]` ends. Pretty-printed files indent every
/// line of their big arrays and objects with a run of spaces: a run is measured a word
/// at a time (the spaces that start eight bytes, found from the first byte that is
/// not one), so a line break and its indent take two steps.
#[inline(always)]
pub(crate) fn space_end(text: &[u8], mut i: usize) -> usize {
    loop {
        match text.get(i) {
            Some(b' ') => match text.get(i..i + 8) {
                Some(w) => {
                    let mut word = [0u8; 8];
                    word.copy_from_slice(w);
                    // Zero bytes where `text` has a space; the first non-zero one ends
                    // the run (the byte at `i` is a space, so at least one is taken).
                    let other = u64::from_le_bytes(word) ^ 0x2020_2020_2020_2020;
                    i += (other.trailing_zeros() / 8) as usize;
                }
                None => i += 1,
            },
            Some(b'\t' | b'\n' | b'\r') => i += 1,
            _ => return i,
        }
    }
}

/// A cursor over one JSON text, in memory or read from a file a window at a time.
///
/// A file is read into one window of [`WINDOW`] bytes that is reused as the scan moves
/// on, rather than into a buffer of its size: reading a 10 MB file into fresh memory
/// page-faults every page of it, which measured four times the cost of the copy itself,
/// and a window stays in the cache where the scan reads it. Values are handed out as
/// slices of the window, valid until the scan moves on.
pub(crate) struct Scan<'a> {
    /// The text in memory, or the window: the bytes of the file read and not yet dropped.
    text: Cow<'a, [u8]>,
    /// Where the scan is in `text`.
    pos: usize,
    /// The rest of the file (`None` for text in memory, or once the file has ended).
    source: Option<Box<dyn Read + 'a>>,
    /// Bytes of the file dropped before `text[0]`.
    dropped: usize,
    /// Bytes of the file still to read, as its length said when it was opened.
    unread: usize,
    /// Start of a value being skipped, which refills keep in the window.
    mark: Option<usize>,
    /// Bytes the window holds, unless one value needs more.
    window: usize,
}

/// Deepest nesting a skipped value may have (serde_json, which parses it afterwards,
/// stops at 128 levels as well).
const MAX_DEPTH: usize = 128;

/// Bytes of a file read at a time: enough that the read calls cost little, few enough
/// that the window stays in the core's cache.
const WINDOW: usize = 1 << 18;

/// Bytes [`Scan::rest`] and [`Scan::string_ahead`] hand out at least (unless the text
/// ends sooner): more than any vocabulary entry or merge of a real file, so that their
/// fast paths see a whole one; a longer one is read by the general path, which refills.
const MARGIN: usize = 1 << 12;

impl<'a> Scan<'a> {
    /// A scan of `text` from its start. The text need not be UTF-8 as a whole: each
    /// string is checked as it is decoded, and each skipped value as it is returned.
    pub(crate) fn new(text: &'a [u8]) -> Scan<'a> {
        Scan {
            text: Cow::Borrowed(text),
            pos: 0,
            source: None,
            dropped: 0,
            unread: 0,
            mark: None,
            window: 0,
        }
    }

    /// A scan of what `source` reads, `len` bytes as far as is known (a hint for the
    /// readers' tables), read a window at a time.
    pub(crate) fn reading(source: impl Read + 'a, len: usize) -> Scan<'a> {
        Scan::reading_by(source, len, WINDOW)
    }

    /// [`Scan::reading`] with a window of `window` bytes.
    pub(crate) fn reading_by(source: impl Read + 'a, len: usize, window: usize) -> Scan<'a> {
        Scan {
            text: Cow::Owned(Vec::with_capacity(window)),
            pos: 0,
            source: Some(Box::new(source)),
            dropped: 0,
            unread: len,
            mark: None,
            window,
        }
    }

    fn error(&self, what: &str) -> String {
        let pos = self.pos.min(self.text.len());
        if matches!(self.text, Cow::Owned(_)) {
            // Lines of a file read in windows are not counted (a tenth of the load).
            return format!("not valid JSON: {what} (at byte {})", self.dropped + pos);
        }
        let line = 1 + self.text[..pos].iter().filter(|&&b| b == b'\n').count();
        format!("not valid JSON: {what} (line {line})")
    }

    /// Reads more of the file into the window, dropping what lies before both the scan
    /// and the mark (the window grows only when a single value fills it); `false` once
    /// the file has ended.
    #[cold]
    #[inline(never)]
    fn refill(&mut self) -> Result<bool, String> {
        let Some(source) = self.source.as_mut() else {
            return Ok(false);
        };
        let Cow::Owned(window) = &mut self.text else {
            return Ok(false);
        };
        let keep = self
            .mark
            .map_or(self.pos, |m| m.min(self.pos))
            .min(window.len());
        window.drain(..keep);
        self.pos -= keep;
        self.dropped += keep;
        if let Some(m) = &mut self.mark {
            *m -= keep;
        }
        if window.len() == window.capacity() || window.capacity() < self.window {
            window.reserve(window.len().max(self.window));
        }
        let room = window.capacity() - window.len();
        let before = window.len();
        // Read into the window's spare room, which is not written first.
        if let Err(e) = source.take(room as u64).read_to_end(window) {
            return Err(format!("could not read the file: {e}"));
        }
        let got = window.len() - before;
        self.unread = self.unread.saturating_sub(got);
        if got == 0 {
            self.source = None;
            return Ok(false);
        }
        Ok(true)
    }

    /// Makes at least `n` bytes from the scan on available, or all that remain.
    #[inline(always)]
    fn ensure(&mut self, n: usize) -> Result<(), String> {
        if self.source.is_none() || self.text.len().saturating_sub(self.pos) >= n {
            return Ok(());
        }
        while self.text.len().saturating_sub(self.pos) < n && self.refill()? {}
        Ok(())
    }

    /// Bytes left from the scan on: in the window and still to read.
    pub(crate) fn len_left(&self) -> usize {
        self.text.len().saturating_sub(self.pos) + self.unread
    }

    /// The next byte that is not whitespace, not consumed.
    #[inline(always)]
    fn peek(&mut self) -> Result<Option<u8>, String> {
        let text: &[u8] = &self.text;
        let pos = space_end(text, self.pos);
        self.pos = pos;
        match text.get(pos) {
            Some(&b) => Ok(Some(b)),
            None => self.peek_on(),
        }
    }

    /// [`Scan::peek`] where the window ends: reads on.
    #[cold]
    #[inline(never)]
    fn peek_on(&mut self) -> Result<Option<u8>, String> {
        loop {
            self.pos = space_end(&self.text, self.pos);
            if self.pos < self.text.len() || !self.refill()? {
                return Ok(self.text.get(self.pos).copied());
            }
        }
    }

    #[inline(always)]
    fn expect(&mut self, byte: u8) -> Result<(), String> {
        if self.peek()? == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(&format!("expected {:?}", byte as char)))
        }
    }

    /// A string value.
    #[inline]
    pub(crate) fn string(&mut self) -> Result<RawStr<'_>, String> {
        self.expect(b'"')?;
        let (start, end, escaped) = self.string_body()?;
        Ok(RawStr {
            raw: &self.text[start..end],
            escaped,
        })
    }

    /// Finds the end of the string whose opening quote the scan has just passed, and
    /// moves past its closing quote: where its body lies in `text`, and whether it holds
    /// an escape.
    fn string_body(&mut self) -> Result<(usize, usize, bool), String> {
        let mut start = self.pos;
        let mut escaped = false;
        loop {
            let found = self
                .text
                .get(self.pos..)
                .and_then(|rest| memchr2(b'"', b'\\', rest));
            let Some(found) = found else {
                // The window ends inside the string: keep all of it (and what a skip
                // keeps) and read on.
                let old = self.mark;
                self.mark = Some(old.map_or(start, |m| m.min(start)));
                let had = self.dropped;
                let more = self.refill();
                let shift = self.dropped - had;
                start -= shift;
                self.mark = old.map(|m| m - shift);
                if !more? {
                    return Err(self.error("a string is not closed"));
                }
                continue;
            };
            self.pos += found;
            if self.text[self.pos] == b'"' {
                let end = self.pos;
                self.pos += 1;
                return Ok((start, end, escaped));
            }
            escaped = true;
            self.pos += 2; // the backslash and the byte it escapes
        }
    }

    /// The input after the opening quote of the string value that comes next, for a
    /// caller that decodes a string in the same pass as it finds its end (and then
    /// calls [`Scan::consume`]); `None` if no string comes next. At least [`MARGIN`]
    /// bytes of it are handed out, unless the text ends sooner.
    #[inline(always)]
    pub(crate) fn string_ahead(&mut self) -> Result<Option<&[u8]>, String> {
        if self.peek()? != Some(b'"') {
            return Ok(None);
        }
        self.ensure(MARGIN + 1)?;
        Ok(Some(&self.text[self.pos + 1..]))
    }

    /// The input from the next byte that is not whitespace on (empty at the end), for a
    /// caller that reads a value the scanner does not (then [`Scan::consume`]): all of
    /// it for text in memory, at least [`MARGIN`] bytes of it (unless it ends sooner)
    /// for a file.
    #[inline(always)]
    pub(crate) fn rest(&mut self) -> Result<&[u8], String> {
        self.peek()?;
        self.ensure(MARGIN)?;
        Ok(&self.text[self.pos.min(self.text.len())..])
    }

    /// Moves past `n` bytes that a caller of [`Scan::string_ahead`] or [`Scan::rest`]
    /// has read (the opening quote counts as one).
    #[inline]
    pub(crate) fn consume(&mut self, n: usize) {
        self.pos += n;
    }

    /// A non-negative integer that fits 32 bits.
    #[inline]
    pub(crate) fn u32(&mut self) -> Result<u32, String> {
        self.peek()?;
        // More than the digits of any number that fits, and what follows them.
        self.ensure(16)?;
        let start = self.pos;
        let mut value: u64 = 0;
        while let Some(&b) = self.text.get(self.pos) {
            if !b.is_ascii_digit() {
                break;
            }
            value = value * 10 + u64::from(b - b'0');
            if value > u64::from(u32::MAX) {
                return Err(self.error("an id does not fit 32 bits"));
            }
            self.pos += 1;
        }
        let digits = self.pos - start;
        if digits == 0 || (digits > 1 && self.text[start] == b'0') {
            return Err(self.error("expected a non-negative integer"));
        }
        if matches!(self.text.get(self.pos), Some(b'.' | b'e' | b'E')) {
            return Err(self.error("expected an integer"));
        }
        Ok(value as u32)
    }

    /// Calls `entry` with each key of an object, the scan placed at its value (which
    /// `entry` must read or skip). The key is a copy: the scan moves on under it.
    pub(crate) fn object(
        &mut self,
        mut entry: impl FnMut(&mut Scan<'a>, RawStr<'_>) -> Result<(), String>,
    ) -> Result<(), String> {
        let mut key = Vec::new();
        self.members(|scan| {
            let escaped = {
                let raw = scan.string()?;
                key.clear();
                key.extend_from_slice(raw.raw);
                raw.escaped
            };
            scan.colon()?;
            entry(scan, RawStr { raw: &key, escaped })
        })
    }

    /// Calls `member` for each member of an object, the scan placed at its key:
    /// `member` reads the key, then [`Scan::colon`], then the value.
    pub(crate) fn members(
        &mut self,
        mut member: impl FnMut(&mut Scan<'a>) -> Result<(), String>,
    ) -> Result<(), String> {
        self.expect(b'{')?;
        if self.peek()? == Some(b'}') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            member(self)?;
            match self.peek()? {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(self.error("expected ',' or '}' in an object")),
            }
        }
    }

    /// The colon between a key and its value.
    #[inline]
    pub(crate) fn colon(&mut self) -> Result<(), String> {
        self.expect(b':')
    }

    /// Calls `item` for each element of an array, the scan placed at it.
    pub(crate) fn array(
        &mut self,
        mut item: impl FnMut(&mut Scan<'a>) -> Result<(), String>,
    ) -> Result<(), String> {
        self.expect(b'[')?;
        if self.peek()? == Some(b']') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            item(self)?;
            match self.peek()? {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(self.error("expected ',' or ']' in an array")),
            }
        }
    }

    /// Whether the next value is `[`.
    pub(crate) fn at_array(&mut self) -> Result<bool, String> {
        Ok(self.peek()? == Some(b'['))
    }

    /// Skips one value and returns its text, unchecked inside: parse it (with
    /// `serde_json`) before using it.
    pub(crate) fn skip(&mut self) -> Result<&str, String> {
        if self.peek()?.is_none() {
            return Err(self.error("expected a value"));
        }
        self.mark = Some(self.pos);
        let skipped = self.skip_marked();
        let start = self.mark.take().unwrap_or(0);
        skipped?;
        std::str::from_utf8(&self.text[start..self.pos])
            .map_err(|_| self.error("a value is not UTF-8"))
    }

    /// Moves past the value that starts at the mark (refills keep it in the window).
    fn skip_marked(&mut self) -> Result<(), String> {
        // Open brackets, one bit each (1: an object), deepest in the lowest bit.
        let mut open = 0u128;
        let mut depth = 0usize;
        loop {
            if self.pos >= self.text.len() && !self.refill()? {
                return Err(self.error("the document ends inside a value"));
            }
            let b = self.text[self.pos];
            match b {
                b'"' => {
                    self.pos += 1;
                    self.string_body()?;
                }
                b'{' | b'[' => {
                    depth += 1;
                    if depth > MAX_DEPTH {
                        return Err(self.error("nested too deeply"));
                    }
                    open = (open << 1) | u128::from(b == b'{');
                    self.pos += 1;
                }
                b'}' | b']' => {
                    if depth == 0 || (open & 1 == 1) != (b == b'}') {
                        return Err(self.error("a closing bracket that does not match"));
                    }
                    depth -= 1;
                    open >>= 1;
                    self.pos += 1;
                }
                b',' | b':' if depth == 0 => return Err(self.error("expected a value")),
                _ => self.pos += 1,
            }
            if depth == 0 {
                // A bare scalar ends where the window does only if the file does.
                if self.pos >= self.text.len() {
                    self.refill()?;
                }
                if self.scalar_ended() {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Whether a top-level value being skipped has ended at `pos`: after a closing
    /// quote or bracket, or where a bare scalar (number, `true`…) meets a delimiter.
    fn scalar_ended(&self) -> bool {
        match self.text.get(self.pos) {
            None => true,
            Some(b) => {
                matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
                    || matches!(
                        self.text.get(self.pos.wrapping_sub(1)),
                        Some(b'"' | b'}' | b']')
                    )
            }
        }
    }

    /// Checks that only whitespace remains.
    pub(crate) fn end(&mut self) -> Result<(), String> {
        match self.peek()? {
            None => Ok(()),
            Some(_) => Err(self.error("text after the document")),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn chars(s: &str) -> Result<String, String> {
        let mut scan = Scan::new(s.as_bytes());
        let raw = scan.string()?;
        let mut out = String::new();
        raw.for_each_char(|c| {
            out.push(char::from_u32(c).unwrap_or('?'));
            true
        })?;
        Ok(out)
    }

    #[test]
    fn strings_decode_as_serde_json_does() {
        for text in [
            r#""plain""#,
            r#""a\"b\\c\/d\n\t""#,
            r#""\u0120x\u00e9""#,
            r#""\ud83d\ude00 é 中""#,
            r#""""#,
        ] {
            let ours = chars(text);
            let theirs: Result<String, _> = serde_json::from_str(text);
            assert_eq!(ours.ok(), theirs.ok(), "{text}");
        }
        assert!(chars(r#""\ud83d""#).is_err());
        assert!(chars(r#""\x""#).is_err());
        // Four hex digits, nothing else (`from_str_radix` alone takes `+041`).
        assert!(chars(r#""\u+041""#).is_err());
        assert!(serde_json::from_str::<String>(r#""\u+041""#).is_err());
        assert!(chars("\"a\u{1}\"").is_err());
        assert!(chars(r#""open"#).is_err());
        let mut latin1 = Scan::new(b"\"caf\xe9\"");
        assert!(latin1.string().and_then(|s| s.decoded()).is_err());
    }

    #[test]
    fn objects_arrays_and_skipped_values() {
        let text =
            r#" {"a": 1, "b": [ ["x", "y"], "z w" ], "c": {"d": [1, {"e": null}]}, "f": true} "#;
        let mut scan = Scan::new(text.as_bytes());
        let mut seen = Vec::new();
        let result = scan.object(|scan, key| {
            if key.is("a") {
                seen.push(format!("a={}", scan.u32()?));
            } else if key.is("b") {
                scan.array(|scan| {
                    if scan.at_array()? {
                        scan.array(|scan| scan.string().map(|_| ()))
                    } else {
                        scan.string().map(|_| ())
                    }
                })?;
                seen.push("b".to_owned());
            } else {
                seen.push(scan.skip()?.to_owned());
            }
            Ok(())
        });
        assert_eq!(result, Ok(()));
        assert_eq!(scan.end(), Ok(()));
        assert_eq!(seen, ["a=1", "b", r#"{"d": [1, {"e": null}]}"#, "true"]);
    }

    /// A reader that hands out at most `step` bytes a call (the tokenizer.json tests
    /// read files through it too).
    pub(crate) struct Trickle<'a> {
        pub(crate) text: &'a [u8],
        pub(crate) step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(self.step).min(self.text.len());
            buf[..n].copy_from_slice(&self.text[..n]);
            self.text = &self.text[n..];
            Ok(n)
        }
    }

    /// Keys, strings and skipped values (escaped quotes and backslashes in them, bare
    /// scalars at the very end) read through windows of every size down to one byte
    /// as they read in memory; a text cut short is refused either way.
    #[test]
    fn windows_read_as_memory() {
        let text = r#" {"a\"b": 12, "c": ["x\\", "y\"z", 7], "d": {"e": ["\"}", null]}, "f": "\u00e9", "g": true, "h": 1.5e3} "#;
        let read = |mut scan: Scan<'_>| -> Result<Vec<String>, String> {
            let mut seen = Vec::new();
            scan.object(|scan, key| {
                seen.push(key.decoded()?);
                if key.decoded()? == "a\"b" {
                    seen.push(scan.u32()?.to_string());
                } else if key.is("c") {
                    scan.array(|scan| {
                        match scan.string_ahead()? {
                            Some(_) => seen.push(scan.string()?.decoded()?),
                            None => seen.push(scan.skip()?.to_owned()),
                        }
                        Ok(())
                    })?;
                } else {
                    seen.push(scan.skip()?.to_owned());
                }
                Ok(())
            })?;
            scan.end()?;
            Ok(seen)
        };
        let memory = read(Scan::new(text.as_bytes()));
        assert!(
            memory.as_ref().is_ok_and(|seen| seen.len() == 14),
            "{memory:?}"
        );
        for window in 1..=9 {
            for step in 1..=3 {
                let trickle = Trickle {
                    text: text.as_bytes(),
                    step,
                };
                let streamed = read(Scan::reading_by(trickle, text.len(), window));
                assert_eq!(streamed, memory, "window {window}, step {step}");
                let cut = &text.as_bytes()[..text.len() - 9];
                let trickle = Trickle { text: cut, step };
                assert!(read(Scan::reading_by(trickle, cut.len(), window)).is_err());
            }
        }
    }

    #[test]
    fn whitespace_ends_where_json_says() {
        for (text, end) in [
            ("", 0),
            ("x", 0),
            ("        x", 8),
            ("         x", 9),
            ("\n              \t\r x", 18),
            ("       ", 7),
            ("                ", 16),
            (" \u{a0}", 1),
        ] {
            assert_eq!(space_end(text.as_bytes(), 0), end, "{text:?}");
        }
    }

    #[test]
    fn malformed_documents_are_refused() {
        let object = |s: &str| {
            let mut scan = Scan::new(s.as_bytes());
            scan.object(|scan, _| scan.skip().map(|_| ()))
                .and_then(|()| scan.end())
        };
        assert!(object(r#"{"a": 1}"#).is_ok());
        assert!(object(r#"{"a": 1,}"#).is_err());
        assert!(object(r#"{"a" 1}"#).is_err());
        assert!(object(r#"{"a": [1}"#).is_err());
        assert!(object(r#"{"a": 1} x"#).is_err());
        assert!(object(r#"{"a": ]}"#).is_err());
        let deep = format!(r#"{{"a": {}{}}}"#, "[".repeat(200), "]".repeat(200));
        assert!(object(&deep).is_err());
        let number = |s: &str| Scan::new(s.as_bytes()).u32();
        assert_eq!(number("42"), Ok(42));
        assert!(number("042").is_err());
        assert!(number("4.2").is_err());
        assert!(number("-1").is_err());
        assert!(number("99999999999").is_err());
    }
}
