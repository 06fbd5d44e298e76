//! The little JSON the trace and the profile write: escaped strings and finite numbers.

use core::fmt::{self, Write as _};

/// `s` as a JSON string literal (quotes included).
pub(crate) struct Str<'a>(pub &'a str);

impl fmt::Display for Str<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_char('"')?;
        for c in self.0.chars() {
            match c {
                '"' => f.write_str("\\\"")?,
                '\\' => f.write_str("\\\\")?,
                '\n' => f.write_str("\\n")?,
                '\r' => f.write_str("\\r")?,
                '\t' => f.write_str("\\t")?,
                c if (c as u32) < 0x20 => write!(f, "\\u{:04x}", c as u32)?,
                c => f.write_char(c)?,
            }
        }
        f.write_char('"')
    }
}

/// A finite number (NaN and infinities, which JSON cannot hold, as `null`).
pub(crate) struct Num(pub f64);

impl fmt::Display for Num {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_finite() {
            write!(f, "{}", self.0)
        } else {
            f.write_str("null")
        }
    }
}

/// Picoseconds as microseconds with picosecond precision (the trace's `ts` and `dur`).
pub(crate) struct Us(pub u64);

impl fmt::Display for Us {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:06}", self.0 / 1_000_000, self.0 % 1_000_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        assert_eq!(Str("a\"b\\c\n\u{1}").to_string(), r#""a\"b\\c\n\u0001""#);
        assert_eq!(Num(f64::NAN).to_string(), "null");
        assert_eq!(Num(1.5).to_string(), "1.5");
        assert_eq!(Us(1_234_567).to_string(), "1.234567");
        assert_eq!(Us(5).to_string(), "0.000005");
    }
}
